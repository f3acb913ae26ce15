#include "gpusched/policy/share_plan.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "gpusched/common/units.h"

namespace gpusched::policy {

namespace {

constexpr int64_t kGpu = common::kGpuMilli.value();
static_assert(kGpu == 1000, "SharePlan's tables have one bit per milli of a GPU");

}  // namespace

SharePlan::SharePlan(const TargetWorkload& m) {
  std::map<int64_t, double> weight_by_milli;
  double total = 0;
  for (const TaskClass& c : m.classes) {
    const int64_t milli = c.gpu_milli.value();
    if (c.gpu_count == 1 && milli > 0 && milli < kGpu && c.weight > 0) {
      weight_by_milli[milli] += c.weight;
      total += c.weight;
    }
  }
  if (total <= 0) {
    return;
  }
  std::vector<int64_t> items;
  for (const auto& [milli, weight] : weight_by_milli) {
    const auto n = std::llround(weight / total * static_cast<double>(kItems));
    items.insert(items.end(), static_cast<size_t>(std::max<int64_t>(n, 1)), milli);
  }
  std::sort(items.begin(), items.end(), std::greater<>());

  // Best fit decreasing with as many GPUs as it takes: rooms by size, each with its GPU's index.
  std::vector<std::vector<int64_t>> gpus;
  std::vector<int64_t> used;
  std::multimap<int64_t, size_t> rooms;
  for (const int64_t share : items) {
    auto room = rooms.lower_bound(share);
    size_t g = gpus.size();
    if (room == rooms.end()) {
      gpus.emplace_back();
      used.push_back(0);
    } else {
      g = room->second;
      rooms.erase(room);
    }
    gpus[g].push_back(share);
    used[g] += share;
    rooms.emplace(kGpu - used[g], g);
  }
  for (auto& contents : gpus) {
    combinations_[contents] += 1;  // already descending: items were placed largest first
  }

  for (const auto& [combination, count] : combinations_) {
    for (size_t i = 0; i < combination.size(); ++i) {
      if (i > 0 && combination[i] == combination[i - 1]) {
        continue;  // the same share size: the same rest
      }
      // Every subtotal of the combination without this one share.
      std::bitset<kGpu + 1> reach;
      reach.set(0);
      for (size_t j = 0; j < combination.size(); ++j) {
        if (j != i) {
          reach |= reach << static_cast<size_t>(combination[j]);
        }
      }
      joins_[combination[i]] |= reach;
      states_ |= reach | (reach << static_cast<size_t>(combination[i]));
    }
  }
}

bool SharePlan::Follows(int64_t used_milli, int64_t share_milli) const {
  if (used_milli == 0) {
    return true;
  }
  auto it = joins_.find(share_milli);
  if (it == joins_.end()) {
    return true;  // a share the plan does not know
  }
  if (used_milli < 0 || used_milli > kGpu) {
    return false;
  }
  const auto used = static_cast<size_t>(used_milli);
  return !states_.test(used) || it->second.test(used);  // a GPU the plan never makes: its pods are not the plan's
}

}  // namespace gpusched::policy
