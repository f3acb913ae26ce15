#include "gpusched/kube/resources.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;

json PodWith(const json& limits, const json& annotations = json::object()) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ns"}, {"uid", "u1"}, {"annotations", annotations}}},
          {"spec", {{"containers", json::array({{{"name", "main"}, {"resources", {{"limits", limits}}}}})}}}};
}

struct Case {
  const char* what;
  json limits;
  int32_t count;
  int64_t milli;
  int64_t memory;
  bool exclusive;
  int32_t memory_percent = 0;
};

// One row per resource name and combination of ARCHITECTURE.md section 3; the expectation follows the rule in
// resources.h, spelled out in `what`.
TEST(ResourcesTest, DecodesEveryResourceName) {
  const Case cases[] = {
      {"gpu+memory+core: 1 GPU, 30 % = 300 milli, 20000 MiB",
       {{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-memory", "20k"}, {"gpusched.io/gpu-core", "30"}},
       1,
       300,
       20000,
       false},
      {"gpu alone: whole exclusive GPUs", {{"gpusched.io/gpu", "2"}}, 2, 1000, 0, true},
      {"core 100 without memory: exclusive", {{"gpusched.io/gpu-core", "100"}}, 1, 1000, 0, true},
      {"core 100 with memory: a full-compute share",
       {{"gpusched.io/gpu-core", "100"}, {"gpusched.io/gpu-memory", "1000"}},
       1,
       1000,
       1000,
       false},
      {"memory alone: count 1, no compute reservation", {{"gpusched.io/gpu-memory", "4096"}}, 1, 0, 4096, false},
      {"core alone: count 1", {{"gpusched.io/gpu-core", "25"}}, 1, 250, 0, false},
      {"two GPUs with 50 % each", {{"gpusched.io/gpu", "2"}, {"gpusched.io/gpu-core", "50"}}, 2, 500, 0, false},
      {"nvidia.com/gpu: whole exclusive", {{"nvidia.com/gpu", "4"}}, 4, 1000, 0, true},
      {"HAMi gpumem: shared, no compute reservation",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}},
       1,
       0,
       3000,
       false},
      {"HAMi gpumem+gpucores",
       {{"nvidia.com/gpu", "2"}, {"nvidia.com/gpumem", "3000"}, {"nvidia.com/gpucores", "30"}},
       2,
       300,
       3000,
       false},
      {"HAMi gpucores 100 without memory: exclusive",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpucores", "100"}},
       1,
       1000,
       0,
       true},
      {"HAMi gpumem-percentage 50: half of each GPU's memory",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "50"}},
       1,
       0,
       0,
       false,
       50},
      {"HAMi gpumem-percentage 100 without cores: exclusive",
       {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "100"}},
       1,
       1000,
       0,
       true},
      {"aliyun.com/gpu-mem 8 GiB: one shared GPU with 8192 MiB", {{"aliyun.com/gpu-mem", "8"}}, 1, 0, 8192, false},
      {"elasticgpu.io core 30 + memory",
       {{"elasticgpu.io/gpu-core", "30"}, {"elasticgpu.io/gpu-memory", "1024"}},
       1,
       300,
       1024,
       false},
      {"elasticgpu.io core 200: two whole GPUs, memory ignored",
       {{"elasticgpu.io/gpu-core", "200"}, {"elasticgpu.io/gpu-memory", "1024"}},
       2,
       1000,
       0,
       true},
      {"elasticgpu.com spelling", {{"elasticgpu.com/gpu-core", "50"}}, 1, 500, 0, false},
      {"elasticgpu.io memory only", {{"elasticgpu.io/gpu-memory", "2048"}}, 1, 0, 2048, false},
      {"keti.com/mpsgpu alone: an equal MPS share, 10 % of compute and of memory",
       {{"keti.com/mpsgpu", "1"}},
       1,
       100,
       0,
       false,
       10},
      {"keti.com/mpsgpu with gpusched memory only: a memory share",
       {{"keti.com/mpsgpu", "1"}, {"gpusched.io/gpu-memory", "6400"}},
       1,
       0,
       6400,
       false},

      {"keti.com/mpsgpu with gpusched core/memory",
       {{"keti.com/mpsgpu", "2"}, {"gpusched.io/gpu-core", "40"}, {"gpusched.io/gpu-memory", "5000"}},
       2,
       400,
       5000,
       false},
  };
  for (const auto& c : cases) {
    auto r = DecodePodRequest(PodWith(c.limits), ResourceConfig{});
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status();
    ASSERT_EQ(r->containers.size(), 1u) << c.what;
    const auto& g = r->containers[0];
    EXPECT_EQ(g.container, "main") << c.what;
    EXPECT_EQ(g.count, c.count) << c.what;
    EXPECT_EQ(g.milli_per_gpu.value(), c.milli) << c.what;
    EXPECT_EQ(g.memory_per_gpu.value(), c.memory) << c.what;
    EXPECT_EQ(g.exclusive, c.exclusive) << c.what;
    EXPECT_EQ(g.memory_percent, c.memory_percent) << c.what;
  }
}

