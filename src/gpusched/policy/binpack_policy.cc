#include "gpusched/policy/binpack_policy.h"

#include <algorithm>

#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {

int64_t UsageAfterPercent(const core::PodRequest& pod, const core::NodeView& node) {
  int64_t used = 0;
  int64_t capacity = 0;
  if (pod.RequestsGpu() && !node.gpus.empty()) {
    capacity = common::kGpuMilli.value() * static_cast<int64_t>(node.gpus.size());
    used = capacity - node.IdleMilli().value() + pod.TotalGpuMilli().value();
  } else {
    capacity = node.node->cpu.value();
    used = (node.node->cpu - node.cpu_free + pod.cpu).value();
  }
  if (capacity <= 0) {
    return 0;
  }
  return std::clamp<int64_t>(used * kMaxScore / capacity, 0, kMaxScore);
}

common::Result<std::unique_ptr<PlacementPolicy>> BinpackPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new BinpackPolicy());
}

int64_t BinpackPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  return UsageAfterPercent(pod, node);
}

std::vector<core::ContainerAllocation> BinpackPolicy::SelectGpus(const core::PodRequest& pod,
                                                                 const core::NodeView& node, common::Rng&) const {
  return SelectGpusBest(pod, node);
}

common::Result<std::unique_ptr<PlacementPolicy>> SpreadPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new SpreadPolicy());
}

int64_t SpreadPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  return kMaxScore - UsageAfterPercent(pod, node);
}

std::vector<core::ContainerAllocation> SpreadPolicy::SelectGpus(const core::PodRequest& pod, const core::NodeView& node,
                                                                common::Rng&) const {
  return SelectGpusWorst(pod, node);
}

}  // namespace gpusched::policy
