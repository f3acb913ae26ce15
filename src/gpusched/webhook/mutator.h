#pragma once

// The mutating webhook's decision (POST /mutate): completes a GPU pod at CREATE so that it works with gpusched
// however it asked. Pure; never denies (a request that cannot be met is the validating webhook's to refuse, with
// its reason); idempotent (run again on its own output it patches nothing, so reinvocationPolicy IfNeeded is safe).
//
// 1. Device count. The kubelet calls a device plugin only for countable device resources. A container that asks for
//    GPU memory or compute by a name without a count (gpusched.io/gpu-memory or gpu-core alone,
//    aliyun.com/gpu-mem, elasticgpu.*, HAMi's nvidia.com/gpumem* and gpucores without nvidia.com/gpu) and for none
//    of the countable names the agent serves (gpusched.io/gpu, nvidia.com/gpu, keti.com/mpsgpu) would start without
//    any GPU handed to it. It gets gpusched.io/gpu: <its number of GPUs, as kube::DecodeContainerGpuRequest counts
//    them> in limits, and in requests too when its requests name a GPU resource (extended resources must be equal
//    in both). Init containers too. Skipped when gpusched.io/gpu is not an enabled resource name, and for a
//    container whose request does not decode.
// 2. Scheduler. A pod that asks for an enabled GPU resource (or for GPUs through Genius's labels), in a namespace
//    of config.scheduler_names, whose spec.schedulerName is absent, empty or default-scheduler, gets that
//    namespace's scheduler.
// 3. Genius's labels. A pod that asks for GPUs only through genius/gpu-number, -memory-each, -memory-total (with
//    geniusLabels on, and no GPU resource) gets gpusched.io/gpu: <genius/gpu-number, default 1> in its first
//    container's limits; the labels still say what each GPU is (kube::DecodePodRequest reads that device count
//    with them, and refuses one that does not match).
// The patch is a JSON Patch with '/' in resource names escaped as ~1; each change also comes back as a warning
// (kubectl prints them), so nobody is surprised by a limit they did not write.
// Anything but CREATE of a pod (no subresource), and pods that ask for no GPU: allowed, no patch.

#include <string>
#include <string_view>

#include "gpusched/webhook/admission_review.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::webhook {

[[nodiscard]] AdmissionResponse Mutate(const AdmissionRequest& request, const WebhookConfig& config);

// A JSON Pointer reference token: '~' -> "~0", '/' -> "~1" (RFC 6901).
[[nodiscard]] std::string EscapeJsonPointer(std::string_view token);

}  // namespace gpusched::webhook
