#pragma once

// gpupacking (FGD benchmark): prefer, in order, (1) partly used GPUs, (2) fresh GPUs on a node already in use,
// (3) an idle node. With nF = fully free GPUs on the node:
//   all GPUs free                      -> max(33 − nF, nF)
//   else take the first gpu_count fitting GPUs in ascending free-milli order:
//     any of them fully free           -> max(50 − #fully free taken, 33)
//     all on shared GPUs               -> max(100 − (Σ ⌊free_i · 100 / 1000⌋) / 10, 50)
// CPU-only pods score 0. GPU choice: best.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

class GpuPackingPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "gpupacking"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
};

}  // namespace gpusched::policy
