#include "gpusched/kube/annotations.h"

#include <gtest/gtest.h>

namespace gpusched::kube {
namespace {

TEST(AnnotationsTest, AllocationRoundTrips) {
  core::Allocation a{.pod = common::PodUid("u1"), .node = common::NodeName("gpu-node-1"), .id = 17};
  a.containers.push_back(core::ContainerAllocation{.container = "trainer",
                                                   .gpus = {core::GpuShare{.index = 0,
                                                                           .uuid = common::GpuUuid("GPU-a"),
                                                                           .milli = common::MilliGpu{300},
                                                                           .memory = common::MiB{20000}},
                                                            core::GpuShare{.index = 3,
                                                                           .uuid = common::GpuUuid("GPU-d"),
                                                                           .milli = common::MilliGpu{1000},
                                                                           .memory = common::MiB{81920},
                                                                           .exclusive = true}}});
  const std::string text = EncodeAllocation(a);
  EXPECT_EQ(text,
            R"({"containers":[{"gpus":[{"exclusive":false,"index":0,"memory_mib":20000,"milli":300,"uuid":"GPU-a"},)"
            R"({"exclusive":true,"index":3,"memory_mib":81920,"milli":1000,"uuid":"GPU-d"}],"name":"trainer"}],)"
            R"("id":17,"node":"gpu-node-1"})");
  auto back = DecodeAllocation(text, common::PodUid("u1"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->node.str(), "gpu-node-1");
  EXPECT_EQ(back->id, 17u);
  ASSERT_EQ(back->containers.size(), 1u);
  ASSERT_EQ(back->containers[0].gpus.size(), 2u);
  EXPECT_EQ(back->containers[0].gpus[1].index, 3);
  EXPECT_TRUE(back->containers[0].gpus[1].exclusive);
  EXPECT_EQ(back->containers[0].gpus[0].memory.value(), 20000);
  EXPECT_EQ(back->pod.str(), "u1");
  EXPECT_EQ(back->containers[0].gpus[0].numa_node, -1);  // unknown: not written, read back as unknown
}

TEST(AnnotationsTest, AllocationRecordsTheNumaNode) {
  core::Allocation a{.pod = common::PodUid("u1"), .node = common::NodeName("n"), .id = 2};
  a.containers.push_back(core::ContainerAllocation{.container = "c",
                                                   .gpus = {core::GpuShare{.index = 5,
                                                                           .uuid = common::GpuUuid("GPU-f"),
                                                                           .milli = common::MilliGpu{1000},
                                                                           .memory = common::MiB{1024},
                                                                           .exclusive = true,
                                                                           .numa_node = 1}}});
  const std::string text = EncodeAllocation(a);
  EXPECT_EQ(text, R"({"containers":[{"gpus":[{"exclusive":true,"index":5,"memory_mib":1024,"milli":1000,"numa":1,)"
                  R"("uuid":"GPU-f"}],"name":"c"}],"id":2,"node":"n"})");
  auto back = DecodeAllocation(text, common::PodUid("u1"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->containers[0].gpus[0].numa_node, 1);
}

TEST(AnnotationsTest, BadAllocationsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "not valid JSON"},
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"containers":[]})", "missing \"node\""},
      {R"({"node":"n","containers":{}})", "\"containers\""},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"milli":10}]}]})", "missing \"index\""},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"index":0,"milli":1001}]}]})", "\"milli\" = 1001"},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"index":-1,"milli":1}]}]})", "\"index\" = -1"},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"index":0,"milli":"1"}]}]})", "not an integer"},
      {R"({"node":"n","id":18446744073709551615,"containers":[]})", "out of range"},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"index":0,"milli":1,"numa":-2}]}]})", "\"numa\" = -2"},
      {R"({"node":"n","containers":[{"name":"c","gpus":[{"index":0,"milli":1,"numa":"0"}]}]})", "not an integer"},
  };
  for (const auto& [text, expect] : cases) {
    auto a = DecodeAllocation(text, common::PodUid("u"));
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_NE(a.status().message().find(expect), std::string::npos) << text << " -> " << a.status();
  }
}

