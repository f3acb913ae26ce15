#include "gpusched/policy/best_fit_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakeBestFit() {
  auto p = BestFitPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(BestFitPolicyTest, Score) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want = 0;
  };
  // raw = 0.5 x (cpu_free - cpu) / 128000 + 0.5 x (idle - count x milli) / 8000; score = floor((1 - raw) x 100).
  const std::vector<Case> cases = {
      // idle = 0 + 500 + 500 + 5 x 1000 = 6000.
      // raw = 0.5 x 28000/128000 + 0.5 x 5530/8000 = 0.109375 + 0.345625 = 0.455 -> floor(54.5) = 54
      {.name = "sharing pod on a partly used node",
       .view = View("n1").Gpus(8).Free({0, 500, 500}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(470).Build(),
       .want = 54},
      // raw = 0.5 x 48000/128000 + 0.5 x (8000 - 4 x 1000)/8000 = 0.1875 + 0.25 = 0.4375 -> floor(56.25) = 56
      {.name = "whole GPUs on an idle node",
       .view = View("n1").Gpus(8).Build(),
       .pod = Pod("p").Cpu(16000).Gpus(4).Build(),
       .want = 56},
      // raw = 0.5 x 56000/128000 + 0.5 x 8000/8000 = 0.21875 + 0.5 = 0.71875 -> floor(28.125) = 28
      {.name = "CPU-only pod", .view = View("n1").Gpus(8).Build(), .pod = Pod("p").Cpu(8000).Build(), .want = 28},
      // The pod takes exactly what is left: raw = 0.5 x 0/128000 + 0.5 x (470 - 470)/8000 = 0 -> 100
      {.name = "exact fit scores 100",
       .view = View("n1").Gpus(8).Free({470, 0, 0, 0, 0, 0, 0, 0}).CpuFree(4000).Build(),
       .pod = Pod("p").Cpu(4000).Share(470).Build(),
       .want = 100},
      // 128000 CPU left on a 128-core node, 8 idle GPUs, CPU pod of 0: raw = 0.5 x 1 + 0.5 x 1 = 1 -> 0
      {.name = "nothing used and nothing asked scores 0",
       .view = View("n1").Gpus(8).Cpu(128000).Build(),
       .pod = Pod("p").Cpu(0).Build(),
       .want = 0},
  };
  const auto policy = MakeBestFit();
  EXPECT_EQ(policy->Name(), "bestfit");
  EXPECT_TRUE(policy->NormalizesScores());  // the runner min-max normalises, as KSS does
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);
  }
}

TEST(BestFitPolicyTest, SelectGpusIsBestFit) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<int32_t> want;
  };
  const std::vector<Case> cases = {
      // Fitting 450: GPU 0 (1000), 1 (600), 2 (500); GPU 3 (300) too small. Least free -> GPU 2.
      {.name = "share takes the tightest GPU",
       .view = View("n1").Gpus(4).Free({1000, 600, 500, 300}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = {2}},
      // GPUs 1 and 2 both have 500 free: the lower index wins.
      {.name = "ties go to the lowest index",
       .view = View("n1").Gpus(3).Free({1000, 500, 500}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = {1}},
      // Fully free: GPUs 1, 3, 4 -> the lowest two.
      {.name = "whole GPUs take the lowest indices",
       .view = View("n1").Gpus(5).Free({300, 1000, 0, 1000, 1000}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = {1, 3}},
  };
  const auto policy = MakeBestFit();
  common::Rng rng(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto allocs = policy->SelectGpus(c.pod, c.view, rng);
    ASSERT_EQ(allocs.size(), 1u);
    std::vector<int32_t> got;
    for (const auto& g : allocs[0].gpus) {
      got.push_back(g.index);
    }
    EXPECT_EQ(got, c.want);
  }
}

}  // namespace
}  // namespace gpusched::policy
