// The JSON builders' objects, field by field.
#include "gpusched/testing/json_builders.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::testing {
namespace {

using nlohmann::json;

TEST(JsonBuildersTest, PodJsonStartsSmallAndWritesWhatItIsTold) {
  EXPECT_EQ(PodJson("p").Build(), json::parse(R"({"metadata": {"name": "p", "namespace": "default", "uid": "uid-p"},
                                                   "spec": {"containers": [{"name": "main"}]}})"));
  const json pod = PodJson("p")
                       .Namespace("ml")
                       .Uid("u-p")
                       .Priority(5)
                       .SchedulerName("gpusched")
                       .Limits(ShareLimits(30, 20000))
                       .Requests({{"cpu", "1"}})
                       .Container("side")
                       .InitContainer("setup", {{"nvidia.com/gpu", "1"}})
                       .Annotation("a", "1")
                       .Label("app", "web")
                       .NodeName("n1")
                       .Phase("Running");
  EXPECT_EQ(pod, json::parse(R"({
    "metadata": {"name": "p", "namespace": "ml", "uid": "u-p", "annotations": {"a": "1"}, "labels": {"app": "web"}},
    "spec": {"priority": 5, "schedulerName": "gpusched", "nodeName": "n1",
             "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"},
                                                           "limits": {"gpusched.io/gpu": "1",
                                                                      "gpusched.io/gpu-core": "30",
                                                                      "gpusched.io/gpu-memory": "20000"}}},
                            {"name": "side"}],
             "initContainers": [{"name": "setup", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
    "status": {"phase": "Running"}})"));
  const json bare = PodJson("q").NoUid().NoContainers();
  EXPECT_EQ(bare, json::parse(R"({"metadata": {"name": "q", "namespace": "default"}, "spec": {}})"));
}

TEST(JsonBuildersTest, GpuNodeJsonListsItsGpusInTheAnnotation) {
  const json node = GpuNodeJson("a").Gpus(2).Gpu("GPU-x", "H100", 1000).Label("zone", "z1").Pods("110");
  EXPECT_EQ(node["metadata"]["name"], "a");
  EXPECT_EQ(node["metadata"]["labels"], json({{"zone", "z1"}}));
  EXPECT_EQ(node["status"]["allocatable"], json({{"cpu", "32"}, {"memory", "128Gi"}, {"pods", "110"}}));
  EXPECT_FALSE(node.contains("spec"));
  EXPECT_EQ(json::parse(node["metadata"]["annotations"]["gpusched.io/gpus"].get<std::string>()), json::parse(R"([
    {"uuid": "GPU-a-0", "index": 0, "model": "A100-SXM4-80GB", "memory_mib": 81920},
    {"uuid": "GPU-a-1", "index": 1, "model": "A100-SXM4-80GB", "memory_mib": 81920},
    {"uuid": "GPU-x", "index": 2, "model": "H100", "memory_mib": 1000}])"));
  const json bare = GpuNodeJson("b").EmptySpec().Labels(json::object()).Taints(json::array());
  EXPECT_EQ(bare["metadata"]["annotations"]["gpusched.io/gpus"], "[]");
  EXPECT_EQ(bare["metadata"]["labels"], json::object());
  EXPECT_EQ(bare["spec"], json({{"taints", json::array()}}));
}

}  // namespace
}  // namespace gpusched::testing
