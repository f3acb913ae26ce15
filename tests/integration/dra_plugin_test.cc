// adapters/deviceplugin's DRA kubelet plugin against FakeDraKubelet over unix sockets in a temporary directory:
// registration with kubelets that speak v1 (1.34+) and only v1beta1 (1.32, 1.33), a refused registration,
// NodePrepareResources / NodeUnprepareResources through both versions, idempotence, the refusals (another node's
// claim, a UID mismatch, an unallocated or missing claim) that write nothing, an agent restart followed by
// Unprepare, a reboot (the CDI directory wiped) rebuilt from the checkpoint, a kubelet restart that prepares again,
// a broken checkpoint, health reaching NodeWatchResources, concurrent prepares serialised, the per-call limit, and
// the sockets removed at Stop. Deterministic: every wait polls with a deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/deviceplugin/dra_plugin.h"
#include "gpusched/testing/fake_kubelet.h"
#include "gpusched/testing/fake_resource_claims.h"

// Debian's gRPC, protobuf and abseil are not built with TSan (see device_plugin_test.cc).
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {  // NOLINT(readability-identifier-naming)
  return "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libprotobuf.so\n"
         "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n"
         "race:libprotobuf.so\n"
         "race:absl::\n"
         "race:grpc::\n"
         "race:grpc_core::\n"
         "race:google::protobuf::\n"
         "mutex:libgrpc.so\n"
         "mutex:libabsl_\n"
         "deadlock:libgrpc.so\n"
         "deadlock:libabsl_\n";
}
#endif

namespace gpusched::adapters::deviceplugin {
namespace {

namespace fs = std::filesystem;
namespace dra = core::dra;
using nlohmann::json;
using std::chrono::milliseconds;
using testing::FakeClaim;
using testing::FakeDraApi;
using testing::FakeDraKubelet;
using testing::FakeDraKubeletOptions;
using testing::FakeKubelet;
using testing::FakePrepareResult;
using testing::FakeResourceClaims;
using ::testing::HasSubstr;

constexpr milliseconds kDeadline{20000};  // generous: sanitizers and a shared 2-core machine
constexpr const char* kNode = "node-a";
constexpr const char* kDriver = "gpu.gpusched.io";

std::string Uuid(int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-00000000-0000-0000-0000-%012d", i);
  return buf;
}

std::string ClaimUid(int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "c1a1d000-0000-4000-8000-%012d", i);
  return buf;
}

// A DeviceInventory whose GPUs a test scripts: health, failure.
class ScriptedInventory final : public ports::DeviceInventory {
 public:
  explicit ScriptedInventory(int gpus) {
    for (int i = 0; i < gpus; ++i) {
      char bus[32];
      std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x10 + i);
      gpus_.push_back(ports::GpuSample{.index = i, .uuid = common::GpuUuid(Uuid(i)), .pci_bus_id = bus});
    }
  }
  common::Result<std::vector<ports::GpuSample>> Sample() override {
    std::lock_guard lock(mu_);
    if (failing_) {
      return common::Unavailable("scripted: NVML lost the driver");
    }
    return gpus_;
  }
  std::string Describe() const override { return "scripted"; }
  void SetHealthy(int index, bool healthy) {
    std::lock_guard lock(mu_);
    gpus_[static_cast<size_t>(index)].healthy = healthy;
  }
  void SetFailing(bool failing) {
    std::lock_guard lock(mu_);
    failing_ = failing;
  }

 private:
  std::mutex mu_;
  std::vector<ports::GpuSample> gpus_;
  bool failing_ = false;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return 0;
  }
  return st.st_mode & 0777;
}

class DraPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpdrai-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* d : {"registry", "plugins", "cdi", "dev"}) {
      fs::create_directories(dir_ + "/" + d);
    }
    std::ofstream(dir_ + "/dev/nvidiactl") << "";
    for (int i = 0; i < 4; ++i) {
      char bus[32];
      std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
      fs::create_directories(dir_ + "/proc/" + bus);
      std::ofstream(dir_ + "/proc/" + bus + "/information") << "Device Minor: \t " << (3 - i) << "\n";
    }
  }
  void TearDown() override {
    kubelet_.reset();
    plugin_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  DraPluginOptions Options() const {
    DraPluginOptions o{
        .node_name = kNode,
        .plugins_registry_dir = dir_ + "/registry",
        .plugins_dir = dir_ + "/plugins",
        .cdi = CdiSpecOptions{.spec_dir = dir_ + "/cdi", .dev_dir = dir_ + "/dev", .proc_gpus_dir = dir_ + "/proc"}};
    o.sample_interval = milliseconds(20);
    o.poll_interval = milliseconds(20);
    return o;
  }
  common::Status StartPlugin(DraPluginOptions o) {
    plugin_ = std::make_unique<DraPlugin>(std::move(o), inventory_, claims_);
    return plugin_->Start();
  }
  void StartKubelet(std::vector<std::string> services = {"v1.DRAPlugin", "v1beta1.DRAPlugin"}) {
    kubelet_ = std::make_unique<FakeDraKubelet>(
        FakeDraKubeletOptions{.registry_dir = dir_ + "/registry", .services = std::move(services)});
    ASSERT_TRUE(kubelet_->Start().ok());
  }
  void StartBoth() {
    ASSERT_TRUE(StartPlugin(Options()).ok());
    StartKubelet();
    ASSERT_TRUE(plugin_->WaitRegistered(kDeadline)) << plugin_->last_error();
  }

  // A claim team-a/<name> (uid ClaimUid(i)) allocated on `node`: the whole device, or `percent` and `gib` of it.
  dra::ResourceClaim Claim(int i, const std::string& device, const std::string& node = kNode, int64_t percent = 0,
                           int64_t gib = 0) const {
    dra::ResourceClaim c{.namespace_ = "team-a", .name = "claim-" + std::to_string(i), .uid = ClaimUid(i)};
    dra::DeviceResult r{.request = "gpu", .driver = kDriver, .pool = kNode, .device = device};
    if (percent > 0 || gib > 0) {
      r.consumed_capacity = {{"gpu.gpusched.io/compute", dra::Quantity::FromUnits(percent)},
                             {"gpu.gpusched.io/memory", dra::Quantity::FromUnits(gib << 30)}};
      r.share_id = "share-" + std::to_string(i);
    }
    c.allocation = dra::ClaimAllocation{.devices = {r}, .node = common::NodeName(node)};
    return c;
  }
  static FakeClaim Ref(const dra::ResourceClaim& c) {
    return FakeClaim{.namespace_ = c.namespace_, .uid = c.uid, .name = c.name};
  }
  std::string SpecPath(const std::string& uid) const { return dir_ + "/cdi/gpu.gpusched.io-claim_" + uid + ".json"; }
  std::string CheckpointPath() const { return dir_ + "/plugins/gpu.gpusched.io/checkpoint.json"; }

  // Prepares one claim through the kubelet and returns its answer.
  FakePrepareResult Prepare(const dra::ResourceClaim& c, FakeDraApi api = FakeDraApi::kChosen) {
    auto got = kubelet_->NodePrepareResources(kDriver, {Ref(c)}, api);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !got->contains(c.uid)) {
      return FakePrepareResult{.error = "no answer"};
    }
    return got->at(c.uid);
  }

  std::string dir_;
  ScriptedInventory inventory_{4};
  FakeResourceClaims claims_;
  std::unique_ptr<DraPlugin> plugin_;
  std::unique_ptr<FakeDraKubelet> kubelet_;
};

