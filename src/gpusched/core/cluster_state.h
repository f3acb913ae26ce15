#pragma once

// ClusterState: the nodes and the allocations on them, and the only thing that changes either.
//
// Life of an allocation: Assume (tentative, before the bind is known to have landed) -> Confirm (bound), or
// Forget (the bind failed; capacity comes back). Release frees a pod's capacity whether assumed or confirmed
// (the pod ended or was deleted). Charge is for a pod the cluster shows bound (a watch, a restart): what is bound
// is charged, always, even where it does not fit; the node is then overcommitted, and Overcommits() says where.
//
// Invariant (CheckInvariants): for every node, what its NodeView says is free equals its capacity minus the sum
// of its allocations; and, on every node that holds no allocation charged past its capacity, no GPU has more than
// 1000 milli or more than its memory allocated, an exclusive GPU has exactly one holder, no GPU is shared by pods of
// two share groups (share_within.h), CPU and memory are not overcommitted. Decisions (Assume) never overcommit. Every
// mutating call validates first and changes nothing when it returns an error.
//
// Node slots are stable: a removed node leaves a dead slot that a later AddNode may reuse, so an index into
// nodes() stays valid for the node's lifetime. Not thread-safe: callers serialise access (the scheduler holds
// one lock around the cycle; each simulator run owns its ClusterState).

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/node.h"
#include "gpusched/core/node_index.h"
#include "gpusched/core/node_view.h"

namespace gpusched::core {

class ClusterState {
 public:
  ClusterState() = default;
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;
  ClusterState(ClusterState&&) = default;
  ClusterState& operator=(ClusterState&&) = default;

  // Fails if a node of that name exists or the description is inconsistent (GPU index != position, negative
  // capacity).
  common::Status AddNode(Node node);
  // Replaces the node's description (capacity, GPUs), keeping its allocations; adds the node when unknown. An
  // identical description changes nothing (not even the generation). The node's description always wins: an
  // allocation that no longer fits (less memory, a GPU now held twice) stays charged and overcommits the node; one
  // that names a GPU the node no longer has (index out of range, another UUID) cannot be charged and is removed
  // and returned, so the caller can keep it until the GPU is back or the pod ends. Fails, changing nothing, only
  // on an inconsistent description.
  common::Result<std::vector<Allocation>> UpdateNode(Node node);
  // Removes the node and every allocation on it (its pods are gone with it).
  common::Status RemoveNode(const common::NodeName& name);

  // Charges the allocation to its node. Fails (changing nothing) if the pod already holds an allocation, the
  // node is unknown, or any share does not fit: more milli or memory than free, an exclusive share on a GPU that
  // others hold, a share on an exclusively held GPU, a UUID that does not match the node's GPU.
  common::Status Assume(Allocation allocation);
  // Charges a bound pod's allocation, confirmed, whether it fits or not. Fails, changing nothing, only where it
  // cannot be charged at all: no pod, a pod that holds an allocation already, an unknown node, a GPU index out of
  // range, another UUID, a share of no milli and no memory. When it did not fit, *overcommit (if given) says why.
  common::Status Charge(Allocation allocation, std::string* overcommit = nullptr);
  common::Status Confirm(const common::PodUid& pod);
  common::Status Forget(const common::PodUid& pod);   // only for an assumed (unconfirmed) allocation
  common::Status Release(const common::PodUid& pod);  // assumed or confirmed

  // Slots, dead ones included (IsLive tells). Index i is stable while the node lives.
  [[nodiscard]] size_t SlotCount() const { return slots_.size(); }
  [[nodiscard]] bool IsLive(size_t i) const { return slots_[i].live; }
  [[nodiscard]] const NodeView& View(size_t i) const { return slots_[i].view; }
  [[nodiscard]] const NodeView* Find(const common::NodeName& name) const;
  [[nodiscard]] std::optional<size_t> SlotOf(const common::NodeName& name) const { return SlotOf(name.str()); }
  [[nodiscard]] std::optional<size_t> SlotOf(std::string_view name) const;
  [[nodiscard]] size_t NodeCount() const { return index_.size(); }
  // Counts the changes that can make a pod fit where it did not: an allocation released or forgotten, a node
  // added or its description changed. Equal before and after: no pod fits anywhere it did not fit before.
  [[nodiscard]] uint64_t FreedGeneration() const { return freed_generation_; }

