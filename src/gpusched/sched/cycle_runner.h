#pragma once

// The scheduling cycle every front end runs (simulator, extender, standalone scheduler), with the Kubernetes
// phase names:
//   Filter          node predicates (nodeName, cordon, node affinity, taints when asked; CPU, memory and pods count as
//                   kube-scheduler's NodeResourcesFit; inter-pod affinity and spread when given) + policy Filter
//   Score           policy Score on the feasible nodes, at the policy's own resolution (ScoreScale points to one of
//                   kube-scheduler's): the pick compares these; a score mix and the extender see 0..100
//   NormalizeScore  min-max to 0..100 when the policy asks (KSS's integer formula); with node constraints checked
//                   and an untolerated PreferNoSchedule taint on a feasible node, kube-scheduler's weighted sum of
//                   the policy's score and TaintToleration's (weight 3)
//   pick            the highest score; ties broken uniformly at random with the injected generator, or, when a
//                   tie rank is given, by the lowest rank (the FGD benchmark's simulator picks the tied node with
//                   the smallest name, and names carry a random prefix: a fixed random order per run)
//   SelectGpus      the policy chooses GPUs on the chosen node (SelectGpusWithSnapshot: it may read the metrics)
//   Reserve         ClusterState::Assume;  Unreserve = Forget
//   Bind            ports::Binder, then Confirm (or Forget on failure)
//
// Score cache: a policy's Filter and Score are pure functions of (request, node view), so the runner remembers
// them per (node slot, node generation, request signature; the signature includes the share group, shareWithin). A
// node's generation changes whenever anything on it changes, so an entry is never stale; a cycle then costs one lookup
// per unchanged node. With many distinct request signatures the cache is simply cleared and refilled.
//
// A policy whose Score reads the snapshot (it declares so in Reads(): load-aware, interference-aware) is a pure
// function of (request, node view, snapshot). What it can see of the snapshot is identified by (gpu_metrics pointer,
// metrics_generation, now_ms, staleness_ms, interference pointer, interference_generation): the front end bumps
// metrics_generation on every change of the map and interference_generation for every forecast it builds (a
// forecast is per incoming pod, and the request signature does not include the pod's application class), and
// freshness is judged at now_ms. The runner numbers each distinct such key it is handed (a snapshot epoch) and reuses
// an entry only when its node generation AND its epoch match, so a cached score is exactly the score for this snapshot,
// never one computed from older metrics or an earlier now. The price: every change of the key recomputes each node
// once. A front end that wants hits across cycles passes now_ms rounded (to a second, or to the refresh interval):
// freshness is then judged at that granularity. Policies that ignore the snapshot are unaffected.
//
// Thread-safety: a CycleRunner is used by one thread at a time (it owns the cache); the policy is shared.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/common/status.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/ports/binder.h"
#include "gpusched/sched/inter_pod.h"

namespace gpusched::sched {

struct CycleOptions {
  bool check_node_resources = true;  // CPU, memory and pods count; off when kube-scheduler already checked them
  // nodeName, cordon, nodeSelector, required node affinity, taints (node_predicates.h); off when kube-scheduler
  // already checked them. Evaluated before the score cache (its key is the request's resources only).
  bool check_node_constraints = false;
  bool collect_reasons = true;  // per-node reasons when a pod fits nowhere (the simulator turns this off)
  bool use_score_cache = true;
  // Optional rank per node slot for breaking ties (lowest wins); empty = stable_ties, else uniformly random ties.
  std::span<const uint32_t> tie_rank;
  // Without tie_rank: ties go to the node whose name hashes lowest (NodeNameRank), an order that is the same on
  // every replica and after every restart. Pods tied on score then fill the nodes in one pseudo-random order (first
  // fit) instead of spreading over them at random: the order kube-scheduler's simulator gets from its random node
  // name prefixes in the FGD benchmark, on which fgd's published numbers rest (simulate --random-ties shows the
  // difference). Policies that choose their node at random (ChoosesNodeAtRandom) are unaffected.
  bool stable_ties = false;
};

// The rank stable_ties gives a node: FNV-1a of its name, 64 bits.
[[nodiscard]] uint64_t NodeNameRank(std::string_view name);

struct CycleResult {
  std::optional<core::Allocation> allocation;  // the reserved allocation, unset when nothing fits
  size_t feasible_nodes = 0;
  size_t considered_nodes = 0;
  // Why each node was rejected, when the pod fits nowhere and reasons are collected.
  std::vector<std::pair<common::NodeName, policy::Fit>> rejections;

