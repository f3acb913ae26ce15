#include "gpusched/policy/gpu_packing_policy.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace gpusched::policy {

common::Result<std::unique_ptr<PlacementPolicy>> GpuPackingPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new GpuPackingPolicy());
}

int64_t GpuPackingPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (s.gpu_count == 0) {
    return 0;
  }
  const int64_t free_gpus = node.FullyFreeGpus();
  if (free_gpus == static_cast<int64_t>(node.gpus.size())) {
    return std::max<int64_t>(33 - free_gpus, free_gpus);
  }
  std::vector<size_t> order(node.gpus.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return node.gpus[a].free < node.gpus[b].free; });
  int32_t left = s.gpu_count;
  int64_t fresh_used = 0;
  int64_t free_ratio_sum = 0;
  for (size_t i : order) {
    if (left == 0) {
      break;
    }
    const auto& g = node.gpus[i];
    if (!node.node->gpus[i].healthy || g.exclusive || !s.AllowsModel(node.GpuModel(i)) || g.free < s.gpu_milli) {
      continue;
    }
    --left;
    fresh_used += g.free >= common::kGpuMilli ? 1 : 0;
    free_ratio_sum += g.free.value() * 100 / 1000;
  }
  if (left > 0) {
    return 0;  // Filter should have removed this node
  }
  if (fresh_used > 0) {
    return std::max<int64_t>(50 - fresh_used, 33);
  }
  return std::max<int64_t>(100 - free_ratio_sum / 10, 50);
}

}  // namespace gpusched::policy
