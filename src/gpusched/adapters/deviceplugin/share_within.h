#pragma once

// shareWithin at the node (core/share_within.h says what each mode means): the schedulers place pods that way, and
// the agent checks it again at Allocate (CheckShareWithin): a container whose shared GPU another live pod of another
// namespace (queue) holds a shared allocation on is refused, naming that pod. Exclusive GPUs are never shared, so
// they are not checked here. Pure.

#include <span>
#include <string>
#include <string_view>

#include "gpusched/adapters/deviceplugin/handoff.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/share_within.h"
#include "gpusched/kube/objects.h"

namespace gpusched::adapters::deviceplugin {

using core::ParseShareWithin;
using core::ShareWithin;
using core::ShareWithinName;

// `pod` gets `shares` (resolved: UUIDs set); `node_pods` are the pods bound to the node (`pod` among them or not).
// Other pods count when live (not terminal), when they hold devices (the kubelet lists devices for one of their
// containers, or the ledger has a handout to them: a pod merely bound is the newcomer, refused at its own Allocate
// if it still conflicts then, so the first pod allocated keeps the GPU), and when their gpusched.io/allocation, for
// this node, names one of the shared GPUs with a shared (not exclusive) share; an allocation that does not decode
// counts for nothing here.
[[nodiscard]] common::Status CheckShareWithin(ShareWithin mode, const kube::PodMeta& pod,
                                              std::span<const core::GpuShare> shares,
                                              std::span<const PodView> node_pods, std::span<const KubeletPod> kubelet,
                                              const HandoffLedger& ledger);

}  // namespace gpusched::adapters::deviceplugin