  // "0/5 nodes are available: 3 x <reason>, 2 x <reason>", grouped like kube-scheduler's message and useful at
  // thousands of nodes: reasons are grouped by their text up to the first "; " or ", " (what the pod needs; the
  // node-specific numbers that follow are dropped), largest groups first, and the message stays within max_bytes
  // (the groups that do not fit are counted in a last "N x K other reasons").
  static constexpr size_t kMaxSummaryBytes = 1024;
  [[nodiscard]] std::string Summary(size_t max_bytes = kMaxSummaryBytes) const;
};

// The part of a rejection reason that a summary groups by (see CycleResult::Summary).
[[nodiscard]] std::string_view ReasonGroup(std::string_view reason);

// kube-scheduler's NodeResourcesFit for the pods count (when the node limits it), CPU, memory and the pod's other
// resources (ephemeral-storage, hugepages-*, extended resources: a node that does not advertise one has none of
// it), then NodePorts (a host port already bound on the node, same protocol, overlapping address).
[[nodiscard]] policy::Fit FitNodeResources(const core::PodRequest& pod, const core::NodeView& node);

// KSS's NormalizeScore: (s − min) · 100 / (max − min) with integer division; when all are equal, all become 100.
void NormalizeScores(std::span<int64_t> scores);

class CycleRunner;

// One member of a weighted score mix: a policy's score (through its runner, so cached as that policy's) and its
// weight (> 0).
struct ScoreWeight {
  CycleRunner* runner = nullptr;
  double weight = 1;
};

// The weighted mix of several policies' scores over the node `slots` of `state`: each member's Filter and raw
// Score (CycleRunner::Evaluate), min-max normalised when its policy asks, clamped to 0..100 and weighted where the
// member's Filter passes (0 where it does not); out[i] = Σ w·score / Σ w for slots[i]. The one definition of a
// profile's weighted scores: the extender's prioritize and the runner's Schedule with a score mix both use it.
void MixScores(std::span<const ScoreWeight> mix, const core::PodRequest& pod, const core::ClusterState& state,
               std::span<const size_t> slots, const policy::Snapshot& snapshot, std::vector<double>& out);

// A scheduling profile: node predicates (CycleOptions) and the policy's Filter, then its Score or, when a score
// mix is given, the weighted mix of those policies' scores (MixScores); the policy chooses the GPUs.
class CycleRunner {
 public:
  CycleRunner(const policy::PlacementPolicy& policy, CycleOptions options);
  // With a score mix: (policy, weight > 0) pairs, replacing `policy`'s own score (it still filters and chooses the
  // GPUs). The runner keeps a runner of its own per member (each with its own score cache).
  CycleRunner(const policy::PlacementPolicy& policy, CycleOptions options,
              std::span<const std::pair<const policy::PlacementPolicy*, double>> score_mix);
  CycleRunner(const CycleRunner&) = delete;
  CycleRunner& operator=(const CycleRunner&) = delete;
  ~CycleRunner();

  [[nodiscard]] const policy::PlacementPolicy& policy() const { return policy_; }

  // Node predicates, inter-pod constraints when given (prepared for this pod), then the policy's Filter
  // (FilterWithSnapshot, with an empty snapshot for the first form).
  [[nodiscard]] policy::Fit Filter(const core::PodRequest& pod, const core::NodeView& node) const;
  [[nodiscard]] policy::Fit Filter(const core::PodRequest& pod, const core::NodeView& node,
                                   const policy::Snapshot& snapshot,
                                   const InterPodConstraints* inter_pod = nullptr) const;

  // Scores of feasible nodes (each must have passed Filter) on kube-scheduler's 0..kMaxScore (Score / ScoreScale),
  // normalised when the policy asks.
  [[nodiscard]] std::vector<int64_t> ScoreNodes(const core::PodRequest& pod,
                                                std::span<const core::NodeView* const> nodes,
                                                const policy::Snapshot& snapshot) const;