TEST_F(DraPluginTest, RegistersWithAKubeletOf134AndPreparesThroughV1) {
  StartBoth();
  auto reg = kubelet_->registration(kDriver);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->type, "DRAPlugin");
  EXPECT_EQ(reg->name, kDriver);
  EXPECT_EQ(reg->endpoint, dir_ + "/plugins/gpu.gpusched.io/dra.sock");
  EXPECT_EQ(reg->supported_versions,
            (std::vector<std::string>{"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"}));
  EXPECT_EQ(reg->chosen_service, "v1.DRAPlugin");
  EXPECT_EQ(reg->error, "");
  EXPECT_EQ(plugin_->registration_socket(), dir_ + "/registry/gpu.gpusched.io-reg.sock");
  // Only the kubelet (root) may connect.
  EXPECT_EQ(Mode(plugin_->registration_socket()), 0600u);
  EXPECT_EQ(Mode(plugin_->dra_socket()), 0600u);
  EXPECT_EQ(Mode(dir_ + "/plugins/gpu.gpusched.io"), 0700u);

  claims_.Upsert(Claim(1, "gpu-2"));
  FakePrepareResult r = Prepare(Claim(1, "gpu-2"));
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].pool, kNode);
  EXPECT_EQ(r.devices[0].device, "gpu-2");
  EXPECT_EQ(r.devices[0].requests, std::vector<std::string>{"gpu"});
  EXPECT_EQ(r.devices[0].cdi_device_ids, std::vector<std::string>{"gpu.gpusched.io/claim=" + ClaimUid(1) + "-gpu-2"});
  // GPU 2 has minor 1 (3 - index); a whole GPU: no MPS limits.
  const json spec = json::parse(ReadFile(SpecPath(ClaimUid(1))));
  EXPECT_EQ(spec["kind"], "gpu.gpusched.io/claim");
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], dir_ + "/dev/nvidia1");
  EXPECT_EQ(spec["containerEdits"]["env"], json::array({"NVIDIA_VISIBLE_DEVICES=" + Uuid(2)}));
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"], json::parse(R"([{"path": ")" + dir_ + R"(/dev/nvidiactl"}])"));
  EXPECT_EQ(Mode(CheckpointPath()), 0600u);
}

TEST_F(DraPluginTest, RegistersWithAKubeletOf132ThroughV1beta1) {
  ASSERT_TRUE(StartPlugin(Options()).ok());
  StartKubelet({"v1beta1.DRAPlugin"});
  ASSERT_TRUE(plugin_->WaitRegistered(kDeadline)) << plugin_->last_error();
  auto reg = kubelet_->registration(kDriver);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->chosen_service, "v1beta1.DRAPlugin");
  claims_.Upsert(Claim(1, "gpu-0", kNode, 25, 10));
  FakePrepareResult r = Prepare(Claim(1, "gpu-0"));
  ASSERT_EQ(r.error, "");
  const json spec = json::parse(ReadFile(SpecPath(ClaimUid(1))));
  EXPECT_THAT(spec["containerEdits"]["env"].get<std::vector<std::string>>(),
              ::testing::IsSupersetOf(std::vector<std::string>{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
                                                               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=10240M",
                                                               "NVIDIA_VISIBLE_DEVICES=" + Uuid(0)}));
  auto un = kubelet_->NodeUnprepareResources(kDriver, {Ref(Claim(1, "gpu-0"))});
  ASSERT_TRUE(un.ok()) << un.status();
  EXPECT_EQ(un->at(ClaimUid(1)), "");
  EXPECT_FALSE(fs::exists(SpecPath(ClaimUid(1))));
}

TEST_F(DraPluginTest, ARefusedRegistrationIsReported) {
  ASSERT_TRUE(StartPlugin(Options()).ok());
  StartKubelet({"v1alpha4.Node"});  // a kubelet that speaks none of our services
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return !plugin_->last_error().empty(); }, kDeadline));
  EXPECT_THAT(plugin_->last_error(), HasSubstr("the kubelet refused the registration of DRA driver gpu.gpusched.io"));
  EXPECT_THAT(plugin_->last_error(), HasSubstr("none of the services supported by the plugin"));
  EXPECT_FALSE(plugin_->registered());
  EXPECT_EQ(kubelet_->registrations(kDriver), 0);
}

