#pragma once

// Who may be evicted for a preemptor, node by node: the possible victims every front end's preemption plans from
// (the standalone scheduler's single-pod and gang plans, and the extender's /preempt, which adds GPU holders to
// kube-scheduler's own victims). preemption.h then chooses among them (SelectVictimsOnNode, PickCandidate).
//
// A placed pod is a possible victim of a preemptor of priority P in GPU queue Q when
//   - it is known bound (not assumed: a pod whose bind is still in flight is never evicted blind) and not leaving;
//   - it is of Q and of priority below P, or, when the rules allow reclaim, of another queue that may give back what
//     it holds (VictimRules::may_reclaim: a queue borrowing beyond its guarantee in a dimension the pod holds).
// A node is left out when nobody there may go, or when even everyone who may go would free less GPU compute than
// VictimRules::need_milli (a cheap bound before any choice: pods that leave with a gang from other nodes free
// nothing here).
//
// Pure: reads the state and the front end's records of its placed pods; changes nothing.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/core/node_view.h"
#include "gpusched/sched/inter_pod.h"
#include "gpusched/sched/preemption.h"

namespace gpusched::sched {

// A pod placed on a node as preemption (a possible victim) and inter-pod constraints see it: bound (the watch showed
// it) or assumed (placed by this front end, its binding not seen yet).
struct PlacedPod : PodOnNode {
  std::string name;
  int32_t priority = 0;
  int64_t start_ms = 0;  // creation time: earlier is more important among equals
  bool assumed = false;
  std::string group;  // namespace/pod-group of a gang member, else empty
  int32_t min_available = 0;
  bool coscheduling = false;  // min_available is its PodGroup's minMember
  std::string queue = core::kDefaultQueue;
  core::GpuAmount demand;  // what it holds of its queue
};

// The preemptor's side of the rules above.
struct VictimRules {
  int32_t priority = 0;
  std::string queue = core::kDefaultQueue;
  // Whether a pod of another queue holding `holds` may be reclaimed; null: pods of other queues never are.
  std::function<bool(const std::string& queue, const core::GpuAmount& holds)> may_reclaim;
  // How far a queue is over its fair share (GpuQueues::Rank): a reclaimed pod's PotentialVictim::over_share.
  std::function<double(const std::string& queue)> over_share;
  std::vector<core::DisruptionBudget> budgets;  // those that count evictions
  int64_t need_milli = 0;                       // see above; 0 keeps every node with a possible victim
  bool with_pods = false;                       // fill VictimPool::Node::pods (inter-pod constraints follow them)
};

struct VictimPool {
  std::vector<core::DisruptionBudget> budgets;
  std::vector<int32_t> allowed;  // disruptions each budget still allows
  struct Node {
    const core::NodeView* view = nullptr;
    std::vector<PotentialVictim> potential;
    std::vector<PodOnNode> pods;  // potential[i] as inter-pod constraints see it (with_pods)
    // For potential[i] of another GPU queue (a reclaim): its queue and what it holds of it; empty queue otherwise.
    std::vector<std::pair<std::string, core::GpuAmount>> reclaim;
  };
  std::vector<Node> nodes;  // only nodes with at least one possible victim
};

// The possible victims on `views` (each a view of `state`, perhaps a copy with some pods already taken off: those
// pods' records are then not found). `placed` finds the front end's record of a pod on a node, null when it has
// none (a pod not placed by a front end that knows it, or a hold that is not a pod).
[[nodiscard]] VictimPool CollectVictims(const core::ClusterState& state, std::span<const core::NodeView* const> views,
                                        const std::function<const PlacedPod*(const common::PodUid&)>& placed,
                                        const VictimRules& rules);

// Whether evicting every possible victim on a pool node could free the GPU compute `request` asks for.
[[nodiscard]] bool CouldFree(const VictimPool::Node& node, const core::PodRequest& request);

}  // namespace gpusched::sched
