#include "gpusched/policy/gpu_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::GpuIndices;
using gpusched::testing::Pod;
using gpusched::testing::View;
using ::testing::HasSubstr;

// The view with the listed GPUs marked unhealthy (the Node description is copied, not shared).
core::NodeView Unhealthy(core::NodeView v, std::initializer_list<size_t> gpus) {
  auto node = std::make_shared<core::Node>(*v.node);
  for (size_t i : gpus) {
    node->gpus[i].healthy = false;
  }
  v.node = std::move(node);
  return v;
}

// The view with GPU i held exclusively by one pod, its free milli left as the builder set it.
core::NodeView Exclusive(core::NodeView v, size_t i) {
  v.gpus[i].exclusive = true;
  v.gpus[i].holders = 1;
  return v;
}

core::GpuRequest Share(std::string container, int64_t milli) {
  return core::GpuRequest{.container = std::move(container), .count = 1, .milli_per_gpu = common::MilliGpu{milli}};
}

core::GpuRequest Whole(std::string container, int32_t count) {
  return core::GpuRequest{
      .container = std::move(container), .count = count, .milli_per_gpu = common::kGpuMilli, .exclusive = true};
}

// The GPU indices of every container's allocation, in the order they were taken.
TEST(FitGpusTest, Table) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    Fit::Code want = Fit::Code::kFits;
    std::vector<std::string> want_reason;  // substrings of the reason; empty reason when it fits
  };
  const std::vector<Case> cases = {
      // GPU 1 has 500 free >= 450.
      {.name = "share fits on a partly used GPU",
       .view = View("n1").Gpus(2).Free({300, 500}).Build(),
       .pod = Pod("p").Share(450).Build()},
      // GPUs 0, 2, 3 are fully free: 3 >= 3.
      {.name = "whole GPUs fit on the fully free ones",
       .view = View("n1").Gpus(4).Free({1000, 300, 1000, 1000}).Build(),
       .pod = Pod("p").Gpus(3).Build()},
      // No GPU container: nothing to place on GPUs.
      {.name = "CPU-only pod fits on a node without GPUs",
       .view = View("c1").Build(),
       .pod = Pod("p").Cpu(4000).Build()},
      // Every GPU is a T4: 0 of 8 usable < 1 needed, and no eviction can change the model.
      {.name = "model not allowed is unresolvable",
       .view = View("n1").Gpus(8, "T4", 16384).Build(),
       .pod = Pod("p").Share(450).Models({"A100"}).Build(),
       .want = Fit::Code::kUnresolvable,
       .want_reason = {"needs 1 GPU(s) of model A100", "node has 8 GPU(s) (T4, 16384 MiB), 0 usable"}},
      // 32768 MiB asked > 16384 MiB per T4: no GPU of the node could ever hold it.
      {.name = "memory per GPU above the GPU's memory is unresolvable",
       .view = View("n1").Gpus(2, "T4", 16384).Build(),
       .pod = Pod("p").Share(500, 32768).Build(),
       .want = Fit::Code::kUnresolvable,
       .want_reason = {"needs 1 GPU(s) with 32768 MiB", "node has 2 GPU(s) (T4, 16384 MiB), 0 usable"}},
      // 4 GPUs asked > 2 on the node.
      {.name = "more GPUs than the node has is unresolvable",
       .view = View("n1").Gpus(2).Build(),
       .pod = Pod("p").Gpus(4).Build(),
       .want = Fit::Code::kUnresolvable,
       .want_reason = {"needs 4 GPU(s)", "node has 2 GPU(s) (A100, 81920 MiB), 2 usable"}},
      // GPUs 0 and 2 fully free: 2 < 3, but evicting the pods on GPUs 1 and 3 would help.
      {.name = "not enough fully free GPUs is unschedulable",
       .view = View("n1").Gpus(4).Free({1000, 600, 1000, 200}).Build(),
       .pod = Pod("p").Gpus(3).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"container main: needs 3 fully free GPU(s), 2 of 4 free"}},
      // 300 and 400 free < 450; the closest is GPU 1 with 400.
      {.name = "share larger than every GPU's free milli names the closest GPU",
       .view = View("n1").Gpus(2).Free({300, 400}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"needs 450 milli on 1 GPU(s)", "most free is GPU 1 (A100) with 400 milli and 81920 MiB free"}},
      // 700 milli free >= 300, but 2048 MiB free < 4096 MiB asked.
      {.name = "share lacking GPU memory is unschedulable",
       .view =
           [] {
             core::NodeView v = View("n1").Gpus(1).Free({700}).Build();
             v.gpus[0].memory_free = common::MiB{2048};
             return v;
           }(),
       .pod = Pod("p").Share(300, 4096).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"needs 300 milli and 4096 MiB", "GPU 0 (A100) with 700 milli and 2048 MiB free"}},
      // The only GPU shows 1000 free, but it is held exclusively: only the flag blocks the share.
      {.name = "exclusively held GPU is not shareable",
       .view = Exclusive(View("n1").Gpus(1).Build(), 0),
       .pod = Pod("p").Share(450).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"every usable GPU is held exclusively"}},
      // GPU 0 has 300 < 450; GPU 1 has 1000 but is unhealthy: 1 usable GPU, closest is GPU 0.
      {.name = "unhealthy GPU is never used for a share",
       .view = Unhealthy(View("n1").Gpus(2).Free({300}).Build(), {1}),
       .pod = Pod("p").Share(450).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"most free is GPU 0 (A100) with 300 milli"}},
      // GPU 1 is free but unhealthy: only GPU 0 could ever host a whole GPU, 1 usable < 2.
      {.name = "unhealthy GPU does not count toward whole GPUs",
       .view = Unhealthy(View("n1").Gpus(2).Build(), {1}),
       .pod = Pod("p").Gpus(2).Build(),
       .want = Fit::Code::kUnresolvable,
       .want_reason = {"needs 2 GPU(s)", "1 usable"}},
      // first (500) takes the tightest fitting GPU, GPU 1 (500 -> 0); second (500) then fits on GPU 0 (1000).
      {.name = "two shares fit one after the other",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod = Pod("p").Container(Share("first", 500)).Container(Share("second", 500)).Build()},
      // Each alone fits on GPU 0 (1000); first takes it whole, so second sees 0 of 2 fully free.
      {.name = "second whole GPU sees what the first container took",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod = Pod("p").Container(Whole("first", 1)).Container(Whole("second", 1)).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"container second: needs 1 fully free GPU(s), 0 of 2 free"}},
      // first (600) fits only GPU 0 (1000 -> 400); second (600) then sees 400 and 500: closest is GPU 1.
      {.name = "second share sees what the first container took",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod = Pod("p").Container(Share("first", 600)).Container(Share("second", 600)).Build(),
       .want = Fit::Code::kUnschedulable,
       .want_reason = {"container second: needs 600 milli", "most free is GPU 1 (A100) with 500 milli"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Fit fit = FitGpus(c.pod, c.view);
    EXPECT_EQ(fit.code, c.want) << fit.reason;
    EXPECT_EQ(fit.fits(), c.want == Fit::Code::kFits);
    if (c.want == Fit::Code::kFits) {
      EXPECT_EQ(fit.reason, "");
    }
    for (const std::string& part : c.want_reason) {
      EXPECT_THAT(fit.reason, HasSubstr(part));
    }
  }
}