struct BadCase {
  json limits;
  const char* expect;  // a substring of the error
};

TEST(ResourcesTest, TopologyAnnotation) {
  const json gpu = {{"nvidia.com/gpu", "2"}};
  EXPECT_EQ(DecodePodRequest(PodWith(gpu), ResourceConfig{})->topology, core::TopologyNeed::kPreferred);
  EXPECT_EQ(DecodePodRequest(PodWith(gpu, {{"gpusched.io/topology", "required"}}), ResourceConfig{})->topology,
            core::TopologyNeed::kRequired);
  EXPECT_EQ(DecodePodRequest(PodWith(gpu, {{"gpusched.io/topology", "none"}}), ResourceConfig{})->topology,
            core::TopologyNeed::kNone);
  EXPECT_EQ(DecodePodRequest(PodWith(gpu, {{"gpusched.io/topology", "preferred"}}), ResourceConfig{})->topology,
            core::TopologyNeed::kPreferred);
  auto bad = DecodePodRequest(PodWith(gpu, {{"gpusched.io/topology", "nvlink"}}), ResourceConfig{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("must be required, preferred or none, not \"nvlink\""), std::string::npos)
      << bad.status().message();
}

TEST(ResourcesTest, PodGroupFromAnnotationsOrTheCoschedulingLabel) {
  const json gpu = {{"nvidia.com/gpu", "1"}};
  auto none = DecodePodRequest(PodWith(gpu), ResourceConfig{});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->pod_group, "");
  EXPECT_EQ(none->min_available, 0);

  auto gang = DecodePodRequest(PodWith(gpu, {{"gpusched.io/pod-group", "train-7"}, {"gpusched.io/min-available", "8"}}),
                               ResourceConfig{});
  ASSERT_TRUE(gang.ok()) << gang.status().message();
  EXPECT_EQ(gang->pod_group, "train-7");
  EXPECT_EQ(gang->min_available, 8);

  auto group_only = DecodePodGroup(PodWith(gpu, {{"gpusched.io/pod-group", "g"}}));
  ASSERT_TRUE(group_only.ok());
  EXPECT_EQ(group_only->min_available, 1);

  json labelled = PodWith(gpu, {{"gpusched.io/min-available", "2"}});
  labelled["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "pg"}};
  auto by_label = DecodePodGroup(labelled);
  ASSERT_TRUE(by_label.ok()) << by_label.status().message();
  EXPECT_EQ(by_label->name, "pg");
  EXPECT_EQ(by_label->min_available, 2);
  EXPECT_FALSE(by_label->coscheduling) << "min-available given: the PodGroup's minMember does not apply";
  labelled["metadata"].erase("annotations");
  auto coscheduling = DecodePodGroup(labelled);
  ASSERT_TRUE(coscheduling.ok());
  EXPECT_EQ(coscheduling->min_available, 1);
  EXPECT_TRUE(coscheduling->coscheduling);
  EXPECT_FALSE(group_only->coscheduling);

  for (const char* bad : {"0", "-1", "x", "2.5", "10001", ""}) {
    auto r = DecodePodRequest(PodWith(gpu, {{"gpusched.io/pod-group", "g"}, {"gpusched.io/min-available", bad}}),
                              ResourceConfig{});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("gpusched.io/min-available"), std::string::npos) << r.status().message();
  }
  auto orphan = DecodePodGroup(PodWith(gpu, {{"gpusched.io/min-available", "2"}}));
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.status().message().find("names no group"), std::string::npos);
}

