#include "gpusched/policy/topology_policy.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpusched/policy/gpu_fit.h"
#include "gpusched/policy/topology.h"

namespace gpusched::policy {
namespace {

// The set score of the best `count` GPUs of the empty node.
int64_t IdealSetScore(const core::Node& node, size_t count) {
  std::vector<size_t> all(node.gpus.size());
  for (size_t i = 0; i < all.size(); ++i) {
    all[i] = i;
  }
  if (count > all.size()) {
    return 0;
  }
  const std::vector<size_t> best = ChooseWholeGpus(node, all, count);
  return SetScore(node, best);
}

}  // namespace

common::Result<std::unique_ptr<PlacementPolicy>> TopologyPolicy::Create(const PolicyOptions&) {
  return std::unique_ptr<PlacementPolicy>(new TopologyPolicy());
}

int64_t TopologyPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  const bool multi = std::any_of(pod.containers.begin(), pod.containers.end(),
                                 [](const core::GpuRequest& c) { return c.count >= 2 && WantsWhole(c); });
  if (!multi || !HasTopology(*node.node)) {
    return kTopologyNeutralScore;
  }
  double quality = 1;
  for (const core::ContainerAllocation& c : SelectGpusBest(pod, node)) {
    std::vector<size_t> set;
    bool whole = true;
    for (const core::GpuShare& g : c.gpus) {
      set.push_back(static_cast<size_t>(g.index));
      whole = whole && HoldsWhole(g);
    }
    if (set.size() < 2 || !whole) {
      continue;
    }
    const int64_t ideal = IdealSetScore(*node.node, set.size());
    if (ideal > 0) {
      quality = std::min(quality, static_cast<double>(SetScore(*node.node, set)) / static_cast<double>(ideal));
    }
  }
  return std::clamp<int64_t>(std::llround(static_cast<double>(kMaxScore) * quality), 0, kMaxScore);
}

std::vector<core::ContainerAllocation> TopologyPolicy::SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node, common::Rng&) const {
  return SelectGpusBest(pod, node);
}

}  // namespace gpusched::policy
