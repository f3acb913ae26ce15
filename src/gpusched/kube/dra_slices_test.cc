#include "gpusched/kube/dra_slices.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using core::dra::AttributeValue;
using core::dra::Quantity;
using nlohmann::json;

constexpr int64_t kMi = 1024 * 1024;

// A valid slice of driver gpu.gpusched.io on node n1 with one shareable GPU.
json Slice() {
  return json::parse(R"({
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
    "metadata": {"name": "n1-gpu.gpusched.io-0", "resourceVersion": "7"},
    "spec": {
      "driver": "gpu.gpusched.io",
      "pool": {"name": "n1", "generation": 3, "resourceSliceCount": 1},
      "nodeName": "n1",
      "devices": [{
        "name": "gpu-0",
        "attributes": {"uuid": {"string": "GPU-1"}, "index": {"int": 0}, "healthy": {"bool": true},
                       "driverVersion": {"version": "535.104.5"},
                       "example.com/rack": {"string": "r1"}},
        "capacity": {"memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi",
                                  "validRange": {"min": "256Mi", "max": "80Gi", "step": "1Mi"}}},
                     "compute": {"value": 100, "requestPolicy": {"default": "100", "validValues": ["50", "100"]}}},
        "allowMultipleAllocations": true,
        "taints": [{"key": "gpu.gpusched.io/unhealthy", "value": "xid-79", "effect": "NoSchedule",
                    "timeAdded": "2026-12-04T01:00:00Z"}]
      }]
    }
  })");
}

TEST(DraSlicesTest, DecodesTheV1ShapeAndQualifiesNames) {
  auto info = DecodeResourceSlice(Slice());
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->name, "n1-gpu.gpusched.io-0");
  EXPECT_EQ(info->resource_version, "7");
  EXPECT_EQ(info->resource_slice_count, 1);
  EXPECT_TRUE(info->node_local);
  EXPECT_EQ(info->pool.driver, "gpu.gpusched.io");
  EXPECT_EQ(info->pool.pool, "n1");
  EXPECT_EQ(info->pool.node.str(), "n1");
  EXPECT_EQ(info->pool.generation, 3);
  ASSERT_EQ(info->pool.devices.size(), 1u);
  const core::dra::Device& d = info->pool.devices[0];
  EXPECT_EQ(d.name, "gpu-0");
  EXPECT_EQ(d.attributes.at("gpu.gpusched.io/uuid"), AttributeValue::String("GPU-1"));
  EXPECT_EQ(d.attributes.at("gpu.gpusched.io/index"), AttributeValue::Int(0));
  EXPECT_EQ(d.attributes.at("gpu.gpusched.io/healthy"), AttributeValue::Bool(true));
  EXPECT_EQ(d.attributes.at("gpu.gpusched.io/driverVersion"), AttributeValue::Version("535.104.5"));
  EXPECT_EQ(d.attributes.at("example.com/rack"), AttributeValue::String("r1"));  // already qualified: kept
  EXPECT_TRUE(d.allow_multiple_allocations);
  const core::dra::DeviceCapacity& memory = d.capacity.at("gpu.gpusched.io/memory");
  EXPECT_EQ(memory.value, Quantity::FromUnits(80 * 1024 * kMi));
  ASSERT_TRUE(memory.request_policy.has_value());
  EXPECT_EQ(memory.request_policy->default_value, Quantity::FromUnits(80 * 1024 * kMi));
  EXPECT_EQ(memory.request_policy->min, Quantity::FromUnits(256 * kMi));
  EXPECT_EQ(memory.request_policy->step, Quantity::FromUnits(kMi));
  const core::dra::DeviceCapacity& compute = d.capacity.at("gpu.gpusched.io/compute");
  EXPECT_EQ(compute.value, Quantity::FromUnits(100));  // a JSON number is a quantity too
  ASSERT_TRUE(compute.request_policy.has_value());
  EXPECT_EQ(compute.request_policy->valid_values,
            (std::vector<Quantity>{Quantity::FromUnits(50), Quantity::FromUnits(100)}));
  ASSERT_EQ(d.taints.size(), 1u);
  EXPECT_EQ(d.taints[0], (core::dra::DeviceTaint{.key = "gpu.gpusched.io/unhealthy",
                                                 .value = "xid-79",
                                                 .effect = "NoSchedule",
                                                 .time_added = "2026-12-04T01:00:00Z"}));
}