TEST(AnnotationsTest, InventoryRoundTripsAndChecksIndices) {
  std::vector<core::Gpu> gpus = {core::Gpu{.index = 0,
                                           .uuid = common::GpuUuid("GPU-0"),
                                           .model = "H100",
                                           .memory = common::MiB{81559},
                                           .numa_node = 0,
                                           .nvlink_peers = {1}},
                                 core::Gpu{.index = 1,
                                           .uuid = common::GpuUuid("GPU-1"),
                                           .model = "H100",
                                           .memory = common::MiB{81559},
                                           .numa_node = 1,
                                           .nvlink_peers = {0},
                                           .healthy = false}};
  auto back = DecodeGpuInventory(EncodeGpuInventory(gpus));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gpus);
  // Order in the list does not matter; gaps and repeats do.
  auto swapped = DecodeGpuInventory(R"([{"index":1,"memory_mib":1},{"index":0,"memory_mib":2}])");
  ASSERT_TRUE(swapped.ok()) << swapped.status();
  EXPECT_EQ((*swapped)[0].memory.value(), 2);
  EXPECT_FALSE(DecodeGpuInventory(R"([{"index":0,"memory_mib":1},{"index":0,"memory_mib":1}])").ok());
  EXPECT_FALSE(DecodeGpuInventory(R"([{"index":1,"memory_mib":1}])").ok());
  EXPECT_FALSE(DecodeGpuInventory(R"({"index":0})").ok());
  // The sharer limit (device ids per GPU) round-trips; absent is 0 (unknown), out of range is refused.
  gpus[0].max_sharers = 10;
  auto limited = DecodeGpuInventory(EncodeGpuInventory(gpus));
  ASSERT_TRUE(limited.ok()) << limited.status();
  EXPECT_EQ((*limited)[0].max_sharers, 10);
  EXPECT_EQ((*limited)[1].max_sharers, 0);
  auto bad_sharers = DecodeGpuInventory(R"([{"index":0,"memory_mib":1,"sharers":-1}])");
  ASSERT_FALSE(bad_sharers.ok());
  EXPECT_NE(bad_sharers.status().message().find("sharers"), std::string::npos) << bad_sharers.status();
  EXPECT_FALSE(DecodeGpuInventory(R"([{"index":0,"memory_mib":1,"sharers":100000}])").ok());
  EXPECT_FALSE(DecodeGpuInventory(R"([{"index":0,"memory_mib":1,"healthy":"yes"}])").ok());
  EXPECT_TRUE(DecodeGpuInventory("[]")->empty());
}