TEST(ResourcesTest, CoschedulingPodGroupsGiveTheirMinMember) {
  auto pg = DecodeCoschedulingPodGroup({{"metadata", {{"name", "pg"}, {"namespace", "ml"}}},
                                        {"spec", {{"minMember", 4}, {"scheduleTimeoutSeconds", 60}}}});
  ASSERT_TRUE(pg.ok()) << pg.status().message();
  EXPECT_EQ(pg->namespace_, "ml");
  EXPECT_EQ(pg->name, "pg");
  EXPECT_EQ(pg->min_member, 4);
  auto zero =
      DecodeCoschedulingPodGroup({{"metadata", {{"name", "pg"}, {"namespace", "ml"}}}, {"spec", {{"minMember", 0}}}});
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->min_member, 1);
  auto none = DecodeCoschedulingPodGroup({{"metadata", {{"name", "pg"}, {"namespace", "ml"}}}});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->min_member, 1);
  for (const json& bad : {json("4"), json(-1), json(2.5), json(10001)}) {
    auto r = DecodeCoschedulingPodGroup(
        {{"metadata", {{"name", "pg"}, {"namespace", "ml"}}}, {"spec", {{"minMember", bad}}}});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("PodGroup ml/pg: spec.minMember is " + bad.dump()), std::string::npos)
        << r.status().message();
  }
  auto unnamed = DecodeCoschedulingPodGroup({{"metadata", {{"namespace", "ml"}}}});
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.status().message().find("metadata.name"), std::string::npos);
}

// shareWithin: every GPU container of a pod carries its share group, from its namespace or its queue label.
TEST(ResourcesTest, ShareWithinGivesEveryGpuContainerThePodsGroup) {
  json pod = PodWith({{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "30"}});
  pod["metadata"]["namespace"] = "team-a";
  pod["metadata"]["labels"] = {{"gpusched.io/queue", "q1"}};
  EXPECT_EQ(DecodePodRequest(pod, ResourceConfig{})->containers[0].share_group, 0U);
  ResourceConfig by_ns;
  by_ns.share_within = core::ShareWithin::kNamespace;
  EXPECT_EQ(DecodePodRequest(pod, by_ns)->GpuShareGroup(),
            core::ShareGroupOf(core::ShareWithin::kNamespace, "team-a", ""));
  ResourceConfig by_queue;
  by_queue.share_within = core::ShareWithin::kQueue;
  EXPECT_EQ(DecodePodRequest(pod, by_queue)->GpuShareGroup(), core::ShareGroupOf(core::ShareWithin::kQueue, "", "q1"));
}

TEST(ResourcesTest, GpushareMemoryUnitIsASetting) {
  auto gib = DecodePodRequest(PodWith({{"aliyun.com/gpu-mem", "3"}}), ResourceConfig{});
  ASSERT_TRUE(gib.ok()) << gib.status();
  EXPECT_EQ(gib->containers[0].memory_per_gpu.value(), 3072);
  ResourceConfig mib;
  mib.gpushare_memory_unit_mib = 1;
  auto co_scheml = DecodePodRequest(PodWith({{"aliyun.com/gpu-mem", "300"}}), mib);
  ASSERT_TRUE(co_scheml.ok()) << co_scheml.status();
  EXPECT_EQ(co_scheml->containers[0].memory_per_gpu.value(), 300) << "300 MiB where gpushare counts MiB";
  EXPECT_FALSE(co_scheml->containers[0].exclusive);
  EXPECT_EQ(DecodePodRequest(PodWith({{"aliyun.com/gpu-mem", "300"}}), ResourceConfig{})->containers[0].memory_per_gpu,
            common::MiB{300 * 1024})
      << "the same number in GiB (no GPU fits it: the filter says so)";
}

