#include "gpusched/sim/topology_templates.h"

#include <gtest/gtest.h>

#include "gpusched/policy/topology.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

core::Node MakeNode(const std::string& model, int32_t gpus) {
  return ToNode(TraceNode{.name = model + "-" + std::to_string(gpus),
                          .cpu_milli = 96000,
                          .memory_mib = 786432,
                          .gpus = gpus,
                          .model = model});
}

TEST(TopologyTemplatesTest, TemplatesByModelAndCount) {
  struct Case {
    std::string model;
    int32_t gpus;
    std::string name;
    size_t largest_nvlink_group;  // of the empty node
  };
  const std::vector<Case> cases = {
      {"G3", 8, "nvswitch", 8},       {"G2", 8, "cube-mesh", 4},
      {"V100M32", 8, "cube-mesh", 4}, {"V100M16", 4, "nvlink-pairs", 2},
      {"T4", 4, "pcie", 1},           {"T4", 2, "pcie", 1},
      {"P100", 2, "pcie", 1},         {"A10", 1, "none", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model + "x" + std::to_string(c.gpus));
    core::Node n = MakeNode(c.model, c.gpus);
    EXPECT_EQ(TopologyTemplateName(n), c.name);
    ApplyTopologyTemplate(n);
    std::vector<size_t> all;
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      all.push_back(i);
      EXPECT_EQ(n.gpus[i].links.size(), n.gpus.size() - 1);
    }
    EXPECT_EQ(policy::LargestNvlinkGroup(n, all), c.largest_nvlink_group);
    // Links are symmetric.
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      for (size_t j = 0; j < n.gpus.size(); ++j) {
        if (i != j) {
          EXPECT_EQ(policy::PairScore(n, i, j), policy::PairScore(n, j, i));
        }
      }
    }
  }
  // Every GPU of the cube-mesh has 6 NVLinks, as on a DGX-1.
  core::Node mesh = MakeNode("V100M32", 8);
  ApplyTopologyTemplate(mesh);
  for (const core::Gpu& g : mesh.gpus) {
    int32_t links = 0;
    for (const core::GpuLink& l : g.links) {
      links += l.nvlinks;
    }
    EXPECT_EQ(links, 6) << "GPU " << g.index;
  }
}

// Nodes of 4 V100s as two NVLink pairs and only 1- and 2-GPU pods: a topology-aware scheduler lets a single GPU
// break at most one pair per node (it takes the broken pair's other half first), so every 2-GPU pod lands on an
// intact pair: all of them fully NVLinked. The topology-blind one (lowest indices) puts a 2-GPU pod across pairs
// after a single GPU took GPU 0.
TEST(TopologyTemplatesTest, AwareSchedulerPutsEveryPairPodOnAPair) {
  Cluster cluster{.name = "pairs"};
  for (int i = 0; i < 6; ++i) {
    core::Node n = MakeNode("V100M16", 4);
    n.name = common::NodeName("pairs-" + std::to_string(i));
    cluster.nodes.push_back(n);
  }
  ApplyTopologyTemplates(cluster);
  Workload w{.name = "mix"};
  for (int i = 0; i < 40; ++i) {
    w.pods.push_back(ToPodRequest(TracePod{.name = "p" + std::to_string(i),
                                           .cpu_milli = 1000,
                                           .memory_mib = 1024,
                                           .num_gpu = i % 2 == 0 ? 1 : 2,
                                           .gpu_milli = 1000}));
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  int64_t blind_split = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto aware = RunOne(cluster, w, RunSpec{.policy = "bestfit", .seed = seed});
    auto blind = RunOne(cluster, w, RunSpec{.policy = "bestfit", .seed = seed, .gpu_choice = GpuChoice::kFirstFit});
    ASSERT_TRUE(aware.ok()) << aware.status();
    ASSERT_TRUE(blind.ok()) << blind.status();
    ASSERT_GT(aware->topology.multi_gpu_pods, 0);
    EXPECT_EQ(aware->topology.nvlinkable, aware->topology.multi_gpu_pods);
    EXPECT_EQ(aware->topology.fully_nvlinked, aware->topology.multi_gpu_pods) << "seed " << seed;
    EXPECT_EQ(aware->topology.mean_pair_score, 200);  // NV2 on every pair
    blind_split += blind->topology.multi_gpu_pods - blind->topology.fully_nvlinked;
    // Topology costs no allocation here: the same GPUs are used in all.
    EXPECT_GE(aware->events.back().allocated_milli, blind->events.back().allocated_milli);
  }
  EXPECT_GT(blind_split, 0) << "the blind scheduler never split a pair: the test shows nothing";
}

}  // namespace
}  // namespace gpusched::sim