TEST(AnnotationsTest, InventoryLinksRoundTripInTopoNames) {
  std::vector<core::Gpu> gpus(3);
  for (int32_t i = 0; i < 3; ++i) {
    gpus[static_cast<size_t>(i)].index = i;
    gpus[static_cast<size_t>(i)].memory = common::MiB{1000};
  }
  gpus[0].links = {{.peer = 1, .kind = core::LinkKind::kNvlink, .nvlinks = 4},
                   {.peer = 2, .kind = core::LinkKind::kCrossSocket}};
  gpus[1].links = {{.peer = 0, .kind = core::LinkKind::kNvlink, .nvlinks = 4},
                   {.peer = 2, .kind = core::LinkKind::kPcieSwitch}};
  gpus[2].links = {{.peer = 0, .kind = core::LinkKind::kCrossSocket},
                   {.peer = 1, .kind = core::LinkKind::kNvSwitch, .nvlinks = 18}};
  const std::string text = EncodeGpuInventory(gpus);
  EXPECT_NE(text.find(R"("links":{"1":"NV4","2":"SYS"})"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("1":"NVS18")"), std::string::npos) << text;
  auto back = DecodeGpuInventory(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, gpus);
  // Every name nvidia-smi topo -m prints; an unknown one is left out, not an error.
  for (const char* name : {"PIX", "PXB", "PHB", "NODE", "SYS", "NV1", "NV18", "NVS12"}) {
    auto l = ParseLinkName(1, name);
    ASSERT_TRUE(l.has_value()) << name;
    EXPECT_EQ(LinkName(*l), name);
  }
  EXPECT_FALSE(ParseLinkName(1, "NVX").has_value());
  EXPECT_FALSE(ParseLinkName(1, "NV").has_value());
  auto future = DecodeGpuInventory(R"([{"index":0,"memory_mib":1,"links":{"1":"C2C"}},{"index":1,"memory_mib":1}])");
  ASSERT_TRUE(future.ok()) << future.status();
  EXPECT_TRUE((*future)[0].links.empty());
  // Keys must be another GPU of the node.
  for (const char* bad :
       {R"([{"index":0,"memory_mib":1,"links":{"0":"NV1"}}])", R"([{"index":0,"memory_mib":1,"links":{"5":"NV1"}}])",
        R"([{"index":0,"memory_mib":1,"links":{"x":"NV1"}}])", R"([{"index":0,"memory_mib":1,"links":["NV1"]}])",
        R"([{"index":0,"memory_mib":1,"links":{"1":4}},{"index":1,"memory_mib":1}])"}) {
    EXPECT_FALSE(DecodeGpuInventory(bad).ok()) << bad;
  }
}

// What release 0.1.0 writes, verbatim: every later release must read these (docs/upgrade.md). A pod bound by 0.1.0
// keeps its GPUs across an upgrade only if its gpusched.io/allocation still decodes to the same shares, and a node
// keeps its GPUs only if the agent's gpusched.io/gpus still decodes to the same inventory. Change the decoders, never
// these strings.
TEST(AnnotationsTest, ReadsWhatRelease010Wrote) {
  const char* allocation =
      R"({"containers":[{"gpus":[{"exclusive":false,"index":1,"memory_mib":20000,"milli":300,"numa":0,)"
      R"("uuid":"GPU-9c1f"}],"name":"trainer"},{"gpus":[{"exclusive":true,"index":2,"memory_mib":81920,)"
      R"("milli":1000,"uuid":"GPU-77aa"}],"name":"sidecar"}],"id":114305652326400017,"node":"gpu-node-7"})";
  auto a = DecodeAllocation(allocation, common::PodUid("u-7"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->pod.str(), "u-7");
  EXPECT_EQ(a->node.str(), "gpu-node-7");
  EXPECT_EQ(a->id, 114305652326400017U);
  ASSERT_EQ(a->containers.size(), 2U);
  EXPECT_EQ(a->containers[0].container, "trainer");
  ASSERT_EQ(a->containers[0].gpus.size(), 1U);
  const core::GpuShare& shared = a->containers[0].gpus[0];
  EXPECT_EQ(shared.index, 1);
  EXPECT_EQ(shared.uuid.str(), "GPU-9c1f");
  EXPECT_EQ(shared.milli.value(), 300);
  EXPECT_EQ(shared.memory.value(), 20000);
  EXPECT_FALSE(shared.exclusive);
  EXPECT_EQ(shared.numa_node, 0);
  const core::GpuShare& whole = a->containers[1].gpus.at(0);
  EXPECT_EQ(whole.index, 2);
  EXPECT_TRUE(whole.exclusive);
  EXPECT_EQ(whole.milli.value(), 1000);
  EXPECT_EQ(whole.numa_node, -1);
  EXPECT_EQ(EncodeAllocation(*a), allocation) << "written back unchanged";

  const char* inventory =
      R"([{"healthy":true,"index":0,"links":{"1":"NV12"},"memory_mib":81920,"model":"A100-SXM4-80GB","numa":0,)"
      R"("nvlink_peers":[1],"sharers":10,"uuid":"GPU-0a"},{"healthy":false,"index":1,"links":{"0":"NV12"},)"
      R"("memory_mib":81920,"model":"A100-SXM4-80GB","numa":1,"nvlink_peers":[0],"uuid":"GPU-1b"}])";
  auto gpus = DecodeGpuInventory(inventory);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2U);
  EXPECT_EQ((*gpus)[0].uuid.str(), "GPU-0a");
  EXPECT_EQ((*gpus)[0].model, "A100-SXM4-80GB");
  EXPECT_EQ((*gpus)[0].memory.value(), 81920);
  EXPECT_EQ((*gpus)[0].numa_node, 0);
  EXPECT_EQ((*gpus)[0].nvlink_peers, std::vector<int32_t>{1});
  ASSERT_EQ((*gpus)[0].links.size(), 1U);
  EXPECT_EQ(LinkName((*gpus)[0].links[0]), "NV12");
  EXPECT_EQ((*gpus)[0].max_sharers, 10);
  EXPECT_TRUE((*gpus)[0].healthy);
  EXPECT_FALSE((*gpus)[1].healthy);
  EXPECT_EQ((*gpus)[1].max_sharers, 0);
  EXPECT_EQ(EncodeGpuInventory(*gpus), inventory) << "written back unchanged";
}

}  // namespace
}  // namespace gpusched::kube
