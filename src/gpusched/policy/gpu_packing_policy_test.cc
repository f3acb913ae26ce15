#include "gpusched/policy/gpu_packing_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakePacking() {
  auto p = GpuPackingPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(GpuPackingPolicyTest, Score) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want = 0;
  };
  const std::vector<Case> cases = {
      // All 8 GPUs free: nF = 8 -> max(33 - 8, 8) = 25 (least preferred).
      {.name = "all-free 8-GPU node",
       .view = View("n1").Gpus(8).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 25},
      // All 2 GPUs free: nF = 2 -> max(33 - 2, 2) = 31.
      {.name = "all-free 2-GPU node",
       .view = View("n1").Gpus(2).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 31},
      // Ascending free: GPU 1 (200), GPU 0 (300) < 470 are skipped; GPU 2 (1000) is fresh -> max(50 - 1, 33) = 49.
      {.name = "fresh GPU on a used node",
       .view = View("n1").Gpus(8).Free({300, 200}).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 49},
      // GPU 0 (500) is skipped (< 1000); GPUs 1, 2, 3 are fresh -> max(50 - 3, 33) = 47.
      {.name = "whole GPUs on a used node",
       .view = View("n1").Gpus(8).Free({500}).Build(),
       .pod = Pod("p").Gpus(3).Build(),
       .want = 47},
      // Ascending: GPU 0 (600) fits, shared -> Σ floor(600 x 100 / 1000) = 60 -> max(100 - 60 / 10, 50) = 94.
      {.name = "shared GPU only",
       .view = View("n1").Gpus(8).Free({600, 800}).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 94},
      // GPU 0 (980): floor(980 x 100 / 1000) = 98 -> 98 / 10 = 9 (integer) -> max(100 - 9, 50) = 91.
      {.name = "barely used shared GPU",
       .view = View("n1").Gpus(8).Free({980}).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 91},
      // CPU-only pods: 0 on every node.
      {.name = "CPU-only pod scores 0",
       .view = View("n1").Gpus(8).Free({600}).Build(),
       .pod = Pod("p").Cpu(4000).Build(),
       .want = 0},
  };
  const auto policy = MakePacking();
  EXPECT_EQ(policy->Name(), "gpupacking");
  EXPECT_FALSE(policy->NormalizesScores());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);
  }
}

TEST(GpuPackingPolicyTest, PrefersSharedThenUsedThenIdle) {
  // The order the scores above imply, on one pod: shared GPU 94 > fresh GPU on a used node 49 > idle node 25.
  const core::PodRequest pod = Pod("p").Share(470).Build();
  const auto policy = MakePacking();
  const int64_t shared = policy->Score(pod, View("a").Gpus(8).Free({600}).Build(), Snapshot{});
  const int64_t used = policy->Score(pod, View("b").Gpus(8).Free({300}).Build(), Snapshot{});
  const int64_t idle = policy->Score(pod, View("c").Gpus(8).Build(), Snapshot{});
  EXPECT_GT(shared, used);
  EXPECT_GT(used, idle);
}

TEST(GpuPackingPolicyTest, SelectGpusIsBestFit) {
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
      // Fully free: GPUs 1, 3 -> both, lowest index first.
      {.name = "whole GPUs take the lowest indices",
       .view = View("n1").Gpus(4).Free({300, 1000, 0}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = {1, 3}},
  };
  const auto policy = MakePacking();
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
