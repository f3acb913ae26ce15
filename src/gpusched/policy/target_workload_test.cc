#include "gpusched/policy/target_workload.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::PodBuilder;
using gpusched::testing::View;

// Appends n copies of the pod to pods.
void Add(std::vector<core::PodRequest>& pods, const PodBuilder& pod, int n) {
  for (int i = 0; i < n; ++i) {
    pods.push_back(pod.Build());
  }
}

// The view with the listed GPUs marked unhealthy (the Node description is copied, not shared).
core::NodeView Unhealthy(core::NodeView v, std::initializer_list<size_t> gpus) {
  auto node = std::make_shared<core::Node>(*v.node);
  for (size_t i : gpus) {
    node->gpus[i].healthy = false;
  }
  v.node = std::move(node);
  return v;
}

TaskClass Class(int64_t cpu, int32_t gpu_count, int64_t gpu_milli, double weight,
                std::vector<std::string> models = {}) {
  return TaskClass{.cpu = common::MilliCpu{cpu},
                   .gpu_count = gpu_count,
                   .gpu_milli = common::MilliGpu{gpu_milli},
                   .models = std::move(models),
                   .weight = weight};
}

TargetWorkload Workload(std::vector<TaskClass> classes) {
  TargetWorkload m;
  m.classes = std::move(classes);
  return m;
}

