#pragma once

// The GpuQueue object (gpusched.io/v1alpha1, cluster scoped) as core::QueueSpec:
//
//   spec:
//     parent: research            # optional; a queue with a parent may not be a parent itself
//     namespaces: [team-a]        # the namespaces whose pods it takes
//     guaranteed: {gpus: 4, gpuMilli: 4000, gpuMemoryMiB: 65536}
//     limit:      {gpus: 8}
//     weight: 2                   # share of what is beyond guarantees; default 1
//
// Amounts are non-negative integers. A dimension left out: gpuMilli is gpus × 1000 when gpus is given (the compute
// of those whole GPUs); in `limit` any other dimension left out is unlimited; in `guaranteed`, gpus is 0, and
// gpuMemoryMiB is not accounted against the guarantee (unlimited) unless `limit` names it (then 0).
// The label gpusched.io/queue on a pod names its queue (kQueueLabel).

#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_queue.h"

namespace gpusched::kube {

using core::kQueueLabel;
// Where the API server serves the resource (its discovery document) and its collection.
inline constexpr const char* kGpuQueueApi = "/apis/gpusched.io/v1alpha1";
inline constexpr const char* kGpuQueuesPath = "/apis/gpusched.io/v1alpha1/gpuqueues";

// The queue's declaration; an error naming the field when the object cannot be read.
common::Result<core::QueueSpec> DecodeGpuQueue(const nlohmann::json& object);
// Its metadata.name alone (what a deleted or unreadable object is still known by).
common::Result<std::string> GpuQueueName(const nlohmann::json& object);
// The GpuQueue's status subresource, as a merge patch: for an accounted queue (`status` set, `error` empty) allocated,
// guaranteed, limit and fairShare ({gpus, gpuMilli, gpuMemoryMiB}; unlimited amounts left out), runningPods,
// pendingPods, reclaimedPods and the condition Valid=True; for a queue left out (`error` says why, or `status` is
// null: not known to the scheduler) those fields null (removing what an earlier valid version reported) and
// Valid=False with the reason.
nlohmann::json GpuQueueStatus(const core::QueueStatus* status, const std::string& error);
// The queue a pod's labels name (kQueueLabel); empty when none.
using core::QueueLabel;

}  // namespace gpusched::kube
