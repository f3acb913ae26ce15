// The DRA kubelet plugin's pure parts: which claims PrepareClaim refuses and why, what a prepared claim's CDI spec
// holds (whole and shared GPUs), device names, the checkpoint's format and its bad input, and the options' checks.
// The gRPC side runs against the fake kubelet in tests/integration/dra_plugin_test.cc.
#include "gpusched/adapters/deviceplugin/dra_plugin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpusched::adapters::deviceplugin {
namespace {

namespace fs = std::filesystem;
namespace dra = core::dra;
using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kNode = "node-a";
constexpr const char* kUid = "0f3c1d2e-aaaa-bbbb-cccc-000000000001";

dra::Quantity Gi(int64_t n) { return dra::Quantity::FromUnits(n * 1024 * 1024 * 1024); }
dra::Quantity Percent(int64_t n) { return dra::Quantity::FromUnits(n); }

class DraPrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpdra-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/dev");
    for (const char* node : {"nvidiactl", "nvidia-uvm"}) {
      std::ofstream(dir_ + "/dev/" + node) << "";
    }
    // GPU 0 at bus 10 has minor 2, GPU 1 at bus 11 minor 0: the minor is the driver's, not the index.
    Driver("0000:10:00.0", 2);
    Driver("0000:11:00.0", 0);
    options_.node_name = kNode;
    options_.cdi = CdiSpecOptions{.spec_dir = dir_ + "/cdi", .dev_dir = dir_ + "/dev", .proc_gpus_dir = dir_ + "/proc"};
    options_.mps.pipe_host_dir = "/run/nvidia/mps/pipe";
    options_.mps.pipe_container_dir = "/tmp/nvidia-mps";
    gpus_ = {Gpu(0, "00000000:10:00.0"), Gpu(1, "00000000:11:00.0")};
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Driver(const std::string& bus, int minor) const {
    fs::create_directories(dir_ + "/proc/" + bus);
    std::ofstream(dir_ + "/proc/" + bus + "/information") << "Model: \t A100\nDevice Minor: \t " << minor << "\n";
  }
  static ports::GpuSample Gpu(int index, const std::string& bus) {
    return ports::GpuSample{
        .index = index, .uuid = common::GpuUuid("GPU-" + std::to_string(index)), .pci_bus_id = bus, .numa_node = index};
  }
  static ClaimRef Ref() { return ClaimRef{.namespace_ = "team-a", .uid = kUid, .name = "train-gpu"}; }
  // A claim of team-a/train-gpu allocated on `node` with `devices`.
  static dra::ResourceClaim Claim(std::vector<dra::DeviceResult> devices, const std::string& node = kNode) {
    dra::ResourceClaim c{.namespace_ = "team-a", .name = "train-gpu", .uid = kUid};
    c.allocation = dra::ClaimAllocation{.devices = std::move(devices), .node = common::NodeName(node)};
    return c;
  }
  static dra::DeviceResult Whole(const std::string& device, const std::string& request = "gpu") {
    return dra::DeviceResult{.request = request, .driver = "gpu.gpusched.io", .pool = kNode, .device = device};
  }
  static dra::DeviceResult Shared(const std::string& device, int64_t percent, int64_t gib) {
    dra::DeviceResult r = Whole(device);
    r.consumed_capacity = {{"gpu.gpusched.io/compute", Percent(percent)}, {"gpu.gpusched.io/memory", Gi(gib)}};
    r.share_id = "s1";
    return r;
  }
  static std::vector<std::string> Env(const json& spec) {
    return spec["containerEdits"]["env"].get<std::vector<std::string>>();
  }

  std::string dir_;
  DraPluginOptions options_;
  std::vector<ports::GpuSample> gpus_;
};

