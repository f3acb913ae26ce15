#pragma once

// SharePlan: how an offline packer would combine a target workload's GPU shares on GPUs, as a table fgd-scarcity
// consults online (fgd_policy.h).
//
// Online, a share arrives before the share that would complete its GPU well. fgd takes the GPU where F grows least,
// and F counts a partly used GPU as lost for every class that asks more than its room, so fgd nearly always puts a
// share into some open room rather than on a free GPU, whether or not what it leaves can ever be filled. On openb
// default a 320 then goes next to a 470 (210 left, which only the rare shares of 220 milli or less can use) because
// no 650's room was open at that moment, and the next 470 opens a new GPU. The plan knows which shares belong
// together.
//
// Building it (once per target workload M): take M's single-GPU share classes (one GPU, 0 < milli < 1000), draw
// kItems shares in proportion to their weights (classes of equal milli merged), and pack them best fit decreasing
// with as many GPUs as needed: largest first, each on the GPU whose room it fills most tightly, a new GPU when no
// room is large enough. The GPUs' contents are the plan's combinations: on openb default 810 alone, 810+160,
// 650+320, 590+370, 550+230+220, 470+470, 460+460, four 230s, ...
// Consulting it: a share of s milli joining a GPU on which `used` milli are taken follows the plan when some
// combination holds s and, besides that s, shares summing to exactly `used` (a free GPU, used 0, always does). The
// plan judges only what it knows: a share whose milli no class of M asks, and a GPU whose used milli no combination
// reaches (pods of other sizes are on it), always follow it. So with a coarse M (the built-in default mix knows
// quarter and half GPUs only) shares of other sizes are steered by F alone.
//
// The plan reads milli sums, not which pods are on a GPU, so a GPU whose pods sum to a planned subtotal by another
// route counts as planned; it costs O(combinations · 1000) bits to build and two bit tests to consult.

#include <bitset>
#include <cstdint>
#include <map>
#include <vector>

#include "gpusched/policy/target_workload.h"

namespace gpusched::policy {

class SharePlan {
 public:
  // How many shares the packer draws: enough that every class with weight >= 1/kItems of the shares gets one.
  static constexpr int64_t kItems = 20000;

  SharePlan() = default;  // an empty plan: every placement follows it
  explicit SharePlan(const TargetWorkload& m);

  // Whether a share of share_milli joining a GPU with used_milli taken follows the plan.
  [[nodiscard]] bool Follows(int64_t used_milli, int64_t share_milli) const;

  // The combinations (shares in descending milli) and on how many of the packer's GPUs each occurred.
  [[nodiscard]] const std::map<std::vector<int64_t>, int64_t>& combinations() const { return combinations_; }
  [[nodiscard]] bool empty() const { return combinations_.empty(); }

 private:
  std::map<std::vector<int64_t>, int64_t> combinations_;
  // Per planned share milli: bit u set when some combination holding that share has, besides it, shares summing
  // to u.
  std::map<int64_t, std::bitset<1001>> joins_;
  std::bitset<1001> states_;  // every subtotal of every combination: the used milli the plan itself makes
};

}  // namespace gpusched::policy
