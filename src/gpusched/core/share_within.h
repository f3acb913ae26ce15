#pragma once

// shareWithin: which pods may share one GPU. Pods that share a GPU (MPS clients above all) are not isolated from
// each other the way separate GPUs are: one client's fault can end the others' work, and they share the control
// daemon's pipes and shared memory. An operator may therefore keep a GPU's sharers within one tenant:
//
//   any        any pods may share a GPU (the default)
//   namespace  only pods of one namespace
//   queue      only pods of one GPU queue, as the label gpusched.io/queue names it (pods without the label form one
//              group); the agent judges by the same label, so both agree on who may share
//
// A pod's group is a ShareGroup: 0 when the mode is any (it may share with anyone), otherwise a 64-bit key of its
// namespace or queue. The schedulers carry it on every GPU request and allocation; a GPU remembers the group of the
// allocations sharing it (GpuState::share_group), and a shared request of another group cannot use it. Exclusive and
// whole GPUs are never shared, so the group does not matter for them. Pure.

#include <cstdint>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::core {

enum class ShareWithin : uint8_t { kAny, kNamespace, kQueue };

[[nodiscard]] common::Result<ShareWithin> ParseShareWithin(std::string_view text);
[[nodiscard]] const char* ShareWithinName(ShareWithin mode);

// A share group: 0 = none (shares with anyone); kMixedShareGroup on a GPU whose sharers are of several groups (a
// GPU charged that way by pods bound before the setting, or by another scheduler): nobody with a group may join it.
using ShareGroup = uint64_t;
inline constexpr ShareGroup kMixedShareGroup = ~ShareGroup{0};

// The group of a pod of namespace `ns` whose queue label is `queue` ("" when it has none) under `mode`: 0 for
// kAny, else FNV-1a of the namespace or the queue, never 0 or kMixedShareGroup.
[[nodiscard]] ShareGroup ShareGroupOf(ShareWithin mode, std::string_view ns, std::string_view queue);

// Whether a GPU whose sharers are of group `held` (with `holders` of them) admits a shared allocation of `group`.
[[nodiscard]] inline bool ShareGroupAdmits(ShareGroup held, int32_t holders, ShareGroup group) {
  return group == 0 || holders == 0 || held == group;
}
// The group of a GPU's sharers after one of `group` joins it (holders counted before the join).
[[nodiscard]] inline ShareGroup JoinShareGroup(ShareGroup held, int32_t holders_before, ShareGroup group) {
  return holders_before == 0 ? group : (held == group ? held : kMixedShareGroup);
}

}  // namespace gpusched::core
