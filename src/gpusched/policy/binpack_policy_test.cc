#include "gpusched/policy/binpack_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakeBinpack() {
  auto p = BinpackPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

std::unique_ptr<PlacementPolicy> MakeSpread() {
  auto p = SpreadPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(BinpackSpreadPolicyTest, Score) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want_usage = 0;   // UsageAfterPercent = binpack's score
    int64_t want_spread = 0;  // 100 - usage
  };
  const std::vector<Case> cases = {
      // GPU pod: capacity 8 x 1000 = 8000; allocated 8000 - 6500 idle = 1500; + 470 = 1970 -> 1970 x 100 / 8000
      //   = 24.6 -> 24; spread 100 - 24 = 76
      {.name = "sharing pod on a partly used node",
       .view = View("n1").Gpus(8).Free({0, 500}).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want_usage = 24,
       .want_spread = 76},
      // 0 allocated + 2 x 1000 = 2000 -> 2000 x 100 / 8000 = 25; spread 75
      {.name = "whole GPUs on an idle node",
       .view = View("n1").Gpus(8).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want_usage = 25,
       .want_spread = 75},
      // allocated 8000 - 530 = 7470; + 470 = 7940 -> 99.25 -> 99; spread 1
      {.name = "pod that nearly fills the node",
       .view = View("n1").Gpus(8).Free({0, 0, 0, 0, 0, 0, 0, 530}).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want_usage = 99,
       .want_spread = 1},
      // CPU pod: capacity 64000; used 64000 - 32000 = 32000; + 8000 = 40000 -> 62.5 -> 62; spread 38
      {.name = "CPU-only pod uses CPU",
       .view = View("n1").Gpus(8).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(8000).Build(),
       .want_usage = 62,
       .want_spread = 38},
      // used 64000 + 8000 = 72000 -> 112 -> clamped to 100; spread 0
      {.name = "overcommitted CPU is clamped",
       .view = View("c1").CpuFree(0).Build(),
       .pod = Pod("p").Cpu(8000).Build(),
       .want_usage = 100,
       .want_spread = 0},
  };
  const auto binpack = MakeBinpack();
  const auto spread = MakeSpread();
  EXPECT_EQ(binpack->Name(), "binpack");
  EXPECT_EQ(spread->Name(), "spread");
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(UsageAfterPercent(c.pod, c.view), c.want_usage);
    EXPECT_EQ(binpack->Score(c.pod, c.view, Snapshot{}), c.want_usage);
    EXPECT_EQ(spread->Score(c.pod, c.view, Snapshot{}), c.want_spread);
  }
}

TEST(BinpackSpreadPolicyTest, SelectGpus) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<int32_t> want_binpack;
    std::vector<int32_t> want_spread;
  };
  const std::vector<Case> cases = {
      // Fitting 450: GPU 0 (600), 2 (800), 3 (500); GPU 1 (300) too small.
      // binpack: least free -> GPU 3; spread: most free -> GPU 2.
      {.name = "share: binpack tightest, spread most free",
       .view = View("n1").Gpus(4).Free({600, 300, 800, 500}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want_binpack = {3},
       .want_spread = {2}},
      // GPUs 0 and 1 both have 800 free: both pick the lower index, GPU 0.
      {.name = "share: ties go to the lowest index",
       .view = View("n1").Gpus(2).Free({800, 800}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want_binpack = {0},
       .want_spread = {0}},
      // Fully free: GPUs 1, 2, 3 -> the lowest two for both.
      {.name = "whole GPUs take the lowest indices",
       .view = View("n1").Gpus(4).Free({300}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want_binpack = {1, 2},
       .want_spread = {1, 2}},
      // first (500): binpack takes GPU 1 (500 -> 0), second (600) then GPU 0. Spread would take GPU 0 (1000 -> 500)
      // and leave 500 and 500 < 600 for second, so it falls back to GPU 1 as well: both {1, 0}.
      {.name = "multi-container pod: spread never starves the later container",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod =
           Pod("p")
               .Container(core::GpuRequest{.container = "first", .count = 1, .milli_per_gpu = common::MilliGpu{500}})
               .Container(core::GpuRequest{.container = "second", .count = 1, .milli_per_gpu = common::MilliGpu{600}})
               .Build(),
       .want_binpack = {1, 0},
       .want_spread = {1, 0}},
  };
  const auto binpack = MakeBinpack();
  const auto spread = MakeSpread();
  common::Rng rng(1);
  const auto indices = [](const std::vector<core::ContainerAllocation>& allocs) {
    std::vector<int32_t> out;
    for (const auto& a : allocs) {
      for (const auto& g : a.gpus) {
        out.push_back(g.index);
      }
    }
    return out;
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(indices(binpack->SelectGpus(c.pod, c.view, rng)), c.want_binpack);
    EXPECT_EQ(indices(spread->SelectGpus(c.pod, c.view, rng)), c.want_spread);
  }
}

}  // namespace
}  // namespace gpusched::policy
