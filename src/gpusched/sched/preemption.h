#pragma once

// Preemption: which running pods to evict so that a pod that fits nowhere fits somewhere, with kube-scheduler's
// rules (DefaultPreemption), over GPU shares as well as CPU, memory and pod slots. Used by the standalone
// scheduler's post-filter and by the extender's /preempt (which adds GPU holders to kube-scheduler's victims).
//
// On one node (SelectVictimsOnNode):
//   1. remove every potential victim (pods of lower priority than the preemptor); if the pod still does not fit,
//      the node is no candidate;
//   2. order the victims most important first (higher priority, then earlier start);
//   3. split them into those whose eviction would violate a PodDisruptionBudget (counting the budget down as
//      victims are taken, most important first) and the rest;
//   4. put them back one by one, the violating ones first, then the others, each in that order: a pod that can go
//      back while the preemptor still fits is spared; the others are the victims.
// Across nodes (PickCandidate), the candidate with, in this order: the fewest PDB violations, the lowest priority of
// its most important victim, the smallest sum of victim priorities, the fewest victims, the latest start of its
// most important victims; then the first.
//
// Pure functions over copies of node views: nothing here changes the cluster.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/node_view.h"

namespace gpusched::sched {

// A pod that may be evicted, with what it holds on its node.
struct PotentialVictim {
  const core::Allocation* allocation = nullptr;  // its uid, node and what it holds
  int32_t priority = 0;
  int64_t start_ms = 0;  // when it started (or was created): earlier is more important among equals
  // How far its GPU queue is over its fair share (GpuQueues::Rank) when it is a reclaim candidate: among equal
  // priorities, the pod of the queue further over its share is less important. 0 otherwise.
  double over_share = 0;
  std::vector<size_t> pdbs;  // the budgets (indices into the budgets span) that count its eviction
};

struct VictimSet {
  common::NodeName node;
  std::vector<common::PodUid> victims;  // most important first
  int32_t pdb_violations = 0;           // victims whose eviction a budget does not allow
  // For PickCandidate.
  int32_t highest_priority = 0;  // of victims[0]; INT32_MIN when there are none
  int64_t priority_sum = 0;      // Σ (priority - INT32_MIN): never negative
  int64_t highest_start_ms = 0;  // the earliest start among the victims of the highest priority
};

// The node view without / with an allocation (its GPU shares, CPU, memory and pod slot).
void RemoveFromView(core::NodeView& view, const core::Allocation& allocation);
void AddToView(core::NodeView& view, const core::Allocation& allocation);

// kube-scheduler's MoreImportantPod: higher priority, then (gpusched's reclaim) lower over_share, then earlier start.
[[nodiscard]] bool MoreImportant(const PotentialVictim& a, const PotentialVictim& b);

// The fewest victims among `potential` (pods of lower priority on this node) that make `fits` true for the node;
// nullopt when even all of them are not enough. `budgets`: disruptions each PodDisruptionBudget still allows.
// `on_change`, when set, hears each time a potential victim is taken off the node (-1) or put back (+1), before
// `fits` is asked again, so that state beyond the node view (inter-pod constraints) can follow; when this returns,
// exactly the victims are off (nullopt: every potential victim is).
using VictimChange = std::function<void(const PotentialVictim& victim, int delta)>;
[[nodiscard]] std::optional<VictimSet> SelectVictimsOnNode(const core::NodeView& view,
                                                           std::span<const PotentialVictim> potential,
                                                           std::span<const int32_t> budgets,
                                                           const std::function<bool(const core::NodeView&)>& fits,
                                                           const VictimChange& on_change = nullptr);

// Whether candidate `a` is better than `b` (see above); and the index of the best candidate (the first of equals);
// candidates must not be empty.
[[nodiscard]] bool BetterCandidate(const VictimSet& a, const VictimSet& b);
[[nodiscard]] size_t PickCandidate(std::span<const VictimSet> candidates);

}  // namespace gpusched::sched
