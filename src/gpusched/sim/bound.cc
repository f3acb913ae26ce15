#include "gpusched/sim/bound.h"

#include <algorithm>
#include <functional>
#include <set>

#include "gpusched/policy/gpu_fit.h"

namespace gpusched::sim {

namespace {

constexpr int64_t kGpu = 1000;

// The relaxation's items: every whole GPU a container asks for, and every share (one per GPU of its container).
struct Items {
  int64_t whole_gpus = 0;
  std::vector<int64_t> shares;  // milli
};

Items ItemsOf(std::span<const core::PodRequest* const> pods) {
  Items items;
  for (const core::PodRequest* p : pods) {
    for (const core::GpuRequest& c : p->containers) {
      if (policy::WantsWhole(c)) {
        items.whole_gpus += c.count;
      } else {
        items.shares.insert(items.shares.end(), static_cast<size_t>(c.count), c.milli_per_gpu.value());
      }
    }
  }
  return items;
}

}  // namespace

PackingBound GpuPackingBound(std::span<const core::PodRequest* const> pods, int64_t capacity_milli) {
  std::vector<int64_t> big;    // sizes above 500
  std::vector<int64_t> small;  // sizes of 500 or less
  PackingBound b{.capacity_milli = capacity_milli};
  const Items items = ItemsOf(pods);
  b.demand_milli = items.whole_gpus * kGpu;
  for (int64_t size : items.shares) {
    b.demand_milli += size;
    (size > kGpu / 2 ? big : small).push_back(size);
  }
  b.big_items = static_cast<int64_t>(big.size());
  // F: leftovers 1000 − s of every big item, filled by small items largest first, each into the leftovers at least
  // its size (nested sets: the leftovers open to an item are open to every smaller one).
  std::vector<int64_t> leftovers;
  for (int64_t s : big) {
    leftovers.push_back(kGpu - s);
    b.big_leftover_milli += kGpu - s;
  }
  std::sort(leftovers.begin(), leftovers.end(), std::greater<>());
  std::sort(small.begin(), small.end(), std::greater<>());
  int64_t pool = 0;
  size_t next = 0;
  for (int64_t x : small) {
    while (next < leftovers.size() && leftovers[next] >= x) {
      pool += leftovers[next++];
    }
    const int64_t put = std::min(pool, x);
    pool -= put;
    b.fill_milli += put;
  }
  // Leave out the k smallest big items, k = 0 .. all: the best minimum of the two terms.
  std::sort(big.begin(), big.end());
  int64_t dropped_volume = 0;
  int64_t waste = b.big_leftover_milli;
  b.bound_milli = -1;
  for (size_t k = 0; k <= big.size(); ++k) {
    if (k > 0) {
      dropped_volume += big[k - 1];
      waste -= kGpu - big[k - 1];
    }
    const int64_t first = b.demand_milli - dropped_volume;
    const int64_t second = capacity_milli - waste + b.fill_milli;
    const int64_t v = std::min({first, second, capacity_milli});
    if (v > b.bound_milli) {
      b.bound_milli = v;
      b.dropped_big = static_cast<int64_t>(k);
    }
  }
  return b;
}

int64_t OfflineBestFitDecreasing(std::span<const core::PodRequest* const> pods, int64_t capacity_milli) {
  Items items = ItemsOf(pods);
  std::vector<int64_t>& shares = items.shares;
  int64_t empty = capacity_milli / kGpu;
  const int64_t placed_whole = std::min(items.whole_gpus, empty);
  empty -= placed_whole;
  int64_t allocated = placed_whole * kGpu;
  std::sort(shares.begin(), shares.end(), std::greater<>());
  std::multiset<int64_t> rooms;  // free milli of the GPUs holding shares, above 0
  for (int64_t s : shares) {
    int64_t room = 0;
    if (auto it = rooms.lower_bound(s); it != rooms.end()) {
      room = *it - s;
      rooms.erase(it);
    } else if (empty > 0) {
      --empty;
      room = kGpu - s;
    } else {
      continue;  // no room anywhere: left out
    }
    allocated += s;
    if (room > 0) {
      rooms.insert(room);
    }
  }
  return allocated;
}

PackingBound BoundAtArrived(const Workload& workload, int64_t capacity_milli, uint64_t seed, double tune,
                            double arrived) {
  common::Rng rng(seed);
  const std::vector<const core::PodRequest*> order = ArrivalOrder(workload, capacity_milli, tune, rng);
  const auto limit = static_cast<int64_t>(arrived * static_cast<double>(capacity_milli));
  std::vector<const core::PodRequest*> prefix;
  int64_t total = 0;
  for (const core::PodRequest* p : order) {
    total += p->TotalGpuMilli().value();
    if (total > limit) {
      break;
    }
    prefix.push_back(p);
  }
  PackingBound b = GpuPackingBound(prefix, capacity_milli);
  b.offline_packed_milli = OfflineBestFitDecreasing(prefix, capacity_milli);
  return b;
}

}  // namespace gpusched::sim
