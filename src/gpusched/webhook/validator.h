#pragma once

// The validating webhook's decision (POST /validate). Pure: a request and the config in, allowed or denied with a
// reason out. Three rules:
//
// 1. Only gpusched's scheduler writes gpusched.io/allocation. The device plugin hands GPUs out by that annotation,
//    so whoever may write it may take any GPU on the node. Denied (403) unless the request's user is in
//    config.allowed_users or one of its groups in config.allowed_groups:
//      pods, CREATE with the annotation; UPDATE of the pod or any of its subresources (the status subresource can
//        change annotations too) that sets, changes or removes it (old and new object compared, value by value);
//      pods/binding and the legacy bindings resource, CREATE of a Binding that carries it (the API server copies a
//        Binding's annotations onto the pod).
//    The message names the annotation and the user.
// 2. A GPU request that can never be met is denied at admission (422) instead of pending forever: on CREATE of a
//    pod that asks for any enabled GPU resource or carries Genius's GPU labels (genius/gpu-number, -memory-each,
//    -memory-total, with geniusLabels on), whatever kube::DecodePodRequest refuses (gpu-core above 100, a
//    fractional or zero count, families mixed in one container, such as exclusive nvidia.com/gpu with shared
//    gpusched.io/gpu-core, ...), with its message; and a gpusched.io/gpu-model annotation that is not a
//    '|'-separated list of model names (CheckGpuModels).
// 3. A GpuQueue (gpusched.io/v1alpha1), CREATE or UPDATE, that cannot be read (kube::DecodeGpuQueue) or breaks a
//    rule that holds for each queue alone (core::ValidateQueues: a guarantee above its limit, a negative amount, a
//    weight not above 0) is denied (422) with the reason, on every Kubernetes version (the CRD's own CEL rule needs
//    1.25). Whether its parent exists and covers its children depends on the other queues: the scheduler judges
//    that (the queue's Valid condition).
// 4. GPU handoff variables. The container runtime hands a container the GPUs NVIDIA_VISIBLE_DEVICES names, with the
//    driver capabilities NVIDIA_DRIVER_CAPABILITIES names, and CUDA_MPS_* point it at an MPS daemon; gpusched's
//    device plugin sets them at Allocate (not in the pod spec). A pod that sets one itself in a container's env, by
//    name, is denied (403) naming the container and the variable: at CREATE, in containers, initContainers and
//    ephemeralContainers, whether or not it asks for a GPU; at UPDATE of pods/ephemeralcontainers (kubectl debug),
//    in the ephemeral containers it adds. envFrom (a ConfigMap or Secret) cannot be judged by name at admission and
//    is not denied (docs/webhook.md). Likewise a container that mounts a volume at or under
//    /var/run/nvidia-container-devices (or /run/...), where the runtime takes the GPUs from under the device plugin's
//    volume-mounts strategy (an emptyDir at .../all would be every GPU of the node), is denied (403) naming the
//    container and the path.
// 5. Queue membership. With the queues known (`queues`, listed by `gpusched webhook --queues`), a pod whose label
//    gpusched.io/queue names a queue that does not admit its namespace (QueueView::JoinRefusal) is denied (403)
//    with the reason, at CREATE and at an UPDATE that sets or changes the label.
// Everything else is allowed: other resources, DELETE and CONNECT, pods without GPU resources (their requests are
// not gpusched's to judge), and UPDATEs that leave the annotation alone (resources cannot change after creation).

#include <string_view>

#include "gpusched/common/status.h"
#include "gpusched/webhook/admission_review.h"
#include "gpusched/webhook/queue_membership.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::webhook {

// `queues`: the GPU queues for rule 5; null = rule 5 off.
[[nodiscard]] AdmissionResponse Validate(const AdmissionRequest& request, const WebhookConfig& config,
                                         const QueueView* queues = nullptr);

// The syntax of the gpusched.io/gpu-model annotation: model names separated by '|', spaces around them allowed
// ("A100-SXM4-80GB | H100"). A name is 1..128 characters of letters, digits, space and . _ - + ( ) /; at most 64
// names; no empty name between two bars (a typo would silently widen or narrow the choice). Errors say which rule
// failed (a comma gets "separate models with |").
common::Status CheckGpuModels(std::string_view value);

}  // namespace gpusched::webhook
