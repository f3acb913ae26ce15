#pragma once

// Where a pending pod stands in its GPU queue (`gpusched why POD`), worked out as the standalone scheduler orders
// and admits pods (sched/gpu_queues.h), from the cluster's pods and GpuQueue objects, read-only:
//   - its GPU queue (the gpusched.io/queue label, else the queue serving its namespace, else "default");
//   - its position among the pending pods of that queue and scheduler, in the order the scheduler tries them
//     (higher priority first, then older, then by namespace/name);
//   - what the queue holds against its guarantee, limit and fair share, and its rank (held / fair share, the
//     dominant dimension: the queue furthest below its share is tried first);
//   - whether the queue's quota admits the pod now, and if not, the limit it would pass.

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/core/gpu_queue.h"
#include "gpusched/sched/gpu_queues.h"

namespace gpusched::sim {

struct QueuedPodView {
  std::string uid;
  std::string key;  // namespace/name
  std::string namespace_;
  std::string queue_label;     // gpusched.io/queue; empty when unset
  std::string scheduler_name;  // spec.schedulerName ("" = default-scheduler)
  int32_t priority = 0;
  std::string created;     // metadata.creationTimestamp, RFC 3339 (sorts as time)
  bool placed = false;     // bound and not terminal: charges its queue
  core::GpuAmount demand;  // what it holds (placed) or asks for (pending)
};

struct QueueWhy {
  std::string queue;
  int64_t position = 0;            // 1-based among `pending`
  int64_t pending = 0;             // pending pods of the queue for the same scheduler, this one included
  std::vector<std::string> ahead;  // up to 3 of the pods before it, nearest first: "ns/name (priority 100)"
  sched::QueueStatus status;
  sched::GpuQueues::Admission admission;
};

// `specs`: the GpuQueue objects (invalid ones are left out, as the scheduler leaves them out); `capacity`: the
// cluster's GPUs; `pods`: every non-terminal pod, `pod` among them.
[[nodiscard]] QueueWhy ExplainQueue(const std::vector<core::QueueSpec>& specs, const core::GpuAmount& capacity,
                                    const std::vector<QueuedPodView>& pods, const QueuedPodView& pod);
[[nodiscard]] std::string FormatQueueWhy(const QueueWhy& why);

}  // namespace gpusched::sim
