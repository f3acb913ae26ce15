#include "gpusched/sim/gpu_allocator_baseline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <vector>

#include "gpusched/core/node_view.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/topology.h"
#include "gpusched/sim/simulator.h"
#include "gpusched/sim/topology_templates.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

core::Node Templated(const std::string& model, int gpus) {
  core::Node n{.name = common::NodeName("n"), .cpu = common::MilliCpu{96000}, .memory = common::MiB{1 << 20}};
  for (int i = 0; i < gpus; ++i) {
    n.gpus.push_back(core::Gpu{
        .index = i, .uuid = common::GpuUuid("GPU-" + std::to_string(i)), .model = model, .memory = common::MiB{16384}});
  }
  ApplyTopologyTemplate(n);
  return n;
}

std::vector<size_t> Range(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = i;
  }
  return v;
}

// Worked by hand on the 4-GPU V100 template: NVLink pairs 0-1 and 2-3 (NV2: 200), the other pairs one host bridge
// (PHB: 30).
TEST(GoGpuAllocatorTest, ChoicesByHand) {
  const core::Node pairs = Templated("V100M16", 4);
  ASSERT_EQ(policy::PairScore(pairs, 0, 1), 200);
  ASSERT_EQ(policy::PairScore(pairs, 0, 2), 30);
  // Two of four: divisions {01,23} = 400, {02,13} = 60, {03,12} = 60; the best division's best group, the first
  // on ties: 0-1.
  EXPECT_EQ(GoGpuAllocatorChoice(pairs, Range(4), 2), (std::vector<size_t>{0, 1}));
  // One GPU: the first available, whatever it breaks (ours would take 3, the broken pair's other half).
  const std::vector<size_t> without_2 = {0, 1, 3};
  EXPECT_EQ(GoGpuAllocatorChoice(pairs, without_2, 1), (std::vector<size_t>{0}));
  // Two of {0, 1, 3}: padded to {0, 1, 3, _}; divisions {01, 3_} = 200, {03, 1_} = 30, {0_, 13} = 30: 0-1.
  EXPECT_EQ(GoGpuAllocatorChoice(pairs, without_2, 2), (std::vector<size_t>{0, 1}));
  // Three of four, padded with two placeholders (a group holds none or both): every division scores 260 (one pair
  // and two host-bridge links), and the first found is {012, 3__}.
  EXPECT_EQ(GoGpuAllocatorChoice(pairs, Range(4), 3), (std::vector<size_t>{0, 1, 2}));
  // All of them.
  EXPECT_EQ(GoGpuAllocatorChoice(pairs, Range(4), 4), Range(4));
}

// On the cube-mesh, four GPUs come as one of the two fully NVLinked quads, as ours; a pair as an NV2 pair.
TEST(GoGpuAllocatorTest, CubeMeshQuadsAndPairs) {
  const core::Node mesh = Templated("V100M32", 8);
  const std::vector<size_t> quad = GoGpuAllocatorChoice(mesh, Range(8), 4);
  EXPECT_TRUE(policy::FullyNvlinked(mesh, quad));
  EXPECT_EQ(policy::SetScore(mesh, quad), policy::SetScore(mesh, policy::ChooseWholeGpus(mesh, Range(8), 4)));
  const std::vector<size_t> pair = GoGpuAllocatorChoice(mesh, Range(8), 2);
  EXPECT_EQ(policy::PairScore(mesh, pair[0], pair[1]), 200);
  // Every size on every subset of a 6-GPU set: a feasible answer of the right size, drawn from the available ones.
  for (uint32_t mask = 1; mask < 256; ++mask) {
    std::vector<size_t> available;
    for (size_t i = 0; i < 8; ++i) {
      if ((mask >> i) & 1U) {
        available.push_back(i);
      }
    }
    for (size_t size = 1; size <= available.size(); ++size) {
      const std::vector<size_t> got = GoGpuAllocatorChoice(mesh, available, size);
      ASSERT_EQ(got.size(), size) << "mask " << mask;
      for (size_t g : got) {
        EXPECT_NE(std::find(available.begin(), available.end(), g), available.end());
      }
      EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
      EXPECT_EQ(std::set<size_t>(got.begin(), got.end()).size(), got.size());
    }
  }
}

// In the simulator: the node is the policy's, the whole GPUs the library's; every placement stays feasible (the run
// would fail on an infeasible bind), and a 2-GPU pod on a V100 pair node gets the pair.
TEST(GoGpuAllocatorTest, RunsInTheSimulator) {
  Cluster cluster{.name = "pairs"};
  for (int i = 0; i < 4; ++i) {
    core::Node n = Templated("V100M16", 4);
    n.name = common::NodeName("pairs-" + std::to_string(i));
    cluster.nodes.push_back(n);
  }
  Workload w{.name = "mix"};
  for (int i = 0; i < 24; ++i) {
    w.pods.push_back(ToPodRequest(TracePod{.name = "p" + std::to_string(i),
                                           .cpu_milli = 1000,
                                           .memory_mib = 1024,
                                           .num_gpu = i % 3 == 0 ? 2 : 1,
                                           .gpu_milli = i % 3 == 2 ? 500 : 1000}));
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    auto go = RunOne(cluster, w, RunSpec{.policy = "bestfit", .seed = seed, .gpu_choice = GpuChoice::kGoGpuAllocator});
    ASSERT_TRUE(go.ok()) << go.status();
    EXPECT_GT(go->pods_scheduled, 0);
    EXPECT_GT(go->topology.multi_gpu_pods, 0);
  }
}

TEST(PolicyMixTest, Parse) {
  auto one = ParsePolicyMix("fgd");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1U);
  auto two = ParsePolicyMix("fgd:3+topology");
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2U);
  EXPECT_EQ((*two)[0].first, "fgd");
  EXPECT_EQ((*two)[0].second, 3);
  EXPECT_EQ((*two)[1].first, "topology");
  EXPECT_EQ((*two)[1].second, 1);
  for (const char* bad : {"fgd:x+topology", "fgd:0+binpack", "fgd+", "+fgd", "fgd:-1", "fgd:"}) {
    EXPECT_FALSE(ParsePolicyMix(bad).ok()) << bad;
  }
  // A mix runs; an unknown member is refused by name.
  Cluster cluster{.name = "one"};
  core::Node n = Templated("V100M16", 4);
  cluster.nodes.push_back(n);
  Workload w{.name = "w"};
  w.pods.push_back(ToPodRequest(TracePod{.name = "p", .cpu_milli = 1000, .num_gpu = 2, .gpu_milli = 1000}));
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  auto ran = RunOne(cluster, w, RunSpec{.policy = "fgd:3+topology:1", .tune = 0});
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_EQ(ran->pods_scheduled, 1);
  auto bad = RunOne(cluster, w, RunSpec{.policy = "fgd+nosuch", .tune = 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("nosuch"), std::string::npos);
}

}  // namespace
}  // namespace gpusched::sim