TEST(DraSlicesTest, EncodeThenDecodeIsTheSamePool) {
  auto info = DecodeResourceSlice(Slice());
  ASSERT_TRUE(info.ok()) << info.status();
  auto specs = EncodeResourceSliceSpecs(info->pool);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  const json& spec = (*specs)[0];
  // Names of the driver's own domain are written short; others keep their domain.
  EXPECT_TRUE(spec["devices"][0]["attributes"].contains("uuid"));
  EXPECT_TRUE(spec["devices"][0]["attributes"].contains("example.com/rack"));
  EXPECT_EQ(spec["devices"][0]["capacity"]["memory"]["value"], "80Gi");
  auto again = DecodeResourceSlice(json{{"metadata", {{"name", "x"}}}, {"spec", spec}});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->pool, info->pool);
}

TEST(DraSlicesTest, PoolsNotLocalToANodeDecodeWithoutANode) {
  json all = Slice();
  all["spec"].erase("nodeName");
  all["spec"]["allNodes"] = true;
  auto info = DecodeResourceSlice(all);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->node_local);
  EXPECT_TRUE(info->pool.node.empty());
}

struct BadCase {
  const char* name;
  std::function<void(json&)> mutate;
  const char* want;  // a substring of the error
};

TEST(DraSlicesTest, ValidationRefusesWhatTheApiServerRefuses) {
  const BadCase cases[] = {
      {"no driver", [](json& s) { s["spec"].erase("driver"); }, "spec.driver: required"},
      {"driver not a DNS subdomain", [](json& s) { s["spec"]["driver"] = "gpu_gpusched"; }, "spec.driver"},
      {"driver longer than 63", [](json& s) { s["spec"]["driver"] = std::string(61, 'a') + ".io"; }, "spec.driver"},
      {"no pool", [](json& s) { s["spec"].erase("pool"); }, "spec.pool: required"},
      {"pool name with a bad part", [](json& s) { s["spec"]["pool"]["name"] = "n1//x"; }, "spec.pool.name"},
      {"negative generation", [](json& s) { s["spec"]["pool"]["generation"] = -1; }, "spec.pool.generation"},
      {"zero resourceSliceCount", [](json& s) { s["spec"]["pool"]["resourceSliceCount"] = 0; },
       "spec.pool.resourceSliceCount: must be greater than zero"},
      {"no node selection", [](json& s) { s["spec"].erase("nodeName"); }, "exactly one of nodeName"},
      {"two node selections", [](json& s) { s["spec"]["allNodes"] = true; }, "several are set"},
      {"allNodes false",
       [](json& s) {
         s["spec"].erase("nodeName");
         s["spec"]["allNodes"] = false;
       },
       "spec.allNodes: must be either unset or set to true"},
      {"node name not a DNS subdomain", [](json& s) { s["spec"]["nodeName"] = "N1"; }, "spec.nodeName"},
      {"object name not a DNS subdomain", [](json& s) { s["metadata"]["name"] = "Slice_1"; }, "metadata.name"},
      {"no object name", [](json& s) { s["metadata"].erase("name"); }, "name or generateName is required"},
      {"device name not a DNS label", [](json& s) { s["spec"]["devices"][0]["name"] = "gpu.0"; },
       "spec.devices[0].name"},
      {"duplicate device names", [](json& s) { s["spec"]["devices"].push_back(s["spec"]["devices"][0]); },
       "duplicate device name \"gpu-0\""},
      {"attribute with two values", [](json& s) { s["spec"]["devices"][0]["attributes"]["index"]["bool"] = true; },
       "attributes[index]: exactly one value must be specified"},
      {"attribute with no value", [](json& s) { s["spec"]["devices"][0]["attributes"]["index"] = json::object(); },
       "exactly one value"},
      {"identifier longer than 32",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"][std::string(33, 'a')] = {{"int", 1}};
       },
       "longer than 32 characters"},
      {"identifier not a C identifier",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["1x"] = {{"int", 1}};
       },
       "must be a C identifier"},
      {"two slashes",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["a.io/b/c"] = {{"int", 1}};
       },
       "more than one slash"},
      {"string longer than 64",
       [](json& s) { s["spec"]["devices"][0]["attributes"]["uuid"]["string"] = std::string(65, 'x'); },
       "at most 64 characters"},
      {"version with a leading zero",
       [](json& s) { s["spec"]["devices"][0]["attributes"]["driverVersion"]["version"] = "535.104.05"; },
       "must be a semantic version"},
      {"more than 32 attributes and capacities",
       [](json& s) {
         for (int i = 0; i < 30; ++i) {
           s["spec"]["devices"][0]["attributes"]["a" + std::to_string(i)] = {{"int", i}};
         }
       },
       "must not exceed 32 (has 37)"},
      {"request policy on a device that is not shareable",
       [](json& s) { s["spec"]["devices"][0].erase("allowMultipleAllocations"); },
       "capacity[compute].requestPolicy: forbidden: allowMultipleAllocations must be true"},
      {"both validValues and validRange",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["validRange"] = {{"min", "1"}};
       },
       "not both validValues and validRange"},
      {"validValues not ascending",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["validValues"] = {"100", "50"};
       },
       "sorted in ascending order"},
      {"default not among validValues",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["default"] = "75"; },
       "the default 75 is not one of the valid values"},
      {"valid value above the capacity",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["compute"]["requestPolicy"]["validValues"] = {"100", "200"};
       },
       "option 200 is larger than the capacity 100"},
      {"range without min",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["validRange"].erase("min"); },
       "validRange.min: required"},
      {"range without default",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"].erase("default"); },
       "default: required when validRange is defined"},
      {"max above the capacity",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["validRange"]["max"] = "81Gi"; },
       "max 81Gi is larger than the capacity 80Gi"},
      {"default not on a step",
       [](json& s) {
         // (80Gi - 256Mi) / 1Gi is not whole: 80Gi is not reachable from 256Mi in steps of 1Gi.
         s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["validRange"]["step"] = "1Gi";
       },
       "default 80Gi is not a multiple of the step 1Gi from min 256Mi"},
      {"zero step",
       [](json& s) { s["spec"]["devices"][0]["capacity"]["memory"]["requestPolicy"]["validRange"]["step"] = "0"; },
       "step: must be greater than zero"},
      {"malformed quantity", [](json& s) { s["spec"]["devices"][0]["capacity"]["memory"]["value"] = "80GB"; },
       "capacity[memory].value: quantity \"80GB\""},
      {"taint without effect", [](json& s) { s["spec"]["devices"][0]["taints"][0].erase("effect"); },
       "taints[0].effect: required"},
      {"taint effect PreferNoSchedule",
       [](json& s) { s["spec"]["devices"][0]["taints"][0]["effect"] = "PreferNoSchedule"; },
       "is not one of None, NoSchedule, NoExecute"},
      {"taint key not a label name", [](json& s) { s["spec"]["devices"][0]["taints"][0]["key"] = "a b"; },
       "taints[0].key"},
      {"taint time not RFC 3339", [](json& s) { s["spec"]["devices"][0]["taints"][0]["timeAdded"] = "yesterday"; },
       "timeAdded: must be an RFC 3339 time"},
      {"more than 16 taints",
       [](json& s) {
         for (int i = 0; i < 16; ++i) {
           s["spec"]["devices"][0]["taints"].push_back({{"key", "k" + std::to_string(i)}, {"effect", "None"}});
         }
       },
       "taints: must have at most 16 entries"},
      {"devices and sharedCounters", [](json& s) { s["spec"]["sharedCounters"] = json::array(); },
       "only one of sharedCounters or devices"},
      {"per-device node name without perDeviceNodeSelection",
       [](json& s) { s["spec"]["devices"][0]["nodeName"] = "n1"; }, "can only be set if perDeviceNodeSelection"},
  };
  for (const auto& c : cases) {
    json s = Slice();
    c.mutate(s);
    const common::Status status = ValidateResourceSlice(s);
    ASSERT_FALSE(status.ok()) << c.name;
    EXPECT_NE(status.message().find(c.want), std::string::npos) << c.name << ": " << status.message();
    EXPECT_FALSE(DecodeResourceSlice(s).ok()) << c.name;
  }
}

