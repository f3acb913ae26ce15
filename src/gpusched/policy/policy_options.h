#pragma once

// Typed options every policy factory receives; each factory validates the fields it needs.

#include <memory>

#include "gpusched/policy/target_workload.h"

namespace gpusched::policy {

struct PolicyOptions {
  // fgd: the target workload M (TypicalPods of the trace or of the cluster's recent pods). Required by fgd.
  std::shared_ptr<const TargetWorkload> target_workload;
};

}  // namespace gpusched::policy
