#include "gpusched/policy/best_fit_policy.h"

#include <cmath>

#include "gpusched/policy/dot_product_policy.h"

namespace gpusched::policy {

common::Result<std::unique_ptr<PlacementPolicy>> BestFitPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new BestFitPolicy());
}

int64_t BestFitPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  const core::PodShape s = core::ShapeOf(pod);
  const double cpu_left = static_cast<double>((node.cpu_free - s.cpu).value());
  const double gpu_left = static_cast<double>(node.IdleMilli().value()) -
                          static_cast<double>(s.gpu_count) * static_cast<double>(s.gpu_milli.value());
  const double raw = 0.5 * cpu_left / kMaxSpecCpu + 0.5 * gpu_left / kMaxSpecGpu;
  return static_cast<int64_t>(std::floor((1.0 - raw) * 100.0));
}

}  // namespace gpusched::policy
