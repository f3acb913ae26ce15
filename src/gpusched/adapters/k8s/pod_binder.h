#pragma once

// PodBinder: ports::Binder over the API server. Bind = one POST of the pod's Binding subresource, with the pod's
// uid as precondition and the gpusched.io/allocation annotation in the Binding's metadata. The API server copies a
// Binding's annotations onto the pod in the same write that sets spec.nodeName, so the placement and the GPUs it
// was given land together or not at all: no pod is ever bound without its allocation, and a failed bind leaves no
// annotation behind to clean up.
//
// Outcome (what the caller may conclude from the Status): OK = bound. InvalidArgument, NotFound, PermissionDenied,
// Unauthenticated = definitely not bound. Aborted (409: already bound, or another uid), Unavailable (5xx, 429,
// transport), DeadlineExceeded (timeout) = unknown: the Binding may have been written; only the watch can tell.

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
