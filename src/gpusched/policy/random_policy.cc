#include "gpusched/policy/random_policy.h"

#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {

common::Result<std::unique_ptr<PlacementPolicy>> RandomPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new RandomPolicy());
}

int64_t RandomPolicy::Score(const core::PodRequest&, const core::NodeView&, const Snapshot&) const { return 0; }

std::vector<core::ContainerAllocation> RandomPolicy::SelectGpus(const core::PodRequest& pod, const core::NodeView& node,
                                                                common::Rng& rng) const {
  return SelectGpusRandom(pod, node, rng);
}

}  // namespace gpusched::policy
