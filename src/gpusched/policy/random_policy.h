#pragma once

// random (FGD benchmark): a uniformly random feasible node (KSS picks one in PreScore and gives it 100). Inside the
// node, a uniformly random fitting GPU for a share; whole GPUs take the lowest-index free ones.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

class RandomPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "random"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] bool ChoosesNodeAtRandom() const override { return true; }
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
};

}  // namespace gpusched::policy
