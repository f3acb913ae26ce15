#pragma once

// The trace-replay simulator: the FGD benchmark's protocol (fgd-benchmark.md §3) run through the production
// scheduling path (sched::CycleRunner over core::ClusterState) against an in-memory cluster that implements the
// ports.
//
// One run (RunOne):
//   1. shuffle the workload's pods with the run's seed;
//   2. tune: while the requested GPU total is <= tune × cluster capacity, append a clone of a uniformly drawn
//      trace pod (KSS's quirk kept: the running total adds the clone's per-GPU milli, not count × milli);
//   3. submit pods one at a time; each is scheduled at once or fails; failed pods are dropped but count as
//      arrived; no pod ever departs;
//   4. after every pod, log arrived and allocated GPU milli, Σ_n F_n(M) and Σ_n idle_n. F_n is recomputed only
//      for the node that changed.
// Runs are independent; RunMany spreads them over threads.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/common/status.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/cluster_source.h"

namespace gpusched::sim {

struct Cluster {
  std::string name;
  std::vector<core::Node> nodes;
};

struct Workload {
  std::string name;  // trace file stem, e.g. openb_pod_list_default
  std::vector<core::PodRequest> pods;
  // FGD's target workload, computed once from `pods` (TypicalPods).
  std::shared_ptr<const policy::TargetWorkload> target;
};

enum class GpuChoice {
  kTopology,        // the policy's own choice, topology-aware (policy/topology.h)
  kFirstFit,        // topology-blind: the scheduler sees no links; the lowest-numbered free GPUs
  kGoGpuAllocator,  // topology-blind node choice, then NVIDIA go-gpuallocator's choice (gpu_allocator_baseline.h)
};

// The name a report gives a choice: "" for kTopology, "first-fit", "go-gpuallocator".
[[nodiscard]] std::string_view GpuChoiceName(GpuChoice choice);

// "fgd:3+topology:1" -> {{"fgd", 3}, {"topology", 1}}; a name without ':' weighs 1; a plain name is itself.
// Errors name the bad part (an empty name, a weight that is not a number in (0, 1e6]). Names are checked when the
// policies are made.
[[nodiscard]] common::Result<std::vector<std::pair<std::string, double>>> ParsePolicyMix(std::string_view spec);

// The policies of a spec ("fgd" or "fgd:3+topology:1"), made with the workload's target: the first filters and
// chooses GPUs; `mix` is what sched::CycleRunner takes as its score mix (empty for a single policy).
struct PolicySet {
  std::vector<std::unique_ptr<policy::PlacementPolicy>> members;
  std::vector<std::pair<const policy::PlacementPolicy*, double>> mix;
  [[nodiscard]] const policy::PlacementPolicy& primary() const { return *members.front(); }
};
// The GPUs of each model among the nodes (healthy or not: a model's scarcity is about what the cluster has).
[[nodiscard]] std::map<std::string, int64_t> GpusByModel(std::span<const core::Node> nodes);
// The policies of `spec`, told the workload's target M and how many GPUs of each model `nodes` have.
[[nodiscard]] common::Result<PolicySet> MakePolicySet(std::string_view spec, const Workload& workload,
                                                      std::span<const core::Node> nodes);

struct RunSpec {
  std::string policy;
  uint64_t seed = 42;
  double tune = 1.3;
  bool keep_allocations = false;  // return every bound allocation (tests, what-if analysis)
  // How the GPUs inside the chosen node are picked for whole-GPU containers (`simulate --topology` compares them;
  // the topology metrics below judge every placement by the cluster's real topology):
  GpuChoice gpu_choice = GpuChoice::kTopology;
  // Several policies scoring together: "fgd:3+topology:1" is score = (3 · fgd + 1 · topology) / 4, the first
  // policy filtering and choosing the GPUs (the scheduler's and extender's `weights`). A plain name: that policy.
  // Break score ties uniformly at random, as kube-scheduler does, instead of KSS's stable node order (TieRank). The
  // FGD benchmark's numbers rest on that order; the standalone scheduler keeps one too (CycleOptions::stable_ties).
  bool random_ties = false;
};

// How multi-GPU pods (a container with 2 or more whole GPUs) were placed, judged by the cluster's topology
// (policy/topology.h), when its nodes have one.
struct TopologyStats {
  int64_t multi_gpu_pods = 0;  // placed
  // Of those, the pods their node could have put on GPUs all NVLink-joined to each other (the empty node has such
  // a group of the pod's size), and of these the ones that got such GPUs.
  int64_t nvlinkable = 0;
  int64_t fully_nvlinked = 0;
  double mean_pair_score = 0;  // mean over those pods of the mean pair score of their GPUs
};

struct Event {
  int64_t arrived_milli = 0;    // cumulative requested GPU milli of all submitted pods
  int64_t allocated_milli = 0;  // GPU milli allocated after this pod
  double frag_milli = 0;        // Σ_n F_n(M)
  int64_t idle_milli = 0;       // Σ_n idle GPU milli
};

struct RunOutcome {
  std::string workload;
  RunSpec spec;
  int64_t total_gpus = 0;
  std::vector<Event> events;  // one per submitted pod
  int64_t pods_submitted = 0;
  int64_t pods_scheduled = 0;
  int64_t pods_failed = 0;
  double wall_seconds = 0;
  std::vector<core::Allocation> allocations;  // when spec.keep_allocations
  TopologyStats topology;
};

// The simulator's cluster: the nodes it was given, and every bind recorded. Implements the ports the cycle
// needs.
class InMemoryCluster : public ports::ClusterSource, public ports::Binder {
 public:
  explicit InMemoryCluster(std::vector<core::Node> nodes) : nodes_(std::move(nodes)) {}
  [[nodiscard]] common::Result<std::vector<core::Node>> ListNodes() const override { return nodes_; }
  [[nodiscard]] common::Result<std::vector<core::Allocation>> ListAllocations() const override { return bound_; }
  [[nodiscard]] common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) override;
  [[nodiscard]] size_t BindCount() const { return bound_.size(); }

 private:
  std::vector<core::Node> nodes_;
  std::vector<core::Allocation> bound_;
};

// Steps 1 and 2 of a run: the workload's pods shuffled with `rng`, then clones appended while the requested GPU
// total is <= tune × capacity. Pointers into workload.pods. RunOne goes on with the same generator.
[[nodiscard]] std::vector<const core::PodRequest*> ArrivalOrder(const Workload& workload, int64_t capacity_milli,
                                                                double tune, common::Rng& rng);

// KSS breaks score ties by the smallest node name, and node names carry a random prefix: a fixed random rank per
// node slot for a whole run (sched::CycleOptions::tie_rank), drawn from `rng`.
[[nodiscard]] std::vector<uint32_t> TieRank(size_t slots, common::Rng& rng);

// Calls work(i) for every i in [0, n) on up to `jobs` threads (the caller's among them); returns when all are done.
void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& work);

[[nodiscard]] common::Result<RunOutcome> RunOne(const Cluster& cluster, const Workload& workload, const RunSpec& spec);

struct RunRequest {
  const Workload* workload = nullptr;
  RunSpec spec;
};

// Runs every request with up to `jobs` threads; `on_done(done, total)` is called (serialised) after each run.
// Results are in request order. The first error stops nothing else but is returned.
[[nodiscard]] common::Result<std::vector<RunOutcome>> RunMany(const Cluster& cluster,
                                                              const std::vector<RunRequest>& requests, int jobs,
                                                              const std::function<void(size_t, size_t)>& on_done);

}  // namespace gpusched::sim
