#pragma once

// ResourceClaimReader: how the agent's DRA kubelet plugin reads the ResourceClaims (resource.k8s.io/v1) the kubelet
// asks it to prepare. The kubelet names a claim by namespace, name and UID; the plugin reads the claim's current
// allocation here and prepares only what that allocation says, so a kubelet request alone never hands out a device.
// adapters/k8s implements it against the API server (a GET, or an informer's cache); testing/fake_resource_claims.h
// keeps claims in memory.

#include <string_view>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::ports {

class ResourceClaimReader {
 public:
  virtual ~ResourceClaimReader() = default;
  // The claim as the API server has it now. NotFound when it does not exist; Unavailable (or another code) when it
  // cannot be read. Must be safe to call from several threads.
  [[nodiscard]] virtual common::Result<core::dra::ResourceClaim> Get(std::string_view namespace_,
                                                                     std::string_view name) = 0;
};

}  // namespace gpusched::ports
