#pragma once

// Binder: makes a placement real. In production it POSTs the pod's Binding with the allocation annotation in the
// Binding's metadata (one write: both land or neither); in the simulator it records the placement.
//
// A failed Bind either definitely did not bind (the caller Forgets the assumed allocation) or has an unknown
// outcome: a timeout, a dropped connection, a 5xx or a 409 may all follow a Binding the API server did write. An
// unknown outcome keeps the allocation assumed until the watch shows the pod (bound: Confirm; unbound or gone:
// Forget) or the assumption's time runs out; BindOutcomeUnknown tells the two apart.

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::ports {

class Binder {
 public:
  virtual ~Binder() = default;
  [[nodiscard]] virtual common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) = 0;
};

// True when a failed Bind may still have bound the pod: Aborted (409: bound already, perhaps by this very request
// retried by the transport), Unavailable (5xx, 429, connection lost), DeadlineExceeded and Internal (an answer
// that could not be read). Invalid input, a missing pod and refused permissions mean nothing was written.
[[nodiscard]] inline bool BindOutcomeUnknown(const common::Status& status) {
  switch (status.code()) {
    case common::StatusCode::kAborted:
    case common::StatusCode::kUnavailable:
    case common::StatusCode::kDeadlineExceeded:
    case common::StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

}  // namespace gpusched::ports