TEST(TypicalPodsTest, Table) {
  struct WantClass {
    int64_t cpu = 0;
    int32_t gpu_count = 0;
    int64_t gpu_milli = 0;
    std::vector<std::string> models;
    int64_t pods = 0;
    double weight = 0;
  };
  struct Case {
    std::string name;
    std::vector<core::PodRequest> pods;
    double coverage = 0.95;
    std::vector<WantClass> want;
    int64_t want_distinct = 0;
    int64_t want_covered = 0;
  };
  // 100 pods in four classes, given smallest first so the sort has work to do.
  std::vector<core::PodRequest> hundred;
  Add(hundred, Pod("d").Cpu(16000).Gpus(2), 5);
  Add(hundred, Pod("c").Cpu(2000), 15);
  Add(hundred, Pod("b").Cpu(8000).Gpus(1), 30);
  Add(hundred, Pod("a").Cpu(4000).Share(470), 50);
  // Two classes of 10 pods each, the larger CPU first in the input.
  std::vector<core::PodRequest> tied;
  Add(tied, Pod("big").Cpu(8000).Share(500), 10);
  Add(tied, Pod("small").Cpu(2000).Share(500), 10);
  // Same CPU and share, one class limited to V100: two classes.
  std::vector<core::PodRequest> models;
  Add(models, Pod("any").Cpu(4000).Share(500), 3);
  Add(models, Pod("v100").Cpu(4000).Share(500).Models({"V100"}), 1);

  const std::vector<Case> cases = {
      // Sorted 50/30/15/5; need 100 x 0.95 = 95: 50 < 95, 80 < 95, 95 >= 95 -> stop after three classes.
      // Weights over the kept 95: 50/95, 30/95, 15/95. Gpus(1) is exclusive -> 1000 milli; a CPU pod -> 0/0.
      {.name = "coverage cut keeps the top classes covering 95 percent",
       .pods = hundred,
       .want = {{.cpu = 4000, .gpu_count = 1, .gpu_milli = 470, .pods = 50, .weight = 50.0 / 95},
                {.cpu = 8000, .gpu_count = 1, .gpu_milli = 1000, .pods = 30, .weight = 30.0 / 95},
                {.cpu = 2000, .gpu_count = 0, .gpu_milli = 0, .pods = 15, .weight = 15.0 / 95}},
       .want_distinct = 4,
       .want_covered = 95},
      // Need 100: the fourth class (5 pods, 2 whole GPUs) is kept too; weights over 100.
      {.name = "coverage 1 keeps every class",
       .pods = hundred,
       .coverage = 1.0,
       .want = {{.cpu = 4000, .gpu_count = 1, .gpu_milli = 470, .pods = 50, .weight = 0.50},
                {.cpu = 8000, .gpu_count = 1, .gpu_milli = 1000, .pods = 30, .weight = 0.30},
                {.cpu = 2000, .gpu_count = 0, .gpu_milli = 0, .pods = 15, .weight = 0.15},
                {.cpu = 16000, .gpu_count = 2, .gpu_milli = 1000, .pods = 5, .weight = 0.05}},
       .want_distinct = 4,
       .want_covered = 100},
      // Need 100 x 0.5 = 50: the first class alone covers 50.
      {.name = "low coverage keeps only the most common class",
       .pods = hundred,
       .coverage = 0.5,
       .want = {{.cpu = 4000, .gpu_count = 1, .gpu_milli = 470, .pods = 50, .weight = 1.0}},
       .want_distinct = 4,
       .want_covered = 50},
      // 10 and 10 tie on count; ties go by key, so cpu 2000 sorts before 8000. Need 20 x 0.5 = 10.
      {.name = "equal counts are ordered by key",
       .pods = tied,
       .coverage = 0.5,
       .want = {{.cpu = 2000, .gpu_count = 1, .gpu_milli = 500, .pods = 10, .weight = 1.0}},
       .want_distinct = 2,
       .want_covered = 10},
      // Need 4 x 0.95 = 3.8: 3 < 3.8 so the V100 class is kept; weights 3/4 and 1/4.
      {.name = "allowed models split a class",
       .pods = models,
       .want = {{.cpu = 4000, .gpu_count = 1, .gpu_milli = 500, .pods = 3, .weight = 0.75},
                {.cpu = 4000, .gpu_count = 1, .gpu_milli = 500, .models = {"V100"}, .pods = 1, .weight = 0.25}},
       .want_distinct = 2,
       .want_covered = 4},
      // Nothing to group.
      {.name = "no pods gives an empty workload", .pods = {}, .want = {}, .want_distinct = 0, .want_covered = 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const TargetWorkload m = TypicalPods(c.pods, TypicalPodsOptions{.coverage = c.coverage});
    EXPECT_EQ(m.total_pods, static_cast<int64_t>(c.pods.size()));
    EXPECT_EQ(m.distinct_classes, c.want_distinct);
    EXPECT_EQ(m.covered_pods, c.want_covered);
    ASSERT_EQ(m.classes.size(), c.want.size());
    for (size_t i = 0; i < c.want.size(); ++i) {
      SCOPED_TRACE("class " + std::to_string(i));
      EXPECT_EQ(m.classes[i].cpu.value(), c.want[i].cpu);
      EXPECT_EQ(m.classes[i].gpu_count, c.want[i].gpu_count);
      EXPECT_EQ(m.classes[i].gpu_milli.value(), c.want[i].gpu_milli);
      EXPECT_EQ(m.classes[i].models, c.want[i].models);
      EXPECT_EQ(m.classes[i].pods, c.want[i].pods);
      EXPECT_DOUBLE_EQ(m.classes[i].weight, c.want[i].weight);
    }
  }
}

// A class's memory is the mean of its pods' (memory is not part of the key: pods that differ only in memory are one
// class).
TEST(TypicalPodsTest, ClassMemoryIsTheMeanOfItsPods) {
  std::vector<core::PodRequest> pods;
  Add(pods, Pod("a").Cpu(1000).Gpus(1).Memory(1000), 2);
  Add(pods, Pod("a").Cpu(1000).Gpus(1).Memory(4000), 1);
  Add(pods, Pod("b").Cpu(2000).Memory(500), 1);
  const TargetWorkload m = TypicalPods(pods, TypicalPodsOptions{.coverage = 1.0});
  ASSERT_EQ(m.classes.size(), 2u);
  EXPECT_EQ(m.classes[0].pods, 3);
  EXPECT_EQ(m.classes[0].memory.value(), 2000);
  EXPECT_EQ(m.classes[1].memory.value(), 500);
}

TEST(FragmentationTest, Table) {
  struct Case {
    std::string name;
    TargetWorkload m;
    core::NodeView view;
    double want = 0;
  };
  // A node with 4 GPUs at 1000/500/200/0 free: idle = 1700.
  const auto node = [] { return View("n1").Gpus(4).Free({1000, 500, 200, 0}).CpuFree(32000); };
  const std::vector<Case> cases = {
      // A CPU-only class strands every idle GPU milli: frag = idle = 1700.
      {.name = "CPU-only class counts all idle milli",
       .m = Workload({Class(4000, 0, 0, 1.0)}),
       .view = node().Build(),
       .want = 1700},
      // No GPU has >= 600 free -> cannot host -> frag = idle = 500 + 200 + 300 + 0 = 1000.
      {.name = "GPU class that cannot fit counts all idle milli",
       .m = Workload({Class(4000, 1, 600, 1.0)}),
       .view = View("n1").Gpus(4).Free({500, 200, 300, 0}).CpuFree(32000).Build(),
       .want = 1000},
      // GPUs 0 and 1 host 300, but 4000 CPU free < 8000 -> Q4 -> frag = idle = 1700.
      {.name = "class lacking CPU counts all idle milli",
       .m = Workload({Class(8000, 1, 300, 1.0)}),
       .view = node().CpuFree(4000).Build(),
       .want = 1700},
      // Q3: 300 fits GPUs 0 (1000) and 1 (500); too small are GPU 2 (200) and 3 (0) -> frag = 200 + 0 = 200.
      {.name = "Q3 share counts only GPUs below the class milli",
       .m = Workload({Class(4000, 1, 300, 1.0)}),
       .view = node().Build(),
       .want = 200},
      // Q3: 2 whole GPUs fit GPUs 0 and 1 (1000 each); GPU 2 (500) and 3 (0) too small -> frag = 500.
      {.name = "Q3 whole GPUs counts partly used GPUs",
       .m = Workload({Class(8000, 2, 1000, 1.0)}),
       .view = View("n1").Gpus(4).Free({1000, 1000, 500, 0}).CpuFree(32000).Build(),
       .want = 500},
      // 2 whole GPUs, only GPU 0 fully free: 1 < 2 -> cannot host -> frag = idle = 1700.
      {.name = "too few fully free GPUs counts all idle milli",
       .m = Workload({Class(8000, 2, 1000, 1.0)}),
       .view = node().Build(),
       .want = 1700},
      // Class limited to V100 on an A100 node: no usable GPU -> frag = idle = 1700.
      {.name = "class of another model counts all idle milli",
       .m = Workload({Class(4000, 1, 300, 1.0, {"V100"})}),
       .view = node().Build(),
       .want = 1700},
      // GPUs 0,1 A100 (1000 free each), 2,3 T4 (500, 100). Class 300 on T4: GPU 2 fits -> Q3; the A100s cannot
      // host it and GPU 3 is too small -> frag = 1000 + 1000 + 100 = 2100.
      {.name = "GPUs of a model the class cannot use count as fragment",
       .m = Workload({Class(4000, 1, 300, 1.0, {"T4"})}),
       .view = View("n1").Gpus(2, "A100").Gpus(2, "T4", 16384).Free({1000, 1000, 500, 100}).CpuFree(32000).Build(),
       .want = 2100},
      // GPU 0 (1000) unhealthy: idle = 500 + 200 + 0 = 700 for the CPU-only class.
      {.name = "unhealthy GPU is not idle",
       .m = Workload({Class(4000, 0, 0, 1.0)}),
       .view = Unhealthy(node().Build(), {0}),
       .want = 700},
      // CPU-only 0.5 x 1700 = 850; share 300 (Q3) 0.3 x 200 = 60; 1 whole GPU fits GPU 0 (Q3), smaller are
      // 500 + 200 + 0 = 700 -> 0.2 x 700 = 140. F = 850 + 60 + 140 = 1050.
      {.name = "weighted sum over classes",
       .m = Workload({Class(4000, 0, 0, 0.5), Class(4000, 1, 300, 0.3), Class(8000, 1, 1000, 0.2)}),
       .view = node().Build(),
       .want = 1050},
      // Tied to A100 (usable here) 0.5 x 200; tied to V100 or T4 (not here) 0.3 x 1700; CPU-only 0.2 x 1700.
      // F = 100 + 510 + 340 = 950.
      {.name = "classes tied to this node's model and to others",
       .m = Workload(
           {Class(4000, 1, 300, 0.5, {"A100"}), Class(4000, 1, 300, 0.3, {"V100", "T4"}), Class(4000, 0, 0, 0.2)}),
       .view = node().Build(),
       .want = 950},
      // Empty node (8 x 1000, CPU 64000): share 470 fits everywhere -> 0; CPU class -> 0.4 x 8000 = 3200.
      {.name = "empty node fragments only for CPU-only classes",
       .m = Workload({Class(4000, 1, 470, 0.6), Class(2000, 0, 0, 0.4)}),
       .view = View("n1").Gpus(8).Build(),
       .want = 3200},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_DOUBLE_EQ(NodeFragmentation(c.m, c.view), c.want);
    // The index fgd scores with gives the same F (one-model nodes through it, mixed nodes through the above).
    const FragmentationIndex index(std::make_shared<const TargetWorkload>(c.m));
    std::vector<int64_t> free;
    for (const auto& g : c.view.gpus) {
      free.push_back(g.free.value());
    }
    EXPECT_DOUBLE_EQ(Fragmentation(index, c.view, c.view.cpu_free, free), c.want);
  }
}

TEST(FragmentationTest, HypotheticalStateOverridesTheView) {
  const TargetWorkload m = Workload({Class(8000, 1, 300, 1.0)});
  const core::NodeView view = View("n1").Gpus(4).CpuFree(32000).Build();  // all free: F = 0
  struct Case {
    std::string name;
    int64_t cpu_free = 0;
    std::vector<int64_t> free;
    double want = 0;
  };
  const std::vector<Case> cases = {
      // GPU 0 at 100 < 300, others fit -> Q3, frag = 100.
      {.name = "hypothetical GPU state", .cpu_free = 32000, .free = {100, 1000, 1000, 1000}, .want = 100},
      // 4000 CPU < 8000 -> Q4, frag = idle = 100 + 3000 = 3100.
      {.name = "hypothetical CPU state", .cpu_free = 4000, .free = {100, 1000, 1000, 1000}, .want = 3100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_DOUBLE_EQ(Fragmentation(m, view, common::MilliCpu{c.cpu_free}, c.free), c.want);
    EXPECT_DOUBLE_EQ(Fragmentation(FragmentationIndex(std::make_shared<const TargetWorkload>(m)), view,
                                   common::MilliCpu{c.cpu_free}, c.free),
                     c.want);
  }
  EXPECT_DOUBLE_EQ(NodeFragmentation(m, view), 0);
}

}  // namespace
}  // namespace gpusched::policy