TEST(ResourcesTest, GeniusLabels) {
  auto with_labels = [](const json& labels) {
    json pod = PodWith(json::object());
    pod["metadata"]["labels"] = labels;
    return pod;
  };
  auto each = DecodePodRequest(
      with_labels({{"genius/gpu-number", "2"}, {"genius/gpu-memory-each", "8000"}, {"genius/gpu-model", "V100"}}),
      ResourceConfig{});
  ASSERT_TRUE(each.ok()) << each.status();
  ASSERT_EQ(each->containers.size(), 1U);
  EXPECT_EQ(each->containers[0].container, "main");
  EXPECT_EQ(each->containers[0].count, 2);
  EXPECT_EQ(each->containers[0].memory_per_gpu.value(), 8000);
  EXPECT_FALSE(each->containers[0].exclusive);
  EXPECT_EQ(each->containers[0].models, std::vector<std::string>{"V100"});

  auto total = DecodePodRequest(with_labels({{"genius/gpu-number", "3"}, {"genius/gpu-memory-total", "10000"}}),
                                ResourceConfig{});
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(total->containers[0].memory_per_gpu.value(), 3334) << "the total over 3 GPUs, rounded up";

  auto whole = DecodePodRequest(with_labels({{"genius/gpu-number", "4"}, {"genius/priority", "7"}}), ResourceConfig{});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(whole->containers[0].exclusive);
  EXPECT_EQ(whole->containers[0].count, 4);
  EXPECT_EQ(whole->priority, 7);

  // A GPU resource wins over the labels; the labels can be turned off; bad values are errors naming the label.
  json both = with_labels({{"genius/gpu-number", "4"}});
  both["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "1"}};
  EXPECT_EQ(DecodePodRequest(both, ResourceConfig{})->containers[0].count, 1);
  ResourceConfig off;
  off.genius_labels = false;
  EXPECT_TRUE(DecodePodRequest(with_labels({{"genius/gpu-number", "4"}}), off)->containers.empty());
  // The device count the webhook adds (gpusched.io/gpu alone on the first container) is read with the labels, and
  // must match them; with the labels off it is whole GPUs, as everywhere.
  json counted = with_labels({{"genius/gpu-number", "2"}, {"genius/gpu-memory-each", "8000"}});
  counted["spec"]["containers"][0]["resources"]["limits"] = {{"gpusched.io/gpu", "2"}};
  auto read = DecodePodRequest(counted, ResourceConfig{});
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->containers.size(), 1U);
  EXPECT_EQ(read->containers[0].count, 2);
  EXPECT_EQ(read->containers[0].memory_per_gpu.value(), 8000);
  EXPECT_FALSE(read->containers[0].exclusive);
  auto whole_without_labels = DecodePodRequest(counted, off);
  ASSERT_TRUE(whole_without_labels.ok()) << whole_without_labels.status();
  EXPECT_TRUE(whole_without_labels->containers[0].exclusive);
  counted["spec"]["containers"][0]["resources"]["limits"] = {{"gpusched.io/gpu", "1"}};
  auto mismatch = DecodePodRequest(counted, ResourceConfig{});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("gpusched.io/gpu 1 does not match the 2 GPU(s) that label "
                                             "genius/gpu-number asks for"),
            std::string::npos)
      << mismatch.status();
  for (const json& bad : {json{{"genius/gpu-number", "two"}}, json{{"genius/gpu-number", "0"}},
                          json{{"genius/gpu-memory-each", "1"}, {"genius/gpu-memory-total", "2"}},
                          json{{"genius/gpu-number", "1"}, {"genius/priority", "high"}}}) {
    auto r = DecodePodRequest(with_labels(bad), ResourceConfig{});
    ASSERT_FALSE(r.ok()) << bad.dump();
    EXPECT_NE(r.status().message().find("genius/"), std::string::npos) << r.status();
  }
}

