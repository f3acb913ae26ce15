#include "gpusched/policy/topology.h"

#include <algorithm>
#include <bit>

namespace gpusched::policy {
namespace {

const core::GpuLink* LinkOf(const core::Node& node, size_t a, size_t b) {
  if (a >= node.gpus.size()) {
    return nullptr;
  }
  for (const core::GpuLink& l : node.gpus[a].links) {
    if (static_cast<size_t>(l.peer) == b) {
      return &l;
    }
  }
  return nullptr;
}

bool ListedPeer(const core::Node& node, size_t a, size_t b) {
  if (a >= node.gpus.size()) {
    return false;
  }
  const auto& peers = node.gpus[a].nvlink_peers;
  return std::find(peers.begin(), peers.end(), static_cast<int32_t>(b)) != peers.end();
}

// What ranks one candidate set against another: higher is better, in this order.
struct Rank {
  int64_t score = 0;
  size_t group_left = 0;
  int64_t left_score = 0;
  bool operator>(const Rank& o) const {
    if (score != o.score) {
      return score > o.score;
    }
    if (group_left != o.group_left) {
      return group_left > o.group_left;
    }
    return left_score > o.left_score;
  }
};

Rank RankOf(const core::Node& node, std::span<const size_t> set, std::span<const size_t> candidates) {
  std::vector<size_t> left;
  left.reserve(candidates.size());
  for (size_t c : candidates) {
    if (std::find(set.begin(), set.end(), c) == set.end()) {
      left.push_back(c);
    }
  }
  return Rank{
      .score = SetScore(node, set), .group_left = LargestNvlinkGroup(node, left), .left_score = SetScore(node, left)};
}

uint64_t Binomial(size_t n, size_t k) {
  if (k > n) {
    return 0;
  }
  uint64_t r = 1;
  for (size_t i = 1; i <= k; ++i) {
    r = r * (n - k + i) / i;
    if (r > (uint64_t{1} << 40)) {
      return r;
    }
  }
  return r;
}

}  // namespace

bool HasTopology(const core::Node& node) {
  return std::any_of(node.gpus.begin(), node.gpus.end(),
                     [](const core::Gpu& g) { return !g.links.empty() || !g.nvlink_peers.empty(); });
}

int64_t PairScore(const core::Node& node, size_t a, size_t b) {
  if (const core::GpuLink* l = LinkOf(node, a, b)) {
    switch (l->kind) {
      case core::LinkKind::kNvSwitch:
      case core::LinkKind::kNvlink:
        return 100 * std::max<int64_t>(1, l->nvlinks);
      case core::LinkKind::kPcieSwitch:
        return 50;
      case core::LinkKind::kPcieMultiSwitch:
        return 40;
      case core::LinkKind::kHostBridge:
        return 30;
      case core::LinkKind::kSameNuma:
        return 20;
      case core::LinkKind::kCrossSocket:
        return 10;
      case core::LinkKind::kUnknown:
        break;
    }
    return 0;
  }
  return (ListedPeer(node, a, b) || ListedPeer(node, b, a)) ? 100 : 0;
}

bool NvlinkJoined(const core::Node& node, size_t a, size_t b) {
  if (const core::GpuLink* l = LinkOf(node, a, b)) {
    return l->kind == core::LinkKind::kNvlink || l->kind == core::LinkKind::kNvSwitch;
  }
  return ListedPeer(node, a, b) || ListedPeer(node, b, a);
}

int64_t SetScore(const core::Node& node, std::span<const size_t> set) {
  int64_t s = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      s += PairScore(node, set[i], set[j]);
    }
  }
  return s;
}

bool FullyNvlinked(const core::Node& node, std::span<const size_t> set) {
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      if (!NvlinkJoined(node, set[i], set[j])) {
        return false;
      }
    }
  }
  return true;
}

size_t LargestNvlinkGroup(const core::Node& node, std::span<const size_t> gpus) {
  const size_t n = gpus.size();
  if (n <= 1) {
    return n;
  }
  if (n > 20) {  // not on real nodes; a lower bound that is cheap
    return 1;
  }
  // Adjacency as bit masks, then every subset (n <= 20: at most a million, in practice n <= 8: 256).
  std::vector<uint32_t> adj(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && NvlinkJoined(node, gpus[i], gpus[j])) {
        adj[i] |= uint32_t{1} << j;
      }
    }
  }
  size_t best = 1;
  for (uint32_t mask = 1; mask < (uint32_t{1} << n); ++mask) {
    const auto size = static_cast<size_t>(std::popcount(mask));
    if (size <= best) {
      continue;
    }
    bool clique = true;
    for (size_t i = 0; i < n && clique; ++i) {
      if ((mask >> i) & 1U) {
        clique = (adj[i] | (uint32_t{1} << i) | ~mask) == ~uint32_t{0};
      }
    }
    if (clique) {
      best = size;
    }
  }
  return best;
}

std::vector<size_t> ChooseWholeGpus(const core::Node& node, std::span<const size_t> candidates, size_t count,
                                    core::TopologyNeed need) {
  if (count == 0) {
    return {};
  }
  const bool required = need == core::TopologyNeed::kRequired && count > 1;
  if (need == core::TopologyNeed::kNone || !HasTopology(node) || (count == candidates.size() && !required)) {
    return std::vector<size_t>(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count));
  }
  std::vector<size_t> best;
  Rank best_rank;
  const uint64_t sets = Binomial(candidates.size(), count);
  if (sets <= kMaxExactSets || (required && sets <= 50 * kMaxExactSets)) {
    // Every combination in lexicographic order, so the first best is the lowest-index one.
    std::vector<size_t> pick(count);
    for (size_t i = 0; i < count; ++i) {
      pick[i] = i;
    }
    std::vector<size_t> set(count);
    while (true) {
      for (size_t i = 0; i < count; ++i) {
        set[i] = candidates[pick[i]];
      }
      const bool allowed = !required || FullyNvlinked(node, set);
      const Rank r = allowed ? RankOf(node, set, candidates) : Rank{};
      if (allowed && (best.empty() || r > best_rank)) {
        best = set;
        best_rank = r;
      }
      size_t i = count;
      while (i > 0 && pick[i - 1] == candidates.size() - count + (i - 1)) {
        --i;
      }
      if (i == 0) {
        break;
      }
      ++pick[i - 1];
      for (size_t j = i; j < count; ++j) {
        pick[j] = pick[j - 1] + 1;
      }
    }
    if (best.empty()) {  // kRequired without such a set: NvlinkFit refused the node; keep the lowest indices
      best.assign(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count));
    }
    return best;
  }
  // Greedy: grow from the first candidate's best partner, adding the GPU that adds the most each time.
  std::vector<size_t> set = {candidates[0]};
  while (set.size() < count) {
    size_t add = candidates.size();
    int64_t gain = -1;
    for (size_t k = 0; k < candidates.size(); ++k) {
      if (std::find(set.begin(), set.end(), candidates[k]) != set.end()) {
        continue;
      }
      int64_t g = 0;
      for (size_t s : set) {
        g += PairScore(node, s, candidates[k]);
      }
      if (g > gain) {
        gain = g;
        add = k;
      }
    }
    set.push_back(candidates[add]);
  }
  std::sort(set.begin(), set.end());
  return set;
}

}  // namespace gpusched::policy
