#pragma once

// dotprod (FGD benchmark, KSS's "Tetris" variant with dimExtMethod=merge, normMethod=max):
//   node = [cpu_free / 128000, Σ free milli / 8000], pod = [cpu / 128000, gpu_count · gpu_milli / 8000]
//   score = ⌊100 · (1 − node·pod / 2)⌋
// so the node whose remaining capacity aligns least with the demand wins (a packing alignment). GPU choice: best.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

inline constexpr double kMaxSpecCpu = 128000;  // KSS normalisation constants
inline constexpr double kMaxSpecGpu = 8000;

class DotProductPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "dotprod"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
};

}  // namespace gpusched::policy