TEST(DraSlicesTest, DeviceLimitIs128Or64WithTaints) {
  auto with = [](size_t n, bool taints) {
    json s = Slice();
    json device = s["spec"]["devices"][0];
    if (!taints) {
      device.erase("taints");
    }
    s["spec"]["devices"] = json::array();
    for (size_t i = 0; i < n; ++i) {
      device["name"] = "gpu-" + std::to_string(i);
      s["spec"]["devices"].push_back(device);
    }
    return ValidateResourceSlice(s);
  };
  EXPECT_TRUE(with(128, false).ok());
  EXPECT_FALSE(with(129, false).ok());
  EXPECT_TRUE(with(64, true).ok());
  const common::Status s = with(65, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at most 64 items when a device has taints"), std::string::npos) << s.message();
}

TEST(DraSlicesTest, DecodingRefusesFieldsGpuschedDoesNotModel) {
  const BadCase cases[] = {
      {"consumesCounters",
       [](json& s) {
         s["spec"]["devices"][0]["consumesCounters"] = {
             {{"counterSet", "mem"}, {"counters", {{"m", {{"value", "1"}}}}}}};
       },
       "consumesCounters: not supported"},
      {"bindingConditions", [](json& s) { s["spec"]["devices"][0]["bindingConditions"] = {"Ready"}; },
       "bindingConditions: not supported"},
      {"bindsToNode", [](json& s) { s["spec"]["devices"][0]["bindsToNode"] = true; }, "bindsToNode: true"},
      {"list attribute",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["ids"] = {{"ints", {1, 2}}};
       },
       "list-typed attributes"},
      {"a name given both ways",
       [](json& s) {
         s["spec"]["devices"][0]["attributes"]["gpu.gpusched.io/uuid"] = {{"string", "GPU-2"}};
       },
       "given twice"},
      {"capacity finer than a milli-unit",
       [](json& s) {
         s["spec"]["devices"][0]["capacity"]["x"] = {{"value", "0.0001"}};
       },
       "finer than a milli-unit"},
  };
  for (const auto& c : cases) {
    json s = Slice();
    c.mutate(s);
    auto decoded = DecodeResourceSlice(s);
    ASSERT_FALSE(decoded.ok()) << c.name;
    EXPECT_NE(decoded.status().message().find(c.want), std::string::npos) << c.name << ": " << decoded.status();
    EXPECT_NE(decoded.status().message().find("gpu-0"), std::string::npos) << c.name << ": names the device";
  }
  json shared = Slice();
  shared["spec"].erase("devices");
  shared["spec"]["sharedCounters"] = {{{"name", "mem"}, {"counters", {{"m", {{"value", "1"}}}}}}};
  EXPECT_TRUE(ValidateResourceSlice(shared).ok());  // the API server accepts it...
  auto decoded = DecodeResourceSlice(shared);       // ...gpusched does not model it
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("spec.sharedCounters is not supported"), std::string::npos);
}

