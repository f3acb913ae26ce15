#include "gpusched/policy/dot_product_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakeDotProduct() {
  auto p = DotProductPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(DotProductPolicyTest, Score) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want = 0;
  };
  const std::vector<Case> cases = {
      // idle = 0 + 500 + 500 + 5 x 1000 = 6000.
      // dot = 32000/128000 x 4000/128000 + 6000/8000 x 470/8000 = 0.0078125 + 0.0440625 = 0.051875
      //   -> floor(100 x (1 - 0.0259375)) = floor(97.40625) = 97
      {.name = "sharing pod on a partly used node",
       .view = View("n1").Gpus(8).Free({0, 500, 500}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(470).Build(),
       .want = 97},
      // dot = 8000/128000 x 4000/128000 + 1000/8000 x 470/8000 = 0.001953125 + 0.00734375 = 0.009296875
      //   -> floor(100 x (1 - 0.0046484375)) = floor(99.53515625) = 99: the fuller node aligns less, scores higher
      {.name = "sharing pod on a nearly full node",
       .view = View("n1").Gpus(8).Free({0, 0, 0, 0, 0, 0, 500, 500}).CpuFree(8000).Build(),
       .pod = Pod("p").Cpu(4000).Share(470).Build(),
       .want = 99},
      // dot = 64000/128000 x 16000/128000 + 8000/8000 x 4 x 1000/8000 = 0.0625 + 0.5 = 0.5625
      //   -> floor(100 x (1 - 0.28125)) = floor(71.875) = 71
      {.name = "whole GPUs on an idle node",
       .view = View("n1").Gpus(8).Build(),
       .pod = Pod("p").Cpu(16000).Gpus(4).Build(),
       .want = 71},
      // dot = 64000/128000 x 8000/128000 + 8000/8000 x 0 = 0.03125 -> floor(100 x (1 - 0.015625)) = floor(98.4375)
      //   = 98
      {.name = "CPU-only pod", .view = View("n1").Gpus(8).Build(), .pod = Pod("p").Cpu(8000).Build(), .want = 98},
      // cpu_free 2000 < 4000 asked: no node vector -> 0.
      {.name = "node lacking CPU scores 0",
       .view = View("n1").Gpus(8).CpuFree(2000).Build(),
       .pod = Pod("p").Cpu(4000).Share(470).Build(),
       .want = 0},
  };
  const auto policy = MakeDotProduct();
  EXPECT_EQ(policy->Name(), "dotprod");
  EXPECT_FALSE(policy->NormalizesScores());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);
  }
}

TEST(DotProductPolicyTest, SelectGpusIsBestFit) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<int32_t> want;
  };
  const std::vector<Case> cases = {
      // Fitting 450: GPU 0 (1000), 1 (600), 2 (500); least free -> GPU 2.
      {.name = "share takes the tightest GPU",
       .view = View("n1").Gpus(4).Free({1000, 600, 500, 300}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = {2}},
      // Fully free: GPUs 1, 2, 3 -> the lowest two.
      {.name = "whole GPUs take the lowest indices",
       .view = View("n1").Gpus(4).Free({300}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = {1, 2}},
  };
  const auto policy = MakeDotProduct();
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
