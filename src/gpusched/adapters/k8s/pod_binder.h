#pragma once

// PodBinder: ports::Binder over the API server. Bind = merge-patch the pod's gpusched.io/allocation annotation,
// then POST the Binding subresource (with the pod's uid as precondition). When the Binding fails after the patch
// landed, the annotation is removed again (best effort); a pod that still carries it is harmless, because only
// bound pods (spec.nodeName set to the annotation's node) are charged.

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/ports/binder.h"

namespace gpusched::adapters::k8s {

class PodBinder : public ports::Binder {
 public:
  explicit PodBinder(ApiClient& client) : client_(client) {}
  // pod.name is "namespace/name".
  [[nodiscard]] common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) override;

 private:
  ApiClient& client_;
};

}  // namespace gpusched::adapters::k8s
