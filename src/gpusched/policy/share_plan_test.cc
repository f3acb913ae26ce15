#include "gpusched/policy/share_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace gpusched::policy {
namespace {

TaskClass Share(int64_t milli, double weight) {
  return TaskClass{.gpu_count = 1, .gpu_milli = common::MilliGpu{milli}, .pods = 1, .weight = weight};
}

TargetWorkload Workload(std::vector<TaskClass> classes) {
  TargetWorkload m;
  m.classes = std::move(classes);
  return m;
}

// Shares 470 (0.3), 320 (0.15), 650 (0.05) beside a whole-GPU class (0.5, not a share): the packer draws 12000
// 470s, 6000 320s and 2000 650s. Largest first: every 650 opens a GPU (350 left); each 470 either opens a GPU or
// fills the 530 another left (60 left): 6000 pairs; the 320s fill the 2000 rooms of 350 (30 left), then open GPUs
// of three (680, 360, 40 left): 1333 of them and one 320 alone.
TEST(SharePlanTest, CombinationsOfABestFitDecreasingPacking) {
  const SharePlan plan(Workload({TaskClass{.gpu_count = 1, .gpu_milli = common::MilliGpu{1000}, .weight = 0.5},
                                 Share(470, 0.3), Share(320, 0.15), Share(650, 0.05)}));
  const std::map<std::vector<int64_t>, int64_t> want = {
      {{650, 320}, 2000}, {{470, 470}, 6000}, {{320, 320, 320}, 1333}, {{320}, 1}};
  EXPECT_EQ(plan.combinations(), want);

  struct Case {
    int64_t used;
    int64_t share;
    bool follows;
  };
  for (const Case& c : std::vector<Case>{
           {0, 320, true},     // a free GPU always
           {470, 470, true},   // the second of a pair
           {650, 320, true},   // 320 into a 650's room
           {320, 650, true},   // and the other way round
           {320, 320, true},   // three 320s
           {640, 320, true},   //
           {470, 320, false},  // 320 next to a 470: 210 left that the plan never fills
           {650, 470, false},  // does not even fit, and is not planned
           {940, 470, false},  // a third 470
           {960, 320, false},  // a fourth 320
           {470, 230, true},   // 230 is no class of M: not covered
           {790, 320, true},   // 790 used is no subtotal of the plan: pods of other sizes, not judged
           {1000, 320, true},  // likewise (a full GPU hosts nothing anyway)
       }) {
    SCOPED_TRACE(testing::Message() << c.share << " onto " << c.used << " used");
    EXPECT_EQ(plan.Follows(c.used, c.share), c.follows);
  }
}

// Rare small shares fill the rooms of large ones: 18000 810s alone (190 left) and 2000 with a 160 (30 left).
TEST(SharePlanTest, SmallSharesCompleteSomeLargeOnes) {
  const SharePlan plan(Workload({Share(810, 0.9), Share(160, 0.1)}));
  const std::map<std::vector<int64_t>, int64_t> want = {{{810}, 16000}, {{810, 160}, 2000}};
  EXPECT_EQ(plan.combinations(), want);
  EXPECT_TRUE(plan.Follows(810, 160));
  EXPECT_TRUE(plan.Follows(160, 810));
  EXPECT_FALSE(plan.Follows(160, 160));
}

// Classes of equal milli (different CPU or models) are one share size; four quarters fill a GPU exactly.
TEST(SharePlanTest, ClassesOfEqualMilliAreMerged) {
  TaskClass a = Share(250, 0.5);
  a.cpu = common::MilliCpu{1000};
  TaskClass b = Share(250, 0.5);
  b.models = {"T4"};
  const SharePlan plan(Workload({a, b}));
  const std::map<std::vector<int64_t>, int64_t> want = {{{250, 250, 250, 250}, 5000}};
  EXPECT_EQ(plan.combinations(), want);
  EXPECT_TRUE(plan.Follows(750, 250));
  EXPECT_FALSE(plan.Follows(1000, 250));  // four quarters are a full GPU: a fifth is off the plan
  EXPECT_TRUE(plan.Follows(300, 250));    // 300 used is not quarters: not judged
}

// No single-GPU share in M (whole GPUs, multi-GPU, CPU only), or no M at all: an empty plan that every placement
// follows.
TEST(SharePlanTest, NoSharesNoPlan) {
  for (const SharePlan& plan :
       {SharePlan(), SharePlan(Workload({TaskClass{.gpu_count = 1, .gpu_milli = common::MilliGpu{1000}, .weight = 0.5},
                                         TaskClass{.gpu_count = 2, .gpu_milli = common::MilliGpu{500}, .weight = 0.25},
                                         TaskClass{.cpu = common::MilliCpu{4000}, .weight = 0.25}}))}) {
    EXPECT_TRUE(plan.empty());
    EXPECT_TRUE(plan.Follows(470, 320));
    EXPECT_TRUE(plan.Follows(0, 500));
  }
}

}  // namespace
}  // namespace gpusched::policy
