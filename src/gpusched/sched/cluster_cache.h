#pragma once

// ClusterCache: the ClusterState every scheduling front end keeps (the extender and the standalone scheduler), fed
// by the API server's node and pod watches, decoded by kube/ (DecodeNode, DecodePodUpdate): accounting only here.
//
//   node ADDED/MODIFIED  -> ClusterState::UpdateNode (GPUs from gpusched.io/gpus or capacity + labels)
//   node DELETED         -> RemoveNode; the allocations of its bound pods wait (as if their node were not known
//                           yet) and are charged again if the node comes back: pods outlive a Node object
//   pod with spec.nodeName and a gpusched.io/allocation annotation for that node
//                        -> Confirm when this process assumed it (its bind landed), else Assume + Confirm
//                           (a restarted front end rebuilds every allocation this way)
//   pod bound without the annotation while this process assumed it -> Forget (someone else bound it)
// What is bound is charged, always (ClusterState::Charge): a bound pod that does not fit, or a node update that
// shrinks under its pods, overcommits the node, and that is logged and counted (CacheStats, exported as metrics),
// never hidden. Only an allocation naming a GPU the node does not list waits, like one whose node is unknown.
//   pod bound without the annotation (or with one that cannot be used) -> with CacheOptions::charge_every_pod,
//                           charged its CPU, memory and one pod slot (no GPUs); else not charged. With
//                           charge_every_pod a pod rebuilt from its annotation is charged its CPU and memory too
//   pod DELETED, Succeeded or Failed -> Release
// For every pod it charges it also remembers the application class (annotation gpusched.io/app, else the
// configured label): the interference forecast needs what runs on each GPU.
// An allocation whose node is not known yet waits and is applied when the node arrives. Pods that carry an
// annotation but no node are not charged: only bound pods hold GPUs.
//
// Assumed allocations expire. Bind assumes first and calls ExpireAssumedAfter with a long bound (the bind may still
// be running), then, when the outcome is unknown (timeout, 5xx, 409), with the short TTL: the watch decides within
// it, else ExpireAssumed (called every second by the front end's main loop) forgets the allocation. Nothing can
// strand capacity: every assumption carries a deadline.
//
// Allocation ids are unique across restarts and replicas: (wall-clock ms x 16, or one above the last id, whichever
// is larger) in the high bits, a random per-process number in the low 16 bits, and above every id seen in an
// annotation.
//
// Locking: one shared_mutex. Filter and prioritize read under a shared lock; bind's choose-and-Assume and every
// watch event take it exclusively, so two binds can never hand out the same capacity.

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "gpusched/common/clock.h"
#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"

namespace gpusched::sched {

using core::EventType;

struct CacheStats {
  uint64_t node_events = 0;
  uint64_t pod_events = 0;
  uint64_t rebuilt_allocations = 0;    // charged from annotations (not by this extender's own binds)
  uint64_t rejected_events = 0;        // undecodable objects or allocations that did not fit
  uint64_t expired_assumptions = 0;    // assumed allocations whose time ran out (ExpireAssumed)
  uint64_t held_for_node_return = 0;   // bound pods' allocations kept when their Node was deleted
  uint64_t overcommitted_charges = 0;  // bound pods charged past their node's capacity
};

struct CacheOptions {
  // The label that names a pod's application class when the annotation gpusched.io/app is absent
  // (kube::ResourceConfig::app_label); empty = the annotation only. Read by whoever decodes the pods.
  std::string app_label;
  // Steady time for assumption deadlines; null = common::SystemClock.
  const common::Clock* clock = nullptr;
  // Wall-clock milliseconds since the epoch for allocation ids; empty = std::chrono::system_clock.
  std::function<int64_t()> wall_ms;
  // The low 16 bits of every allocation id; 0 = random.
  uint16_t id_nonce = 0;
  // Charge every bound pod, not only those with gpusched.io/allocation: a pod without the annotation is charged
  // its CPU and memory requests and one pod on its node (no GPUs: what it holds of them is not known). The
  // standalone scheduler checks CPU, memory and pods count itself; the extender leaves them to kube-scheduler.
  bool charge_every_pod = false;
  // Who may share a GPU with whom (core/share_within.h): the share group every charged allocation gets from its
  // pod's namespace or queue label. The front end sets it with kube::ResourceConfig::share_within.
  core::ShareWithin share_within = core::ShareWithin::kAny;
  // Names the front end in log lines ("extender: ...").
  std::string component = "gpusched";
};

class ClusterCache {
 public:
  ClusterCache() : ClusterCache(CacheOptions{}) {}
  explicit ClusterCache(CacheOptions options);

  [[nodiscard]] const CacheOptions& options() const { return options_; }

  // A node added or changed (decoded: an error is counted and logged, and the node keeps its last description).
  void ApplyNode(common::Result<core::Node> node);
  void ApplyNodeDeleted(const common::NodeName& name);
  // A pod event (decoded with kube::DecodePodUpdate, with requests under charge_every_pod).
  void ApplyPod(EventType type, const common::Result<core::PodUpdate>& pod);

  [[nodiscard]] std::shared_lock<std::shared_mutex> ReadLock() const { return std::shared_lock(mu_); }
  [[nodiscard]] std::unique_lock<std::shared_mutex> WriteLock() { return std::unique_lock(mu_); }
  // The state; the caller holds ReadLock (const use) or WriteLock.
  [[nodiscard]] core::ClusterState& state() { return state_; }
  [[nodiscard]] const core::ClusterState& state() const { return state_; }

