#pragma once

// binpack and spread (elastic-gpu's meaning). binpack fills the most-used node first and, inside it, the most-used
// fitting GPU; spread does the opposite. Node usage after placing the pod, in percent:
//   GPU pod:  (allocated milli + pod milli) · 100 / GPU capacity milli
//   CPU pod:  (used CPU + pod CPU) · 100 / CPU capacity
// binpack score = usage, spread score = 100 − usage.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

// The node's usage in percent (0..100) after the pod would be placed.
[[nodiscard]] int64_t UsageAfterPercent(const core::PodRequest& pod, const core::NodeView& node);

class BinpackPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "binpack"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  // The most used fitting GPU first (least free milli).
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
};

class SpreadPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "spread"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  // The least used fitting GPU first (most free milli).
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
};

}  // namespace gpusched::policy
