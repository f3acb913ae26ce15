#include "gpusched/policy/gpu_clustering_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakeClustering() {
  auto p = GpuClusteringPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(GpuClusteringPolicyTest, Score) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want = 0;
  };
  // score = base + floor(25 x (8000 - idle) / 8000); the sharing pod's tag is 0, k whole GPUs' tag is k.
  const std::vector<Case> cases = {
      // Only shares (tag 0) on the node -> base 75; idle = 530 + 7 x 1000 = 7530 -> 25 x 470 / 8000 = 1.47 -> 1.
      // 75 + 1 = 76
      {.name = "node holds only my tag",
       .view = View("n1").Gpus(8).Free({530}).Shape(0, 1).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 76},
      // Tags 0 and 1 -> base 50; idle = 530 + 0 + 6 x 1000 = 6530 -> 25 x 1470 / 8000 = 4.59 -> 4. 50 + 4 = 54
      {.name = "node holds my tag and others",
       .view = View("n1").Gpus(8).Free({530, 0}).Shape(0, 1).Shape(1, 1).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 54},
      // No GPU pods -> base 25; idle = 8000 -> 25 x 0 / 8000 = 0. 25 + 0 = 25
      {.name = "empty node", .view = View("n1").Gpus(8).Build(), .pod = Pod("p").Share(470).Build(), .want = 25},
      // Only a 2-GPU pod (tag 2) -> base 0; idle = 6000 -> 25 x 2000 / 8000 = 6.25 -> 6. 0 + 6 = 6
      {.name = "node holds only other tags",
       .view = View("n1").Gpus(8).Free({0, 0}).Shape(2, 1).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 6},
      // The pod asks 2 whole GPUs: tag 2 is the node's only tag -> 75; + 6 as above = 81
      {.name = "whole-GPU pod joins its own shape",
       .view = View("n1").Gpus(8).Free({0, 0}).Shape(2, 1).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = 81},
      // One whole GPU is tag 1, not the node's tag 2 -> base 0; + 6 = 6
      {.name = "one whole GPU is not the shape of two",
       .view = View("n1").Gpus(8).Free({0, 0}).Shape(2, 1).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .want = 6},
      // A 2-GPU node (idle 1000) still uses the 8000 constant: 25 x 7000 / 8000 = 21.875 -> 21; only tag 0 -> 75 + 21
      //   = 96
      {.name = "small node uses the 8000 milli constant",
       .view = View("n1").Gpus(2).Free({0, 1000}).Shape(0, 2).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 96},
      // CPU-only pods have no tag: 0 everywhere.
      {.name = "CPU-only pod scores 0",
       .view = View("n1").Gpus(8).Free({530}).Shape(0, 1).Build(),
       .pod = Pod("p").Cpu(4000).Build(),
       .want = 0},
  };
  const auto policy = MakeClustering();
  EXPECT_EQ(policy->Name(), "gpuclustering");
  EXPECT_FALSE(policy->NormalizesScores());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);
  }
}

TEST(GpuClusteringPolicyTest, SelectGpusIsBestFit) {
  // Fitting 450: GPU 0 (1000), 1 (600), 2 (500); GPU 3 (300) too small. Least free -> GPU 2.
  const core::NodeView view = View("n1").Gpus(4).Free({1000, 600, 500, 300}).Build();
  const auto policy = MakeClustering();
  common::Rng rng(1);
  const auto allocs = policy->SelectGpus(Pod("p").Share(450).Build(), view, rng);
  ASSERT_EQ(allocs.size(), 1u);
  ASSERT_EQ(allocs[0].gpus.size(), 1u);
  EXPECT_EQ(allocs[0].gpus[0].index, 2);
}

}  // namespace
}  // namespace gpusched::policy