TEST_F(DraPluginTest, PrepareIsIdempotentAcrossVersionsAndUnprepareRemovesTheSpec) {
  StartBoth();
  claims_.Upsert(Claim(1, "gpu-1", kNode, 50, 20));
  const FakePrepareResult first = Prepare(Claim(1, "gpu-1"), FakeDraApi::kV1);
  ASSERT_EQ(first.error, "");
  const std::string spec = ReadFile(SpecPath(ClaimUid(1)));
  // The kubelet asks again (after its own restart): the same devices, from the checkpoint (no second read), even
  // though the claim changed in the API meanwhile.
  claims_.Upsert(Claim(1, "gpu-3"));
  const FakePrepareResult again = Prepare(Claim(1, "gpu-1"), FakeDraApi::kV1beta1);
  ASSERT_EQ(again.error, "");
  ASSERT_EQ(again.devices.size(), 1u);
  EXPECT_EQ(again.devices[0].device, "gpu-1");
  EXPECT_EQ(again.devices[0].cdi_device_ids, first.devices[0].cdi_device_ids);
  EXPECT_EQ(claims_.gets(), 1);
  EXPECT_EQ(ReadFile(SpecPath(ClaimUid(1))), spec);

  for (FakeDraApi api : {FakeDraApi::kV1beta1, FakeDraApi::kV1}) {  // the second is a no-op
    auto un = kubelet_->NodeUnprepareResources(kDriver, {Ref(Claim(1, "gpu-1"))}, api);
    ASSERT_TRUE(un.ok()) << un.status();
    EXPECT_EQ(un->at(ClaimUid(1)), "");
  }
  EXPECT_FALSE(fs::exists(SpecPath(ClaimUid(1))));
  EXPECT_TRUE(plugin_->prepared().empty());
  EXPECT_EQ(json::parse(ReadFile(CheckpointPath()))["claims"], json::array());
}

TEST_F(DraPluginTest, RefusalsNameTheReasonAndWriteNothing) {
  StartBoth();
  dra::ResourceClaim unallocated{.namespace_ = "team-a", .name = "claim-3", .uid = ClaimUid(3)};
  dra::ResourceClaim recreated = Claim(4, "gpu-0");
  recreated.uid = ClaimUid(44);  // the kubelet still asks for ClaimUid(4)
  claims_.Upsert(Claim(1, "gpu-0"));
  claims_.Upsert(Claim(2, "gpu-1", "node-b"));
  claims_.Upsert(unallocated);
  claims_.Upsert(recreated);
  claims_.SetClaimError("team-a", "claim-6", common::Unavailable("apiserver: connection refused"));
  struct Want {
    FakeClaim ref;
    std::string error;  // "" = prepared
  };
  const std::vector<Want> want = {
      {Ref(Claim(1, "gpu-0")), ""},
      {Ref(Claim(2, "gpu-1")), "is allocated to node node-b, this is node node-a; not prepared"},
      {Ref(unallocated), "ResourceClaim team-a/claim-3 is not allocated; not prepared"},
      {Ref(Claim(4, "gpu-0")), "has UID " + ClaimUid(44) + ", the kubelet asked for UID " + ClaimUid(4)},
      {Ref(Claim(5, "gpu-0")), "cannot read ResourceClaim team-a/claim-5: resourceclaims \"claim-5\" not found"},
      {Ref(Claim(6, "gpu-0")), "cannot read ResourceClaim team-a/claim-6: apiserver: connection refused"},
      {FakeClaim{.namespace_ = "team-a", .uid = "../../../etc/x", .name = "claim-7"}, "has a character other than"},
  };
  std::vector<FakeClaim> refs;
  for (const Want& w : want) {
    refs.push_back(w.ref);
  }
  auto got = kubelet_->NodePrepareResources(kDriver, refs);
  ASSERT_TRUE(got.ok()) << got.status();
  for (const Want& w : want) {
    ASSERT_TRUE(got->contains(w.ref.uid)) << w.ref.name;
    const FakePrepareResult& r = got->at(w.ref.uid);
    if (w.error.empty()) {
      EXPECT_EQ(r.error, "") << w.ref.name;
      EXPECT_TRUE(fs::exists(SpecPath(w.ref.uid))) << w.ref.name;
    } else {
      EXPECT_THAT(r.error, HasSubstr(w.error)) << w.ref.name;
      EXPECT_TRUE(r.devices.empty()) << w.ref.name;
      EXPECT_FALSE(fs::exists(SpecPath(w.ref.uid))) << w.ref.name;
    }
  }
  // Only the prepared claim is in the checkpoint and in the CDI directory.
  const json checkpoint = json::parse(ReadFile(CheckpointPath()));
  ASSERT_EQ(checkpoint["claims"].size(), 1u);
  EXPECT_EQ(checkpoint["claims"][0]["uid"], ClaimUid(1));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ + "/cdi"), fs::directory_iterator()), 1);
  EXPECT_EQ(kubelet_->prepared_claims(kDriver).size(), 1u);
}