TEST_F(DraPrepareTest, RefusesClaimsThatAreNotThisNodesToPrepare) {
  struct Case {
    std::string name;
    dra::ResourceClaim claim;
    std::string says;
  };
  dra::ResourceClaim unallocated{.namespace_ = "team-a", .name = "train-gpu", .uid = kUid};
  dra::ResourceClaim other_uid = Claim({Whole("gpu-0")});
  other_uid.uid = "0f3c1d2e-aaaa-bbbb-cccc-000000000999";
  dra::ResourceClaim deleting = Claim({Whole("gpu-0")});
  deleting.deallocation_requested = true;
  dra::DeviceResult other_driver = Whole("gpu-0");
  other_driver.driver = "gpu.nvidia.com";
  dra::DeviceResult other_pool = Whole("gpu-0");
  other_pool.pool = "node-b";
  const std::vector<Case> cases = {
      {.name = "another node's claim",
       .claim = Claim({Whole("gpu-0")}, "node-b"),
       .says = "is allocated to node node-b, this is node node-a"},
      {.name = "not pinned to a node", .claim = Claim({Whole("gpu-0")}, ""), .says = "is allocated to no single node"},
      {.name = "UID differs (re-created claim)",
       .claim = other_uid,
       .says = "has UID 0f3c1d2e-aaaa-bbbb-cccc-000000000999, the kubelet asked for UID " + std::string(kUid)},
      {.name = "unallocated", .claim = unallocated, .says = "team-a/train-gpu is not allocated"},
      {.name = "being deallocated", .claim = deleting, .says = "is being deleted or deallocated"},
      {.name = "no devices of this driver",
       .claim = Claim({other_driver}),
       .says = "has no devices of driver gpu.gpusched.io"},
      {.name = "another pool", .claim = Claim({other_pool}), .says = "is in pool \"node-b\", this node's pool is"},
      {.name = "a GPU the node does not have",
       .claim = Claim({Whole("gpu-7")}),
       .says = "device gpu-7 is not a GPU of this node (it has 2 GPUs)"},
      {.name = "a name that is not gpu-<index>",
       .claim = Claim({Whole("gpu-01")}),
       .says = "device \"gpu-01\" is not one of this driver's names"},
  };
  for (const Case& c : cases) {
    auto got = PrepareClaim(options_, Ref(), c.claim, gpus_);
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_THAT(got.status().message(), HasSubstr(c.says)) << c.name;
    EXPECT_THAT(got.status().message(), HasSubstr("not prepared")) << c.name;
  }
}

TEST_F(DraPrepareTest, AGpuWithoutAMinorIsRefusedNamingIt) {
  gpus_.push_back(Gpu(2, "00000000:12:00.0"));  // no information file
  auto got = PrepareClaim(options_, Ref(), Claim({Whole("gpu-2")}), gpus_);
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(),
              HasSubstr("GPU 2 (GPU-2): cannot read " + dir_ + "/proc/0000:12:00.0/information"));
}

TEST_F(DraPrepareTest, WholeGpusGetTheirDeviceNodesAndUuidsAndNoMpsLimits) {
  auto got = PrepareClaim(options_, Ref(), Claim({Whole("gpu-1", "a"), Whole("gpu-0", "b")}), gpus_);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->devices.size(), 2u);
  EXPECT_EQ(got->devices[0],
            (PreparedDevice{.requests = {"a"},
                            .pool = kNode,
                            .device = "gpu-1",
                            .cdi_device_ids = {"gpu.gpusched.io/claim=" + std::string(kUid) + "-gpu-1"}}));
  const json& spec = got->cdi_spec;
  EXPECT_EQ(spec["kind"], "gpu.gpusched.io/claim");
  // gpu-1 has minor 0, gpu-0 minor 2.
  EXPECT_EQ(spec["devices"][0]["name"], std::string(kUid) + "-gpu-1");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], dir_ + "/dev/nvidia0");
  EXPECT_EQ(spec["devices"][1]["containerEdits"]["deviceNodes"][0]["path"], dir_ + "/dev/nvidia2");
  // Host index order in NVIDIA_VISIBLE_DEVICES; NUMA nodes of both; no MPS.
  EXPECT_EQ(Env(spec), (std::vector<std::string>{"GPUSCHED_NUMA_NODES=0,1", "NVIDIA_VISIBLE_DEVICES=GPU-0,GPU-1"}));
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"].size(), 2u);  // nvidiactl, nvidia-uvm (uvm-tools is absent)
  EXPECT_FALSE(spec["containerEdits"].contains("mounts"));
}