core::dra::Device Device(int i, bool tainted) {
  core::dra::Device d{.name = "gpu-" + std::to_string(i)};
  d.attributes["gpu.gpusched.io/index"] = AttributeValue::Int(i);
  if (tainted) {
    d.taints.push_back({.key = "gpu.gpusched.io/unhealthy", .effect = "NoSchedule"});
  }
  return d;
}

struct SplitCase {
  const char* name;
  int devices;
  std::vector<int> tainted;
  std::vector<size_t> want;  // devices per slice
};

TEST(DraSlicesTest, EncodingSplitsAPoolAtTheApiLimit) {
  const SplitCase cases[] = {
      {"empty pool: one empty slice", 0, {}, {0}},
      {"2 GPUs: one slice", 2, {}, {2}},
      {"128 untainted: one slice", 128, {}, {128}},
      {"129 untainted: 128 + 1", 129, {}, {128, 1}},
      {"300 untainted: 128 + 128 + 44", 300, {}, {128, 128, 44}},
      // The taint is device 0: the first slice holds 64; the rest have none and hold up to 128.
      {"200 with device 0 tainted: 64 + 128 + 8", 200, {0}, {64, 128, 8}},
      // Device 100 is tainted: the first slice stops before it would exceed 64 with it (it already has 100).
      {"130 with device 100 tainted: 100 + 30", 130, {100}, {100, 30}},
  };
  for (const auto& c : cases) {
    core::dra::DevicePool pool{
        .driver = "gpu.gpusched.io", .pool = "n1", .node = common::NodeName("n1"), .generation = 4};
    for (int i = 0; i < c.devices; ++i) {
      pool.devices.push_back(Device(i, std::find(c.tainted.begin(), c.tainted.end(), i) != c.tainted.end()));
    }
    auto specs = EncodeResourceSliceSpecs(pool);
    ASSERT_TRUE(specs.ok()) << c.name << ": " << specs.status();
    std::vector<size_t> got;
    core::dra::DevicePool back{
        .driver = "gpu.gpusched.io", .pool = "n1", .node = common::NodeName("n1"), .generation = 4};
    for (const json& spec : *specs) {
      got.push_back(spec["devices"].size());
      EXPECT_EQ(spec["pool"]["resourceSliceCount"], static_cast<int64_t>(c.want.size())) << c.name;
      EXPECT_EQ(spec["pool"]["generation"], 4) << c.name;
      auto info = DecodeResourceSlice(json{{"metadata", {{"name", "s"}}}, {"spec", spec}});
      ASSERT_TRUE(info.ok()) << c.name << ": " << info.status();
      back.devices.insert(back.devices.end(), info->pool.devices.begin(), info->pool.devices.end());
    }
    EXPECT_EQ(got, c.want) << c.name;
    EXPECT_EQ(back, pool) << c.name << ": the slices hold the pool's devices in order";
  }
}

