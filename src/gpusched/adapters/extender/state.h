#pragma once

// ClusterMirror: the extender's ClusterState, fed by the API server's node and pod watches.
//
//   node ADDED/MODIFIED  -> ClusterState::UpdateNode (GPUs from gpusched.io/gpus or capacity + labels)
//   node DELETED         -> RemoveNode
//   pod with spec.nodeName and a gpusched.io/allocation annotation for that node
//                        -> Confirm when this extender assumed it (its bind landed), else Assume + Confirm
//                           (a restarted extender rebuilds every allocation this way)
//   pod DELETED, Succeeded or Failed -> Release
// For every pod it charges it also remembers the application class (annotation gpusched.io/app, else the label the
// mirror was built with): the interference forecast needs what runs on each GPU.
// An allocation whose node is not known yet waits and is applied when the node arrives. Pods that carry an
// annotation but no node (a bind that failed after the patch) are not charged: only bound pods hold GPUs.
//
// Locking: one shared_mutex. Filter and prioritize read under a shared lock; bind's choose-and-Assume and every
// watch event take it exclusively, so two binds can never hand out the same capacity.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/ids.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/kube/resources.h"

namespace gpusched::adapters::extender {

enum class EventType { kAdded, kModified, kDeleted };

struct MirrorStats {
  uint64_t node_events = 0;
  uint64_t pod_events = 0;
  uint64_t rebuilt_allocations = 0;  // charged from annotations (not by this extender's own binds)
  uint64_t rejected_events = 0;      // undecodable objects or allocations that did not fit
};

class ClusterMirror {
 public:
  ClusterMirror() = default;
  // app_label: the label that names a pod's application class when the annotation gpusched.io/app is absent
  // (kube::ResourceConfig::app_label); empty = the annotation only.
  explicit ClusterMirror(std::string app_label) : app_label_(std::move(app_label)) {}

  void OnNode(EventType type, const nlohmann::json& node);
  void OnPod(EventType type, const nlohmann::json& pod);

  [[nodiscard]] std::shared_lock<std::shared_mutex> ReadLock() const { return std::shared_lock(mu_); }
  [[nodiscard]] std::unique_lock<std::shared_mutex> WriteLock() { return std::unique_lock(mu_); }
  // The state; the caller holds ReadLock (const use) or WriteLock.
  [[nodiscard]] core::ClusterState& state() { return state_; }
  [[nodiscard]] const core::ClusterState& state() const { return state_; }

  // Priority of a pod holding an allocation (spec.priority; 0 when unknown). Caller holds a lock.
  [[nodiscard]] int32_t PriorityOf(const common::PodUid& pod) const;
  // The largest GPU memory of any node (for "memory above every GPU"). Caller holds a lock.
  [[nodiscard]] common::MiB LargestGpuMemory() const { return largest_gpu_memory_; }
  // Allocation ids: above every id seen in an annotation.
  [[nodiscard]] uint64_t NextAllocationId() { return next_id_.fetch_add(1) + 1; }
  // Records a pod's priority for a bind this extender makes. Caller holds WriteLock.
  void SetPriority(const common::PodUid& pod, int32_t priority) { priorities_[pod] = priority; }
  // Application class of a pod holding an allocation ("" when unknown). Caller holds a lock.
  [[nodiscard]] std::string AppOf(const common::PodUid& pod) const;
  // Records a pod's application class for a bind this extender makes. Caller holds WriteLock.
  void SetApp(const common::PodUid& pod, std::string app);

  [[nodiscard]] MirrorStats stats() const;
  [[nodiscard]] size_t PendingAllocations() const;

 private:
  void ApplyAllocation(core::Allocation allocation);  // mu_ held
  void RecomputeLargest();                            // mu_ held

  mutable std::shared_mutex mu_;
  core::ClusterState state_;
  std::string app_label_;
  std::unordered_map<common::PodUid, int32_t> priorities_;
  std::unordered_map<common::PodUid, std::string> apps_;          // only pods with a known class
  std::unordered_map<common::PodUid, core::Allocation> pending_;  // node not known yet
  common::MiB largest_gpu_memory_{0};
  std::atomic<uint64_t> next_id_{0};
  MirrorStats stats_;
};

}  // namespace gpusched::adapters::extender