TEST_F(DraPrepareTest, ASharedGpuGetsMpsLimitsFromItsConsumedCapacity) {
  auto got = PrepareClaim(options_, Ref(), Claim({Shared("gpu-1", 30, 20)}), gpus_);
  ASSERT_TRUE(got.ok()) << got.status();
  // 30 percent -> 300 MilliGpu -> 30; 20 GiB -> 20480 MiB at ordinal 0 (the claim's only GPU).
  EXPECT_EQ(
      Env(got->cdi_spec),
      (std::vector<std::string>{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30",
                                "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M", "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
                                "GPUSCHED_NUMA_NODES=1", "NVIDIA_VISIBLE_DEVICES=GPU-1"}));
  EXPECT_EQ(got->cdi_spec["containerEdits"]["mounts"],
            json::parse(R"([{"hostPath": "/run/nvidia/mps/pipe", "containerPath": "/tmp/nvidia-mps",
                             "options": ["ro", "nosuid", "nodev", "bind"]}])"));
}

TEST_F(DraPrepareTest, TwoRequestsSharingOneGpuAddUp) {
  dra::DeviceResult a = Shared("gpu-0", 20, 8);
  dra::DeviceResult b = Shared("gpu-0", 10, 4);
  b.request = "second";
  auto got = PrepareClaim(options_, Ref(), Claim({a, b}), gpus_);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->devices.size(), 1u);  // one device, serving both requests
  EXPECT_EQ(got->devices[0].requests, (std::vector<std::string>{"gpu", "second"}));
  const auto env = Env(got->cdi_spec);
  // 20 + 10 percent = 30; 8 + 4 GiB = 12288 MiB.
  EXPECT_THAT(env, ::testing::Contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30"));
  EXPECT_THAT(env, ::testing::Contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=12288M"));
}

TEST_F(DraPrepareTest, MpsOffOrTheDaemonDown) {
  options_.mps.enabled = false;
  auto off = PrepareClaim(options_, Ref(), Claim({Shared("gpu-0", 50, 10)}), gpus_);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(Env(off->cdi_spec), (std::vector<std::string>{"GPUSCHED_NUMA_NODES=0", "NVIDIA_VISIBLE_DEVICES=GPU-0"}));

  options_.mps.enabled = true;
  options_.mps_daemon = [] { return common::Unavailable("no control daemon at /run/nvidia/mps/pipe"); };
  auto down = PrepareClaim(options_, Ref(), Claim({Shared("gpu-0", 50, 10)}), gpus_);
  ASSERT_FALSE(down.ok());
  EXPECT_THAT(down.status().message(), HasSubstr("MPS control daemon does not answer (no control daemon"));
  // A whole GPU needs no daemon.
  EXPECT_TRUE(PrepareClaim(options_, Ref(), Claim({Whole("gpu-0")}), gpus_).ok());
}

TEST(DraDeviceNameTest, RoundTripsAndRefusesOtherNames) {
  EXPECT_EQ(DraDeviceName(3), "gpu-3");
  for (int i : {0, 7, 15, 123}) {
    auto back = ParseDraDeviceName(DraDeviceName(i));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, i);
  }
  for (const char* bad : {"gpu-", "gpu-01", "gpu--1", "gpu-x", "gpu-1x", "mig-1", "GPU-1", "gpu-99999999"}) {
    EXPECT_FALSE(ParseDraDeviceName(bad).ok()) << bad;
  }
}

TEST(DraClaimRefTest, TheUidMustBeSafeAsAFileName) {
  struct Case {
    ClaimRef ref;
    std::optional<std::string> says;  // nullopt: accepted
  };
  const std::vector<Case> cases = {
      {{.namespace_ = "a", .uid = "0f3c-11", .name = "c"}, std::nullopt},
      {{.namespace_ = "a", .uid = "", .name = "c"}, "are all required"},
      {{.namespace_ = "", .uid = "u", .name = "c"}, "are all required"},
      {{.namespace_ = "a", .uid = "../../etc/passwd", .name = "c"}, "has a character other than"},
      {{.namespace_ = "a", .uid = "u/v", .name = "c"}, "has a character other than"},
      {{.namespace_ = "a", .uid = std::string(129, 'a'), .name = "c"}, "longer than 128"},
  };
  for (const Case& c : cases) {
    common::Status s = CheckClaimRef(c.ref);
    if (!c.says.has_value()) {
      EXPECT_TRUE(s.ok()) << c.ref.uid << ": " << s;
    } else {
      EXPECT_THAT(s.message(), HasSubstr(*c.says)) << c.ref.uid;
    }
  }
}