TEST(SelectGpusTest, Table) {
  enum class Method { kBest, kWorst };
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    Method method = Method::kBest;
    std::vector<int32_t> want;        // GPU indices in the order taken
    std::vector<int64_t> want_milli;  // milli charged per GPU, same order
  };
  const std::vector<Case> cases = {
      // Fitting: GPU 0 (1000), 1 (600), 2 (500); GPU 3 (300) < 450. Least free -> GPU 2.
      {.name = "best takes the tightest fitting GPU",
       .view = View("n1").Gpus(4).Free({1000, 600, 500, 300}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = {2},
       .want_milli = {450}},
      // GPUs 1 and 2 both have 500: the lower index wins.
      {.name = "best breaks ties by lowest index",
       .view = View("n1").Gpus(3).Free({600, 500, 500}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want = {1},
       .want_milli = {450}},
      // GPU 0 (500) would be tightest but is unhealthy; GPU 1 (1000) is the only one left.
      {.name = "best skips an unhealthy GPU",
       .view = Unhealthy(View("n1").Gpus(2).Free({500}).Build(), {0}),
       .pod = Pod("p").Share(450).Build(),
       .want = {1},
       .want_milli = {450}},
      // Fitting: GPU 0 (600), 2 (800), 3 (500); most free -> GPU 2.
      {.name = "worst takes the most free fitting GPU",
       .view = View("n1").Gpus(4).Free({600, 300, 800, 500}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .method = Method::kWorst,
       .want = {2},
       .want_milli = {450}},
      // Fully free: GPUs 1, 3, 4 -> the lowest two, charged whole.
      {.name = "best takes whole GPUs at the lowest indices",
       .view = View("n1").Gpus(5).Free({300, 1000, 0, 1000, 1000}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = {1, 3},
       .want_milli = {1000, 1000}},
      // Same as above: whole GPUs ignore the share chooser.
      {.name = "worst takes whole GPUs at the lowest indices",
       .view = View("n1").Gpus(5).Free({300, 1000, 0, 1000, 1000}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .method = Method::kWorst,
       .want = {1, 3},
       .want_milli = {1000, 1000}},
      // 2 x 500 shared: fitting in ascending free order is GPU 2 (500), 1 (600), 3 (900), 0 (1000) -> 2, 1.
      {.name = "multi-GPU share takes the tightest GPUs",
       .view = View("n1").Gpus(4).Free({1000, 600, 500, 900}).Build(),
       .pod = Pod("p")
                  .Container(core::GpuRequest{.container = "main", .count = 2, .milli_per_gpu = common::MilliGpu{500}})
                  .Build(),
       .want = {2, 1},
       .want_milli = {500, 500}},
      // first: tightest of GPU 0 (1000), GPU 1 (600) -> 1 (600 -> 100); second: only GPU 0 still fits 500.
      {.name = "second container sees what the first took",
       .view = View("n1").Gpus(2).Free({1000, 600}).Build(),
       .pod = Pod("p").Container(Share("first", 500)).Container(Share("second", 500)).Build(),
       .want = {1, 0},
       .want_milli = {500, 500}},
      // Filter's simulation: first (500) takes the tightest GPU 1 (500 -> 0), second (600) GPU 0 -> fits.
      // worst alone would put first on GPU 0 (1000 -> 500), leaving 500 and 500 < 600 for second; so first falls
      // back to the tightest GPU 1 and second takes GPU 0.
      {.name = "worst falls back to the tightest GPU when its pick would starve a later container",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod = Pod("p").Container(Share("first", 500)).Container(Share("second", 600)).Build(),
       .method = Method::kWorst,
       .want = {1, 0},
       .want_milli = {500, 600}},
      // first (300): worst picks GPU 0 (1000 -> 700); second (600) still fits GPU 0 (700), so the pick stands.
      {.name = "worst keeps its pick when later containers still fit",
       .view = View("n1").Gpus(2).Free({1000, 500}).Build(),
       .pod = Pod("p").Container(Share("first", 300)).Container(Share("second", 600)).Build(),
       .method = Method::kWorst,
       .want = {0, 0},
       .want_milli = {300, 600}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(FitGpus(c.pod, c.view).fits());
    const auto allocs = c.method == Method::kBest ? SelectGpusBest(c.pod, c.view) : SelectGpusWorst(c.pod, c.view);
    EXPECT_EQ(GpuIndices(allocs), c.want);
    std::vector<int64_t> milli;
    for (const auto& a : allocs) {
      for (const auto& g : a.gpus) {
        milli.push_back(g.milli.value());
        EXPECT_EQ(g.uuid, c.view.node->gpus[static_cast<size_t>(g.index)].uuid);
      }
    }
    EXPECT_EQ(milli, c.want_milli);
  }
}

TEST(SelectGpusTest, RandomTakesOnlyFittingGpusAndEveryOne) {
  // Fitting 450: GPU 0 (1000), 2 (600), 3 (500); GPU 1 (300) never. Each fitting GPU has chance 1/3 per draw.
  const core::NodeView view = View("n1").Gpus(4).Free({1000, 300, 600, 500}).Build();
  const core::PodRequest pod = Pod("p").Share(450).Build();
  constexpr uint64_t kSeed = 42;
  common::Rng rng(kSeed);
  std::vector<int> chosen(4, 0);
  for (int draw = 0; draw < 200; ++draw) {
    const auto allocs = SelectGpusRandom(pod, view, rng);
    ASSERT_EQ(GpuIndices(allocs).size(), 1u) << "seed " << kSeed;
    chosen[static_cast<size_t>(allocs[0].gpus[0].index)] += 1;
  }
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  EXPECT_GT(chosen[0], 0);
  EXPECT_EQ(chosen[1], 0);
  EXPECT_GT(chosen[2], 0);
  EXPECT_GT(chosen[3], 0);
}

// A GPU takes no more sharers than its node's device plugin has device ids for it (the kubelet would refuse the
// next one); whole-GPU requests and other GPUs are unaffected.
TEST(FitGpusTest, AGpuTakesNoMoreSharersThanItsDeviceIds) {
  core::NodeView view = View("n1").Gpus(2).Free({700, 1000}).Build();
  auto node = std::make_shared<core::Node>(*view.node);
  node->gpus[0].max_sharers = 2;
  node->gpus[1].max_sharers = 2;
  view.node = std::move(node);
  view.gpus[0].holders = 2;  // 300 milli held by two pods: full, with 700 milli free
  const core::PodRequest share = Pod("p").Share(100).Build();
  EXPECT_FALSE(GpuCanHost(share.containers[0], view, view.gpus, 0));
  EXPECT_TRUE(GpuCanHost(share.containers[0], view, view.gpus, 1));
  ASSERT_TRUE(FitGpus(share, view).fits());
  EXPECT_EQ(GpuIndices(SelectGpusBest(share, view)), (std::vector<int32_t>{1}));

  view.gpus[1].holders = 2;
  view.gpus[1].free = common::MilliGpu{800};
  const Fit fit = FitGpus(share, view);
  ASSERT_FALSE(fit.fits());
  EXPECT_THAT(fit.reason, HasSubstr("shared by as many pods as the node's device plugin admits (2 such GPU(s))"));

  // One sharer fewer and it fits again; no limit known (0) is no limit.
  view.gpus[1].holders = 1;
  EXPECT_TRUE(FitGpus(share, view).fits());
  view.gpus[1].holders = 50;
  auto unlimited = std::make_shared<core::Node>(*view.node);
  unlimited->gpus[1].max_sharers = 0;
  view.node = std::move(unlimited);
  EXPECT_TRUE(FitGpus(share, view).fits());
}

// Every share records the NUMA node of the GPU it takes (the node's inventory; -1 where it is unknown).
TEST(SelectGpusTest, SharesRecordTheGpusNumaNode) {
  core::NodeView view = View("n1").Gpus(4).Free({1000, 1000, 1000, 1000}).Build();
  auto node = std::make_shared<core::Node>(*view.node);
  node->gpus[0].numa_node = 0;
  node->gpus[1].numa_node = 0;
  node->gpus[2].numa_node = 1;
  view.node = std::move(node);
  const auto whole = SelectGpusBest(Pod("p").Gpus(4).Build(), view);
  ASSERT_EQ(whole.size(), 1u);
  ASSERT_EQ(whole[0].gpus.size(), 4u);
  for (const core::GpuShare& g : whole[0].gpus) {
    EXPECT_EQ(g.numa_node, g.index < 2 ? 0 : (g.index == 2 ? 1 : -1)) << "GPU " << g.index;
  }
  // GPU 3 has no known NUMA node, so its pairs score nothing: a share that opens a GPU breaks the least there.
  const auto shared = SelectGpusBest(Pod("q").Share(300).Build(), view);
  ASSERT_EQ(GpuIndices(shared), (std::vector<int32_t>{3}));
  EXPECT_EQ(shared[0].gpus[0].numa_node, -1);
  view.gpus[1].free = common::MilliGpu{500};  // the tightest fit now: GPU 1, on NUMA node 0
  view.gpus[1].holders = 1;
  const auto tight = SelectGpusBest(Pod("q").Share(300).Build(), view);
  ASSERT_EQ(GpuIndices(tight), (std::vector<int32_t>{1}));
  EXPECT_EQ(tight[0].gpus[0].numa_node, 0);
}

// shareWithin: a shared GPU whose sharers are of another group is no candidate, in Filter and in every way of
// choosing GPUs; the reason names shareWithin; whole GPUs and requests without a group are unaffected.
TEST(FitGpusTest, AShareOfAnotherGroupCannotJoinAGpuItsSharersHold) {
  const core::ShareGroup a = core::ShareGroupOf(core::ShareWithin::kNamespace, "team-a", "");
  const core::ShareGroup b = core::ShareGroupOf(core::ShareWithin::kNamespace, "team-b", "");
  core::NodeView view = View("n1").Gpus(2).Free({400, 1000}).Build();
  view.gpus[0].share_group = a;  // team-a holds 600 milli of GPU 0
  core::GpuRequest mine = Share("main", 300);
  mine.share_group = a;
  core::GpuRequest theirs = Share("main", 300);
  theirs.share_group = b;
  EXPECT_TRUE(GpuCanHost(mine, view, view.gpus, 0));
  EXPECT_FALSE(GpuCanHost(theirs, view, view.gpus, 0));
  EXPECT_TRUE(GpuCanHost(theirs, view, view.gpus, 1));
  EXPECT_TRUE(GpuCanHost(Share("main", 300), view, view.gpus, 0));  // no group: shares with anyone
  const core::PodRequest pod_b = Pod("b").Container(theirs).Build();
  EXPECT_EQ(GpuIndices(SelectGpusBest(pod_b, view)), (std::vector<int32_t>{1}));  // not the tightest GPU 0
  const core::PodRequest pod_a = Pod("a").Container(mine).Build();
  EXPECT_EQ(GpuIndices(SelectGpusBest(pod_a, view)), (std::vector<int32_t>{0}));
  // With GPU 1 taken by team-a too, team-b fits nowhere here, and the reason says why.
  view.gpus[1].free = common::MilliGpu{900};
  view.gpus[1].holders = 1;
  view.gpus[1].share_group = a;
  const Fit fit = FitGpus(pod_b, view);
  EXPECT_FALSE(fit.fits());
  EXPECT_THAT(fit.reason, HasSubstr("shareWithin"));
  EXPECT_TRUE(FitGpus(pod_a, view).fits());
  // A GPU of two groups' sharers takes no one with a group.
  view.gpus[0].share_group = core::kMixedShareGroup;
  EXPECT_FALSE(GpuCanHost(mine, view, view.gpus, 0));
}

// 100 % of a GPU's compute with a memory amount, not exclusive (KETI, gpusched.io/gpu-core 100 + memory, HAMi
// gpucores 100 + gpumem), is a share: it joins a GPU that only memory-only shares hold, takes only its memory, and
// leaves room for memory-only shares beside it. Only exclusive requests want whole GPUs.
TEST(FitGpusTest, AShareOfAllComputeIsAShareNotAWholeGpu) {
  core::GpuRequest all_compute = Share("main", 1000);
  all_compute.memory_per_gpu = common::MiB{8000};
  EXPECT_FALSE(WantsWhole(all_compute));
  EXPECT_TRUE(WantsWhole(Whole("main", 1)));
  core::NodeView view = View("n1").Gpus(1).Build();
  view.gpus[0].holders = 1;  // a memory-only share holds 4000 MiB, no compute
  view.gpus[0].memory_free = common::MiB{81920 - 4000};
  EXPECT_TRUE(GpuCanHost(all_compute, view, view.gpus, 0));
  const auto allocs = SelectGpusBest(Pod("p").Container(all_compute).Build(), view);
  ASSERT_EQ(allocs.size(), 1U);
  ASSERT_EQ(allocs[0].gpus.size(), 1U);
  EXPECT_FALSE(allocs[0].gpus[0].exclusive);
  EXPECT_EQ(allocs[0].gpus[0].milli, common::kGpuMilli);
  EXPECT_EQ(allocs[0].gpus[0].memory, common::MiB{8000}) << "its memory only, not the GPU's";
  // Beside it, with no compute left: a memory-only share fits, a compute share does not.
  view.gpus[0].holders = 2;
  view.gpus[0].free = common::MilliGpu{0};
  core::GpuRequest memory_only{.container = "main", .count = 1, .memory_per_gpu = common::MiB{2000}};
  EXPECT_TRUE(GpuCanHost(memory_only, view, view.gpus, 0));
  EXPECT_FALSE(GpuCanHost(Share("main", 100), view, view.gpus, 0));
}

}  // namespace
}  // namespace gpusched::policy
