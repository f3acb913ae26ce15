#include "gpusched/agent/inventory.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <tuple>

#include "gpusched/kube/annotations.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::agent {
namespace {

using nlohmann::json;

std::vector<ports::GpuSample> Samples(int n) {
  std::vector<ports::GpuSample> out;
  for (int i = 0; i < n; ++i) {
    ports::GpuSample s;
    s.index = i;
    s.uuid = common::GpuUuid("GPU-" + std::to_string(i));
    s.model = "A100-SXM4-80GB";
    s.memory_total = common::MiB{81920};
    s.numa_node = i / 4;
    s.gpu_utilization = 10.0 * i;
    out.push_back(s);
  }
  return out;
}

TEST(InventoryPublisherTest, PatchesOnlyWhenTheInventoryChanges) {
  std::vector<std::pair<std::string, std::string>> patched;
  InventoryPublisher pub("node-1", [&](const std::string& node, const std::string& value) {
    patched.emplace_back(node, value);
    return common::Status::Ok();
  });
  auto s = Samples(2);
  ASSERT_TRUE(pub.Publish(s).ok());
  ASSERT_EQ(patched.size(), 1u);
  EXPECT_EQ(patched[0].first, "node-1");
  auto decoded = kube::DecodeGpuInventory(patched[0].second);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->size(), 2u);
  // Live metrics move: no patch.
  s[0].gpu_utilization = 99;
  s[1].temperature_c = 80;
  ASSERT_TRUE(pub.Publish(s).ok());
  EXPECT_EQ(patched.size(), 1u);
  // Health changes: a patch.
  s[1].healthy = false;
  ASSERT_TRUE(pub.Publish(s).ok());
  ASSERT_EQ(patched.size(), 2u);
  EXPECT_FALSE((*kube::DecodeGpuInventory(patched[1].second))[1].healthy);
  EXPECT_EQ(pub.patches(), 2u);
}

TEST(InventoryPublisherTest, PublishesHowManyPodsMayShareEachGpu) {
  std::string value;
  InventoryPublisher pub(
      "n",
      [&](const std::string&, const std::string& v) {
        value = v;
        return common::Status::Ok();
      },
      /*max_sharers=*/10);
  ASSERT_TRUE(pub.Publish(Samples(2)).ok());
  auto decoded = kube::DecodeGpuInventory(value);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  for (const core::Gpu& g : *decoded) {
    EXPECT_EQ(g.max_sharers, 10);
  }
  // An older agent's annotation without the limit is a change: the limit gets published.
  InventoryPublisher newer(
      "n",
      [&](const std::string&, const std::string& v) {
        value = v;
        return common::Status::Ok();
      },
      10);
  newer.SetCurrent(kube::EncodeGpuInventory(InventoryOf(Samples(2))));
  ASSERT_TRUE(newer.Publish(Samples(2)).ok());
  EXPECT_EQ(newer.patches(), 1u);
}

TEST(InventoryPublisherTest, ARestartWithTheSameGpusPatchesNothingAndFailuresAreRetried) {
  int calls = 0;
  bool fail = false;
  InventoryPublisher pub("n", [&](const std::string&, const std::string&) {
    ++calls;
    return fail ? common::Unavailable("apiserver down") : common::Status::Ok();
  });
  const auto s = Samples(4);
  // The node already carries these GPUs, keys in another order.
  json reordered = json::parse(kube::EncodeGpuInventory(InventoryOf(s)));
  pub.SetCurrent(reordered.dump(2));
  ASSERT_TRUE(pub.Publish(s).ok());
  EXPECT_EQ(calls, 0);
  fail = true;
  const auto five = Samples(5);
  EXPECT_FALSE(pub.Publish(five).ok());
  EXPECT_EQ(calls, 1);
  fail = false;
  ASSERT_TRUE(pub.Publish(five).ok());  // retried at the next sample
  EXPECT_EQ(calls, 2);
  ASSERT_TRUE(pub.Publish(five).ok());
  EXPECT_EQ(calls, 2);
}

json BoundPod(const std::string& name, const std::string& node, const std::string& phase,
              const std::vector<std::tuple<std::string, int, int64_t, int64_t>>& shares) {
  core::Allocation a{.node = common::NodeName(node), .id = 1};
  for (const auto& [container, gpu, milli, mib] : shares) {
    a.containers.push_back(
        core::ContainerAllocation{.container = container,
                                  .gpus = {core::GpuShare{.index = gpu,
                                                          .uuid = common::GpuUuid("GPU-" + std::to_string(gpu)),
                                                          .milli = common::MilliGpu{milli},
                                                          .memory = common::MiB{mib}}}});
  }
  return testing::PodJson(name)
      .Namespace("ml")
      .Uid("u-" + name)
      .Annotation("gpusched.io/allocation", kube::EncodeAllocation(a))
      .NoContainers()
      .NodeName(node)
      .Phase(phase);
}

TEST(SummarisePodsTest, AttributesGpusAndSumsAllocationsOfLivePodsOnThisNode) {
  std::vector<json> pods = {
      BoundPod("a", "n1", "Running", {{"train", 0, 300, 20000}, {"side", 1, 200, 1000}}),
      BoundPod("b", "n1", "Pending", {{"main", 0, 500, 30000}}),
      BoundPod("done", "n1", "Succeeded", {{"main", 0, 100, 100}}),
      BoundPod("other", "n2", "Running", {{"main", 0, 100, 100}}),
      {{"metadata", {{"name", "plain"}, {"uid", "x"}}}, {"spec", {{"nodeName", "n1"}}}},
  };
  const PodsOnNode s = SummarisePods(pods, "n1");
  EXPECT_EQ(s.pods, 2u);
  ASSERT_EQ(s.allocations.size(), 2u);
  EXPECT_EQ(s.allocations.at(common::GpuUuid("GPU-0")).milli.value(), 800);
  EXPECT_EQ(s.allocations.at(common::GpuUuid("GPU-0")).memory.value(), 50000);
  EXPECT_EQ(s.allocations.at(common::GpuUuid("GPU-1")).milli.value(), 200);
  const auto& refs = s.attribution.at(common::GpuUuid("GPU-0"));
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].pod, "a");
  EXPECT_EQ(refs[0].container, "train");
  EXPECT_EQ(refs[0].namespace_name, "ml");
  EXPECT_EQ(refs[1].pod, "b");
}

}  // namespace
}  // namespace gpusched::agent