TEST(ResourcesTest, RejectsContradictoryOrImpossibleRequestsNamingContainerAndResource) {
  const BadCase cases[] = {
      {{{"gpusched.io/gpu-core", "150"}}, "gpusched.io/gpu-core 150 is above 100"},
      {{{"gpusched.io/gpu", "1"}, {"nvidia.com/gpu", "1"}}, "mixes GPU resources"},
      {{{"nvidia.com/gpu", "1"}, {"gpusched.io/gpu-core", "30"}}, "mixes GPU resources"},
      {{{"aliyun.com/gpu-mem", "2"}, {"elasticgpu.io/gpu-core", "20"}}, "mixes GPU resources"},
      {{{"gpusched.io/gpu", "0"}}, "must be positive"},
      {{{"gpusched.io/gpu", "1.5"}}, "whole number"},
      {{{"gpusched.io/gpu-memory", "lots"}}, "gpusched.io/gpu-memory"},
      {{{"elasticgpu.io/gpu-core", "150"}}, "multiple of 100"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "10"}, {"nvidia.com/gpumem-percentage", "10"}}, "both"},
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem-percentage", "101"}}, "above 100"},
      {{{"gpusched.io/gpu", "5000"}}, "above the limit"},
      {{{"keti.com/mpsgpu", "1"}, {"gpusched.io/gpu", "1"}}, "one count"},
  };
  for (const auto& c : cases) {
    auto r = DecodePodRequest(PodWith(c.limits), ResourceConfig{});
    ASSERT_FALSE(r.ok()) << c.limits.dump();
    EXPECT_EQ(r.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("pod ns/p: container main"), std::string::npos) << r.status();
  }
}

