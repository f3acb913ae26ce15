#pragma once

// fgd: Fragmentation Gradient Descent (Weng et al., ATC'23), as the FGD benchmark's simulator implements it.
// Places the pod where the node's fragmentation F_n(M) (target_workload.h) grows least:
//   sharing pod: for each GPU i that can host it, n' = n with cpu and milli taken from GPU i;
//                s_i = ⌊100 · sigmoid((F_n − F_n') / 1000)⌋; score = max_i s_i (first GPU on ties), and SelectGpus
//                takes that GPU;
//   otherwise:   n' = n minus the pod's CPU and its GPUs taken in ascending free-milli order (whole GPUs: fully
//                free ones); score = ⌊100 · sigmoid((F_n − F_n') / 1000)⌋; whole GPUs go to the lowest-index
//                fully free ones.
// The integer truncation is kept on purpose (fidelity): one score point is about 40 milli of ΔF.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/policy/target_workload.h"

namespace gpusched::policy {

class FgdPolicy final : public PlacementPolicy {
 public:
  // Fails unless options carry a non-empty target workload.
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  explicit FgdPolicy(std::shared_ptr<const TargetWorkload> m) : m_(std::move(m)) {}

  [[nodiscard]] std::string_view Name() const override { return "fgd"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;

 private:
  struct Best {
    int64_t score = 0;
    size_t gpu = 0;  // for a sharing pod: the GPU that gave the score
  };
  [[nodiscard]] Best Evaluate(const core::PodRequest& pod, const core::NodeView& node) const;

  std::shared_ptr<const TargetWorkload> m_;
};

}  // namespace gpusched::policy
