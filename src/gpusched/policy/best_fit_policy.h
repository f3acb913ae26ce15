#pragma once

// bestfit (FGD benchmark): the node left with the least resources wins.
//   raw = 0.5 · (cpu_free − cpu) / 128000 + 0.5 · (Σ free milli − gpu_count · gpu_milli) / 8000
//   score = ⌊(1 − raw) · 100⌋, then min-max normalised over the feasible nodes by the runner.
// GPU choice: best.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

class BestFitPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "bestfit"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] bool NormalizesScores() const override { return true; }
};

}  // namespace gpusched::policy
