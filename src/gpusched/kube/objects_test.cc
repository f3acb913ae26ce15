#include "gpusched/kube/objects.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;

json Fixture(const std::string& file) {
  std::ifstream in(std::string(GPUSCHED_SHARED_DIR) + "/fixtures/kube-scheduler-extender/" + file);
  if (!in) {
    return nullptr;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

TEST(ObjectsTest, NodesFromTheRealFixtureUseTheInventoryAnnotation) {
  const json body = Fixture("1.32/cache-false/001-filter.json");
  if (body.is_null()) {
    GTEST_SKIP() << "../shared/fixtures not found next to the repository";
  }
  const auto& items = body.at("Nodes").at("items");
  ASSERT_EQ(items.size(), 3u);
  for (const auto& item : items) {
    auto node = DecodeNode(item);
    ASSERT_TRUE(node.ok()) << node.status();
    EXPECT_EQ(node->cpu.value(), 32000);
    EXPECT_EQ(node->memory.value(), 128 * 1024);
    ASSERT_EQ(node->gpus.size(), 4u);
    for (int32_t i = 0; i < 4; ++i) {
      EXPECT_EQ(node->gpus[static_cast<size_t>(i)].index, i);
      EXPECT_EQ(node->gpus[static_cast<size_t>(i)].model, "A100-SXM4-80GB");
      EXPECT_EQ(node->gpus[static_cast<size_t>(i)].memory.value(), 81920);
      EXPECT_TRUE(node->gpus[static_cast<size_t>(i)].uuid.str().starts_with("GPU-"));
    }
  }
}

TEST(ObjectsTest, WithoutTheAnnotationGpusComeFromCapacityAndFeatureDiscoveryLabels) {
  json node = {
      {"metadata",
       {{"name", "n1"},
        {"labels", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.memory", "81920"}}}}},
      {"status",
       {{"capacity", {{"nvidia.com/gpu", "8"}}},
        {"allocatable", {{"cpu", "63500m"}, {"memory", "500Gi"}, {"nvidia.com/gpu", "8"}}}}}};
  auto n = DecodeNode(node);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->cpu.value(), 63500);
  EXPECT_EQ(n->memory.value(), 500 * 1024);
  ASSERT_EQ(n->gpus.size(), 8u);
  EXPECT_EQ(n->gpus[7].index, 7);
  EXPECT_EQ(n->gpus[7].model, "A100-SXM4-80GB");
  EXPECT_EQ(n->gpus[7].memory.value(), 81920);
  EXPECT_TRUE(n->gpus[7].uuid.empty());

  json cpu_only = {{"metadata", {{"name", "cpu"}}}, {"status", {{"allocatable", {{"cpu", "4"}}}}}};
  EXPECT_TRUE(DecodeNode(cpu_only)->gpus.empty());
}

TEST(ObjectsTest, BadNodesAreErrorsNamingTheNode) {
  json bad = {{"metadata", {{"name", "n2"}, {"annotations", {{"gpusched.io/gpus", "[{\"index\":1}]"}}}}}};
  auto n = DecodeNode(bad);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("node n2"), std::string::npos) << n.status();
  EXPECT_FALSE(DecodeNode(json::object()).ok());
  json bad_cpu = {{"metadata", {{"name", "n3"}}}, {"status", {{"allocatable", {{"cpu", "lots"}}}}}};
  EXPECT_FALSE(DecodeNode(bad_cpu).ok());
}

TEST(ObjectsTest, PodMeta) {
  const json body = Fixture("1.32/cache-true/034-filter.json");
  if (body.is_null()) {
    GTEST_SKIP() << "../shared/fixtures not found next to the repository";
  }
  auto m = DecodePodMeta(body.at("Pod"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->namespace_, "default");
  EXPECT_EQ(m->name, "high-preemptor");
  EXPECT_FALSE(m->uid.empty());
  EXPECT_EQ(m->scheduler_name, "default-scheduler");
  EXPECT_EQ(m->phase, "Pending");
  EXPECT_FALSE(m->Terminal());
  EXPECT_FALSE(m->deleting);

  json done = {{"metadata", {{"name", "x"}, {"deletionTimestamp", "2026-01-01T00:00:00Z"}}},
               {"spec", {{"nodeName", "n1"}}},
               {"status", {{"phase", "Succeeded"}}}};
  auto d = DecodePodMeta(done);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->namespace_, "default");
  EXPECT_TRUE(d->Terminal());
  EXPECT_TRUE(d->deleting);
  EXPECT_EQ(d->node_name, "n1");
  EXPECT_FALSE(DecodePodMeta(json::array()).ok());
}

}  // namespace
}  // namespace gpusched::kube