TEST(DraCheckpointTest, RoundTripsAndNamesWhatIsWrong) {
  const std::vector<PreparedClaim> claims = {
      {.uid = "u1",
       .namespace_ = "a",
       .name = "c1",
       .devices = {{.requests = {"gpu"}, .pool = "n", .device = "gpu-0", .cdi_device_ids = {"k/c=u1-gpu-0"}}},
       .cdi_spec = json{{"kind", "k/c"}}},
      {.uid = "u2", .namespace_ = "b", .name = "c2", .cdi_spec = json::object()}};
  auto back = ParseCheckpoint(CheckpointJson(claims));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, claims);

  struct Case {
    std::string name;
    std::string doc;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"not a checkpoint", R"({"claims": []})", "not a checkpoint"},
      {"a newer version", R"({"kind": "gpusched.io/dra-checkpoint", "version": 2, "claims": []})",
       "unsupported version 2"},
      {"claims not a list", R"({"kind": "gpusched.io/dra-checkpoint", "version": 1, "claims": {}})",
       "\"claims\" is not a list"},
      {"uid missing", R"({"kind": "gpusched.io/dra-checkpoint", "version": 1, "claims": [{"namespace": "a"}]})",
       "claims[0]: uid, namespace and name must be strings"},
      {"unsafe uid",
       R"({"kind": "gpusched.io/dra-checkpoint", "version": 1, "claims": [{"uid": "../x", "namespace": "a", "name": "c", "devices": [], "cdiSpec": {}}]})",
       "has a character other than"},
      {"uid twice",
       R"({"kind": "gpusched.io/dra-checkpoint", "version": 1, "claims": [{"uid": "u", "namespace": "a", "name": "c", "devices": [], "cdiSpec": {}}, {"uid": "u", "namespace": "a", "name": "c", "devices": [], "cdiSpec": {}}]})",
       "claims[1]: uid u is listed twice"},
      {"bad device",
       R"({"kind": "gpusched.io/dra-checkpoint", "version": 1, "claims": [{"uid": "u", "namespace": "a", "name": "c", "devices": [{"pool": 1}], "cdiSpec": {}}]})",
       "a device needs requests, pool, device and cdiDeviceIds"},
  };
  for (const Case& c : cases) {
    auto got = ParseCheckpoint(json::parse(c.doc));
    ASSERT_FALSE(got.ok()) << c.name;
    EXPECT_THAT(got.status().message(), HasSubstr(c.says)) << c.name;
  }
}

TEST(DraOptionsTest, BadOptionsAreRefusedWithTheReason) {
  struct Case {
    std::string name;
    std::function<void(DraPluginOptions&)> change;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"no node", [](DraPluginOptions& o) { o.node_name.clear(); }, "node_name is required"},
      {"driver not a DNS name", [](DraPluginOptions& o) { o.driver_name = "GPU_driver"; }, "is not a DNS subdomain"},
      {"relative registry", [](DraPluginOptions& o) { o.plugins_registry_dir = "reg"; }, "must be absolute paths"},
      {"socket path too long", [](DraPluginOptions& o) { o.plugins_dir = "/" + std::string(120, 'p'); },
       "is longer than 107 bytes"},
      {"CDI kind without a class", [](DraPluginOptions& o) { o.cdi_kind = "gpu.gpusched.io"; },
       "must be <vendor>/<class>"},
      {"no claims per call", [](DraPluginOptions& o) { o.max_claims_per_call = 0; }, "must be positive"},
      {"tiny messages", [](DraPluginOptions& o) { o.max_message_bytes = 100; }, "at least 4096"},
  };
  for (const Case& c : cases) {
    DraPluginOptions o{.node_name = kNode};
    EXPECT_TRUE(ValidateOptions(o).ok()) << c.name;
    c.change(o);
    EXPECT_THAT(ValidateOptions(o).message(), HasSubstr(c.says)) << c.name;
  }
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
