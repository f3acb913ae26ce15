#pragma once

// ResourceClaims and DeviceClasses (resource.k8s.io/v1) to and from the core model (core/dra.h), and the claims a
// pod references. Pure; no I/O.
//
// Read: v1 (Kubernetes 1.34+) and the v1beta1 request shape (1.32-1.33: a request's class, selectors, mode and count
// sit in the request itself instead of under `exactly`). Anything a scheduler must not guess about is an error that
// names the field: an allocation mode other than ExactCount and All ("clients must refuse unknown modes"), a selector
// that is not CEL, a request with both or neither of exactly and firstAvailable.
// Written: status.allocation (results with consumed capacity and share IDs; a node selector naming the node by
// metadata.name, as kube-scheduler writes it for node-local devices) and status.reservedFor (pods).

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::kube {

inline constexpr std::string_view kDraAdminNamespaceLabel = "resource.kubernetes.io/admin-access";

[[nodiscard]] common::Result<core::dra::ResourceClaim> DecodeResourceClaim(const nlohmann::json& claim);
[[nodiscard]] common::Result<core::dra::DeviceClass> DecodeDeviceClass(const nlohmann::json& device_class);

// status.allocation of a claim.
[[nodiscard]] nlohmann::json EncodeClaimAllocation(const core::dra::ClaimAllocation& allocation);
[[nodiscard]] common::Result<core::dra::ClaimAllocation> DecodeClaimAllocation(const nlohmann::json& allocation);

// A pod a claim is reserved for (status.reservedFor entry).
struct ClaimConsumer {
  std::string name;
  common::PodUid uid;
};
// The claim's status with `allocation` and `reserved_for` (pods), for a PUT of the claim's status subresource.
[[nodiscard]] nlohmann::json EncodeClaimStatus(const core::dra::ClaimAllocation& allocation,
                                               std::span<const ClaimConsumer> reserved_for);

// One entry of a pod's spec.resourceClaims: the name containers use, and the ResourceClaim it resolves to (named in
// the entry, or, for a claim made from a template, the name the resourceclaim controller reported in
// status.resourceClaimStatuses; empty while it has not).
struct PodClaimRef {
  std::string pod_claim_name;
  std::string claim_name;
  bool from_template = false;
};
[[nodiscard]] common::Result<std::vector<PodClaimRef>> DecodePodClaimRefs(const nlohmann::json& pod);

}  // namespace gpusched::kube
