// Property test: 10^6 random operations (assume, confirm, forget, release, node add/remove), valid and invalid,
// over 100+ nodes; the invariant is checked after every step. The seed comes from GPUSCHED_SEED (default fixed)
// and is printed on failure, so any failure repeats exactly.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/testing/builders.h"

namespace gpusched::core {
namespace {

using common::MiB;
using common::MilliGpu;

uint64_t SeedFromEnv() {
  const char* s = std::getenv("GPUSCHED_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 20231121ULL;
}

int64_t StepsFromEnv() {
  const char* s = std::getenv("GPUSCHED_PROPERTY_STEPS");
  return s != nullptr ? std::strtoll(s, nullptr, 10) : 1000000;
}

Node RandomNode(common::Rng& rng, int id) {
  static const std::vector<std::pair<std::string, int64_t>> kModels = {{"T4", 15360}, {"A100", 81920}, {"V100", 32768}};
  const auto& [model, mem] = kModels[rng.Uniform(kModels.size())];
  const int32_t gpus = static_cast<int32_t>(std::vector<int>{0, 1, 2, 4, 8}[rng.Uniform(5)]);
  return testing::Node("node-" + std::to_string(id))
      .Gpus(gpus, model, mem)
      .Cpu(static_cast<int64_t>(8000 + rng.Uniform(8) * 8000))
      .Memory(static_cast<int64_t>(32768 + rng.Uniform(8) * 32768))
      .Build();
}

// A random allocation that may or may not fit (the state must reject what does not).
Allocation RandomAllocation(common::Rng& rng, const NodeView& v, const std::string& pod) {
  Allocation a{.pod = common::PodUid(pod),
               .node = v.name(),
               .cpu = common::MilliCpu{static_cast<int64_t>(rng.Uniform(6000))},
               .memory = MiB{static_cast<int64_t>(rng.Uniform(16384))}};
  const size_t n = v.gpus.size();
  if (n == 0 || rng.Uniform(5) == 0) {
    return a;  // CPU-only
  }
  ContainerAllocation c{.container = "main"};
  const uint64_t kind = rng.Uniform(3);
  const size_t count = kind == 2 ? 1 + rng.Uniform(std::min<size_t>(n, 3)) : 1;
  for (size_t k = 0; k < count; ++k) {
    const auto index = static_cast<int32_t>(rng.Uniform(n + 1));  // n = out of range, sometimes
    if (kind == 0) {                                              // share
      c.gpus.push_back(GpuShare{.index = index,
                                .milli = MilliGpu{static_cast<int64_t>(1 + rng.Uniform(700))},
                                .memory = MiB{static_cast<int64_t>(rng.Uniform(20000))}});
    } else {  // whole, exclusive
      c.gpus.push_back(GpuShare{.index = index, .milli = common::kGpuMilli, .exclusive = true});
    }
  }
  a.containers.push_back(std::move(c));
  return a;
}

TEST(ClusterStatePropertyTest, InvariantHoldsUnderRandomOperations) {
  const uint64_t seed = SeedFromEnv();
  const int64_t steps = StepsFromEnv();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun with GPUSCHED_SEED=" + std::to_string(seed) + ")");
  common::Rng rng(seed);
  ClusterState state;
  std::vector<std::string> names;
  int next_node = 0;
  for (; next_node < 120; ++next_node) {
    ASSERT_TRUE(state.AddNode(RandomNode(rng, next_node)).ok());
    names.push_back("node-" + std::to_string(next_node));
  }
  std::vector<std::string> pods;  // pods believed to hold allocations (may be stale after node removal)
  int next_pod = 0;
  int64_t accepted = 0, rejected = 0;
  // Our own model of the cluster total, kept independently of ClusterState.
  int64_t model_allocated = 0;

  for (int64_t step = 0; step < steps; ++step) {
    const uint64_t op = rng.Uniform(100);
    std::string touched;
    if (op < 45) {  // assume
      const std::string& node = names[rng.Uniform(names.size())];
      const NodeView* v = state.Find(common::NodeName(node));
      ASSERT_NE(v, nullptr);
      const uint64_t gen = v->generation;
      const std::string pod =
          rng.Uniform(50) == 0 && !pods.empty() ? pods[rng.Uniform(pods.size())] : "pod-" + std::to_string(next_pod++);
      Allocation a = RandomAllocation(rng, *v, pod);
      const int64_t milli = a.TotalMilli().value();
      common::Status s = state.Assume(a);
      if (s.ok()) {
        ++accepted;
        pods.push_back(pod);
        model_allocated += milli;
      } else {
        ++rejected;
        ASSERT_EQ(state.Find(common::NodeName(node))->generation, gen) << "rejected Assume changed the node: " << s;
      }
      touched = node;
    } else if (op < 60 && !pods.empty()) {  // confirm
      (void)state.Confirm(common::PodUid(pods[rng.Uniform(pods.size())]));
    } else if (op < 75 && !pods.empty()) {  // forget or release
      const size_t i = rng.Uniform(pods.size());
      const common::PodUid pod(pods[i]);
      const Allocation* a = state.FindAllocation(pod);
      const int64_t milli = a != nullptr ? a->TotalMilli().value() : 0;
      touched = a != nullptr ? a->node.str() : "";
      common::Status s = rng.Uniform(2) == 0 ? state.Forget(pod) : state.Release(pod);
      if (s.ok()) {
        model_allocated -= milli;
      }
      pods[i] = pods.back();
      pods.pop_back();
    } else if (op < 77) {  // remove a node, add another
      const size_t i = rng.Uniform(names.size());
      for (const auto& p : state.PodsOn(common::NodeName(names[i]))) {
        model_allocated -= state.FindAllocation(p)->TotalMilli().value();
      }
      ASSERT_TRUE(state.RemoveNode(common::NodeName(names[i])).ok());
      names[i] = "node-" + std::to_string(next_node);
      ASSERT_TRUE(state.AddNode(RandomNode(rng, next_node++)).ok());
      touched = names[i];
    } else {  // release a random (possibly unknown) pod
      const common::PodUid pod("pod-" + std::to_string(rng.Uniform(static_cast<uint64_t>(next_pod) + 10)));
      const Allocation* a = state.FindAllocation(pod);
      const int64_t milli = a != nullptr ? a->TotalMilli().value() : 0;
      touched = a != nullptr ? a->node.str() : "";
      if (state.Release(pod).ok()) {
        model_allocated -= milli;
      }
    }
    // The invariant after every step: the touched node (the only one an operation can change) is recomputed from
    // its allocations, and the cluster total matches our independent model. Every 10^4 steps, the whole cluster.
    if (!touched.empty()) {
      common::Status s = state.CheckNodeInvariants(common::NodeName(touched));
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    }
    ASSERT_EQ(state.AllocatedMilli().value(), model_allocated) << "step " << step;
    if (step % 10000 == 0) {
      common::Status s = state.CheckInvariants();
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    }
  }
  ASSERT_TRUE(state.CheckInvariants().ok());
  // Both paths were exercised.
  EXPECT_GT(accepted, steps / 20);
  EXPECT_GT(rejected, steps / 20);
  EXPECT_GE(state.NodeCount(), 100U);
}

}  // namespace
}  // namespace gpusched::core
