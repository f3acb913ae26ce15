#pragma once

// GpuQueues: GPU queues with a guaranteed quota, a limit, and a weight for sharing what nobody is guaranteed, as the
// standalone scheduler and the simulator account them. Pure bookkeeping: it never sees nodes, only what each pod
// of each queue asks for (GpuAmount) and the cluster's total.
//
// The three dimensions (whole GPUs, GPU compute, GPU memory) are core/gpu_queue.h's.
//
// Queues form a tree of at most two levels (a queue with a parent may not itself be a parent). A pod belongs to the
// queue its label gpusched.io/queue names, else to the queue that serves its namespace, else to the default queue
// ("default": no guarantee, no limit, weight 1, unless a queue of that name is declared).
//
// Admission (Admit): a pod is admitted when its queue, and the queue's parent, stay within their limits in every
// dimension with the pod added. It is "within guarantee" when its queue's allocation with the pod stays within the
// queue's guarantee in every dimension (and so does the parent's): such a pod is entitled to its room, and may
// reclaim it from queues that borrow beyond their guarantees.
//
// Fair share (per dimension, level by level): each queue first gets the smaller of its guarantee and its demand
// (allocated + pending, capped by its limit); what is left of its parent's share (the cluster for top-level queues)
// is water-filled among the queues that want more, in proportion to their weights, none above its demand. A queue's
// rank is its dominant ratio, max over the dimensions of allocated / fair share: the scheduler tries the queue with
// the lowest rank first (the one furthest below its fair share), so idle capacity is lent in proportion to weight.
//
// Reclaim (MayReclaim): a victim's queue must be borrowing: over its guarantee, after the victims already chosen
// from it, in a dimension the victim holds. A queue within its guarantee is never reclaimed from.
//
// Thread-safety: every method may be called from any thread (one mutex).

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/core/gpu_queue.h"

namespace gpusched::sched {

using core::DemandOf;
using core::GpuAmount;
using core::kDefaultQueue;
using core::QueueSpec;
using core::ValidateQueues;

using core::QueueStatus;

class GpuQueues {
 public:
  explicit GpuQueues(GpuAmount capacity = {});

  // Replaces the queues with the valid ones of `specs`; returns the rejected ones with their reasons (ValidateQueues).
  // Pods keep their accounting: a pod of a queue that disappeared is counted in the default queue.
  std::map<std::string, std::string> SetQueues(const std::vector<QueueSpec>& specs);
  // The cluster's GPUs (the total the top-level queues share).
  void SetCapacity(const GpuAmount& capacity);

  // The queue of a pod: the label's queue when it names one the pod may join (JoinRefusal; an unknown queue is
  // checked by Admit: it admits nothing), else the queue serving the namespace, else the default queue. A pod is
  // therefore never counted against a queue it may not join, whatever its label says.
  [[nodiscard]] std::string QueueOf(const std::string& namespace_, const std::string& label_queue) const;
  // Why a pod of `namespace_` may not join `queue` by its label; empty when it may, or when no such queue exists
  // (Admit refuses that). A declared queue admits the namespaces listed in its spec.namespaces or its parent's;
  // the default queue admits the namespaces that no declared queue serves. So a label can move a pod among the
  // queues its namespace was given, never into another team's queue (spending its guarantee, deciding whom
  // reclaim evicts) nor out of its own queue's limit into the default queue.
  [[nodiscard]] std::string JoinRefusal(const std::string& queue, const std::string& namespace_) const;
  [[nodiscard]] bool Exists(const std::string& queue) const;

  // A placed pod (assumed or bound) charges its queue; a pending one counts in its queue's demand. A uid is in at
  // most one of the two (Charge moves a pending pod, Release forgets either).
  void Charge(const std::string& uid, const std::string& queue, const GpuAmount& demand);
  void SetPending(const std::string& uid, const std::string& queue, const GpuAmount& demand);
  void Release(const std::string& uid);
  // Counts a pod of `queue` evicted to give back a guarantee.
  void CountReclaim(const std::string& queue);

  struct Admission {
    bool admitted = false;
    bool within_guarantee = false;
    std::string reason;  // why not admitted: "queue team-a: gpus 9 > limit 8"
  };
  // Whether `demand` more fits `queue` (and its parent). A queue that has children takes no pods itself.
  [[nodiscard]] Admission Admit(const std::string& queue, const GpuAmount& demand) const;

  // The queue's rank (lower is tried first); 0 for a queue with nothing allocated.
  [[nodiscard]] double Rank(const std::string& queue) const;
  // The rank the queue would have with `more` allocated to it.
  [[nodiscard]] double RankIf(const std::string& queue, const GpuAmount& more) const;
  // The index of the queue of the lowest rank among `queues` (the first of equals); queues must not be empty.
  [[nodiscard]] size_t Lowest(std::span<const std::string* const> queues) const;
  // Whether a pod holding `victim` in `queue` may be evicted to give back a guarantee of `reclaimer` (a queue),
  // when `taken` is already chosen from `queue` (see Reclaim above). Across parents, the victim's parent must be
  // borrowing too.
  [[nodiscard]] bool MayReclaim(const std::string& queue, const GpuAmount& victim, const GpuAmount& taken,
                                const std::string& reclaimer) const;

  [[nodiscard]] std::optional<QueueStatus> Status(const std::string& queue) const;
  [[nodiscard]] std::vector<QueueStatus> All() const;  // by name
  // The queue of a charged or pending pod; empty when unknown.
  [[nodiscard]] std::string QueueOfPod(const std::string& uid) const;

 private:
  struct Queue {
    QueueSpec spec;
    bool declared = false;
    GpuAmount allocated, pending;
    size_t running_pods = 0, pending_pods = 0;
    uint64_t reclaimed = 0;
    // The fair share, rounded down and exact per dimension (kDims order); valid when !dirty_.
    mutable GpuAmount fair;
    mutable std::array<double, 3> fair_exact{};
    mutable GpuAmount want;  // allocated + pending, capped by the limit (a parent's: its children's)
    mutable double rank = 0;
    std::vector<std::string> children;
  };
  struct PodEntry {
    std::string queue;
    GpuAmount demand;
    bool placed = false;
  };
  Queue& QueueFor(const std::string& name);  // the queue, or the default one; mu_ held
  std::string JoinRefusalLocked(const std::string& queue, const std::string& namespace_) const;
  const Queue* Find(const std::string& name) const;
  void Recompute() const;  // fair shares when dirty; mu_ held
  double RankLocked(const Queue& q, const GpuAmount& more = {}) const;
  void Forget(const std::string& uid);               // mu_ held
  void Set(const std::string& uid, PodEntry entry);  // Forget, then record and account; takes mu_
  // Adds (or takes away) a pod's demand to its queue's allocated or pending amounts and counts; mu_ held.
  void Account(const PodEntry& p, bool add);
  // A parent's allocation: its own pods' and its children's; mu_ held.
  [[nodiscard]] GpuAmount SubtreeAllocated(const Queue& parent) const;
  void Rebuild();  // children lists and namespace map; mu_ held

  mutable std::mutex mu_;
  GpuAmount capacity_;
  mutable std::map<std::string, Queue> queues_;  // by name; always holds the default queue
  std::unordered_map<std::string, std::string> by_namespace_;
  std::unordered_map<std::string, PodEntry> pods_;
  mutable bool dirty_ = true;
};

}  // namespace gpusched::sched