TEST(DraSlicesTest, EncodingRefusesADeviceOverTheAttributeLimitAndNamesIt) {
  core::dra::DevicePool pool{.driver = "gpu.gpusched.io", .pool = "n1", .node = common::NodeName("n1")};
  pool.devices.push_back(Device(0, false));
  core::dra::Device big{.name = "gpu-1"};
  for (int i = 0; i < 33; ++i) {
    big.attributes["gpu.gpusched.io/a" + std::to_string(i)] = AttributeValue::Int(i);
  }
  pool.devices.push_back(big);
  auto specs = EncodeResourceSliceSpecs(pool);
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("device gpu-1 of pool n1 has 33 attributes and capacities"),
            std::string::npos)
      << specs.status();

  core::dra::DevicePool bad_version{.driver = "gpu.gpusched.io", .pool = "n1", .node = common::NodeName("n1")};
  bad_version.devices.push_back(Device(0, false));
  bad_version.devices[0].attributes["gpu.gpusched.io/driverVersion"] = AttributeValue::Version("535.104.05");
  specs = EncodeResourceSliceSpecs(bad_version);
  ASSERT_FALSE(specs.ok());
  EXPECT_NE(specs.status().message().find("must be a semantic version"), std::string::npos) << specs.status();

  core::dra::DevicePool no_node{.driver = "gpu.gpusched.io", .pool = "n1"};
  EXPECT_FALSE(EncodeResourceSliceSpecs(no_node).ok());
}

