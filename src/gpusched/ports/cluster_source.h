#pragma once

// ClusterSource: where the scheduler learns the nodes and the allocations already made (the API server's
// informer caches in production, the trace in the simulator).

#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/node.h"

namespace gpusched::ports {

class ClusterSource {
 public:
  virtual ~ClusterSource() = default;
  [[nodiscard]] virtual common::Result<std::vector<core::Node>> ListNodes() const = 0;
  // Allocations of pods that are bound or being bound (rebuilt from pod annotations in production).
  [[nodiscard]] virtual common::Result<std::vector<core::Allocation>> ListAllocations() const = 0;
};

}  // namespace gpusched::ports
