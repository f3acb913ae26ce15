#include "gpusched/sim/whatif.h"
#include "gpusched/sim/why.h"

#include <gtest/gtest.h>

#include "gpusched/testing/builders.h"

#include <sstream>

namespace gpusched::sim {
namespace {

core::Node GpuNode(const std::string& name, int32_t gpus) {
  return testing::NodeBuilder(name).Gpus(gpus, "A100", 40960).Cpu(32000).Memory(131072).Build();
}

core::PodRequest Whole(int32_t count) {
  core::PodRequest p{.cpu = common::MilliCpu{1000}, .memory = common::MiB{1024}};
  p.containers.push_back(core::GpuRequest{
      .container = "main", .count = count, .milli_per_gpu = common::MilliGpu{1000}, .exclusive = true});
  return p;
}

core::PodUpdate Running(const std::string& uid, const std::string& node, int32_t gpu) {
  core::PodUpdate p{.uid = common::PodUid(uid), .key = "default/" + uid, .node_name = node};
  p.annotated = true;
  p.allocation =
      core::Allocation{.pod = common::PodUid(uid),
                       .node = common::NodeName(node),
                       .cpu = common::MilliCpu{1000},
                       .memory = common::MiB{1024},
                       .containers = {core::ContainerAllocation{
                           .container = "main",
                           .gpus = {core::GpuShare{.index = gpu,
                                                   .uuid = common::GpuUuid("GPU-" + node + "-" + std::to_string(gpu)),
                                                   .milli = common::MilliGpu{1000},
                                                   .memory = common::MiB{40960},
                                                   .exclusive = true}}}},
                       .id = 7};
  return p;
}

// node-a (4 GPUs) and node-b (2 GPUs) each run a pod on GPU 0. "one" (1 GPU) then "three" (3 GPUs): binpack puts
// "one" on the fuller node-b (100 % after, against 50 %) and "three" fits on node-a; spread puts "one" on node-a and
// "three" then fits nowhere.
WhatIfCluster Cluster() {
  WhatIfCluster c;
  c.nodes = {GpuNode("node-a", 4), GpuNode("node-b", 2)};
  c.pods = {Running("u-1", "node-a", 0), Running("u-2", "node-b", 0)};
  return c;
}

TEST(WhatIfTest, PoliciesDifferByHand) {
  const WhatIfCluster cluster = Cluster();
  const std::vector<WhatIfPod> pods = {{.name = "one", .source = "f.yaml:1", .request = Whole(1)},
                                       {.name = "three", .source = "f.yaml:12", .request = Whole(3)}};
  const WhatIfSummary summary = SummarizeCluster(cluster);
  EXPECT_EQ(summary.nodes, 2);
  EXPECT_EQ(summary.gpus, 6);
  EXPECT_EQ(summary.allocated_milli, 2000);
  EXPECT_EQ(summary.pods_charged, 2);
  auto out = WhatIf(cluster, pods, {"spread", "binpack"}, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2U);
  const WhatIfOutcome& spread = (*out)[0];
  const WhatIfOutcome& binpack = (*out)[1];
  EXPECT_EQ(spread.placed, 1);
  EXPECT_EQ(spread.placements[0].allocation->node.str(), "node-a");
  EXPECT_FALSE(spread.placements[1].allocation.has_value());
  EXPECT_NE(spread.placements[1].reason.find("0/2 nodes are available"), std::string::npos)
      << spread.placements[1].reason;
  EXPECT_EQ(binpack.placed, 2);
  EXPECT_EQ(binpack.placements[0].allocation->node.str(), "node-b");
  EXPECT_EQ(binpack.placements[1].allocation->node.str(), "node-a");
  // GPU 0 is held: "three" gets 1, 2 and 3.
  const auto& gpus = binpack.placements[1].allocation->containers[0].gpus;
  ASSERT_EQ(gpus.size(), 3U);
  EXPECT_EQ(gpus[0].index, 1);
  std::ostringstream text;
  PrintWhatIf(text, summary, pods, *out);
  EXPECT_NE(text.str().find("under binpack (places the most)"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("nothing was written"), std::string::npos);
  EXPECT_NE(text.str().find("f.yaml:12"), std::string::npos);
  // Each policy starts from the live state: the outcomes do not depend on the order of the policies.
  auto reversed = WhatIf(cluster, pods, {"binpack", "spread"}, 1);
  ASSERT_TRUE(reversed.ok());
  EXPECT_EQ((*reversed)[0].placed, 2);
  EXPECT_EQ((*reversed)[1].placed, 1);
}

TEST(WhatIfTest, BadInput) {
  const WhatIfCluster cluster = Cluster();
  EXPECT_FALSE(WhatIf(cluster, {}, {"binpack"}, 1).ok());
  const std::vector<WhatIfPod> pods = {{.name = "one", .request = Whole(1)}};
  auto unknown = WhatIf(cluster, pods, {"nosuch"}, 1);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("nosuch"), std::string::npos);
}

// why: 4 whole GPUs fit nowhere (node-a has 3 free, node-b 1); at priority 100 evicting node-a's pod (priority 0)
// would make room, at priority 0 nothing would.
TEST(WhyTest, PendingPodByHand) {
  const WhatIfCluster cluster = Cluster();
  core::PodRequest pod = Whole(4);
  pod.uid = common::PodUid("pending");
  pod.priority = 100;
  const WhyReport r = ExplainPod(cluster, pod);
  EXPECT_EQ(r.need, "4 whole GPUs, 1.0 CPU, 1024 MiB memory");
  EXPECT_TRUE(r.fits_on.empty());
  ASSERT_EQ(r.classes.size(), 2U);
  EXPECT_EQ(r.classes[0].name, "2x A100");
  EXPECT_EQ(r.classes[1].name, "4x A100");
  EXPECT_EQ(r.classes[1].best, "node-a: 3 of 4 GPUs wholly free; GPU 1 has 100% and 40960 MiB free; 31.0 CPU free");
  EXPECT_FALSE(r.classes[1].reason.empty());
  EXPECT_EQ(r.preempt_node, "node-a");
  EXPECT_EQ(r.victims, std::vector<std::string>{"default/u-1 (priority 0)"});
  const std::string text = FormatWhy(r);
  EXPECT_NE(text.find("what would make it fit: on node-a, evicting default/u-1 (priority 0)"), std::string::npos)
      << text;
  pod.priority = 0;
  const WhyReport none = ExplainPod(cluster, pod);
  EXPECT_TRUE(none.preempt_node.empty());
  EXPECT_NE(FormatWhy(none).find("no eviction of lower-priority pods would"), std::string::npos);
  // One GPU fits now.
  EXPECT_FALSE(ExplainPod(cluster, Whole(1)).fits_on.empty());
}

}  // namespace
}  // namespace gpusched::sim