TEST_F(DraPluginTest, AfterAnAgentRestartUnprepareStillWorks) {
  StartBoth();
  claims_.Upsert(Claim(1, "gpu-0"));
  ASSERT_EQ(Prepare(Claim(1, "gpu-0")).error, "");
  plugin_->Stop();
  EXPECT_FALSE(fs::exists(dir_ + "/registry/gpu.gpusched.io-reg.sock"));
  EXPECT_FALSE(fs::exists(dir_ + "/plugins/gpu.gpusched.io/dra.sock"));
  EXPECT_TRUE(fs::exists(SpecPath(ClaimUid(1))));  // running containers still need it
  // A new agent process: a new plugin reads the checkpoint; the kubelet sees the new socket and registers it.
  plugin_.reset();
  ASSERT_TRUE(StartPlugin(Options()).ok());
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return kubelet_->registrations(kDriver) == 2; }, kDeadline));
  ASSERT_EQ(plugin_->prepared().size(), 1u);
  claims_.Delete("team-a", "claim-1");  // the pod and its claim are gone by the time the kubelet unprepares
  auto un = kubelet_->NodeUnprepareResources(kDriver, {Ref(Claim(1, "gpu-0"))});
  ASSERT_TRUE(un.ok()) << un.status();
  EXPECT_EQ(un->at(ClaimUid(1)), "");
  EXPECT_FALSE(fs::exists(SpecPath(ClaimUid(1))));
  EXPECT_TRUE(plugin_->prepared().empty());
}

TEST_F(DraPluginTest, AfterARebootTheSpecsAreRebuiltFromTheCheckpoint) {
  StartBoth();
  claims_.Upsert(Claim(1, "gpu-0", kNode, 30, 8));
  claims_.Upsert(Claim(2, "gpu-3"));
  ASSERT_EQ(Prepare(Claim(1, "gpu-0")).error, "");
  ASSERT_EQ(Prepare(Claim(2, "gpu-3")).error, "");
  const std::string spec1 = ReadFile(SpecPath(ClaimUid(1)));
  const std::string spec2 = ReadFile(SpecPath(ClaimUid(2)));
  plugin_->Stop();
  plugin_.reset();
  // The reboot: /var/run/cdi is tmpfs. A stray spec of ours that nobody lists is removed, others' stay.
  fs::remove_all(dir_ + "/cdi");
  fs::create_directories(dir_ + "/cdi");
  std::ofstream(dir_ + "/cdi/gpu.gpusched.io-claim_stray.json") << "{}";
  std::ofstream(dir_ + "/cdi/nvidia.com-gpu.json") << "{}";
  ASSERT_TRUE(StartPlugin(Options()).ok());
  EXPECT_EQ(ReadFile(SpecPath(ClaimUid(1))), spec1);
  EXPECT_EQ(ReadFile(SpecPath(ClaimUid(2))), spec2);
  EXPECT_FALSE(fs::exists(dir_ + "/cdi/gpu.gpusched.io-claim_stray.json"));
  EXPECT_TRUE(fs::exists(dir_ + "/cdi/nvidia.com-gpu.json"));

  // The kubelet restarts too, registers the plugin again and prepares its claims again: the same devices,
  // without reading the claims again.
  const int64_t gets = claims_.gets();
  auto again = kubelet_->Restart(kDriver, kDeadline);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ(again->at(ClaimUid(1)).error, "");
  EXPECT_EQ(again->at(ClaimUid(1)).devices[0].device, "gpu-0");
  EXPECT_EQ(again->at(ClaimUid(2)).devices[0].device, "gpu-3");
  EXPECT_EQ(claims_.gets(), gets);
}

