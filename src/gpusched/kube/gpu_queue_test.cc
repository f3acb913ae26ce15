#include "gpusched/kube/gpu_queue.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;
constexpr int64_t kAll = core::GpuAmount::kUnlimited;

TEST(GpuQueueTest, DecodesTheSpecWithItsDefaults) {
  auto q = DecodeGpuQueue(json::parse(R"({"metadata": {"name": "team-a"}, "spec": {
      "parent": "research", "namespaces": ["a1", "a2"], "weight": 2.5,
      "guaranteed": {"gpus": 4}, "limit": {"gpus": 8, "gpuMemoryMiB": 163840}}})"));
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q->name, "team-a");
  EXPECT_EQ(q->parent, "research");
  EXPECT_EQ(q->namespaces, (std::vector<std::string>{"a1", "a2"}));
  EXPECT_DOUBLE_EQ(q->weight, 2.5);
  // gpuMilli follows gpus; memory is limited, so the guarantee counts it (0).
  EXPECT_EQ(q->guaranteed, (core::GpuAmount{4, 4000, 0}));
  EXPECT_EQ(q->limit, (core::GpuAmount{8, 8000, 163840}));

  q = DecodeGpuQueue(json::parse(R"({"metadata": {"name": "open"}})"));
  ASSERT_TRUE(q.ok());
  EXPECT_DOUBLE_EQ(q->weight, 1);
  // Nothing guaranteed but memory, which is not accounted against the guarantee; no limit at all.
  EXPECT_EQ(q->guaranteed, (core::GpuAmount{0, 0, kAll}));
  EXPECT_EQ(q->limit, core::GpuAmount::Unlimited());
}

TEST(GpuQueueTest, BadFieldsAreNamed) {
  auto err = [](const char* text) { return DecodeGpuQueue(json::parse(text)).status().message(); };
  EXPECT_EQ(err(R"({"spec": {}})"), "a GpuQueue needs metadata.name");
  EXPECT_EQ(err(R"({"metadata": {"name": "q"}, "spec": {"guaranteed": {"gpus": -1}}})"),
            "GpuQueue q: spec.guaranteed.gpus: want a non-negative integer, got -1");
  EXPECT_EQ(err(R"({"metadata": {"name": "q"}, "spec": {"limit": {"gpuMilli": "lots"}}})"),
            "GpuQueue q: spec.limit.gpuMilli: want a non-negative integer, got \"lots\"");
  EXPECT_EQ(err(R"({"metadata": {"name": "q"}, "spec": {"weight": 0}})"),
            "GpuQueue q: spec.weight: want a number > 0, got 0");
  EXPECT_EQ(err(R"({"metadata": {"name": "q"}, "spec": {"namespaces": "a"}})"),
            "GpuQueue q: spec.namespaces: want a list, got \"a\"");
}

}  // namespace
}  // namespace gpusched::kube
