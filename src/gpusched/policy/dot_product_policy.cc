#include "gpusched/policy/dot_product_policy.h"

#include <cmath>

namespace gpusched::policy {

common::Result<std::unique_ptr<PlacementPolicy>> DotProductPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new DotProductPolicy());
}

int64_t DotProductPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (node.cpu_free < s.cpu) {
    return 0;
  }
  const double node_cpu = static_cast<double>(node.cpu_free.value()) / kMaxSpecCpu;
  const double node_gpu = static_cast<double>(node.IdleMilli().value()) / kMaxSpecGpu;
  const double pod_cpu = static_cast<double>(s.cpu.value()) / kMaxSpecCpu;
  const double pod_gpu = static_cast<double>(s.gpu_count) * static_cast<double>(s.gpu_milli.value()) / kMaxSpecGpu;
  const double dot = node_cpu * pod_cpu + node_gpu * pod_gpu;
  return static_cast<int64_t>(std::floor(100.0 * (1.0 - dot / 2.0)));
}

}  // namespace gpusched::policy