TEST_F(DraPluginTest, ABrokenCheckpointStopsTheStartNamingTheFile) {
  fs::create_directories(dir_ + "/plugins/gpu.gpusched.io");
  std::ofstream(CheckpointPath()) << "{\"kind\": \"gpusched.io/dra-checkpoint\", \"version\": 1, \"claims\": [";
  common::Status s = StartPlugin(Options());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(CheckpointPath() + " is not valid JSON"));
  EXPECT_FALSE(fs::exists(dir_ + "/registry/gpu.gpusched.io-reg.sock"));  // not served

  std::ofstream(CheckpointPath()) << R"({"kind": "gpusched.io/dra-checkpoint", "version": 9, "claims": []})";
  s = StartPlugin(Options());
  EXPECT_THAT(s.message(), HasSubstr("unsupported version 9"));
}

TEST_F(DraPluginTest, HealthChangesReachTheStream) {
  StartBoth();
  auto health_of = [&](const std::string& device) -> std::string {
    auto list = kubelet_->Health(kDriver);
    if (!list.has_value()) {
      return "";
    }
    for (const auto& d : *list) {
      if (d.device == device) {
        return d.health;
      }
    }
    return "";
  };
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return health_of("gpu-3") == "HEALTHY"; }, kDeadline));
  auto list = kubelet_->Health(kDriver);
  ASSERT_EQ(list->size(), 4u);
  EXPECT_EQ((*list)[0].pool, kNode);
  EXPECT_GT((*list)[0].last_updated, 0);
  inventory_.SetHealthy(1, false);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return health_of("gpu-1") == "UNHEALTHY"; }, kDeadline));
  EXPECT_EQ(health_of("gpu-0"), "HEALTHY");
  inventory_.SetFailing(true);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return health_of("gpu-0") == "UNKNOWN"; }, kDeadline));
  inventory_.SetFailing(false);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return health_of("gpu-0") == "HEALTHY"; }, kDeadline));
  EXPECT_EQ(health_of("gpu-1"), "UNHEALTHY");
}

TEST_F(DraPluginTest, ConcurrentPreparesAreSerialised) {
  StartBoth();
  constexpr int kClaims = 8;
  for (int i = 0; i < kClaims; ++i) {
    claims_.Upsert(Claim(i, "gpu-" + std::to_string(i % 4), kNode, 10, 2));
  }
  claims_.SetDelay(milliseconds(20));  // each read takes a while: overlapping calls would overlap here
  std::vector<std::thread> threads;
  std::atomic<int> prepared{0};
  for (int i = 0; i < kClaims; ++i) {
    threads.emplace_back([&, i] {
      auto got = kubelet_->NodePrepareResources(kDriver, {Ref(Claim(i, ""))},
                                                i % 2 == 0 ? FakeDraApi::kV1 : FakeDraApi::kV1beta1);
      if (got.ok() && got->at(ClaimUid(i)).error.empty()) {
        ++prepared;
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(prepared.load(), kClaims);
  EXPECT_EQ(claims_.max_in_flight(), 1);
  EXPECT_EQ(plugin_->prepared().size(), static_cast<size_t>(kClaims));
  EXPECT_EQ(json::parse(ReadFile(CheckpointPath()))["claims"].size(), static_cast<size_t>(kClaims));
}

TEST_F(DraPluginTest, TooManyClaimsInOneCallAreRefusedAsAWhole) {
  DraPluginOptions o = Options();
  o.max_claims_per_call = 2;
  ASSERT_TRUE(StartPlugin(o).ok());
  StartKubelet();
  ASSERT_TRUE(plugin_->WaitRegistered(kDeadline));
  auto got = kubelet_->NodePrepareResources(kDriver, {Ref(Claim(1, "")), Ref(Claim(2, "")), Ref(Claim(3, ""))});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("3 claims in one call, at most 2"));
  EXPECT_EQ(claims_.gets(), 0);
}

TEST_F(DraPluginTest, ADeletedSocketIsServedAgainAndRegisteredAgain) {
  StartBoth();
  fs::remove(plugin_->registration_socket());
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return plugin_->registrations() == 2 && plugin_->registered(); }, kDeadline))
      << plugin_->last_error();
  EXPECT_EQ(kubelet_->registrations(kDriver), 2);
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
