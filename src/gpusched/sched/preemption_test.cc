#include "gpusched/sched/preemption.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::sched {
namespace {

core::Allocation Share(const std::string& pod, int32_t gpu, int64_t milli, int64_t cpu = 0) {
  core::Allocation a{.pod = common::PodUid(pod), .node = common::NodeName("n1"), .cpu = common::MilliCpu(cpu)};
  a.containers.push_back(core::ContainerAllocation{
      .container = "main", .gpus = {core::GpuShare{.index = gpu, .milli = common::MilliGpu(milli)}}});
  return a;
}

// One GPU node with the given allocations charged.
core::NodeView NodeWith(const std::vector<core::Allocation>& held, int32_t gpus = 1) {
  core::NodeView v = testing::View("n1").Gpus(gpus).Cpu(8000).Build();
  for (const auto& a : held) {
    AddToView(v, a);
  }
  return v;
}

// The preemptor needs `milli` free on some GPU.
std::function<bool(const core::NodeView&)> NeedsShare(int64_t milli) {
  return [milli](const core::NodeView& v) {
    for (const auto& g : v.gpus) {
      if (g.free.value() >= milli) {
        return true;
      }
    }
    return false;
  };
}

std::vector<std::string> Uids(const VictimSet& s) {
  std::vector<std::string> out;
  for (const auto& u : s.victims) {
    out.push_back(u.str());
  }
  return out;
}

TEST(PreemptionTest, ViewArithmeticIsSymmetric) {
  const core::Allocation a = Share("a", 0, 400, 500);
  core::NodeView v = NodeWith({});
  const core::NodeView before = v;
  AddToView(v, a);
  EXPECT_EQ(v.gpus[0].free.value(), 600);
  EXPECT_EQ(v.gpus[0].holders, 1);
  EXPECT_EQ(v.cpu_free.value(), 7500);
  EXPECT_EQ(v.pods, 1);
  RemoveFromView(v, a);
  EXPECT_EQ(v.gpus[0].free, before.gpus[0].free);
  EXPECT_EQ(v.gpus[0].holders, 0);
  EXPECT_EQ(v.cpu_free, before.cpu_free);
  EXPECT_EQ(v.pods, 0);
}

// Three shares of 300 on one GPU; the preemptor needs 500: the two least important must go, the third is spared.
TEST(PreemptionTest, EvictsTheLeastImportantAndSparesTheRest) {
  const std::vector<core::Allocation> held = {Share("low", 0, 300), Share("mid", 0, 300), Share("old-mid", 0, 300)};
  const core::NodeView v = NodeWith(held);
  const std::vector<PotentialVictim> potential = {{.allocation = &held[0], .priority = 1, .start_ms = 10},
                                                  {.allocation = &held[1], .priority = 5, .start_ms = 20},
                                                  {.allocation = &held[2], .priority = 5, .start_ms = 5}};
  auto s = SelectVictimsOnNode(v, potential, {}, NeedsShare(500));
  ASSERT_TRUE(s.has_value());
  // old-mid (earlier start) is the more important of the two of priority 5: it is put back first and stays.
  EXPECT_EQ(Uids(*s), (std::vector<std::string>{"mid", "low"}));
  EXPECT_EQ(s->pdb_violations, 0);
  EXPECT_EQ(s->highest_priority, 5);
  EXPECT_EQ(s->highest_start_ms, 20);
  const int64_t offset = -static_cast<int64_t>(std::numeric_limits<int32_t>::min());
  EXPECT_EQ(s->priority_sum, (1 + offset) + (5 + offset));
}

// State beyond the node view follows the victims through on_change: here a "conflict" that only `mid`'s leaving
// ends (as an anti-affinity would). Only what on_change reports decides; when the call returns, exactly the
// victims are off.
TEST(PreemptionTest, OnChangeLetsOtherStateDecideAndEndsWithExactlyTheVictimsOff) {
  const std::vector<core::Allocation> held = {Share("low", 0, 100), Share("mid", 0, 100), Share("other", 0, 100)};
  const core::NodeView v = NodeWith(held);
  const std::vector<PotentialVictim> potential = {{.allocation = &held[0], .priority = 1},
                                                  {.allocation = &held[1], .priority = 5},
                                                  {.allocation = &held[2], .priority = 3}};
  std::map<std::string, int> on;  // 1: on the node
  for (const auto& a : held) {
    on[a.pod.str()] = 1;
  }
  auto follow = [&](const PotentialVictim& victim, int delta) { on[victim.allocation->pod.str()] += delta; };
  auto conflict_gone = [&](const core::NodeView&) { return on["mid"] == 0; };
  auto s = SelectVictimsOnNode(v, potential, {}, conflict_gone, follow);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(Uids(*s), std::vector<std::string>{"mid"});
  EXPECT_EQ(on, (std::map<std::string, int>{{"low", 1}, {"mid", 0}, {"other", 1}}));
  // No candidate: every potential victim is off when it returns.
  auto never = SelectVictimsOnNode(
      v, potential, {}, [](const core::NodeView&) { return false; }, follow);
  EXPECT_FALSE(never.has_value());
  EXPECT_EQ(on, (std::map<std::string, int>{{"low", 0}, {"mid", -1}, {"other", 0}}));
}

TEST(PreemptionTest, NoCandidateWhenEveryLowerPriorityPodIsNotEnough) {
  // 700 held by a pod of higher priority (not a potential victim), 300 by one of lower: 500 can never be free.
  const std::vector<core::Allocation> held = {Share("high", 0, 700), Share("low", 0, 300)};
  const core::NodeView v = NodeWith(held);
  const std::vector<PotentialVictim> potential = {{.allocation = &held[1], .priority = 0}};
  EXPECT_FALSE(SelectVictimsOnNode(v, potential, {}, NeedsShare(500)).has_value());
  // 300 is exactly what the pod of lower priority holds: it alone goes.
  auto exact = SelectVictimsOnNode(v, potential, {}, NeedsShare(300));
  ASSERT_TRUE(exact.has_value());
  EXPECT_EQ(Uids(*exact), std::vector<std::string>{"low"});
  // Nothing needed: an empty victim set (the node already fits).
  auto none = SelectVictimsOnNode(v, potential, {}, NeedsShare(0));
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->victims.empty());
}