  [[nodiscard]] const Allocation* FindAllocation(const common::PodUid& pod) const;
  [[nodiscard]] bool IsConfirmed(const common::PodUid& pod) const;
  [[nodiscard]] size_t AllocationCount() const { return allocations_.size(); }
  // Pods holding allocations on the node.
  [[nodiscard]] std::vector<common::PodUid> PodsOn(const common::NodeName& name) const;

  // Cluster totals, kept incrementally.
  [[nodiscard]] common::MilliGpu AllocatedMilli() const { return allocated_milli_; }
  [[nodiscard]] common::MilliGpu CapacityMilli() const { return capacity_milli_; }
  // Live nodes with at least one PreferNoSchedule taint (the scheduler scores those only where there are any).
  [[nodiscard]] size_t PreferNoScheduleNodes() const { return prefer_no_schedule_nodes_; }

  // Nodes holding an allocation charged past their capacity, each with what is over (sorted by node name).
  [[nodiscard]] std::vector<std::pair<common::NodeName, std::string>> Overcommits() const;
  // What is over on that node ("" when nothing is, or the node is unknown).
  [[nodiscard]] std::string OvercommitOf(const common::NodeName& name) const;

  // Recomputes every node from its allocations and compares; returns the first violation found.
  [[nodiscard]] common::Status CheckInvariants() const;
  // The same for one node.
  [[nodiscard]] common::Status CheckNodeInvariants(const common::NodeName& name) const;

 private:
  struct Slot {
    NodeView view;
    std::vector<common::PodUid> pods;
    int32_t forced = 0;  // allocations on it charged past its capacity
    bool live = false;
  };
  struct Entry {
    Allocation allocation;
    size_t slot = 0;
    bool confirmed = false;
    bool forced = false;  // charged without fitting
  };

  // Assume (charge = false: must fit, stays unconfirmed) and Charge (charge = true: confirmed, fit or not).
  common::Status Add(Allocation allocation, bool charge, std::string* overcommit);
  // Shape: everything but capacity (GPU indices, UUIDs, positive shares, no GPU named twice exclusively).
  common::Status ValidateShape(const Allocation& a, const Slot& slot) const;
  // Shape, then capacity.
  common::Status Validate(const Allocation& a, const Slot& slot) const;
  // The holders of GPU `gpu` of the slot other than `except`: whether one holds it exclusively, and their group.
  struct Others {
    bool exclusive = false;
    ShareGroup group = 0;
  };
  [[nodiscard]] Others OthersOn(const Slot& slot, int32_t gpu, const common::PodUid& except) const;
  [[nodiscard]] std::string OverOf(const Slot& slot) const;
  void Apply(const Allocation& a, Slot& slot, int sign);
  void Touch(Slot& slot) { slot.view.generation = ++generation_; }
  common::Status CheckSlot(const Slot& slot) const;

  std::vector<Slot> slots_;
  std::vector<size_t> free_slots_;
  // Name -> slot of the live nodes; the extender resolves every node of a request here.
  NodeIndex index_;
  std::unordered_map<common::PodUid, Entry> allocations_;
  uint64_t generation_ = 0;
  uint64_t freed_generation_ = 0;
  common::MilliGpu allocated_milli_{0};
  common::MilliGpu capacity_milli_{0};
  size_t prefer_no_schedule_nodes_ = 0;
  void CountPreferNoSchedule(const Node& before, const Node& after);
};

}  // namespace gpusched::core
