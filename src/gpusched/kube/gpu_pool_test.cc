#include "gpusched/kube/gpu_pool.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpusched/kube/dra_slices.h"

namespace gpusched::kube {
namespace {

using core::dra::AttributeValue;
using core::dra::Quantity;

constexpr int64_t kMi = 1024 * 1024;

PoolGpu Gpu(int32_t index, std::vector<int32_t> nvlink_peers = {}, std::vector<core::GpuLink> links = {}) {
  PoolGpu g;
  g.gpu.index = index;
  g.gpu.uuid = common::GpuUuid("GPU-" + std::to_string(index));
  g.gpu.model = "A100-SXM4-80GB";
  g.gpu.memory = common::MiB(81920);
  g.gpu.numa_node = index / 4;
  g.gpu.nvlink_peers = std::move(nvlink_peers);
  g.gpu.links = std::move(links);
  g.product_name = "NVIDIA A100-SXM4-80GB";
  return g;
}

const AttributeValue& Attr(const core::dra::Device& d, const std::string& id) {
  return d.attributes.at("gpu.gpusched.io/" + id);
}

TEST(GpuPoolTest, OneShareableDevicePerGpu) {
  const std::vector<PoolGpu> gpus = {Gpu(1, {0}), Gpu(0, {1})};  // out of order on purpose
  const core::dra::DevicePool pool =
      GpuDevicePool(common::NodeName("n1"), gpus, {.driver_version = "535.104.05", .cuda_version = "12.2"});
  EXPECT_EQ(pool.driver, "gpu.gpusched.io");
  EXPECT_EQ(pool.pool, "n1");
  EXPECT_EQ(pool.node.str(), "n1");
  ASSERT_EQ(pool.devices.size(), 2u);
  const core::dra::Device& d = pool.devices[0];
  EXPECT_EQ(d.name, "gpu-0");
  EXPECT_EQ(pool.devices[1].name, "gpu-1");
  EXPECT_EQ(Attr(d, "uuid"), AttributeValue::String("GPU-0"));
  EXPECT_EQ(Attr(d, "index"), AttributeValue::Int(0));
  EXPECT_EQ(Attr(d, "model"), AttributeValue::String("A100-SXM4-80GB"));
  EXPECT_EQ(Attr(d, "productName"), AttributeValue::String("NVIDIA A100-SXM4-80GB"));
  EXPECT_EQ(Attr(d, "numaNode"), AttributeValue::Int(0));
  EXPECT_EQ(Attr(d, "driverVersion"), AttributeValue::Version("535.104.5"));
  EXPECT_EQ(Attr(d, "cudaVersion"), AttributeValue::Version("12.2.0"));
  EXPECT_EQ(Attr(d, "healthy"), AttributeValue::Bool(true));
  EXPECT_TRUE(d.allow_multiple_allocations);
  EXPECT_TRUE(d.taints.empty());
  // memory: 81920 MiB in bytes; a claim naming no capacity takes it all; MPS takes whole MiB from 256 MiB on.
  const core::dra::DeviceCapacity& memory = d.capacity.at("gpu.gpusched.io/memory");
  EXPECT_EQ(memory.value, Quantity::FromUnits(81920 * kMi));
  EXPECT_EQ(memory.request_policy, (core::dra::CapacityRequestPolicy{.default_value = Quantity::FromUnits(81920 * kMi),
                                                                     .min = Quantity::FromUnits(256 * kMi),
                                                                     .max = Quantity::FromUnits(81920 * kMi),
                                                                     .step = Quantity::FromUnits(kMi)}));
  const core::dra::DeviceCapacity& compute = d.capacity.at("gpu.gpusched.io/compute");
  EXPECT_EQ(compute.value, Quantity::FromUnits(100));
  EXPECT_EQ(compute.request_policy, (core::dra::CapacityRequestPolicy{.default_value = Quantity::FromUnits(100),
                                                                      .min = Quantity::FromUnits(1),
                                                                      .max = Quantity::FromUnits(100),
                                                                      .step = Quantity::FromUnits(1)}));
  // What the API server would accept.
  auto specs = EncodeResourceSliceSpecs(pool);
  ASSERT_TRUE(specs.ok()) << specs.status();
  EXPECT_EQ(specs->size(), 1u);
}

TEST(GpuPoolTest, WholeGpusOnlyHasNoSharingAndNoPolicies) {
  const std::vector<PoolGpu> gpus = {Gpu(0)};
  const core::dra::DevicePool pool = GpuDevicePool(common::NodeName("n1"), gpus, {.whole_gpus_only = true});
  const core::dra::Device& d = pool.devices[0];
  EXPECT_FALSE(d.allow_multiple_allocations);
  EXPECT_FALSE(d.capacity.at("gpu.gpusched.io/memory").request_policy.has_value());
  EXPECT_FALSE(d.capacity.at("gpu.gpusched.io/compute").request_policy.has_value());
  EXPECT_TRUE(EncodeResourceSliceSpecs(pool).ok());
}

TEST(GpuPoolTest, UnknownFactsAreLeftOut) {
  PoolGpu g = Gpu(0);
  g.gpu.memory = common::MiB(0);
  g.gpu.numa_node = -1;
  g.product_name.clear();
  const std::vector<PoolGpu> gpus = {g};
  const core::dra::DevicePool pool = GpuDevicePool(common::NodeName("n1"), gpus, {.driver_version = "not-a-version"});
  const core::dra::Device& d = pool.devices[0];
  EXPECT_FALSE(d.capacity.contains("gpu.gpusched.io/memory"));
  EXPECT_FALSE(d.attributes.contains("gpu.gpusched.io/numaNode"));
  EXPECT_FALSE(d.attributes.contains("gpu.gpusched.io/productName"));
  EXPECT_FALSE(d.attributes.contains("gpu.gpusched.io/driverVersion"));
  EXPECT_FALSE(d.attributes.contains("gpu.gpusched.io/cudaVersion"));
  EXPECT_TRUE(EncodeResourceSliceSpecs(pool).ok());

  // A GPU of at most 256 MiB cannot be split at MPS's granularity from 256 MiB: default only.
  g = Gpu(0);
  g.gpu.memory = common::MiB(256);
  const std::vector<PoolGpu> small = {g};
  const core::dra::DevicePool tiny = GpuDevicePool(common::NodeName("n1"), small, {});
  const auto& policy = tiny.devices[0].capacity.at("gpu.gpusched.io/memory").request_policy;
  ASSERT_TRUE(policy.has_value());
  EXPECT_FALSE(policy->min.has_value());
  EXPECT_TRUE(EncodeResourceSliceSpecs(tiny).ok());
}

TEST(GpuPoolTest, UnhealthyGpusAreTaintedNoSchedule) {
  PoolGpu xid = Gpu(0);
  xid.gpu.healthy = false;
  xid.last_xid = 79;
  PoolGpu lost = Gpu(1);
  lost.gpu.healthy = false;
  const std::vector<PoolGpu> gpus = {xid, lost, Gpu(2)};
  const core::dra::DevicePool pool = GpuDevicePool(common::NodeName("n1"), gpus, {});
  EXPECT_EQ(pool.devices[0].taints,
            (std::vector<core::dra::DeviceTaint>{
                {.key = "gpu.gpusched.io/unhealthy", .value = "xid-79", .effect = "NoSchedule"}}));
  EXPECT_EQ(
      pool.devices[1].taints,
      (std::vector<core::dra::DeviceTaint>{{.key = "gpu.gpusched.io/unhealthy", .value = "", .effect = "NoSchedule"}}));
  EXPECT_TRUE(pool.devices[2].taints.empty());
  EXPECT_EQ(Attr(pool.devices[0], "healthy"), AttributeValue::Bool(false));
  EXPECT_TRUE(EncodeResourceSliceSpecs(pool).ok());
}

struct GroupCase {
  const char* name;
  std::vector<PoolGpu> gpus;
  std::vector<int64_t> want;  // linkGroup by index
};

TEST(GpuPoolTest, LinkGroupsAreNvlinkComponents) {
  using core::LinkKind;
  const GroupCase cases[] = {
      {"no NVLink: each GPU alone", {Gpu(0), Gpu(1), Gpu(2)}, {0, 1, 2}},
      // 0-1 and 2-3 by nvlink_peers: two pairs.
      {"two NVLink pairs", {Gpu(0, {1}), Gpu(1, {0}), Gpu(2, {3}), Gpu(3, {2})}, {0, 0, 2, 2}},
      // A chain 0-1-2 through links (one direction is enough); 3 reaches 0 only through PCIe.
      {"a chain joins transitively, PCIe does not",
       {Gpu(0, {}, {{.peer = 1, .kind = LinkKind::kNvlink, .nvlinks = 4}, {.peer = 3, .kind = LinkKind::kPcieSwitch}}),
        Gpu(1, {}, {{.peer = 2, .kind = LinkKind::kNvlink, .nvlinks = 4}}), Gpu(2), Gpu(3)},
       {0, 0, 0, 3}},
      // NVSwitch boards: every GPU with every other.
      {"NVSwitch: one group",
       {Gpu(0, {}, {{.peer = 1, .kind = LinkKind::kNvSwitch}, {.peer = 2, .kind = LinkKind::kNvSwitch}}), Gpu(1),
        Gpu(2)},
       {0, 0, 0}},
      {"a peer not in the inventory is ignored", {Gpu(0, {7}), Gpu(1)}, {0, 1}},
  };
  for (const auto& c : cases) {
    const core::dra::DevicePool pool = GpuDevicePool(common::NodeName("n1"), c.gpus, {});
    ASSERT_EQ(pool.devices.size(), c.want.size()) << c.name;
    for (size_t i = 0; i < c.want.size(); ++i) {
      EXPECT_EQ(Attr(pool.devices[i], "linkGroup"), AttributeValue::Int(c.want[i])) << c.name << ": gpu-" << i;
    }
  }
}

TEST(GpuPoolTest, VersionsAreNormalisedToSemver) {
  const std::pair<const char*, const char*> cases[] = {
      {"535.104.05", "535.104.5"}, {"550.54.15", "550.54.15"},   {"12.2", "12.2.0"},  {"470", "470.0.0"},
      {"1.2.3.4", "1.2.3+4"},      {"1.02.3.04.5", "1.2.3+4.5"}, {"00.0.0", "0.0.0"},
  };
  for (const auto& [in, want] : cases) {
    auto got = NormaliseVersion(in);
    ASSERT_TRUE(got.has_value()) << in;
    EXPECT_EQ(*got, want) << in;
    EXPECT_TRUE(IsSemver(*got)) << *got;
  }
  for (const char* bad : {"", "535.", ".1", "r535", "1.2.x", "99999999999.0.0"}) {
    EXPECT_FALSE(NormaliseVersion(bad).has_value()) << bad;
  }
}

// The example of docs/dra.md: a 2-GPU node (NVLink between them), GPU 1 after XID 79, driver 550.54.15.
TEST(GpuPoolTest, TwoGpuNodeAsTheDocsShowIt) {
  PoolGpu a = Gpu(0, {1});
  a.gpu.uuid = common::GpuUuid("GPU-4f6c1a02-7d1e-4b7e-9d0b-1c2e3f405162");
  PoolGpu b = Gpu(1, {0});
  b.gpu.uuid = common::GpuUuid("GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d");
  b.gpu.healthy = false;
  b.last_xid = 79;
  const std::vector<PoolGpu> gpus = {a, b};
  core::dra::DevicePool pool = GpuDevicePool(common::NodeName("gpu-node-1"), gpus, {.driver_version = "550.54.15"});
  pool.generation = 1;
  auto specs = EncodeResourceSliceSpecs(pool);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  const nlohmann::json want = nlohmann::json::parse(R"({
    "driver": "gpu.gpusched.io",
    "pool": {"name": "gpu-node-1", "generation": 1, "resourceSliceCount": 1},
    "nodeName": "gpu-node-1",
    "devices": [
      {"name": "gpu-0",
       "attributes": {"uuid": {"string": "GPU-4f6c1a02-7d1e-4b7e-9d0b-1c2e3f405162"}, "index": {"int": 0},
                      "model": {"string": "A100-SXM4-80GB"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                      "numaNode": {"int": 0}, "linkGroup": {"int": 0}, "driverVersion": {"version": "550.54.15"},
                      "healthy": {"bool": true}},
       "capacity": {
         "memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi",
                    "validRange": {"min": "256Mi", "max": "80Gi", "step": "1Mi"}}},
         "compute": {"value": "100", "requestPolicy": {"default": "100",
                     "validRange": {"min": "1", "max": "100", "step": "1"}}}},
       "allowMultipleAllocations": true},
      {"name": "gpu-1",
       "attributes": {"uuid": {"string": "GPU-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"}, "index": {"int": 1},
                      "model": {"string": "A100-SXM4-80GB"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                      "numaNode": {"int": 0}, "linkGroup": {"int": 0}, "driverVersion": {"version": "550.54.15"},
                      "healthy": {"bool": false}},
       "capacity": {
         "memory": {"value": "80Gi", "requestPolicy": {"default": "80Gi",
                    "validRange": {"min": "256Mi", "max": "80Gi", "step": "1Mi"}}},
         "compute": {"value": "100", "requestPolicy": {"default": "100",
                     "validRange": {"min": "1", "max": "100", "step": "1"}}}},
       "allowMultipleAllocations": true,
       "taints": [{"key": "gpu.gpusched.io/unhealthy", "value": "xid-79", "effect": "NoSchedule"}]}
    ]
  })");
  EXPECT_EQ((*specs)[0], want) << (*specs)[0].dump(2);
}

}  // namespace
}  // namespace gpusched::kube
