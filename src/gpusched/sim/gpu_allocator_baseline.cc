#include "gpusched/sim/gpu_allocator_baseline.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "gpusched/policy/gpu_fit.h"
#include "gpusched/policy/topology.h"

namespace gpusched::sim {
namespace {

constexpr int64_t kPad = -1;  // a placeholder in a padded group

// Enumerates the divisions of `items` (GPU indices and kPad placeholders) into groups of `size`, each group either
// without placeholders or holding all `pads` of them; calls `visit(groups)` with each full division.
class Divisions {
 public:
  Divisions(const core::Node& node, size_t size, size_t pads) : node_(node), size_(size), pads_(pads) {}

  // The best division's groups (by the sum of their set scores; the first on ties).
  std::vector<std::vector<int64_t>> Best(std::vector<int64_t> items) {
    std::vector<std::vector<int64_t>> groups;
    Walk(items, groups, 0);
    return best_;
  }

 private:
  int64_t GroupScore(const std::vector<int64_t>& g) const {
    std::vector<size_t> real;
    for (int64_t i : g) {
      if (i != kPad) {
        real.push_back(static_cast<size_t>(i));
      }
    }
    return policy::SetScore(node_, real);
  }

  void Walk(const std::vector<int64_t>& items, std::vector<std::vector<int64_t>>& groups, int64_t score) {
    if (items.empty()) {
      if (!found_ || score > best_score_) {
        found_ = true;
        best_score_ = score;
        best_ = groups;
      }
      return;
    }
    // The group holding the first remaining item: it plus every (size-1)-subset of the rest, in lexicographic
    // order, so no division is visited twice.
    const size_t rest = items.size() - 1;
    std::vector<size_t> pick(size_ - 1);
    for (size_t i = 0; i < pick.size(); ++i) {
      pick[i] = i + 1;
    }
    while (true) {
      std::vector<int64_t> group = {items[0]};
      for (size_t p : pick) {
        group.push_back(items[p]);
      }
      const auto pads = static_cast<size_t>(std::count(group.begin(), group.end(), kPad));
      if (pads == 0 || pads == pads_) {
        std::vector<int64_t> left;
        for (size_t k = 1, j = 0; k < items.size(); ++k) {
          if (j < pick.size() && pick[j] == k) {
            ++j;
          } else {
            left.push_back(items[k]);
          }
        }
        groups.push_back(group);
        Walk(left, groups, score + GroupScore(group));
        groups.pop_back();
      }
      // Next (size-1)-combination of positions 1..rest.
      size_t i = pick.size();
      while (i > 0 && pick[i - 1] == rest - (pick.size() - i)) {
        --i;
      }
      if (i == 0) {
        break;
      }
      ++pick[i - 1];
      for (size_t j = i; j < pick.size(); ++j) {
        pick[j] = pick[j - 1] + 1;
      }
    }
  }

  const core::Node& node_;
  size_t size_;
  size_t pads_;
  bool found_ = false;
  int64_t best_score_ = 0;
  std::vector<std::vector<int64_t>> best_;
};

}  // namespace

std::vector<size_t> GoGpuAllocatorChoice(const core::Node& node, std::span<const size_t> available, size_t size) {
  if (size == 0 || available.size() < size) {
    return {};
  }
  if (size == 1) {
    return {available.front()};
  }
  if (size == available.size()) {
    return {available.begin(), available.end()};
  }
  if (available.size() > kMaxGoAllocatorGpus) {
    return policy::ChooseWholeGpus(node, available, size);
  }
  std::vector<int64_t> items(available.begin(), available.end());
  size_t pads = 0;
  while (items.size() % size != 0) {
    items.push_back(kPad);
    ++pads;
  }
  Divisions divisions(node, size, pads);
  const std::vector<std::vector<int64_t>> best = divisions.Best(std::move(items));
  std::optional<std::vector<size_t>> chosen;
  int64_t chosen_score = 0;
  for (const auto& g : best) {
    if (std::find(g.begin(), g.end(), kPad) != g.end()) {
      continue;
    }
    std::vector<size_t> set(g.begin(), g.end());
    const int64_t s = policy::SetScore(node, set);
    if (!chosen.has_value() || s > chosen_score) {
      chosen = std::move(set);
      chosen_score = s;
    }
  }
  std::vector<size_t> out =
      chosen.value_or(std::vector<size_t>(available.begin(), available.begin() + static_cast<std::ptrdiff_t>(size)));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<core::ContainerAllocation> GoGpuAllocatorPlacement::SelectGpus(const core::PodRequest& pod,
                                                                           const core::NodeView& node,
                                                                           common::Rng& rng) const {
  return Rechoose(pod, node, inner_.SelectGpus(pod, node, rng));
}

std::vector<core::ContainerAllocation> GoGpuAllocatorPlacement::SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                                       const core::NodeView& node,
                                                                                       const policy::Snapshot& snapshot,
                                                                                       common::Rng& rng) const {
  return Rechoose(pod, node, inner_.SelectGpusWithSnapshot(pod, node, snapshot, rng));
}

std::vector<core::ContainerAllocation> GoGpuAllocatorPlacement::Rechoose(
    const core::PodRequest& pod, const core::NodeView& node, std::vector<core::ContainerAllocation> chosen) const {
  auto real = real_nodes_.find(node.name().str());
  if (real == real_nodes_.end() || chosen.size() != pod.containers.size()) {
    return chosen;
  }
  // GPUs taken by the pod's other containers (as inner chose them) are not available to a whole-GPU container.
  std::vector<core::GpuState> gpus = node.gpus;
  for (const core::ContainerAllocation& c : chosen) {
    for (const core::GpuShare& g : c.gpus) {
      core::GpuState& s = gpus[static_cast<size_t>(g.index)];
      s.free -= g.milli;
      s.holders += 1;
    }
  }
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const core::GpuRequest& req = pod.containers[ci];
    core::ContainerAllocation& c = chosen[ci];
    if (!policy::WantsWhole(req) || c.gpus.empty()) {
      continue;
    }
    for (const core::GpuShare& g : c.gpus) {  // give this container's GPUs back while it chooses
      core::GpuState& s = gpus[static_cast<size_t>(g.index)];
      s.free += g.milli;
      s.holders -= 1;
    }
    std::vector<size_t> available;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (policy::GpuCanHost(req, node, gpus, i)) {
        available.push_back(i);
      }
    }
    const std::vector<size_t> pick = GoGpuAllocatorChoice(*real->second, available, c.gpus.size());
    if (pick.size() == c.gpus.size()) {
      const core::GpuShare like = c.gpus.front();
      c.gpus.clear();
      for (size_t i : pick) {
        core::GpuShare g = like;
        g.index = static_cast<int32_t>(i);
        g.uuid = node.node->gpus[i].uuid;
        c.gpus.push_back(g);
      }
    }
    for (const core::GpuShare& g : c.gpus) {
      core::GpuState& s = gpus[static_cast<size_t>(g.index)];
      s.free -= g.milli;
      s.holders += 1;
    }
  }
  return chosen;
}

}  // namespace gpusched::sim