// Budgets: pods whose eviction a budget does not allow are put back first, so a victim set avoids them when it can.
TEST(PreemptionTest, PodsProtectedByABudgetAreSparedFirst) {
  // Two GPUs; either GPU's pod may go for a 600 share. The more important one (prio 3) is protected by budget 0,
  // which allows no disruption: the unprotected one (prio 4, more important!) is evicted instead.
  const std::vector<core::Allocation> held = {Share("protected", 0, 600), Share("free", 1, 600)};
  const core::NodeView v = NodeWith(held, 2);
  const std::vector<int32_t> budgets = {0};
  const std::vector<PotentialVictim> potential = {{.allocation = &held[0], .priority = 3, .pdbs = {0}},
                                                  {.allocation = &held[1], .priority = 4}};
  auto s = SelectVictimsOnNode(v, potential, budgets, NeedsShare(600));
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(Uids(*s), std::vector<std::string>{"free"});
  EXPECT_EQ(s->pdb_violations, 0);

  // When only the protected pod can make room, it is a victim that violates the budget.
  const std::vector<core::Allocation> one = {Share("protected", 0, 600)};
  const std::vector<PotentialVictim> only = {{.allocation = &one[0], .priority = 3, .pdbs = {0}}};
  auto forced = SelectVictimsOnNode(NodeWith(one), only, budgets, NeedsShare(600));
  ASSERT_TRUE(forced.has_value());
  EXPECT_EQ(Uids(*forced), std::vector<std::string>{"protected"});
  EXPECT_EQ(forced->pdb_violations, 1);

  // A budget allowing one disruption covers the most important of two covered pods only.
  const std::vector<core::Allocation> two = {Share("a", 0, 500), Share("b", 0, 500)};
  const std::vector<int32_t> one_left = {1};
  const std::vector<PotentialVictim> both = {{.allocation = &two[0], .priority = 2, .pdbs = {0}},
                                             {.allocation = &two[1], .priority = 1, .pdbs = {0}}};
  auto all = SelectVictimsOnNode(NodeWith(two), both, one_left, NeedsShare(1000));
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(Uids(*all), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(all->pdb_violations, 1);
}

TEST(PreemptionTest, PickCandidateFollowsKubeSchedulersOrder) {
  auto set = [](std::string node, int32_t violations, int32_t highest, int64_t sum, size_t count, int64_t start) {
    VictimSet s{.node = common::NodeName(std::move(node)),
                .pdb_violations = violations,
                .highest_priority = highest,
                .priority_sum = sum,
                .highest_start_ms = start};
    for (size_t i = 0; i < count; ++i) {
      s.victims.push_back(common::PodUid("v" + std::to_string(i)));
    }
    return s;
  };
  struct Case {
    std::vector<VictimSet> candidates;
    size_t want;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{set("a", 1, 0, 0, 1, 0), set("b", 0, 9, 99, 5, 0)}, 1, "fewest PDB violations first"},
      {{set("a", 0, 5, 10, 1, 0), set("b", 0, 3, 50, 4, 0)}, 1, "then the lowest highest priority"},
      {{set("a", 0, 3, 60, 1, 0), set("b", 0, 3, 50, 4, 0)}, 1, "then the smallest priority sum"},
      {{set("a", 0, 3, 50, 3, 0), set("b", 0, 3, 50, 2, 0)}, 1, "then the fewest victims"},
      {{set("a", 0, 3, 50, 2, 100), set("b", 0, 3, 50, 2, 200)}, 1, "then the latest start"},
      {{set("a", 0, 3, 50, 2, 100), set("b", 0, 3, 50, 2, 100)}, 0, "then the first"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PickCandidate(c.candidates), c.want) << c.why;
  }
}

}  // namespace
}  // namespace gpusched::sched
