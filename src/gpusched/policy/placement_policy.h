#pragma once

// The placement policy interface, with the Kubernetes phase names. A policy is a pure function of
// (request, node view, snapshot): const methods, no I/O, no clock, no globals; randomness only from the generator
// passed in. The cycle runner (sched/) calls Filter on every node, Score on the feasible ones, normalises when the
// policy asks, picks the best node (ties broken at random), then SelectGpus on it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node_view.h"
#include "gpusched/policy/interference_forecast.h"

namespace gpusched::policy {

// Filter's answer. Not an error: "does not fit here" is a normal outcome.
struct Fit {
  enum class Code {
    kFits,
    kUnschedulable,  // evicting pods on the node could make it fit
    kUnresolvable,   // nothing on this node could make it fit
  };
  Code code = Code::kFits;
  std::string reason;  // human, names the GPU and the numbers; empty when it fits

  [[nodiscard]] bool fits() const { return code == Code::kFits; }
  static Fit Fits() { return {}; }
  static Fit Unschedulable(std::string why) { return {Code::kUnschedulable, std::move(why)}; }
  static Fit Unresolvable(std::string why) { return {Code::kUnresolvable, std::move(why)}; }
};

// Cluster-wide inputs the front end hands to a cycle: what a policy may read besides the request and the node
// view. A cheap, copyable aggregate of pointers and numbers; `Snapshot{}` (no metrics) is what the benchmark
// policies get. The policy never reads a clock: "now" is `now_ms`, chosen by the front end (wall time in the
// extender, simulated time in the simulator).
struct Snapshot {
  // Live GPU samples by UUID (the background metrics cache's current map); null = no metrics at all. Borrowed:
  // it must outlive the cycle and not change during it.
  const core::GpuMetricsMap* gpu_metrics = nullptr;
  int64_t now_ms = 0;            // Unix milliseconds at which freshness is judged
  int64_t staleness_ms = 30000;  // a sample older than this at now_ms counts as unknown (GpuMetrics::Fresh)
  // Changes whenever *gpu_metrics changes (each refresh of the cache). With now_ms and staleness_ms it identifies
  // what a snapshot-reading Score can see; the cycle runner's score cache relies on that (cycle_runner.h).
  uint64_t metrics_generation = 0;
  // Predicted co-location slowdowns for the pod being placed (interference-aware reads it); null = no forecast,
  // every GPU counts as empty. Borrowed like gpu_metrics. A forecast is built per incoming pod, so it changes
  // from one pod to the next even when nothing in the cluster did.
  const InterferenceForecast* interference = nullptr;
  // Identifies *interference together with its address: the front end gives every forecast it builds a number it
  // has not used before (a counter), because a forecast built for the next pod may live at the same address. The
  // cycle runner's score cache keys snapshot-reading scores by (interference, interference_generation).
  uint64_t interference_generation = 0;
};

inline constexpr int64_t kMaxScore = 100;

// The inputs a policy declares beyond the pod's request and the node view (PlacementPolicy::Reads).
struct Inputs {
  bool gpu_metrics = false;            // Snapshot::gpu_metrics with now_ms and staleness_ms (live GPU load)
  bool interference_forecast = false;  // Snapshot::interference (predicted slowdowns for the incoming pod)

  [[nodiscard]] bool any() const { return gpu_metrics || interference_forecast; }
  Inputs& operator|=(const Inputs& o) {
    gpu_metrics = gpu_metrics || o.gpu_metrics;
    interference_forecast = interference_forecast || o.interference_forecast;
    return *this;
  }
};

class PlacementPolicy {
 public:
  PlacementPolicy() = default;
  PlacementPolicy(const PlacementPolicy&) = delete;
  PlacementPolicy& operator=(const PlacementPolicy&) = delete;
  virtual ~PlacementPolicy() = default;

  [[nodiscard]] virtual std::string_view Name() const = 0;

  // Whether the node's GPUs can host the pod's GPU containers (CPU and memory are the runner's node predicates).
  // Default: FitGpus (gpu_fit.h).
  [[nodiscard]] virtual Fit Filter(const core::PodRequest& pod, const core::NodeView& node) const;
  // Filter for a policy whose notion of a fit also reads the snapshot (interference-aware: a GPU predicted not to
  // fit in memory next to its residents). The cycle runner calls this one; it must imply Filter. Only policies with
  // ScoresFromSnapshot may read the snapshot here (the runner caches fits with scores per snapshot).
  // Default: Filter(pod, node).
  [[nodiscard]] virtual Fit FilterWithSnapshot(const core::PodRequest& pod, const core::NodeView& node,
                                               const Snapshot& snapshot) const {
    (void)snapshot;
    return Filter(pod, node);
  }

  // 0..kMaxScore · ScoreScale(), higher is better. Called only on nodes that passed Filter.
  [[nodiscard]] virtual int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                                      const Snapshot& snapshot) const = 0;

  // How many of Score's points make one of kube-scheduler's 0..kMaxScore. A policy whose score measures a
  // continuous quantity resolves it finer than 101 levels this way: the runner's own choice of node compares the
  // fine scores, and whatever needs 0..kMaxScore (a score mix, the extender's prioritize) gets Score / ScoreScale()
  // (CycleRunner::Evaluate). Default 1.
  [[nodiscard]] virtual int64_t ScoreScale() const { return 1; }

  // What the policy reads of the snapshot. Front ends fill exactly these and refuse a policy whose inputs they
  // cannot provide; none recognises a policy by its name. Default: nothing (request and node view only).
  [[nodiscard]] virtual Inputs Reads() const { return {}; }

  // Whether Score reads the snapshot. The runner's score cache then reuses a score only for the same snapshot
  // (cycle_runner.h); policies that ignore the snapshot are cached per node generation.
  [[nodiscard]] bool ScoresFromSnapshot() const { return Reads().any(); }

  // Whether the runner min-max normalises the feasible nodes' scores to 0..kMaxScore.
  [[nodiscard]] virtual bool NormalizesScores() const { return false; }

  // Whether the node is a uniformly random feasible one, whatever the scores and the runner's tie rule (the
  // random policy: KSS picks its node in PreScore).
  [[nodiscard]] virtual bool ChoosesNodeAtRandom() const { return false; }

  // Chooses the GPUs for every GPU container. Precondition: Filter(pod, node) fits. Default: the tightest
  // fitting GPU for a shared GPU, the lowest-index fully free GPUs for whole ones (SelectGpusBest).
  [[nodiscard]] virtual std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                          const core::NodeView& node,
                                                                          common::Rng& rng) const;

  // SelectGpus for a policy whose GPU choice reads the snapshot (load-aware: the least-loaded GPUs). Front ends
  // call this one with the cycle's snapshot. Default: SelectGpus(pod, node, rng), ignoring the snapshot.
  [[nodiscard]] virtual std::vector<core::ContainerAllocation> SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                                      const core::NodeView& node,
                                                                                      const Snapshot& snapshot,
                                                                                      common::Rng& rng) const;
};

}  // namespace gpusched::policy
