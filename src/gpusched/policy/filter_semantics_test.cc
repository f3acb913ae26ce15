// The filter semantics Genius offers, checked for EVERY policy in the registry: GPU count, memory per GPU, total GPU
// memory of the node, GPU model. A policy that overrides Filter must keep them; the shared fit (gpu_fit.h) is
// where they live.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/policy/registry.h"
#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

// Options every policy accepts (fgd needs a target workload).
PolicyOptions AllOptions() {
  const std::vector<core::PodRequest> pods = {Pod("a").Cpu(4000).Share(470).Build(),
                                              Pod("b").Cpu(8000).Gpus(1).Build()};
  return PolicyOptions{.target_workload = std::make_shared<const TargetWorkload>(TypicalPods(pods))};
}

core::GpuRequest Whole(std::string name, int32_t count, int64_t memory_mib) {
  return {.container = std::move(name),
          .count = count,
          .milli_per_gpu = common::kGpuMilli,
          .memory_per_gpu = common::MiB{memory_mib},
          .exclusive = true};
}

core::GpuRequest Shared(std::string name, int64_t milli, int64_t memory_mib) {
  return {.container = std::move(name),
          .count = 1,
          .milli_per_gpu = common::MilliGpu{milli},
          .memory_per_gpu = common::MiB{memory_mib}};
}

// A node of 2 A100 GPUs with 16384 MiB each: 32768 MiB of GPU memory in all.
core::NodeView TwoGpus() { return View("n").Gpus(2, "A100", 16384).Build(); }

TEST(FilterSemanticsTest, EveryPolicyKeepsGeniusFilterRules) {
  using Code = Fit::Code;
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    Code want = Code::kFits;
  };
  core::NodeView gpu0_memory_held = TwoGpus();
  gpu0_memory_held.gpus[0].memory_free = common::MiB{1000};  // GPU 0 shared, 15384 MiB of it taken
  gpu0_memory_held.gpus[0].free = common::MilliGpu{900};
  gpu0_memory_held.gpus[0].holders = 1;
  gpu0_memory_held.gpus[1] = gpu0_memory_held.gpus[0];

  const std::vector<Case> cases = {
      // GPU count
      {.name = "count: 2 GPUs on a 2-GPU node fit", .view = TwoGpus(), .pod = Pod("p").Gpus(2).Build()},
      {.name = "count: 4 GPUs on a 2-GPU node can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Gpus(4).Build(),
       .want = Code::kUnresolvable},
      {.name = "count: 2 GPUs with 1 free could fit after eviction",
       .view = View("n").Gpus(2, "A100", 16384).Free({0, 1000}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want = Code::kUnschedulable},
      {.name = "count: a share with every GPU too full could fit after eviction",
       .view = View("n").Gpus(2, "A100", 16384).Free({200, 300}).Build(),
       .pod = Pod("p").Share(500).Build(),
       .want = Code::kUnschedulable},
      // memory per GPU
      {.name = "memory: 16384 MiB per GPU on 16384 MiB GPUs fits",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Whole("main", 1, 16384)).Build()},
      {.name = "memory: 20000 MiB per whole GPU on 16384 MiB GPUs can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Whole("main", 1, 20000)).Build(),
       .want = Code::kUnresolvable},
      {.name = "memory: a 20000 MiB share on 16384 MiB GPUs can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Shared("main", 100, 20000)).Build(),
       .want = Code::kUnresolvable},
      {.name = "memory: a 4096 MiB share with 1000 MiB free per GPU could fit after eviction",
       .view = gpu0_memory_held,
       .pod = Pod("p").Container(Shared("main", 100, 4096)).Build(),
       .want = Code::kUnschedulable},
      // total GPU memory of the node (32768 MiB)
      {.name = "total: 2 x 16384 = 32768 MiB, the node's total, fits",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Whole("main", 2, 16384)).Build()},
      {.name = "total: 2 x 20000 = 40000 > 32768 MiB can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Whole("main", 2, 20000)).Build(),
       .want = Code::kUnresolvable},
      {.name = "total: 3 x 12000 = 36000 > 32768 MiB (each GPU could hold 12000) can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Whole("main", 3, 12000)).Build(),
       .want = Code::kUnresolvable},
      // three 300-milli shares would fit by compute on one GPU, but 3 x 12000 = 36000 > 32768 MiB
      {.name = "total: three containers of 12000 MiB shares can never fit",
       .view = TwoGpus(),
       .pod = Pod("p")
                  .Container(Shared("a", 300, 12000))
                  .Container(Shared("b", 300, 12000))
                  .Container(Shared("c", 300, 12000))
                  .Build(),
       .want = Code::kUnresolvable},
      {.name = "total: two containers of 12000 MiB shares fit, one per GPU",
       .view = TwoGpus(),
       .pod = Pod("p").Container(Shared("a", 300, 12000)).Container(Shared("b", 300, 12000)).Build()},
      // GPU model
      {.name = "model: allowed model fits",
       .view = TwoGpus(),
       .pod = Pod("p").Gpus(1).Models({"H100", "A100"}).Build()},
      {.name = "model: a model not in the list can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Gpus(1).Models({"H100"}).Build(),
       .want = Code::kUnresolvable},
      {.name = "model: a share of a model not in the list can never fit",
       .view = TwoGpus(),
       .pod = Pod("p").Share(100).Models({"T4"}).Build(),
       .want = Code::kUnresolvable},
  };
  const PolicyOptions options = AllOptions();
  const std::vector<std::string> names = PolicyNames();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE("policy " + name);
    const auto policy = MakePolicy(name, options);
    ASSERT_TRUE(policy.ok()) << policy.status();
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const Fit fit = (*policy)->Filter(c.pod, c.view);
      EXPECT_EQ(fit.code, c.want) << fit.reason;
      EXPECT_EQ(fit.reason.empty(), c.want == Code::kFits) << fit.reason;
    }
  }
}

}  // namespace
}  // namespace gpusched::policy