ResourceSliceInfo Info(const std::string& name, const std::string& pool, int64_t generation, int64_t count,
                       std::vector<int> devices) {
  ResourceSliceInfo s{.name = name, .resource_slice_count = count};
  s.pool = core::dra::DevicePool{
      .driver = "gpu.gpusched.io", .pool = pool, .node = common::NodeName(pool), .generation = generation};
  for (int i : devices) {
    s.pool.devices.push_back(Device(i, false));
  }
  return s;
}

TEST(DraSlicesTest, AssemblingPoolsUsesTheHighestGenerationAndChecksTheCount) {
  const std::vector<ResourceSliceInfo> slices = {
      // n1: generation 2 complete (2 of 2); the stale generation-1 slice is ignored.
      Info("n1-1", "n1", 2, 2, {2}),
      Info("n1-0", "n1", 2, 2, {0, 1}),
      Info("n1-old", "n1", 1, 1, {7}),
      // n2: generation 5 says 2 slices, only one is there yet.
      Info("n2-0", "n2", 5, 2, {0}),
      // n3: a device in two slices.
      Info("n3-0", "n3", 1, 2, {0}),
      Info("n3-1", "n3", 1, 2, {0}),
  };
  const std::vector<AssembledPool> pools = AssemblePools(slices);
  ASSERT_EQ(pools.size(), 3u);
  EXPECT_EQ(pools[0].pool.pool, "n1");
  EXPECT_EQ(pools[0].pool.generation, 2);
  EXPECT_EQ(pools[0].problem, "");
  ASSERT_EQ(pools[0].pool.devices.size(), 3u);
  EXPECT_EQ(pools[0].pool.devices[0].name, "gpu-0");  // n1-0 before n1-1
  EXPECT_EQ(pools[0].pool.devices[2].name, "gpu-2");
  EXPECT_EQ(pools[1].problem, "incomplete: 1 of 2 slices of generation 5");
  EXPECT_EQ(pools[2].problem, "device gpu-0 appears in two of its slices");
}

TEST(DraSlicesTest, SliceNamesAreValidForEveryNodeName) {
  EXPECT_EQ(ResourceSliceName("n1", "gpu.gpusched.io", 0), "n1-gpu.gpusched.io-0");
  const std::string long_a = std::string(240, 'a') + "x";
  const std::string long_b = std::string(240, 'a') + "y";
  const std::string a = ResourceSliceName(long_a, "gpu.gpusched.io", 1);
  const std::string b = ResourceSliceName(long_b, "gpu.gpusched.io", 1);
  EXPECT_LE(a.size(), 253u);
  EXPECT_TRUE(IsDnsSubdomain(a)) << a;
  EXPECT_NE(a, b) << "two long node names that differ only at the end";
  EXPECT_TRUE(a.ends_with("-gpu.gpusched.io-1")) << a;
}

TEST(DraSlicesTest, QuantitiesAndSemver) {
  EXPECT_EQ(FormatDraQuantity(Quantity::FromUnits(81920 * kMi)), "80Gi");
  EXPECT_EQ(FormatDraQuantity(Quantity::FromUnits(256 * kMi)), "256Mi");
  EXPECT_EQ(FormatDraQuantity(Quantity::FromUnits(100)), "100");
  EXPECT_EQ(FormatDraQuantity(Quantity::FromUnits(0)), "0");
  EXPECT_EQ(FormatDraQuantity(Quantity{1500}), "1500m");
  for (const char* ok : {"1.2.3", "535.104.5", "0.0.0", "1.0.0-rc.1", "1.0.0+build.05", "1.0.0-alpha-1"}) {
    EXPECT_TRUE(IsSemver(ok)) << ok;
  }
  for (const char* bad : {"535.104.05", "1.2", "1.2.3.4", "v1.2.3", "1.2.3-", "1.2.3-01", "", "1..3"}) {
    EXPECT_FALSE(IsSemver(bad)) << bad;
  }
}

}  // namespace
}  // namespace gpusched::kube