// gpusched.io/gpu next to a family without a device count of its own (what the webhook adds): the family's
// request, unchanged, when the count matches; an error naming both when it does not.
TEST(ResourcesTest, GpuschedDeviceCountBesideCompatibilityNames) {
  const Case cases[] = {
      {"aliyun 8 GiB + gpu 1: the gpushare request",
       {{"aliyun.com/gpu-mem", "8"}, {"gpusched.io/gpu", "1"}},
       1,
       0,
       8192,
       false},
      {"elastic core 200 + gpu 2: two whole GPUs",
       {{"elasticgpu.io/gpu-core", "200"}, {"gpusched.io/gpu", "2"}},
       2,
       1000,
       0,
       true},
      {"elastic core 30 + memory + gpu 1",
       {{"elasticgpu.com/gpu-core", "30"}, {"elasticgpu.com/gpu-memory", "1024"}, {"gpusched.io/gpu", "1"}},
       1,
       300,
       1024,
       false},
      {"HAMi gpumem without nvidia.com/gpu + gpu 1",
       {{"nvidia.com/gpumem", "3000"}, {"gpusched.io/gpu", "1"}},
       1,
       0,
       3000,
       false},
  };
  for (const auto& c : cases) {
    auto r = DecodePodRequest(PodWith(c.limits), ResourceConfig{});
    ASSERT_TRUE(r.ok()) << c.what << ": " << r.status();
    ASSERT_EQ(r->containers.size(), 1u) << c.what;
    const auto& g = r->containers[0];
    EXPECT_EQ(g.count, c.count) << c.what;
    EXPECT_EQ(g.milli_per_gpu.value(), c.milli) << c.what;
    EXPECT_EQ(g.memory_per_gpu.value(), c.memory) << c.what;
    EXPECT_EQ(g.exclusive, c.exclusive) << c.what;
  }
  const BadCase bad[] = {
      {{{"aliyun.com/gpu-mem", "8"}, {"gpusched.io/gpu", "2"}},
       "gpusched.io/gpu 2 does not match the 1 GPU(s) that aliyun.com/gpu-mem asks for"},
      {{{"elasticgpu.io/gpu-core", "300"}, {"gpusched.io/gpu", "1"}}, "does not match the 3 GPU(s)"},
      // With sizes of its own, gpusched.io is a family again: mixing stays an error.
      {{{"aliyun.com/gpu-mem", "8"}, {"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "20"}}, "mixes GPU resources"},
      // nvidia.com/gpu is HAMi's count already.
      {{{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "3000"}, {"gpusched.io/gpu", "1"}}, "mixes GPU resources"},
  };
  for (const auto& c : bad) {
    auto r = DecodePodRequest(PodWith(c.limits), ResourceConfig{});
    ASSERT_FALSE(r.ok()) << c.limits.dump();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
}

TEST(ResourcesTest, DecodesOneContainer) {
  const json container = {{"name", "trainer"},
                          {"resources", {{"limits", {{"elasticgpu.io/gpu-core", "200"}, {"cpu", "2"}}}}}};
  auto r = DecodeContainerGpuRequest(container, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->container, "trainer");
  EXPECT_EQ((*r)->count, 2);
  EXPECT_TRUE((*r)->exclusive);

  auto none = DecodeContainerGpuRequest({{"name", "sidecar"}, {"resources", {{"limits", {{"cpu", "1"}}}}}}, {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());

  auto bad = DecodeContainerGpuRequest({{"name", "x"}, {"resources", {{"limits", {{"gpusched.io/gpu-core", "150"}}}}}},
                                       ResourceConfig{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("container x: gpusched.io/gpu-core 150 is above 100"), std::string::npos)
      << bad.status();
}

TEST(ResourcesTest, RequestsWinOverLimitsAndDisabledNamesAreIgnored) {
  json pod = PodWith({{"gpusched.io/gpu-core", "50"}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {
      {"gpusched.io/gpu-core", "20"}, {"cpu", "2"}, {"memory", "1Gi"}};
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->containers[0].milli_per_gpu.value(), 200);
  EXPECT_EQ(r->cpu.value(), 2000);
  EXPECT_EQ(r->memory.value(), 1024);

  ResourceConfig only_nvidia{.enabled = {"nvidia.com/gpu"}};
  EXPECT_TRUE(DecodePodRequest(pod, only_nvidia)->containers.empty());
  EXPECT_FALSE(RequestsGpuResource(pod, only_nvidia));
  EXPECT_TRUE(RequestsGpuResource(pod, ResourceConfig{}));
}

TEST(ResourcesTest, InitContainersCountAsKubernetesCountsThem) {
  json pod = PodWith({{"gpusched.io/gpu-core", "50"}, {"cpu", "1"}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", "1"}, {"memory", "1Gi"}};
  pod["spec"]["initContainers"] =
      json::array({{{"name", "small"}, {"resources", {{"requests", {{"cpu", "3"}, {"gpusched.io/gpu-core", "20"}}}}}},
                   {{"name", "big"}, {"resources", {{"requests", {{"memory", "4Gi"}, {"nvidia.com/gpu", "2"}}}}}}});
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  // CPU: max(1 app, 3 init) = 3; memory: max(1 GiB, 4 GiB).
  EXPECT_EQ(r->cpu.value(), 3000);
  EXPECT_EQ(r->memory.value(), 4096);
  // "small" (20 %) is covered by main (50 %); "big" (2 whole GPUs) is not and gets its own entry.
  ASSERT_EQ(r->containers.size(), 2u);
  EXPECT_EQ(r->containers[1].container, "init:big");
  EXPECT_EQ(r->containers[1].count, 2);
}

TEST(ResourcesTest, ABoundPodsResourcesAreItsRequestsWithoutTheRest) {
  json pod = PodWith({{"gpusched.io/gpu-core", "50"}, {"cpu", "1"}});
  pod["spec"]["containers"][0]["resources"]["requests"] = {
      {"cpu", "1"}, {"memory", "1Gi"}, {"example.com/fpga", "2"}, {"gpusched.io/gpu-core", "500"}};
  pod["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 80}, {"hostPort", 8080}}});
  pod["spec"]["initContainers"] =
      json::array({{{"name", "init"}, {"resources", {{"requests", {{"cpu", "3"}, {"example.com/fpga", "1"}}}}}}});
  auto r = DecodePodResources(pod);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cpu.value(), 3000);
  EXPECT_EQ(r->memory.value(), 1024);
  EXPECT_EQ(r->scalars, (std::map<std::string, int64_t>{{"example.com/fpga", 2}}));
  ASSERT_EQ(r->host_ports.size(), 1u);
  EXPECT_EQ(r->host_ports[0].port, 8080);

  // The GPU request (500 % of a GPU) is not read, nor are fields that do not decode: a bound pod is charged.
  pod["spec"]["tolerations"] = "not a list";
  auto again = DecodePodResources(pod);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cpu.value(), 3000);
  EXPECT_FALSE(DecodePodRequest(pod, ResourceConfig{}).ok());

  // The same sums as the whole request where that decodes.
  pod["spec"].erase("tolerations");
  pod["spec"]["containers"][0]["resources"]["requests"]["gpusched.io/gpu-core"] = "50";
  auto whole = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->cpu, r->cpu);
  EXPECT_EQ(whole->memory, r->memory);
  EXPECT_EQ(whole->scalars, r->scalars);

  pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "lots";
  auto bad = DecodePodResources(pod);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("container main"), std::string::npos) << bad.status();
  EXPECT_FALSE(DecodePodResources(json{{"metadata", json::object()}}).ok());
}

TEST(ResourcesTest, ModelsAndPriority) {
  json pod = PodWith({{"nvidia.com/gpu", "1"}}, {{"gpusched.io/gpu-model", "A100-SXM4-80GB | H100"}});
  pod["spec"]["priority"] = 1000;
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->containers[0].models, (std::vector<std::string>{"A100-SXM4-80GB", "H100"}));
  EXPECT_EQ(r->priority, 1000);
  EXPECT_EQ(r->name, "ns/p");
  EXPECT_EQ(r->uid.str(), "u1");

  json labelled = PodWith({{"nvidia.com/gpu", "1"}});
  labelled["metadata"]["labels"] = {{"gpusched.io/priority", "7"}};
  EXPECT_EQ(DecodePodRequest(labelled, ResourceConfig{})->priority, 7);
  EXPECT_EQ(*DecodePodPriority(labelled, /*genius_labels=*/false), 7) << "the same rule, for bound pods";
  EXPECT_EQ(*DecodePodPriority(pod, false), 1000);
  EXPECT_EQ(*DecodePodPriority(json::object(), false), 0);
  // As kube-apiserver admits them: spec.priority is always set (0 without a class), so a pod naming no class takes
  // its label's priority, and one naming a class the class's.
  json admitted = labelled;
  admitted["spec"]["priority"] = 0;
  EXPECT_EQ(*DecodePodPriority(admitted, false), 7) << "the label, although spec.priority is 0";
  admitted["metadata"]["labels"] = {{"genius/priority", "100"}};
  EXPECT_EQ(*DecodePodPriority(admitted, true), 100);
  EXPECT_EQ(*DecodePodPriority(admitted, false), 0) << "genius labels off";
  admitted["spec"]["priorityClassName"] = "batch-low";
  admitted["spec"]["priority"] = 10;
  EXPECT_EQ(*DecodePodPriority(admitted, true), 10) << "a named class decides";
  EXPECT_FALSE(DecodePodRequest(PodWith({{"nvidia.com/gpu", "1"}}, {{"gpusched.io/gpu-model", "|"}}), {}).ok());
  // preemptionPolicy: Never is read; anything else but PreemptLowerPriority is an error naming the field.
  json never = pod;
  never["spec"]["preemptionPolicy"] = "Never";
  EXPECT_TRUE(DecodePodRequest(never, ResourceConfig{})->preempt_never);
  never["spec"]["preemptionPolicy"] = "PreemptLowerPriority";
  EXPECT_FALSE(DecodePodRequest(never, ResourceConfig{})->preempt_never);
  never["spec"]["preemptionPolicy"] = "Sometimes";
  EXPECT_NE(DecodePodRequest(never, ResourceConfig{}).status().message().find("spec.preemptionPolicy"),
            std::string::npos);
}

TEST(ResourcesTest, ApplicationClassFromAnnotationOrConfiguredLabel) {
  struct AppCase {
    std::string what;
    json annotations;
    json labels;
    std::string app_label;  // ResourceConfig::app_label
    std::string want;
  };
  const std::vector<AppCase> cases = {
      {"the annotation names it", {{"gpusched.io/app", "resnet50-bs64"}}, json::object(), "", "resnet50-bs64"},
      {"no annotation and no label configured: unknown", json::object(), {{"app", "bert"}}, "", ""},
      {"the configured label when the annotation is absent", json::object(), {{"app", "bert"}}, "app", "bert"},
      {"the annotation wins over the label", {{"gpusched.io/app", "vgg16"}}, {{"app", "bert"}}, "app", "vgg16"},
      {"an empty annotation counts as absent", {{"gpusched.io/app", ""}}, {{"app", "bert"}}, "app", "bert"},
      {"a configured label the pod lacks: unknown", json::object(), {{"tier", "gpu"}}, "app", ""},
      {"a non-string annotation is ignored", {{"gpusched.io/app", 3}}, json::object(), "", ""},
  };
  for (const AppCase& c : cases) {
    SCOPED_TRACE(c.what);
    json pod = PodWith({{"gpusched.io/gpu-core", "30"}}, c.annotations);
    pod["metadata"]["labels"] = c.labels;
    ResourceConfig config;
    config.app_label = c.app_label;
    auto r = DecodePodRequest(pod, config);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->app, c.want);
    EXPECT_EQ(DecodePodApp(pod, c.app_label), c.want);
  }
  EXPECT_EQ(DecodePodApp(json::object(), "app"), "") << "no metadata: unknown, not an error";
}

TEST(ResourcesTest, RealPodsAsKubeSchedulerSendsThem) {
  struct Fixture {
    const char* file;
    int64_t milli;
    int64_t memory;
    int32_t count;
    bool exclusive;
  };
  const Fixture fixtures[] = {
      {"1.32/cache-true/001-filter.json", 300, 20000, 1, false},   // gpu-share
      {"1.32/cache-true/004-filter.json", 1000, 0, 2, true},       // gpu-whole: nvidia.com/gpu 2
      {"1.32/cache-false/007-filter.json", 500, 10000, 1, false},  // multi-container: trainer
      {"1.20/cache-true/001-filter.json", 300, 20000, 1, false},
  };
  for (const auto& f : fixtures) {
    std::ifstream in(std::string(GPUSCHED_SHARED_DIR) + "/fixtures/kube-scheduler-extender/" + f.file);
    if (!in) {
      GTEST_SKIP() << "../shared/fixtures not found next to the repository";
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const json body = json::parse(ss.str());
    auto r = DecodePodRequest(body.at("Pod"), ResourceConfig{});
    ASSERT_TRUE(r.ok()) << f.file << ": " << r.status();
    ASSERT_EQ(r->containers.size(), 1u) << f.file;
    EXPECT_EQ(r->containers[0].milli_per_gpu.value(), f.milli) << f.file;
    EXPECT_EQ(r->containers[0].memory_per_gpu.value(), f.memory) << f.file;
    EXPECT_EQ(r->containers[0].count, f.count) << f.file;
    EXPECT_EQ(r->containers[0].exclusive, f.exclusive) << f.file;
  }
}

}  // namespace
}  // namespace gpusched::kube
