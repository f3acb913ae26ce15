#pragma once

// Binder: makes a placement real. In production it patches the pod's allocation annotation and POSTs the Binding;
// in the simulator it records the placement. A failed Bind must leave nothing half-done that a retry would trip
// on; the caller then Forgets the assumed allocation.

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::ports {

class Binder {
 public:
  virtual ~Binder() = default;
  [[nodiscard]] virtual common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) = 0;
};

}  // namespace gpusched::ports
