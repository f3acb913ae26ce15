#include "gpusched/policy/gpu_clustering_policy.h"

namespace gpusched::policy {

common::Result<std::unique_ptr<PlacementPolicy>> GpuClusteringPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new GpuClusteringPolicy());
}

int64_t GpuClusteringPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (s.gpu_count == 0) {
    return 0;
  }
  const int32_t tag = s.IsSharing() ? 0 : s.gpu_count;
  int64_t base = 0;
  if (!node.HasGpuPods()) {
    base = 25;
  } else if (node.ShapeCount(tag) > 0) {
    base = node.shape_counts.size() == 1 ? 75 : 50;
  }
  return base + 25 * (8000 - node.IdleMilli().value()) / 8000;
}

}  // namespace gpusched::policy
