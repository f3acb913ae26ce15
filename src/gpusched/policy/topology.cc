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

// The largest NVLink-joined group of every subset of `gpus` (n <= 20), by subset mask: a table built once per choice,
// so that ranking a candidate set looks its leftovers up instead of searching them.
std::vector<uint8_t> GroupTable(const core::Node& node, std::span<const size_t> gpus) {
  const size_t n = gpus.size();
  std::vector<uint32_t> adj(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i != j && NvlinkJoined(node, gpus[i], gpus[j])) {
        adj[i] |= uint32_t{1} << j;
      }
    }
  }
  std::vector<uint8_t> best(size_t{1} << n, 0);
  for (uint32_t mask = 1; mask < (uint32_t{1} << n); ++mask) {
    const auto v = static_cast<size_t>(std::countr_zero(mask));
    const uint32_t without = mask & (mask - 1);
    // The largest group of `mask` either leaves v out, or holds v and only v's NVLink peers within `mask`.
    best[mask] = std::max<uint8_t>(best[without], static_cast<uint8_t>(1 + best[mask & adj[v]]));
  }
  return best;
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
  if (std::any_of(node.gpus.begin(), node.gpus.end(),
                  [](const core::Gpu& g) { return !g.links.empty() || !g.nvlink_peers.empty(); })) {
    return true;
  }
  // An inventory with NUMA nodes but no links (an agent that could not read them): GPUs on two or more NUMA nodes
  // are topology enough to keep a pod's GPUs on one.
  int32_t first = -1;
  for (const core::Gpu& g : node.gpus) {
    if (g.numa_node < 0) {
      continue;
    }
    if (first < 0) {
      first = g.numa_node;
    } else if (g.numa_node != first) {
      return true;
    }
  }
  return false;
}

namespace {

// go-gpuallocator's scale for one link kind; NVLink counts per link.
int64_t LinkScore(core::LinkKind kind, int32_t nvlinks) {
  switch (kind) {
    case core::LinkKind::kNvSwitch:
    case core::LinkKind::kNvlink:
      return 100 * std::max<int64_t>(1, nvlinks);
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

}  // namespace

int64_t PairScore(const core::Node& node, size_t a, size_t b) {
  if (const core::GpuLink* l = LinkOf(node, a, b)) {
    return LinkScore(l->kind, l->nvlinks);
  }
  if (ListedPeer(node, a, b) || ListedPeer(node, b, a)) {
    return LinkScore(core::LinkKind::kNvlink, 1);
  }
  // No link recorded: the NUMA nodes, where known, say what NODE or SYS would.
  const int32_t na = node.gpus[a].numa_node;
  const int32_t nb = node.gpus[b].numa_node;
  if (na >= 0 && nb >= 0) {
    return LinkScore(na == nb ? core::LinkKind::kSameNuma : core::LinkKind::kCrossSocket, 0);
  }
  return 0;
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
  return GroupTable(node, gpus).back();
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
    // Every combination in lexicographic order, so the first best is the lowest-index one. Leftovers are ranked
    // through a table of every subset's largest NVLink group (candidates.size() <= 20) or searched (more).
    const size_t n = candidates.size();
    const std::vector<uint8_t> groups = n <= 20 ? GroupTable(node, candidates) : std::vector<uint8_t>{};
    const uint32_t all = n <= 20 ? static_cast<uint32_t>((uint64_t{1} << n) - 1) : 0;
    std::vector<size_t> pick(count);
    for (size_t i = 0; i < count; ++i) {
      pick[i] = i;
    }
    // Pair scores among the candidates, once: ranking a set then costs only additions.
    std::vector<int64_t> pair(n * n, 0);
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        pair[a * n + b] = pair[b * n + a] = PairScore(node, candidates[a], candidates[b]);
      }
    }
    auto score_of = [&](std::span<const size_t> positions) {
      int64_t sum = 0;
      for (size_t i = 0; i < positions.size(); ++i) {
        for (size_t j = i + 1; j < positions.size(); ++j) {
          sum += pair[positions[i] * n + positions[j]];
        }
      }
      return sum;
    };
    std::vector<size_t> set(count);
    std::vector<size_t> left;      // GPU indices
    std::vector<size_t> left_pos;  // their positions among the candidates
    left.reserve(n);
    left_pos.reserve(n);
    while (true) {
      uint32_t set_mask = 0;
      for (size_t i = 0; i < count; ++i) {
        set[i] = candidates[pick[i]];
        set_mask |= n <= 20 ? uint32_t{1} << pick[i] : 0;
      }
      const bool allowed = !required || FullyNvlinked(node, set);
      if (allowed) {
        left.clear();
        left_pos.clear();
        for (size_t k = 0, i = 0; k < n; ++k) {
          if (i < count && pick[i] == k) {
            ++i;
          } else {
            left.push_back(candidates[k]);
            left_pos.push_back(k);
          }
        }
        const Rank r{.score = score_of(pick),
                     .group_left = n <= 20 ? groups[all & ~set_mask] : LargestNvlinkGroup(node, left),
                     .left_score = score_of(left_pos)};
        if (best.empty() || r > best_rank) {
          best = set;
          best_rank = r;
        }
      }
      size_t i = count;
      while (i > 0 && pick[i - 1] == n - count + (i - 1)) {
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
