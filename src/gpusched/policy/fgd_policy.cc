#include "gpusched/policy/fgd_policy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {

namespace {

int64_t SigmoidScore(double delta_milli) {
  return static_cast<int64_t>(std::floor(100.0 / (1.0 + std::exp(-delta_milli / 1000.0))));
}

}  // namespace

common::Result<std::unique_ptr<PlacementPolicy>> FgdPolicy::Create(const PolicyOptions& options) {
  if (options.target_workload == nullptr || options.target_workload->classes.empty()) {
    return common::InvalidArgument(
        "policy fgd needs a target workload (the typical pods of a trace); none was given or it is empty");
  }
  return std::unique_ptr<PlacementPolicy>(new FgdPolicy(options.target_workload));
}

FgdPolicy::Best FgdPolicy::Evaluate(const core::PodRequest& pod, const core::NodeView& node) const {
  const size_t n = node.gpus.size();
  std::vector<int64_t> free(n);
  for (size_t i = 0; i < n; ++i) {
    free[i] = node.gpus[i].free.value();
  }
  const double before = Fragmentation(*m_, node, node.cpu_free, free);
  const common::MilliCpu cpu_after = node.cpu_free - pod.cpu;
  const core::PodShape s = core::ShapeOf(pod);

  if (s.IsSharing() && pod.containers.size() == 1) {
    const core::GpuRequest& c = pod.containers.front();
    Best best{.score = -1};
    // GPUs of one model with equal free milli give the same n' up to order, and F is order-free: evaluate the
    // first (lowest index) of each such group only.
    std::vector<std::pair<int64_t, const std::string*>> seen;
    for (size_t i = 0; i < n; ++i) {
      if (!GpuCanHost(c, node, node.gpus, i)) {
        continue;
      }
      const std::pair<int64_t, const std::string*> key{free[i], &node.GpuModel(i)};
      if (std::any_of(seen.begin(), seen.end(),
                      [&](const auto& k) { return k.first == key.first && *k.second == *key.second; })) {
        continue;
      }
      seen.push_back(key);
      free[i] -= c.milli_per_gpu.value();
      const int64_t score = SigmoidScore(before - Fragmentation(*m_, node, cpu_after, free));
      free[i] += c.milli_per_gpu.value();
      if (score > best.score) {
        best = Best{.score = score, .gpu = i};
      }
    }
    return best.score < 0 ? Best{} : best;
  }

  // n' = n.Sub(pod): each container takes its GPUs in ascending free-milli order.
  std::vector<core::GpuState> gpus = node.gpus;
  for (const auto& c : pod.containers) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < n; ++i) {
      if (GpuCanHost(c, node, gpus, i)) {
        candidates.push_back(i);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](size_t a, size_t b) { return gpus[a].free < gpus[b].free; });
    const bool whole = WantsWhole(c);
    for (size_t k = 0; k < candidates.size() && k < static_cast<size_t>(c.count); ++k) {
      core::GpuState& g = gpus[candidates[k]];
      g.free -= whole ? common::kGpuMilli : c.milli_per_gpu;
      g.holders += 1;
      g.exclusive = whole;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    free[i] = gpus[i].free.value();
  }
  return Best{.score = SigmoidScore(before - Fragmentation(*m_, node, cpu_after, free))};
}

int64_t FgdPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  return Evaluate(pod, node).score;
}

std::vector<core::ContainerAllocation> FgdPolicy::SelectGpus(const core::PodRequest& pod, const core::NodeView& node,
                                                             common::Rng&) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (s.IsSharing() && pod.containers.size() == 1) {
    const size_t gpu = Evaluate(pod, node).gpu;
    return SelectGpusWith(pod, node,
                          [gpu](const core::GpuRequest&, const core::NodeView&, std::span<const core::GpuState>,
                                std::span<const size_t>) { return gpu; });
  }
  return SelectGpusBest(pod, node);
}

}  // namespace gpusched::policy
