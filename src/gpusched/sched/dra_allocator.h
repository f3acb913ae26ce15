#pragma once

// Allocation of a pod's ResourceClaims on one node: which devices each request of each claim gets, and how much of a
// shareable device's capacity it consumes. Pure: the caller hands in the node's devices with what is free of each
// (from the ResourceSlices, the claims allocated already and the device-plugin pods on the same GPUs), the classes,
// and a selector evaluator (sched/cel.h in production); nothing here reads the API or a clock.
//
// Semantics follow resource.k8s.io/v1 as kube-scheduler implements it:
//   * every request of every claim must be satisfied, all or nothing (the pod's claims together);
//   * a request is `exactly` one sub-request or the first of its `first_available` alternatives that can be
//     satisfied together with the others (alternatives are tried in order, so an earlier one always wins where both
//     fit);
//   * a device qualifies for a sub-request when its class's and the request's CEL selectors are all true, it
//     tolerates every NoSchedule/NoExecute taint of the device (other effects are informational), and it has room:
//       - a device without allow_multiple_allocations is taken whole, by one allocation only; capacity asked of it
//         is a filter (its capacity must be at least the amount asked);
//       - a shareable device is consumed in part: for each of its capacities, the amount asked (or, when the request
//         names none, the request policy's default, or the whole capacity without a policy) rounded up to the next
//         value the policy allows; it qualifies while what is free covers every amount. The amounts are recorded as
//         consumed capacity with a share ID unique among the device's sharers;
//   * kExactCount takes `count` devices; kAll takes every device of the node the selectors match, and fails when
//     one of them is not free (unless admin access);
//   * admin access ignores other allocations and consumes nothing;
//   * match_attribute: every device of the named requests has the attribute, all with one value;
//     distinct_attribute: every device has it, the values pairwise different;
//   * a device serves at most one request of all the pod's claims unless it is shareable.
//
// Search: depth first over the requests in order, devices tried in the candidates' order (the caller's preference:
// the placement policy's GPU choice first), with constraints checked as devices are picked. The first complete
// assignment wins. The search is bounded (options.max_steps device trials); past it the node is reported as not
// fitting with a reason that says so, never as an error.
//
// Capacity names a request asks for may be unqualified ("memory"): they mean "<driver of the device>/memory".

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::sched {

// One device of the node and what of it is free now.
struct DraCandidate {
  const core::dra::DevicePool* pool = nullptr;
  const core::dra::Device* device = nullptr;
  // Held by an allocation that excludes others: a non-shareable device allocated to a claim (or its GPU held by a
  // device-plugin pod), or a shareable one consumed whole.
  bool taken = false;
  // Free amount per capacity (fully qualified names) of a shareable device; a capacity absent here is free whole.
  std::map<std::string, core::dra::Quantity> available;
  std::vector<std::string> share_ids;  // share IDs its current sharers hold
};

// A selector's verdict on a device: true, false, or an error (a CEL runtime error aborts the allocation).
using DraSelectorMatch = std::function<common::Result<bool>(
    std::string_view expression, const core::dra::DevicePool& pool, const core::dra::Device& device)>;

struct DraAllocatorOptions {
  int64_t max_steps = 200000;  // device trials before giving up on the node
  // Whether the claims' namespace carries resource.kubernetes.io/admin-access=true (admin access is refused
  // otherwise).
  bool admin_access_allowed = false;
  // Whether to build the allocations (false: only whether and why the claims fit, for the Filter of every node; the
  // chosen node is then allocated with true).
  bool allocations = true;
};

struct DraNodeResult {
  bool fits = false;
  std::string reason;  // why not, when !fits
  // One per claim handed in, in order; each with node set (empty with options.allocations false).
  std::vector<core::dra::ClaimAllocation> allocations;
};

// Allocates `claims` (none of them allocated yet) on `node` from `candidates`. Errors: a request that names a class
// not in `classes`, a malformed request (no sub-request, count < 1), admin access where it is not allowed, a
// selector that fails to evaluate; "no room" is a result with fits = false.
[[nodiscard]] common::Result<DraNodeResult> AllocateClaimsOnNode(
    std::span<const core::dra::ResourceClaim* const> claims, const common::NodeName& node,
    std::span<const DraCandidate> candidates, const std::map<std::string, core::dra::DeviceClass>& classes,
    const DraSelectorMatch& match, const DraAllocatorOptions& options = {});

// The amount of capacity `name` an allocation consumes when it asks for `asked` (nullopt: asked for nothing),
// rounded up by the capacity's request policy; nullopt when the policy cannot serve it (above max, above every valid
// value).
[[nodiscard]] std::optional<core::dra::Quantity> ConsumedAmount(const core::dra::DeviceCapacity& capacity,
                                                                std::optional<core::dra::Quantity> asked);

// A share ID for the n-th result of `claim_uid` on a device: a UUID (8-4-4-4-12 lowercase hex, version 4 and
// variant bits set) derived from the inputs, so a retried allocation gets the same one.
[[nodiscard]] std::string DraShareId(std::string_view claim_uid, std::string_view request, std::string_view device,
                                     uint32_t attempt);

}  // namespace gpusched::sched
