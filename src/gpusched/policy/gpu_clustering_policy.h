#pragma once

// gpuclustering (FGD benchmark): keep pods of one GPU shape together. A pod's tag is "share" (one GPU, < 1000
// milli) or "k whole GPUs"; a node's tags are those of its GPU pods.
//   base = 75 if the node holds only the pod's tag, 50 if the pod's tag and others, 25 if no GPU pods, 0 if only
//   other tags; score = base + ⌊25 · (8000 − Σ free milli) / 8000⌋.
// CPU-only pods score 0 everywhere. GPU choice: best.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

class GpuClusteringPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "gpuclustering"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
};

}  // namespace gpusched::policy