  // Priority of a pod holding an allocation (spec.priority; 0 when unknown). Caller holds a lock.
  [[nodiscard]] int32_t PriorityOf(const common::PodUid& pod) const;
  // The largest GPU memory of any node (for "memory above every GPU"). Caller holds a lock.
  [[nodiscard]] common::MiB LargestGpuMemory() const { return largest_gpu_memory_; }
  // A new allocation id: unique across restarts and replicas, above every id seen in an annotation.
  [[nodiscard]] uint64_t NextAllocationId();
  // Gives the pod's assumed (unconfirmed) allocation a deadline ttl_ms from now, replacing an earlier one; at the
  // deadline ExpireAssumed forgets it unless the watch confirmed it first. bind_running: its bind is still in
  // flight (false: the bind ended with an unknown outcome). A pod without an assumed allocation loses its
  // deadline. Caller holds WriteLock.
  void ExpireAssumedAfter(const common::PodUid& pod, int64_t ttl_ms, bool bind_running = false);
  // True when the pod's allocation is assumed and its last bind ended with an unknown outcome (not in flight): a
  // retried bind to the same node may send the same allocation again. Caller holds a lock.
  [[nodiscard]] bool AwaitsBindOutcome(const common::PodUid& pod) const;
  // The bind protocol every front end follows (the scheduler's binds and the extender's bind verb), in three steps:
  //   BindState    what the state holds for the pod before a bind (caller holds a lock): nothing (choose GPUs
  //                and Assume them), a resend (its allocation is assumed and its last bind's outcome is unknown:
  //                send the same allocation again; if the first Binding landed, the watch confirms), bound (the
  //                allocation is confirmed), or in flight (a bind runs, or its outcome is not known yet and it is
  //                not this caller's to retry).
  //   BindStarting the allocation is assumed (ClusterState::Assume, by the cycle's Reserve or the caller, or held
  //                for a resend): records the pod's priority and application class and gives the assumption the
  //                in-flight deadline, so it cannot outlive bind_in_flight_ms whatever happens to the binding
  //                thread. Caller holds WriteLock.
  //   FinishBind   the bind's outcome (takes WriteLock): bound -> Confirm (unless the watch did) and no deadline;
  //                outcome unknown (ports::BindOutcomeUnknown: timeout, 5xx, 409) -> assumed for assumed_ttl_ms
  //                more, for the watch to decide; failed -> Forget and no deadline. Only an unconfirmed allocation
  //                on `node` is confirmed or forgotten: the watch may have shown the pod elsewhere meanwhile.
  enum class HeldForBind { kNothing, kResend, kBound, kInFlight };
  [[nodiscard]] HeldForBind BindState(const common::PodUid& pod) const;
  void BindStarting(const core::PodRequest& request, int64_t bind_in_flight_ms);
  enum class BindEnd { kBound, kUnknown, kFailed };
  BindEnd FinishBind(const common::PodUid& pod, const common::NodeName& node, const common::Status& bound,
                     int64_t assumed_ttl_ms);

  // Forgets every assumed allocation whose deadline passed; returns how many. Takes the lock itself.
  size_t ExpireAssumed();
  // Assumed allocations with a deadline. Caller holds a lock.
  [[nodiscard]] size_t TrackedAssumptions() const { return assumed_deadline_.size(); }
  // Records a pod's priority for a bind this extender makes. Caller holds WriteLock.
  void SetPriority(const common::PodUid& pod, int32_t priority) { priorities_[pod] = priority; }
  // Application class of a pod holding an allocation ("" when unknown). Caller holds a lock.
  [[nodiscard]] std::string AppOf(const common::PodUid& pod) const;
  // Records a pod's application class for a bind this extender makes. Caller holds WriteLock.
  void SetApp(const common::PodUid& pod, std::string app);

  // Releases what the pod holds, charged or waiting for its node to come back (a hold that is not a pod: the
  // scheduler's room for a preemptor). Caller holds WriteLock.
  void ReleaseHeld(const common::PodUid& pod);

  [[nodiscard]] CacheStats stats() const;
  [[nodiscard]] size_t PendingAllocations() const;

 private:
  void ApplyAllocation(core::Allocation allocation);  // mu_ held
  // A bound pod without the annotation, under charge_every_pod. mu_ held.
  void ChargeUnannotated(const core::PodUpdate& pod);
  // The pod's CPU, memory, other resources and host ports into `allocation` (zero, logged and counted, when they
  // could not be read).
  void RequestsOf(const core::PodUpdate& pod, core::Allocation& allocation);
  void RecomputeLargest();  // mu_ held
  void SeeId(uint64_t id);
  void Warn(const std::string& message) const;

  CacheOptions options_;
  mutable std::shared_mutex mu_;
  core::ClusterState state_;
  std::unordered_map<common::PodUid, int32_t> priorities_;
  std::unordered_map<common::PodUid, std::string> apps_;          // only pods with a known class
  std::unordered_map<common::PodUid, core::Allocation> pending_;  // node not known yet
  struct Deadline {
    int64_t at_ms = 0;  // steady
    bool bind_running = false;
  };
  std::unordered_map<common::PodUid, Deadline> assumed_deadline_;
  common::MiB largest_gpu_memory_{0};
  const common::Clock* clock_;
  std::function<int64_t()> wall_ms_;
  uint16_t id_nonce_;
  std::atomic<uint64_t> last_id_{0};  // the largest id issued or seen
  CacheStats stats_;
};

}  // namespace gpusched::sched