  // One whole cycle over every live node of `state`, ending with Reserve. Errors only for broken state
  // (a policy choosing GPUs that do not fit); "fits nowhere" is a result without allocation.
  // The reserved allocation carries allocation_id. `inter_pod`: the pod's inter-pod constraints, prepared on
  // `state` (evaluated outside the score cache, as the node constraints).
  [[nodiscard]] common::Result<CycleResult> Schedule(const core::PodRequest& pod, core::ClusterState& state,
                                                     const policy::Snapshot& snapshot, common::Rng& rng,
                                                     uint64_t allocation_id = 0,
                                                     const InterPodConstraints* inter_pod = nullptr);

  // Filter and Score / ScoreScale (0..kMaxScore, not normalised) of the given node slots of `state`, cached like
  // Schedule; out[i] is for slots[i]. For front ends that are handed the candidate nodes (the extender) and for
  // score mixes.
  struct NodeEval {
    bool fits = false;
    int64_t score = 0;
  };
  void Evaluate(const core::PodRequest& pod, const core::ClusterState& state, std::span<const size_t> slots,
                const policy::Snapshot& snapshot, std::vector<NodeEval>& out);

  // Bind a reserved allocation; Confirm on success, Forget on failure (the bind error is returned).
  [[nodiscard]] static common::Status Bind(core::ClusterState& state, ports::Binder& binder,
                                           const core::PodRequest& pod, const core::Allocation& allocation);

 private:
  struct Entry {
    uint64_t generation = 0;  // 0 = empty (generations start at 1)
    bool fits = false;
    uint32_t snapshot_epoch = 0;  // the epoch the score was computed in; 0 for snapshot-blind policies
    int64_t score = 0;
  };
  // What a snapshot-reading Score can see of a snapshot (see the class comment).
  struct SnapshotKey {
    const core::GpuMetricsMap* gpu_metrics = nullptr;
    uint64_t metrics_generation = 0;
    int64_t now_ms = 0;
    int64_t staleness_ms = 0;
    const policy::InterferenceForecast* interference = nullptr;
    uint64_t interference_generation = 0;
    bool operator==(const SnapshotKey&) const = default;
  };
  uint32_t Signature(const core::PodRequest& pod);
  // The epoch of `snapshot`: 0 when the policy ignores snapshots, else a number that changes with the key.
  uint32_t SnapshotEpoch(const policy::Snapshot& snapshot);
  // The cached entry for (slot, signature), recomputed unless its generation and epoch are current.
  Entry Cached(const core::PodRequest& pod, size_t slot, uint32_t sig, uint32_t epoch, const core::NodeView& view,
               const policy::Snapshot& snapshot);
  Entry Evaluate(const core::PodRequest& pod, const core::NodeView& node, const policy::Snapshot& snapshot) const;
  // With check_node_constraints: where a feasible node has PreferNoSchedule taints the pod does not tolerate, the
  // feasible scores become policy (normalised, 0..100) + kTaintScoreWeight x TaintToleration's score (0..100).
  void AddTaintScores(const core::PodRequest& pod, const core::ClusterState& state);
  static constexpr int64_t kTaintScoreWeight = 3;  // kube-scheduler's default weight for TaintToleration

  static constexpr size_t kMaxSignatures = 1024;

  // With a score mix: the feasible nodes' scores become the mix's (rounded to an integer).
  void ApplyScoreMix(const core::PodRequest& pod, const core::ClusterState& state, const policy::Snapshot& snapshot);

  const policy::PlacementPolicy& policy_;
  CycleOptions options_;
  std::vector<std::unique_ptr<CycleRunner>> mix_runners_;
  std::vector<ScoreWeight> mix_;
  std::vector<size_t> mix_slots_;
  std::vector<double> mixed_;
  std::unordered_map<std::string, uint32_t> signatures_;
  std::vector<std::vector<Entry>> cache_;  // [signature][slot]
  SnapshotKey snapshot_key_;
  uint32_t snapshot_epoch_ = 0;  // 0 until the first snapshot
  std::vector<size_t> ties_;
  std::vector<std::pair<size_t, int64_t>> feasible_;
  std::vector<int64_t> scores_;
  std::vector<int> penalties_;
};

}  // namespace gpusched::sched
