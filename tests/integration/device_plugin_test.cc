// adapters/deviceplugin against FakeKubelet over unix sockets in a temporary directory: registration,
// ListAndWatch and health changes, kubelet restarts, a missing kubelet, the handoff under concurrent admissions
// (each pod gets its own GPUs, never another pod's), preferred allocation, PreStartContainer's check, and the
// error cases; and with the agent's pod source (agent::NodePods, an informer) against FakeApiServer over mTLS: the
// API requests each container start makes, and handoffs while the API server is down. Deterministic: every wait polls
// with a deadline; randomised rounds print their seed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <cstdio>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gpusched/adapters/deviceplugin/device_plugin.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/agent/node_pods.h"
#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/fake_kubelet.h"
#include "gpusched/testing/json_builders.h"
#include "gpusched/testing/test_pki.h"

// Debian's gRPC, protobuf and abseil are not built with TSan, so it cannot see their synchronisation and reports
// every buffer they hand between threads. Reports with a frame in those libraries are suppressed; that includes
// our gRPC handlers (gRPC frames sit below them), so their shared state is guarded by plain std::mutex and kept
// simple (device_plugin.cc). Races among our own threads (supervisor, tests, OnSamples) are still reported.
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

using nlohmann::json;
using std::chrono::milliseconds;
namespace k8s = adapters::k8s;
using testing::FakeDevice;
using testing::FakeKubelet;
using testing::FakeKubeletOptions;
using testing::FakePodSpec;
using ::testing::HasSubstr;

constexpr milliseconds kDeadline{20000};  // generous: sanitizers and a shared 2-core machine
constexpr const char* kNode = "node-a";
constexpr const char* kGpu = "gpusched.io/gpu";
constexpr const char* kNvidia = "nvidia.com/gpu";
constexpr const char* kKeti = "keti.com/mpsgpu";

std::string Uuid(int i) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-00000000-0000-0000-0000-%012d", i);
  return buf;
}

// A DeviceInventory whose GPUs a test scripts: health, failure.
class ScriptedInventory final : public ports::DeviceInventory {
 public:
  explicit ScriptedInventory(int gpus) {
    for (int i = 0; i < gpus; ++i) {
      char bus[32];
      std::snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x10 + i);
      gpus_.push_back(ports::GpuSample{.index = i,
                                       .uuid = common::GpuUuid(Uuid(i)),
                                       .model = "A100-SXM4-80GB",
                                       .pci_bus_id = bus,
                                       .numa_node = i % 2,
                                       .memory_total = common::MiB{81920}});
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

// Pods in memory, as the API server has them. `Hide` leaves a pod out of PodsOnNode (a lagging read) while GetPod
// still finds it.
class MemoryPodSource final : public PodSource {
 public:
  common::Result<std::vector<json>> PodsOnNode() override {
    std::lock_guard lock(mu_);
    std::vector<json> out;
    for (const auto& [key, pod] : pods_) {
      if (!hidden_.contains(key) && pod["spec"].value("nodeName", "") == kNode) {
        out.push_back(pod);
      }
    }
    return out;
  }
  common::Result<json> GetPod(const std::string& ns, const std::string& name) override {
    std::lock_guard lock(mu_);
    auto it = pods_.find(ns + "/" + name);
    if (it == pods_.end()) {
      return common::NotFound("pod " + ns + "/" + name + " not found");
    }
    return it->second;
  }
  void Put(const json& pod) {
    std::lock_guard lock(mu_);
    pods_[pod["metadata"]["namespace"].get<std::string>() + "/" + pod["metadata"]["name"].get<std::string>()] = pod;
  }
  void Remove(const std::string& key) {
    std::lock_guard lock(mu_);
    pods_.erase(key);
  }
  void Hide(const std::string& key) {
    std::lock_guard lock(mu_);
    hidden_.insert(key);
  }

 private:
  std::mutex mu_;
  std::map<std::string, json> pods_;
  std::set<std::string> hidden_;
};

// One GPU container of a test pod: the resource it asks for and the GPUs its allocation gives it.
struct Gpus {
  std::string container = "main";
  std::string resource = kGpu;
  std::vector<int> gpus;  // host indices
  int64_t milli = 1000;
  int64_t mib = 0;
  bool exclusive = true;
  bool init = false;
};

struct TestPod {
  std::string name;
  std::vector<Gpus> containers;
  std::string alloc_node = kNode;
  bool annotate = true;
  bool extra_cpu_container = false;
  std::string phase = "Pending";
  uint64_t allocation_id = 0;

  [[nodiscard]] std::string Key() const { return "default/" + name; }

  [[nodiscard]] json Json() const {
    testing::PodJson pod(name);
    pod.NodeName(kNode).SchedulerName("gpusched").Containers(json::array()).Phase(phase);
    core::Allocation a{.pod = common::PodUid("uid-" + name), .node = common::NodeName(alloc_node), .id = allocation_id};
    for (const auto& c : containers) {
      const json limits = {{c.resource, std::to_string(c.gpus.size())}};
      if (c.init) {
        pod.InitContainer(c.container, limits);
      } else {
        pod.Container(c.container, limits);
      }
      core::ContainerAllocation ca{.container = c.init ? "init:" + c.container : c.container};
      for (int g : c.gpus) {
        ca.gpus.push_back(core::GpuShare{.index = g,
                                         .uuid = common::GpuUuid(Uuid(g)),
                                         .milli = common::MilliGpu{c.milli},
                                         .memory = common::MiB{c.mib},
                                         .exclusive = c.exclusive});
      }
      a.containers.push_back(std::move(ca));
    }
    if (extra_cpu_container) {
      pod.Container("sidecar");
    }
    if (annotate) {
      pod.Annotation("gpusched.io/allocation", kube::EncodeAllocation(a));
    }
    return pod;
  }

  [[nodiscard]] FakePodSpec Spec() const {
    FakePodSpec spec{.name = name};
    for (const auto& c : containers) {
      spec.containers.push_back(testing::FakeContainerSpec{
          .name = c.container, .devices = {{c.resource, static_cast<int64_t>(c.gpus.size())}}, .init = c.init});
    }
    if (extra_cpu_container) {
      spec.containers.push_back(testing::FakeContainerSpec{.name = "sidecar"});
    }
    return spec;
  }

  // NVIDIA_VISIBLE_DEVICES this container must get: its GPUs' UUIDs in host index order.
  [[nodiscard]] static std::string Visible(const Gpus& c) {
    std::vector<int> sorted = c.gpus;
    std::sort(sorted.begin(), sorted.end());
    std::string out;
    for (int g : sorted) {
      out += (out.empty() ? "" : ",") + Uuid(g);
    }
    return out;
  }
};

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    common::SetLogLevel(common::LogLevel::kError);  // refusals are expected here; keep the output short
    char tmpl[] = "/tmp/gpdp-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void StartKubelet(FakeKubeletOptions o = {}) {
    o.dir = dir_;
    kubelet_ = std::make_unique<FakeKubelet>(o);
    ASSERT_TRUE(kubelet_->Start().ok());
  }

  DevicePluginOptions Options() const {
    // The tests read the GPUs from NVIDIA_VISIBLE_DEVICES: the envvar strategy (others: DeviceListStrategies).
    return DevicePluginOptions{.node_name = kNode,
                               .plugin_dir = dir_,
                               .replicas = 4,
                               .device_list_strategy = DeviceListStrategy::kEnvvar,
                               .cdi = CdiSpecOptions{.spec_dir = dir_ + "/cdi", .proc_gpus_dir = dir_ + "/proc"},
                               .poll_interval = milliseconds(20),
                               .sample_interval = milliseconds(20),
                               .initial_backoff = milliseconds(20),
                               .max_backoff = milliseconds(200),
                               .rpc_timeout = milliseconds(5000)};
  }

  void StartPlugin(DevicePluginOptions o) {
    pod_resources_ = NewKubeletPodResources(
        kubelet_ != nullptr ? kubelet_->pod_resources_socket() : dir_ + "/pod-resources/kubelet.sock",
        milliseconds(5000));
    plugin_ = std::make_unique<DevicePlugin>(std::move(o), inventory_, source_ != nullptr ? *source_ : pods_,
                                             *pod_resources_);
    ASSERT_TRUE(plugin_->Start().ok());
  }

  // Plugin registered for all three resources and the kubelet holds a device list for each.
  void StartBoth(FakeKubeletOptions k = {}) { StartBothWith(Options(), k); }
  void StartBothWith(DevicePluginOptions o, FakeKubeletOptions k = {}) {
    StartKubelet(k);
    StartPlugin(std::move(o));
    ASSERT_TRUE(FakeKubelet::WaitFor(
        [&] {
          for (const char* r : {kGpu, kNvidia, kKeti}) {
            auto d = kubelet_->Devices(r);
            if (!d.has_value() || d->empty()) {
              return false;
            }
          }
          return plugin_->registered();
        },
        kDeadline))
        << plugin_->last_error();
  }

  int CountHealth(const std::string& resource, const std::string& health, const std::string& uuid_prefix = "") {
    auto d = kubelet_->Devices(resource);
    if (!d.has_value()) {
      return -1;
    }
    return static_cast<int>(std::count_if(d->begin(), d->end(), [&](const FakeDevice& x) {
      return x.health == health && x.id.starts_with(uuid_prefix);
    }));
  }

  std::string dir_;
  ScriptedInventory inventory_{8};
  MemoryPodSource pods_;
  PodSource* source_ = nullptr;  // the plugin's pod source when set, else pods_
  std::unique_ptr<PodResourcesSource> pod_resources_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<DevicePlugin> plugin_;
};

TEST_F(DevicePluginTest, RegistersAndStreamsEveryResource) {
  StartBoth();
  EXPECT_TRUE(plugin_->registered());
  EXPECT_EQ(plugin_->last_error(), "");
  for (const char* r : {kGpu, kNvidia, kKeti}) {
    EXPECT_EQ(kubelet_->registrations(r), 1) << r;
    auto o = kubelet_->plugin_options(r);
    ASSERT_TRUE(o.has_value()) << r;
    EXPECT_TRUE(o->pre_start_required);
    EXPECT_TRUE(o->get_preferred_allocation_available);
  }
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/gpusched-gpusched-io-gpu.sock"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/gpusched-nvidia-com-gpu.sock"));
  // 8 GPUs x 4 replicas; 8 x 1 for nvidia.com/gpu.
  auto gpu = kubelet_->Devices(kGpu);
  ASSERT_EQ(gpu->size(), 32u);
  EXPECT_EQ((*gpu)[0].id, Uuid(0) + "::0");
  EXPECT_EQ((*gpu)[5].id, Uuid(1) + "::1");
  EXPECT_EQ((*gpu)[5].numa_nodes, std::vector<int64_t>{1});
  auto nvidia = kubelet_->Devices(kNvidia);
  ASSERT_EQ(nvidia->size(), 8u);
  EXPECT_EQ((*nvidia)[3].id, Uuid(3));
  EXPECT_EQ((*nvidia)[3].numa_nodes, std::vector<int64_t>{1});
  EXPECT_EQ(kubelet_->Devices(kKeti)->size(), 32u);
  EXPECT_EQ(CountHealth(kGpu, "Healthy"), 32);
}

TEST_F(DevicePluginTest, HealthChangesAreStreamed) {
  StartBoth();
  inventory_.SetHealthy(2, false);
  ASSERT_TRUE(FakeKubelet::WaitFor(
      [&] {
        // Each resource has its own ListAndWatch stream: wait for all three.
        return CountHealth(kGpu, "Unhealthy") == 4 && CountHealth(kNvidia, "Unhealthy") == 1 &&
               CountHealth(kKeti, "Unhealthy") == 4;
      },
      kDeadline));
  EXPECT_EQ(CountHealth(kGpu, "Unhealthy", Uuid(2)), 4);
  EXPECT_EQ(CountHealth(kNvidia, "Unhealthy", Uuid(2)), 1);
  EXPECT_EQ(CountHealth(kKeti, "Unhealthy", Uuid(2)), 4);
  EXPECT_EQ(CountHealth(kGpu, "Healthy"), 28);

  inventory_.SetHealthy(2, true);
  ASSERT_TRUE(FakeKubelet::WaitFor(
      [&] { return CountHealth(kGpu, "Healthy") == 32 && CountHealth(kKeti, "Healthy") == 32; }, kDeadline));

  // The driver is gone: every device turns Unhealthy, and back.
  inventory_.SetFailing(true);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return CountHealth(kNvidia, "Unhealthy") == 8; }, kDeadline));
  inventory_.SetFailing(false);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return CountHealth(kNvidia, "Healthy") == 8; }, kDeadline));
}

TEST_F(DevicePluginTest, ReRegistersWhenTheKubeletRestarts) {
  StartBoth();
  ASSERT_EQ(plugin_->registrations(), 1u);
  for (int round = 2; round <= 3; ++round) {
    ASSERT_TRUE(kubelet_->Restart().ok());
    ASSERT_TRUE(FakeKubelet::WaitFor(
        [&] {
          for (const char* r : {kGpu, kNvidia, kKeti}) {
            auto d = kubelet_->Devices(r);
            if (kubelet_->registrations(r) != round || !d.has_value() || d->empty()) {
              return false;
            }
          }
          return plugin_->registrations() == static_cast<uint64_t>(round);
        },
        kDeadline))
        << "round " << round << ": " << plugin_->last_error();
    EXPECT_EQ(plugin_->registrations(), static_cast<uint64_t>(round));
    EXPECT_TRUE(std::filesystem::exists(dir_ + "/gpusched-keti-com-mpsgpu.sock"));
  }
  // And it still hands out GPUs.
  TestPod p{.name = "after-restart", .containers = {{.gpus = {5}}}};
  pods_.Put(p.Json());
  auto admitted = kubelet_->AdmitPod(p.Spec());
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ((*admitted)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(5));
}

TEST_F(DevicePluginTest, MissingKubeletIsAClearErrorRetriedWithBackoff) {
  StartPlugin(Options());  // no kubelet yet
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return !plugin_->last_error().empty(); }, kDeadline));
  EXPECT_THAT(plugin_->last_error(), HasSubstr("kubelet socket " + dir_ + "/kubelet.sock does not exist"));
  EXPECT_FALSE(plugin_->registered());
  StartKubelet();
  ASSERT_TRUE(plugin_->WaitRegistered(kDeadline)) << plugin_->last_error();
  EXPECT_EQ(plugin_->last_error(), "");
  EXPECT_EQ(kubelet_->registrations(kGpu), 1);
}

TEST_F(DevicePluginTest, AllocateReturnsTheShareEnvironment) {
  StartBoth();
  const TestPod shared{.name = "shared", .containers = {{.gpus = {1}, .milli = 300, .mib = 20000, .exclusive = false}}};
  const TestPod whole{.name = "whole", .containers = {{.resource = kNvidia, .gpus = {6, 2}}}};
  const TestPod keti{.name = "keti",
                     .containers = {{.resource = kKeti, .gpus = {3}, .milli = 1000, .mib = 0, .exclusive = false}}};
  for (const auto* p : {&shared, &whole, &keti}) {
    pods_.Put(p->Json());
  }
  auto a = kubelet_->AdmitPod(shared.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 1u);
  const auto& env = (*a)[0].response.envs;
  EXPECT_EQ(env.at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
  EXPECT_EQ(env.at("GPUSCHED_NUMA_NODES"), "1");  // the node's inventory puts GPU 1 on NUMA node 1
  EXPECT_EQ(env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "30");
  EXPECT_EQ(env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20000M");
  EXPECT_EQ(env.at("CUDA_MPS_PIPE_DIRECTORY"), "/tmp/nvidia-mps");
  ASSERT_EQ((*a)[0].response.mounts.size(), 1u);
  EXPECT_EQ((*a)[0].response.mounts[0].host_path, "/tmp/nvidia-mps");
  EXPECT_TRUE((*a)[0].pre_start.ok()) << (*a)[0].pre_start;
  // Preferred allocation steered the kubelet to a replica of GPU 1.
  ASSERT_EQ((*a)[0].device_ids.size(), 1u);
  EXPECT_TRUE((*a)[0].device_ids[0].starts_with(Uuid(1) + "::")) << (*a)[0].device_ids[0];

  auto b = kubelet_->AdmitPod(whole.Spec());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].response.envs,
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", Uuid(2) + "," + Uuid(6)},
                                                {"GPUSCHED_NUMA_NODES", "0"}}));  // GPU i is on NUMA node i % 2
  EXPECT_TRUE((*b)[0].response.mounts.empty());
  EXPECT_EQ(std::set<std::string>((*b)[0].device_ids.begin(), (*b)[0].device_ids.end()),
            (std::set<std::string>{Uuid(2), Uuid(6)}));

  auto c = kubelet_->AdmitPod(keti.Spec());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(3));
  EXPECT_EQ((*c)[0].response.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "100");
  EXPECT_FALSE((*c)[0].response.envs.contains("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"));
  EXPECT_EQ(plugin_->allocations(), 3u);
  EXPECT_EQ(plugin_->refusals(), 0u);
}

TEST_F(DevicePluginTest, MultiContainerPodsGetEachContainerItsOwnGpus) {
  StartBoth();
  const TestPod p{.name = "multi",
                  .containers = {{.container = "setup", .gpus = {4}, .init = true},
                                 {.container = "a", .gpus = {0, 1}},
                                 {.container = "b", .gpus = {7}, .milli = 500, .mib = 4000, .exclusive = false}},
                  .extra_cpu_container = true};
  pods_.Put(p.Json());
  auto a = kubelet_->AdmitPod(p.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u);
  std::map<std::string, std::string> visible;
  for (const auto& c : *a) {
    visible[c.container] = c.response.envs.at("NVIDIA_VISIBLE_DEVICES");
    EXPECT_TRUE(c.pre_start.ok()) << c.container << ": " << c.pre_start;
  }
  EXPECT_EQ(visible,
            (std::map<std::string, std::string>{{"setup", Uuid(4)}, {"a", Uuid(0) + "," + Uuid(1)}, {"b", Uuid(7)}}));
}

// Runs `rounds` rounds of `pods_per_round` pods, each created and admitted by its own thread at the same time;
// every pod gets distinct GPUs (shares of one GPU for some). Returns (admitted, refused); fails the test if a
// container ever gets GPUs other than its own.
std::pair<int, int> RunConcurrentRounds(MemoryPodSource& pods, FakeKubelet& kubelet, int rounds, int pods_per_round,
                                        uint64_t seed, bool bind_all_first) {
  std::mt19937_64 rng(seed);
  std::atomic<int> admitted{0}, refused{0};
  for (int round = 0; round < rounds; ++round) {
    // 8 GPUs: pod i gets GPU i (exclusive, shared or via nvidia.com/gpu) so no two pods share a GPU.
    std::vector<TestPod> round_pods;
    for (int i = 0; i < pods_per_round; ++i) {
      const auto kind = rng() % 3;
      const int64_t milli = 100 + static_cast<int64_t>(rng() % 9) * 100;
      Gpus g{.resource = kind == 1 ? kNvidia : kGpu, .gpus = {i}};
      if (kind == 2) {
        g.milli = milli;
        g.mib = 1000 * (i + 1);
        g.exclusive = false;
      }
      round_pods.push_back(TestPod{.name = "r" + std::to_string(round) + "-p" + std::to_string(i), .containers = {g}});
    }
    if (bind_all_first) {
      for (const auto& p : round_pods) {
        pods.Put(p.Json());
      }
    }
    std::vector<std::thread> threads;
    for (const auto& p : round_pods) {
      threads.emplace_back([&, p] {
        if (!bind_all_first) {
          pods.Put(p.Json());
        }
        auto result = kubelet.AdmitPod(p.Spec());
        if (!result.ok()) {
          ++refused;
          EXPECT_THAT(result.status().message(), HasSubstr("ambiguous")) << p.name << " seed " << seed;
          return;
        }
        ++admitted;
        ASSERT_EQ(result->size(), 1u);
        const auto& c = (*result)[0];
        EXPECT_EQ(c.response.envs.at("NVIDIA_VISIBLE_DEVICES"), TestPod::Visible(p.containers[0]))
            << p.name << " got another pod's GPUs; seed " << seed;
        if (!p.containers[0].exclusive) {
          EXPECT_EQ(c.response.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), std::to_string(p.containers[0].milli / 10))
              << p.name << "; seed " << seed;
          EXPECT_EQ(c.response.envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                    "0=" + std::to_string(p.containers[0].mib) + "M")
              << p.name << "; seed " << seed;
        } else {
          EXPECT_FALSE(c.response.envs.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")) << p.name;
        }
        EXPECT_TRUE(c.pre_start.ok()) << p.name << ": " << c.pre_start << "; seed " << seed;
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    for (const auto& p : round_pods) {
      kubelet.RemovePod("default", p.name);
      pods.Remove(p.Key());
    }
  }
  return {admitted.load(), refused.load()};
}

TEST_F(DevicePluginTest, ConcurrentAdmissionsEachGetTheirOwnGpus) {
  StartBoth();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // Pods bound while others are admitted, and pods all bound before the kubelet admits any (the worst case:
  // several wait at once). The kubelet lists the pod it admits, so every one is placed and none is refused.
  auto [admitted, refused] = RunConcurrentRounds(pods_, *kubelet_, 10, 8, seed, /*bind_all_first=*/false);
  EXPECT_EQ(admitted, 80);
  EXPECT_EQ(refused, 0);
  std::tie(admitted, refused) = RunConcurrentRounds(pods_, *kubelet_, 10, 8, seed + 1, /*bind_all_first=*/true);
  EXPECT_EQ(admitted, 80);
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(plugin_->refusals(), 0u);
}

TEST_F(DevicePluginTest, AKubeletThatListsPodsLateNeverCausesAWrongHandoff) {
  // A kubelet that lists a pod only after its admission: when several pods wait with the same device count the
  // plugin cannot tell them apart and refuses (the pod is rejected) instead of guessing.
  StartBoth(FakeKubeletOptions{.list_admitting_pod = false});
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto [admitted, refused] = RunConcurrentRounds(pods_, *kubelet_, 6, 8, seed, /*bind_all_first=*/true);
  EXPECT_EQ(admitted + refused, 48);
  EXPECT_GT(refused, 0);  // 8 pods wait with one device each: the first of them is ambiguous
}

TEST_F(DevicePluginTest, OverlappingAdmissionsNeverCrossPods) {
  // No real kubelet admits pods in parallel; if one did, every call is either right or refused.
  StartBoth(FakeKubeletOptions{.serial_admission = false});
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto [admitted, refused] = RunConcurrentRounds(pods_, *kubelet_, 6, 8, seed, /*bind_all_first=*/true);
  EXPECT_EQ(admitted + refused, 48);
}

TEST_F(DevicePluginTest, ALaggingPodReadIsCompletedFromTheKubeletsList) {
  StartBoth();
  // "early" was bound first and waits; "late" is the one the kubelet admits, but the pod read misses it.
  const TestPod early{.name = "early", .containers = {{.gpus = {0}}}};
  const TestPod late{.name = "late", .containers = {{.gpus = {1}}}};
  pods_.Put(early.Json());
  pods_.Put(late.Json());
  pods_.Hide(late.Key());
  auto a = kubelet_->AdmitPod(late.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
  auto b = kubelet_->AdmitPod(early.Spec());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(0));
}

TEST_F(DevicePluginTest, ErrorsNameThePodAndTheDevices) {
  StartBoth();
  // No pod at all / a pod that requests no GPU: nobody waits.
  pods_.Put(testing::PodJson("cpu-only").Uid("u-cpu").NodeName(kNode).Phase("Pending"));
  auto none = kubelet_->Allocate(kGpu, {Uuid(0) + "::0"});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), common::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("no pod bound to node node-a waits for gpusched.io/gpu"));
  EXPECT_THAT(none.status().message(), HasSubstr(Uuid(0) + "::0"));

  // Unknown device id.
  auto unknown = kubelet_->Allocate(kGpu, {"GPU-nope::0"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown gpusched.io/gpu device id \"GPU-nope::0\""));

  // Not scheduled by gpusched: no allocation annotation.
  TestPod foreign{.name = "foreign", .containers = {{.resource = kNvidia, .gpus = {0}}}, .annotate = false};
  pods_.Put(foreign.Json());
  auto f = kubelet_->AdmitPod(foreign.Spec());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(f.status().message(), HasSubstr("pod default/foreign container main requests nvidia.com/gpu but the "
                                              "pod has no gpusched.io/allocation annotation"));
  pods_.Remove(foreign.Key());

  // Allocation for another node.
  TestPod moved{.name = "moved", .containers = {{.gpus = {0}}}, .alloc_node = "node-b"};
  pods_.Put(moved.Json());
  auto m = kubelet_->AdmitPod(moved.Spec());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("pod default/moved: its allocation is for node node-b, this is node "
                                              "node-a"));
  pods_.Remove(moved.Key());

  // The kubelet passes 2 devices, the allocation names 1 GPU.
  TestPod p{.name = "short", .containers = {{.gpus = {3}}}};
  json j = p.Json();
  j["spec"]["containers"][0]["resources"]["limits"][kGpu] = "2";
  pods_.Put(j);
  FakePodSpec spec = p.Spec();
  spec.containers[0].devices[kGpu] = 2;
  auto s = kubelet_->AdmitPod(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("pod default/short container main: kubelet passed 2 device(s)"));
  EXPECT_THAT(s.status().message(), HasSubstr("the allocation names 1 GPU(s) [" + Uuid(3) + "]"));
  EXPECT_GE(plugin_->refusals(), 5u);
  EXPECT_EQ(plugin_->allocations(), 0u);
}

TEST_F(DevicePluginTest, PreStartContainerRefusesAMismatchedHandoff) {
  StartBoth();
  const TestPod a{.name = "a", .containers = {{.gpus = {0}}}};
  pods_.Put(a.Json());
  const std::vector<std::string> ids = {Uuid(0) + "::2"};
  auto r = kubelet_->Allocate(kGpu, ids);  // the only waiting pod: a
  ASSERT_TRUE(r.ok()) << r.status();
  // The kubelet's record says the devices went to another pod: the container must not start.
  kubelet_->RecordDevices("default", "intruder", "main", kGpu, ids);
  auto s = kubelet_->PreStartContainer(kGpu, ids);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), common::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("handoff mismatch"));
  EXPECT_THAT(s.message(), HasSubstr("pod default/a container main"));
  EXPECT_THAT(s.message(), HasSubstr("pod default/intruder container main"));
  // With the kubelet's record right, it starts.
  kubelet_->RemovePod("default", "intruder");
  kubelet_->RecordDevices("default", "a", "main", kGpu, ids);
  EXPECT_TRUE(kubelet_->PreStartContainer(kGpu, ids).ok());
}

// Forged allocations (docs/device-plugin.md): pods created with spec.nodeName set and a gpusched.io/allocation
// annotation naming GPUs other pods hold. The kubelet rejects such a pod at admission (it turns Failed); `Reject`
// plays the API server's side of that.
class ForgedAllocationTest : public DevicePluginTest {
 protected:
  void Reject(TestPod p) {
    p.phase = "Failed";
    pods_.Put(p.Json());
  }
  // Binds and admits `p`; it must get its GPUs and start.
  std::vector<testing::FakeContainerAdmission> Admit(const TestPod& p) {
    pods_.Put(p.Json());
    auto a = kubelet_->AdmitPod(p.Spec());
    EXPECT_TRUE(a.ok()) << p.name << ": " << a.status();
    if (!a.ok()) {
      return {};
    }
    for (const auto& c : *a) {
      EXPECT_TRUE(c.pre_start.ok()) << p.name << ": " << c.pre_start;
    }
    return std::move(a).value();
  }
  // Binds `p` and has the kubelet admit it; returns the rejection (OK if it was admitted).
  common::Status Attack(const TestPod& p) {
    pods_.Put(p.Json());
    auto a = kubelet_->AdmitPod(p.Spec());
    if (a.ok()) {
      return common::Status::Ok();
    }
    Reject(p);
    return a.status();
  }
  static std::string GpuName(int i) { return "GPU " + std::to_string(i) + " (" + Uuid(i) + ")"; }
};

TEST_F(ForgedAllocationTest, AnotherPodsExclusiveGpuIsRefusedAtAllocate) {
  StartBoth();
  const TestPod victim{.name = "victim", .containers = {{.gpus = {0}}}, .allocation_id = 41};
  const auto held = Admit(victim);
  ASSERT_EQ(held.size(), 1u);
  ASSERT_EQ(held[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(0));

  // The same GPU, exclusively: refused, naming the victim, the GPU and the numbers.
  const common::Status exclusive = Attack(TestPod{.name = "attacker", .containers = {{.gpus = {0}}}});
  ASSERT_FALSE(exclusive.ok());
  EXPECT_EQ(exclusive.code(), common::StatusCode::kFailedPrecondition) << exclusive;
  EXPECT_THAT(exclusive.message(),
              HasSubstr("pod default/attacker container main: its allocation asks for " + GpuName(0) +
                        " exclusively, but it is allocated to pod default/victim "
                        "(1000 milli-GPU, 0 MiB, exclusive; holds its devices)"));
  // A small shared slice of it, through another resource: refused all the same.
  const common::Status slice = Attack(
      TestPod{.name = "nibbler",
              .containers = {{.resource = kNvidia, .gpus = {0}, .milli = 100, .mib = 1000, .exclusive = false}}});
  ASSERT_FALSE(slice.ok());
  EXPECT_THAT(slice.message(), HasSubstr(GpuName(0) + " is held exclusively by pod default/victim"));
  // A verbatim copy of the victim's annotation (same allocation id).
  TestPod copy = victim;
  copy.name = "copycat";
  const common::Status copied = Attack(copy);
  ASSERT_FALSE(copied.ok());
  EXPECT_THAT(copied.message(), HasSubstr("(allocation id 41 is pod default/victim's too: a copied annotation?)"));
  // A GPU this node does not have (the inventory has 8).
  const common::Status unknown = Attack(TestPod{.name = "phantom", .containers = {{.gpus = {9}}}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.message(), HasSubstr("pod default/phantom container main: the allocation names GPU " + Uuid(9) +
                                           ", which node node-a does not have"));
  // One GPU named twice for a container that asks for two devices.
  const common::Status twice = Attack(
      TestPod{.name = "doubler", .containers = {{.gpus = {3, 3}, .milli = 400, .mib = 1000, .exclusive = false}}});
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.message(), HasSubstr("names " + GpuName(3) + " twice"));

  EXPECT_EQ(plugin_->allocations(), 1u);
  EXPECT_EQ(plugin_->refusals(), 5u);
  // The victim keeps its GPU: its container still starts, and a legitimate pod gets a free GPU.
  EXPECT_TRUE(kubelet_->PreStartContainer(kGpu, held[0].device_ids).ok());
  const auto other = Admit(TestPod{.name = "bystander", .containers = {{.gpus = {1}}}});
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
}

TEST_F(ForgedAllocationTest, OvercommittingASharedGpuIsRefused) {
  StartBoth();
  // 600 milli-GPU and 50000 of GPU 1's 81920 MiB.
  Admit(TestPod{.name = "victim", .containers = {{.gpus = {1}, .milli = 600, .mib = 50000, .exclusive = false}}});
  // 600 + 500 = 1100 milli-GPU > 1000
  const common::Status compute =
      Attack(TestPod{.name = "greedy", .containers = {{.gpus = {1}, .milli = 500, .mib = 1000, .exclusive = false}}});
  ASSERT_FALSE(compute.ok());
  EXPECT_THAT(compute.message(),
              HasSubstr("pod default/greedy container main: " + GpuName(1) +
                        " would be overcommitted: pod default/greedy asks 500 milli-GPU, 1000 MiB of it, and it is "
                        "allocated to pod default/victim (600 milli-GPU, 50000 MiB; holds its devices); together "
                        "1100 milli-GPU > 1000"));
  // 50000 + 40000 = 90000 MiB > 81920
  const common::Status memory =
      Attack(TestPod{.name = "hungry", .containers = {{.gpus = {1}, .milli = 100, .mib = 40000, .exclusive = false}}});
  ASSERT_FALSE(memory.ok());
  EXPECT_THAT(memory.message(), HasSubstr("together 90000 MiB > 81920 MiB (the GPU's memory)"));
  // Exclusive on a GPU someone shares.
  const common::Status whole = Attack(TestPod{.name = "hog", .containers = {{.gpus = {1}}}});
  ASSERT_FALSE(whole.ok());
  EXPECT_THAT(whole.message(), HasSubstr("asks for " + GpuName(1) + " exclusively"));

  // 600 + 400 = 1000, 50000 + 31920 = 81920: a second shared pod that fits exactly is admitted.
  const auto fits = Admit(
      TestPod{.name = "neighbour", .containers = {{.gpus = {1}, .milli = 400, .mib = 31920, .exclusive = false}}});
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(1));
  EXPECT_EQ(fits[0].response.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "40");
  EXPECT_EQ(plugin_->refusals(), 3u);
}

TEST_F(ForgedAllocationTest, ATerminalPodsGpuIsFreeAgain) {
  StartBoth();
  TestPod done{.name = "done", .containers = {{.gpus = {2}}}};
  Admit(done);
  const common::Status busy = Attack(TestPod{.name = "early", .containers = {{.gpus = {2}}}});
  ASSERT_FALSE(busy.ok());
  EXPECT_THAT(busy.message(), HasSubstr("pod default/done"));
  // It finished; the kubelet still lists it (not deleted yet), but a terminal pod holds nothing.
  done.phase = "Succeeded";
  pods_.Put(done.Json());
  const auto next = Admit(TestPod{.name = "next", .containers = {{.gpus = {2}}}});
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(2));
}

TEST_F(ForgedAllocationTest, WhenNeitherHoldsTheGpuTheOneAllocatedNowIsRefused) {
  StartBoth();
  // The victim is bound but the kubelet has not admitted it yet; the attacker is admitted first.
  const TestPod victim{.name = "victim", .containers = {{.gpus = {4}}}};
  pods_.Put(victim.Json());
  const common::Status s =
      Attack(TestPod{.name = "attacker", .containers = {{.gpus = {4}, .milli = 200, .exclusive = false}}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(GpuName(4) + " is claimed exclusively by pod default/victim (1000 milli-GPU, 0 "
                                                  "MiB, exclusive; bound, holds no devices yet)"));
  // Rejected, the attacker is Failed: the victim gets its GPU.
  auto a = kubelet_->AdmitPod(victim.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(4));
  EXPECT_TRUE((*a)[0].pre_start.ok()) << (*a)[0].pre_start;
}

TEST_F(ForgedAllocationTest, PreStartContainerRefusesAContainerOnAnotherPodsGpu) {
  StartBoth();
  const TestPod victim{.name = "victim", .containers = {{.gpus = {5}}}};
  const auto held = Admit(victim);
  ASSERT_EQ(held.size(), 1u);
  // The attacker holds devices this agent never handed out (an older agent did, or one without this check) and its
  // annotation names the victim's GPU: its container must not start.
  const TestPod attacker{.name = "attacker", .containers = {{.gpus = {5}}}};
  pods_.Put(attacker.Json());
  std::vector<std::string> ids;
  for (int k = 0; ids.empty(); ++k) {  // a replica of GPU 5 the victim's container does not hold
    const std::string id = Uuid(5) + "::" + std::to_string(k);
    if (std::find(held[0].device_ids.begin(), held[0].device_ids.end(), id) == held[0].device_ids.end()) {
      ids.push_back(id);
    }
  }
  kubelet_->RecordDevices("default", "attacker", "main", kGpu, ids);
  const common::Status s = kubelet_->PreStartContainer(kGpu, ids);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), common::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("pod default/attacker container main: its allocation asks for " + GpuName(5) +
                                     " exclusively, but it is allocated to pod default/victim (1000 milli-GPU, 0 "
                                     "MiB, exclusive; holds its devices)"));
  // The victim, handed its GPU by this agent after the check, still starts: an unchecked holder does not outrank it.
  EXPECT_TRUE(kubelet_->PreStartContainer(kGpu, held[0].device_ids).ok());
  EXPECT_EQ(plugin_->refusals(), 1u);
}

// MPS limits are only worth handing out while the node's MPS control daemon answers: without it CUDA ignores them
// and the container would get the whole GPU. Such a container is refused with the reason; exclusive GPUs need no
// MPS and are handed out as always; once the daemon answers, shared containers are admitted again.
TEST_F(DevicePluginTest, SharedContainersAreRefusedWhileTheMpsDaemonDoesNotAnswer) {
  std::atomic<bool> mps_up{false};
  DevicePluginOptions o = Options();
  o.mps_daemon = [&mps_up] {
    return mps_up ? common::Status::Ok() : common::Unavailable("nvidia-cuda-mps-control exited with 1");
  };
  StartBothWith(o);
  const TestPod shared{.name = "shared", .containers = {{.gpus = {1}, .milli = 300, .mib = 20000, .exclusive = false}}};
  const TestPod whole{.name = "whole", .containers = {{.resource = kNvidia, .gpus = {6}}}};
  const TestPod later{.name = "later", .containers = {{.gpus = {2}, .milli = 500, .mib = 0, .exclusive = false}}};
  for (const auto* p : {&shared, &whole, &later}) {
    pods_.Put(p->Json());
  }
  auto a = kubelet_->AdmitPod(shared.Spec());
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("container main of pod default/shared shares GPU(s) " + Uuid(1) +
                                              " with MPS limits (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30, "
                                              "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M)"));
  EXPECT_THAT(a.status().message(), HasSubstr("the MPS control daemon of node " + std::string(kNode) +
                                              " does not answer: nvidia-cuda-mps-control exited with 1"));
  EXPECT_EQ(plugin_->allocations(), 0u);
  EXPECT_EQ(plugin_->refusals(), 1u);
  auto b = kubelet_->AdmitPod(whole.Spec());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(6));
  mps_up = true;
  auto c = kubelet_->AdmitPod(later.Spec());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)[0].response.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(plugin_->allocations(), 2u);
}

// shareWithin queue: a pod of another queue is refused on a GPU that a pod of one queue shares; the MPS hook sees
// every container it admits (with its GPUs) before Allocate answers, and its error refuses the container.
TEST_F(DevicePluginTest, ShareWithinAndTheMpsLimitsAreCheckedAtAllocate) {
  std::vector<std::string> admitted;
  DevicePluginOptions o = Options();
  o.mps_daemon = [] { return common::Status::Ok(); };
  o.share_within = ShareWithin::kQueue;
  o.mps_admit = [&admitted](const kube::PodMeta& pod, const std::string& entry,
                            std::span<const core::GpuShare> shares) {
    admitted.push_back(pod.Key() + " " + entry + " " + shares[0].uuid.str());
    return pod.name == "limits-fail" ? common::Unavailable("MPS: set_active_thread_percentage 7 30: exited with 1")
                                     : common::Status::Ok();
  };
  StartBothWith(o);
  const TestPod first{.name = "first", .containers = {{.gpus = {1}, .milli = 300, .mib = 1000, .exclusive = false}}};
  TestPod other{.name = "other", .containers = {{.gpus = {1}, .milli = 300, .mib = 1000, .exclusive = false}}};
  const TestPod same{.name = "same", .containers = {{.gpus = {1}, .milli = 200, .mib = 1000, .exclusive = false}}};
  const TestPod fails{.name = "limits-fail",
                      .containers = {{.gpus = {3}, .milli = 300, .mib = 1000, .exclusive = false}}};
  auto put = [this](const TestPod& p, const std::string& queue) {
    json j = p.Json();
    j["metadata"]["labels"] = {{"gpusched.io/queue", queue}};
    pods_.Put(j);
  };
  put(first, "q1");
  put(other, "q2");
  put(same, "q1");
  put(fails, "q1");
  auto a = kubelet_->AdmitPod(first.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = kubelet_->AdmitPod(other.Spec());
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("shareWithin queue: pod default/other (queue \"q2\") would share GPU " +
                                              Uuid(1) + " with pod default/first (queue \"q1\")"));
  // The kubelet fails a pod it could not admit; a failed pod shares nothing.
  other.phase = "Failed";
  put(other, "q2");
  auto c = kubelet_->AdmitPod(same.Spec());
  ASSERT_TRUE(c.ok()) << c.status();
  auto d = kubelet_->AdmitPod(fails.Spec());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("MPS: set_active_thread_percentage 7 30: exited with 1"));
  EXPECT_EQ(admitted, (std::vector<std::string>{"default/first main " + Uuid(1), "default/same main " + Uuid(1),
                                                "default/limits-fail main " + Uuid(3)}));
  EXPECT_EQ(plugin_->allocations(), 2u);
}

// A refused handoff is told to the pod it was for (GPUHandoffRefused, with the reason the kubelet gets), so that
// `kubectl describe pod` shows why its container did not start; an admitted one tells nothing.
TEST_F(DevicePluginTest, ARefusedHandoffIsToldToThePod) {
  struct Recorder final : ports::EventRecorder {
    void Record(ports::PodEvent e) override {
      std::lock_guard lock(mu);
      events.push_back(std::move(e));
    }
    std::mutex mu;
    std::vector<ports::PodEvent> events;
  } recorder;
  // The refusal is logged once, with the pod (the sink is swapped before any server thread runs, and back after
  // they are gone).
  auto lines = std::make_shared<std::vector<std::string>>();
  auto lines_mu = std::make_shared<std::mutex>();
  common::SetLogSink([lines, lines_mu](common::LogLevel, std::string_view line) {
    std::lock_guard lock(*lines_mu);
    lines->emplace_back(line);
  });
  common::SetLogLevel(common::LogLevel::kWarn);
  DevicePluginOptions o = Options();
  o.events = &recorder;
  o.mps_daemon = [] { return common::Unavailable("nvidia-cuda-mps-control exited with 1"); };
  StartBothWith(o);
  const TestPod shared{.name = "shared", .containers = {{.gpus = {1}, .milli = 300, .mib = 20000, .exclusive = false}}};
  const TestPod whole{.name = "whole", .containers = {{.resource = kNvidia, .gpus = {6}}}};
  pods_.Put(shared.Json());
  pods_.Put(whole.Json());
  ASSERT_FALSE(kubelet_->AdmitPod(shared.Spec()).ok());
  ASSERT_TRUE(kubelet_->AdmitPod(whole.Spec()).ok());
  plugin_.reset();
  kubelet_.reset();
  common::SetLogLevel(common::LogLevel::kError);
  common::SetLogSink([](common::LogLevel, std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  });
  std::vector<std::string> refused;
  for (const std::string& line : *lines) {
    if (line.find("refused") != std::string::npos) {
      refused.push_back(line);
    }
  }
  ASSERT_EQ(refused.size(), 1U) << ::testing::PrintToString(*lines);
  EXPECT_THAT(refused[0], HasSubstr("gpusched agent refused to hand GPUs to container main"));
  EXPECT_THAT(refused[0], HasSubstr("pod=default/shared"));
  std::lock_guard lock(recorder.mu);
  ASSERT_EQ(recorder.events.size(), 1U);
  const ports::PodEvent& e = recorder.events[0];
  EXPECT_EQ(e.namespace_, "default");
  EXPECT_EQ(e.name, "shared");
  EXPECT_FALSE(e.uid.empty());
  EXPECT_EQ(e.type, "Warning");
  EXPECT_EQ(e.reason, "GPUHandoffRefused");
  EXPECT_THAT(e.message, HasSubstr("gpusched agent refused to hand GPUs to container main (gpusched.io/gpu ["));
  EXPECT_THAT(e.message, HasSubstr("the MPS control daemon of node " + std::string(kNode) + " does not answer"));
}

// --mps off: no MPS on the node; shared containers get their GPUs without caps (time slicing), and no pipe mount.
TEST_F(DevicePluginTest, WithoutMpsSharedContainersGetTheirGpusAndNoLimits) {
  DevicePluginOptions o = Options();
  o.mps.enabled = false;
  StartBothWith(o);
  const TestPod shared{.name = "shared", .containers = {{.gpus = {4}, .milli = 300, .mib = 20000, .exclusive = false}}};
  pods_.Put(shared.Json());
  auto a = kubelet_->AdmitPod(shared.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)[0].response.envs,
            (std::map<std::string, std::string>{{"NVIDIA_VISIBLE_DEVICES", Uuid(4)}, {"GPUSCHED_NUMA_NODES", "0"}}));
  EXPECT_TRUE((*a)[0].response.mounts.empty());
}

// HAMi's mode: nvidia.com/gpu advertised as replicas per GPU, so that several pods asking for nvidia.com/gpu: 1 with
// a memory or compute share fit one GPU at the kubelet too; each gets the GPU its allocation names.
TEST_F(DevicePluginTest, HamiModeSplitsEachGpuIntoReplicasOfNvidiaGpu) {
  DevicePluginOptions o = Options();
  o.nvidia_gpu_replicas = o.replicas;
  StartBothWith(o);
  auto nvidia = kubelet_->Devices(kNvidia);
  ASSERT_EQ(nvidia->size(), 32u);
  EXPECT_EQ((*nvidia)[0].id, Uuid(0) + "::0");
  EXPECT_EQ((*nvidia)[5].id, Uuid(1) + "::1");
  const TestPod first{
      .name = "hami-1",
      .containers = {{.resource = kNvidia, .gpus = {5}, .milli = 250, .mib = 8000, .exclusive = false}}};
  const TestPod second{
      .name = "hami-2",
      .containers = {{.resource = kNvidia, .gpus = {5}, .milli = 250, .mib = 8000, .exclusive = false}}};
  for (const auto* p : {&first, &second}) {
    pods_.Put(p->Json());
    auto a = kubelet_->AdmitPod(p->Spec());
    ASSERT_TRUE(a.ok()) << p->name << ": " << a.status();
    EXPECT_EQ((*a)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES"), Uuid(5)) << p->name;
    EXPECT_EQ((*a)[0].response.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25") << p->name;
    ASSERT_EQ((*a)[0].device_ids.size(), 1u);
    EXPECT_TRUE((*a)[0].device_ids[0].starts_with(Uuid(5) + "::")) << (*a)[0].device_ids[0];
  }
}

// The agent's pod source, agent::NodePods (an informer of the node's pods), against the fake API server over mTLS:
// the requests a container start makes (GetPreferredAllocation, Allocate and PreStartContainer, as FakeKubelet's
// AdmitPod calls them), counted by the server, and what still works while it is down.
class NodePodsTest : public DevicePluginTest {
 protected:
  static void SetUpTestSuite() {
    pki_dir_ = new std::string(testing::MakeTempDir("gpusched-dp-pki"));
    ASSERT_FALSE(pki_dir_->empty());
    auto pki = testing::MakeTestPki(*pki_dir_ + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new testing::TestPki(*pki);
  }
  static void TearDownTestSuite() {
    if (pki_dir_ != nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(*pki_dir_, ec);
    }
    delete pki_;
    delete pki_dir_;
    pki_ = nullptr;
    pki_dir_ = nullptr;
  }

  void SetUp() override {
    DevicePluginTest::SetUp();
    server_ = std::make_unique<testing::FakeApiServer>(testing::FakeApiServerOptions{
        .cert_file = pki_->server_cert_file, .key_file = pki_->server_key_file, .client_ca_file = pki_->ca_file});
    ASSERT_TRUE(server_->Start().ok());
    auto client = k8s::ApiClient::Create(k8s::ClientConfig{.server = server_->url(),
                                                           .ca_pem = pki_->ca_pem,
                                                           .client_cert_pem = pki_->client_cert_pem,
                                                           .client_key_pem = pki_->client_key_pem,
                                                           .namespace_ = "default"});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    node_pods_ = std::make_unique<agent::NodePods>(
        *client_, agent::NodePodsOptions{
                      .node = kNode,
                      .informer = {.initial_backoff = milliseconds(20), .max_backoff = milliseconds(200), .seed = 1}});
    node_pods_->Start();
    ASSERT_TRUE(node_pods_->WaitForSync(kDeadline));
    source_ = node_pods_.get();
  }
  void TearDown() override {
    plugin_.reset();  // before its pod source
    node_pods_.reset();
    client_.reset();
    server_.reset();
    DevicePluginTest::TearDown();
  }

  bool Cached(const TestPod& p) const {
    const auto cached = node_pods_->informer().Get(p.Key());
    return cached.has_value() && (*cached)["metadata"].value("uid", "") == "uid-" + p.name;
  }
  // Binds `p` on the API server (created with spec.nodeName set, as a Binding leaves it) and, unless told not to,
  // waits until the watch has delivered it.
  void Bind(const TestPod& p, bool wait = true) {
    server_->UpsertPod(p.Json());
    if (wait) {
      ASSERT_TRUE(FakeKubelet::WaitFor([&] { return Cached(p); }, kDeadline)) << p.name;
    }
  }
  struct Reads {
    int lists = 0;
    int gets = 0;
  };
  Reads Count() const {
    return Reads{.lists = server_->RequestCount("GET", "list-pods"), .gets = server_->RequestCount("GET", "get-pod")};
  }
  static Reads Since(const Reads& before, const Reads& after) {
    return Reads{.lists = after.lists - before.lists, .gets = after.gets - before.gets};
  }
  // Admits `p` and checks that every container got exactly its own GPUs and starts.
  std::vector<testing::FakeContainerAdmission> ExpectAdmitted(const TestPod& p) {
    auto a = kubelet_->AdmitPod(p.Spec());
    EXPECT_TRUE(a.ok()) << p.name << ": " << a.status();
    if (!a.ok()) {
      return {};
    }
    EXPECT_EQ(a->size(), p.containers.size()) << p.name;
    for (size_t i = 0; i < p.containers.size() && i < a->size(); ++i) {
      EXPECT_EQ((*a)[i].response.envs.at("NVIDIA_VISIBLE_DEVICES"), TestPod::Visible(p.containers[i])) << p.name;
      EXPECT_TRUE((*a)[i].pre_start.ok()) << p.name << ": " << (*a)[i].pre_start;
    }
    return std::move(a).value();
  }

  static std::string* pki_dir_;
  static testing::TestPki* pki_;
  std::unique_ptr<testing::FakeApiServer> server_;
  std::unique_ptr<k8s::ApiClient> client_;
  std::unique_ptr<agent::NodePods> node_pods_;
};

std::string* NodePodsTest::pki_dir_ = nullptr;
testing::TestPki* NodePodsTest::pki_ = nullptr;

// What the agent read before it kept an informer: a quorum LIST of the node's pods at every Allocate-side call, and
// a GET of a listed pod that list missed. The baseline the counts below are compared with.
class QuorumPodSource final : public PodSource {
 public:
  explicit QuorumPodSource(k8s::ApiClient& client) : client_(client) {}
  common::Result<std::vector<json>> PodsOnNode() override {
    auto list = client_.List("/api/v1/pods", std::string("spec.nodeName=") + kNode);
    if (!list.ok()) {
      return list.status();
    }
    return std::move(list->items);
  }
  common::Result<json> GetPod(const std::string& ns, const std::string& name) override {
    return client_.Get("/api/v1/namespaces/" + ns + "/pods/" + name);
  }

 private:
  k8s::ApiClient& client_;
};

TEST_F(NodePodsTest, AQuorumPodSourceListsTheNodesPodsThreeTimesPerContainerStart) {
  QuorumPodSource quorum(*client_);
  source_ = &quorum;
  StartBoth();
  const TestPod p{.name = "quorum", .containers = {{.gpus = {2}}}};
  Bind(p);
  const Reads before = Count();
  ExpectAdmitted(p);
  const Reads reads = Since(before, Count());
  std::printf("quorum pod source: %d LIST, %d GET of pods for one container start\n", reads.lists, reads.gets);
  EXPECT_EQ(reads.lists, 3);  // GetPreferredAllocation, Allocate, PreStartContainer
  EXPECT_EQ(reads.gets, 0);
  plugin_.reset();  // before `quorum` goes
}

TEST_F(NodePodsTest, AContainerStartReadsNoPodsFromTheApiServer) {
  StartBoth();
  const TestPod one{.name = "one", .containers = {{.gpus = {2}}}};
  const TestPod multi{.name = "multi",
                      .containers = {{.container = "setup", .gpus = {4}, .init = true},
                                     {.container = "a", .gpus = {0, 1}},
                                     {.container = "b", .gpus = {7}, .milli = 500, .mib = 4000, .exclusive = false}}};
  Bind(one);
  Bind(multi);
  const Reads before = Count();
  ExpectAdmitted(one);
  ExpectAdmitted(multi);
  const Reads reads = Since(before, Count());
  std::printf("informer pod source: %d LIST, %d GET of pods for 4 container starts\n", reads.lists, reads.gets);
  EXPECT_EQ(reads.lists, 0);
  EXPECT_EQ(reads.gets, 0);
  EXPECT_EQ(node_pods_->lists(), 0u);
  EXPECT_EQ(node_pods_->gets(), 0u);
  EXPECT_EQ(plugin_->allocations(), 4u);
}

// A pod bound a moment ago whose watch event has not arrived: the kubelet lists it, so the plugin reads that pod
// alone, once for the three calls of its container start; the checks against forged allocations see it all the
// same. Once the watch delivers, nothing is read again.
TEST_F(NodePodsTest, APodTheWatchHasNotDeliveredIsReadOnceAlone) {
  StartBoth();
  server_->StallWatches(true);  // events are held back from the informer
  const TestPod fresh{.name = "fresh", .containers = {{.gpus = {3}}}, .allocation_id = 7};
  Bind(fresh, /*wait=*/false);
  ASSERT_FALSE(Cached(fresh));
  Reads before = Count();
  ExpectAdmitted(fresh);
  Reads reads = Since(before, Count());
  std::printf("informer pod source, pod not delivered yet: %d LIST, %d GET of pods for one container start\n",
              reads.lists, reads.gets);
  EXPECT_EQ(reads.lists, 0);
  EXPECT_EQ(reads.gets, 1);
  ASSERT_FALSE(Cached(fresh));  // still held back

  // A copy of its annotation on a pod created with spec.nodeName, also not delivered: read alone, and refused
  // against the pod that holds the GPU, which itself was only ever read alone.
  TestPod forged{.name = "forged", .containers = {{.gpus = {3}}}, .allocation_id = 7};
  Bind(forged, /*wait=*/false);
  auto attack = kubelet_->AdmitPod(forged.Spec());
  ASSERT_FALSE(attack.ok());
  EXPECT_EQ(attack.status().code(), common::StatusCode::kFailedPrecondition) << attack.status();
  EXPECT_THAT(attack.status().message(),
              HasSubstr("pod default/forged container main: its allocation asks for GPU 3 (" + Uuid(3) +
                        ") exclusively, but it is allocated to pod default/fresh (1000 milli-GPU, 0 MiB, exclusive; "
                        "holds its devices) (allocation id 7 is pod default/fresh's too: a copied annotation?)"));
  forged.phase = "Failed";  // the kubelet's rejection
  server_->UpsertPod(forged.Json());

  server_->StallWatches(false);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return Cached(fresh) && Cached(forged); }, kDeadline));
  const TestPod next{.name = "next", .containers = {{.gpus = {5}}}};
  Bind(next);
  before = Count();
  ExpectAdmitted(next);
  reads = Since(before, Count());
  EXPECT_EQ(reads.lists, 0);
  EXPECT_EQ(reads.gets, 0);
  EXPECT_TRUE(plugin_->registered());
}

// A kubelet that lists the pod under admission only after admitting it (no real kubelet does): the informer's view
// alone would pick the only waiting pod it has, which is not the one being admitted. The pick is not one the kubelet
// lists, so Allocate decides again on one quorum LIST, sees both pods, and refuses as ambiguous instead.
TEST_F(NodePodsTest, AKubeletThatListsLateGetsAQuorumReadInsteadOfAWrongHandoff) {
  StartBoth(FakeKubeletOptions{.list_admitting_pod = false});
  const TestPod early{.name = "early", .containers = {{.gpus = {0}}}};
  const TestPod late{.name = "late", .containers = {{.gpus = {1}}}};
  Bind(early);
  server_->StallWatches(true);
  Bind(late, /*wait=*/false);
  Reads before = Count();
  auto a = kubelet_->AdmitPod(late.Spec());
  ASSERT_FALSE(a.ok()) << "late was handed " << (*a)[0].response.envs.at("NVIDIA_VISIBLE_DEVICES");
  EXPECT_EQ(a.status().code(), common::StatusCode::kAborted) << a.status();
  EXPECT_THAT(a.status().message(), HasSubstr("ambiguous"));
  Reads reads = Since(before, Count());
  EXPECT_EQ(reads.lists, 1);  // Allocate's one fallback; GetPreferredAllocation only advises and reads none
  EXPECT_EQ(reads.gets, 0);
  // The kubelet rejected `late`; `early` alone waits now, and gets its own GPU.
  TestPod rejected = late;
  rejected.phase = "Failed";
  server_->UpsertPod(rejected.Json());
  before = Count();
  ExpectAdmitted(early);
  reads = Since(before, Count());
  EXPECT_EQ(reads.lists, 1);
  EXPECT_EQ(plugin_->allocations(), 1u);
}

// A pod deleted and created again under its name (a StatefulSet's) while the watch lags: the cache still has the old
// pod, being deleted, and the kubelet lists the new one under the same name. The kubelet never admits a pod being
// deleted, so Allocate decides on one quorum LIST and hands the new pod its own GPU, not its predecessor's.
TEST_F(NodePodsTest, APodCreatedAgainUnderItsNameGetsItsOwnGpus) {
  StartBoth();
  const TestPod before_pod{.name = "web-0", .containers = {{.gpus = {0}}}};
  json old_json = before_pod.Json();
  old_json["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  server_->UpsertPod(old_json);
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return Cached(before_pod); }, kDeadline));
  server_->StallWatches(true);
  ASSERT_TRUE(server_->DeletePod("default", "web-0"));
  const TestPod again{.name = "web-0", .containers = {{.gpus = {3}}}};
  json again_json = again.Json();
  again_json["metadata"]["uid"] = "uid-web-0-again";
  server_->UpsertPod(again_json);
  const Reads before = Count();
  ExpectAdmitted(again);  // GPU 3, its own
  const Reads reads = Since(before, Count());
  EXPECT_EQ(reads.lists, 1);
  EXPECT_EQ(reads.gets, 0);
}

// The API server is down: pods the watch delivered before get their GPUs and start, a running container starts
// again, a forged claim on a held GPU is still refused, and a pod deleted meanwhile that the kubelet still lists
// (terminating) does not stand in the way; a pod the informer never saw is refused with a clear error, and nothing
// else changes.
TEST_F(NodePodsTest, PodsTheInformerHasGetTheirGpusWhileTheApiServerIsDown) {
  StartBoth();
  const TestPod a{.name = "a", .containers = {{.gpus = {0}}}, .allocation_id = 11};
  const TestPod b{.name = "b", .containers = {{.gpus = {1}, .milli = 400, .mib = 9000, .exclusive = false}}};
  const TestPod gone{.name = "gone", .containers = {{.gpus = {6}}}};
  const TestPod thief{.name = "thief", .containers = {{.gpus = {0}}}, .allocation_id = 11};
  const TestPod after{.name = "after", .containers = {{.gpus = {2}}}};
  Bind(a);
  const auto held = ExpectAdmitted(a);
  ASSERT_EQ(held.size(), 1u);
  Bind(thief);
  Bind(b);
  Bind(gone);
  Bind(after);
  ExpectAdmitted(gone);
  ASSERT_TRUE(server_->DeletePod("default", "gone"));
  ASSERT_TRUE(FakeKubelet::WaitFor([&] { return !Cached(gone); }, kDeadline));
  server_->Stop();

  ExpectAdmitted(b);
  EXPECT_TRUE(kubelet_->PreStartContainer(kGpu, held[0].device_ids).ok());  // a's container restarts
  auto attack = kubelet_->AdmitPod(thief.Spec());
  ASSERT_FALSE(attack.ok());
  EXPECT_EQ(attack.status().code(), common::StatusCode::kFailedPrecondition) << attack.status();
  EXPECT_THAT(attack.status().message(), HasSubstr("pod default/thief container main: its allocation asks for GPU 0 (" +
                                                   Uuid(0) + ") exclusively, but it is allocated to pod default/a"));
  const TestPod unseen{.name = "unseen", .containers = {{.gpus = {2}}}};
  auto refused = kubelet_->AdmitPod(unseen.Spec());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("reading pod default/unseen (listed by the kubelet)"));
  // And the refusals changed nothing: the next pod the informer has is handed its GPUs.
  ExpectAdmitted(after);
  EXPECT_EQ(plugin_->allocations(), 4u);
  EXPECT_EQ(plugin_->refusals(), 2u);
  EXPECT_TRUE(plugin_->registered());
  EXPECT_EQ(node_pods_->lists(), 0u);
}

// volume-mounts (the default): the GPUs reach NVIDIA's runtime as mounts only a device plugin's answer can make; the
// variable names the mount directory, never a GPU.
TEST_F(DevicePluginTest, VolumeMountsHandTheGpusOverAsMounts) {
  DevicePluginOptions o = Options();
  o.device_list_strategy = DeviceListStrategy::kVolumeMounts;
  StartBothWith(o);
  const TestPod p{.name = "mounted", .containers = {{.resource = kNvidia, .gpus = {5, 2}}}};
  pods_.Put(p.Json());
  auto a = kubelet_->AdmitPod(p.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  const auto& r = (*a)[0].response;
  EXPECT_EQ(r.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  std::vector<std::tuple<std::string, std::string, bool>> mounts;
  for (const auto& m : r.mounts) {
    mounts.emplace_back(m.container_path, m.host_path, m.read_only);
  }
  EXPECT_EQ(mounts, (std::vector<std::tuple<std::string, std::string, bool>>{
                        {"/var/run/nvidia-container-devices/" + Uuid(2), "/dev/null", true},
                        {"/var/run/nvidia-container-devices/" + Uuid(5), "/dev/null", true}}));
  EXPECT_TRUE(r.cdi_devices.empty());
  EXPECT_TRUE((*a)[0].pre_start.ok()) << (*a)[0].pre_start;
}

// cdi-cri: the plugin writes a CDI spec with one device per GPU (its node from the driver's minor, here the reverse
// of the index) and answers with CDI device names; a GPU the spec lacks is refused, and a plugin started with another
// strategy removes the spec.
TEST_F(DevicePluginTest, CdiDevicesNameTheSpecTheAgentWrites) {
  for (int i = 0; i < 8; ++i) {
    if (i == 4) {
      continue;  // the driver tells nothing about GPU 4
    }
    char bus[32];
    std::snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x10 + i);
    std::filesystem::create_directories(dir_ + "/proc/" + bus);
    std::ofstream(dir_ + "/proc/" + bus + "/information") << "Device Minor: \t " << 7 - i << "\n";
  }
  DevicePluginOptions o = Options();
  o.device_list_strategy = DeviceListStrategy::kCdiCri;
  StartBothWith(o);
  const std::string spec_path = dir_ + "/cdi/gpusched.io-gpu.json";
  ASSERT_TRUE(std::filesystem::exists(spec_path));
  const json spec = json::parse(std::ifstream(spec_path));
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  EXPECT_EQ(spec["kind"], "gpusched.io/gpu");
  ASSERT_EQ(spec["devices"].size(), 7u);
  EXPECT_EQ(spec["devices"][0]["name"], Uuid(0));
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia7");
  EXPECT_EQ(spec["devices"][4]["name"], Uuid(5));
  EXPECT_EQ(spec["devices"][4]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia2");

  const TestPod p{.name = "cdi", .containers = {{.gpus = {5}, .milli = 500, .mib = 1000, .exclusive = false}}};
  pods_.Put(p.Json());
  auto a = kubelet_->AdmitPod(p.Spec());
  ASSERT_TRUE(a.ok()) << a.status();
  const auto& r = (*a)[0].response;
  EXPECT_EQ(r.cdi_devices, std::vector<std::string>{"gpusched.io/gpu=" + Uuid(5)});
  EXPECT_EQ(r.envs.at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(r.envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_TRUE(r.annotations.empty());

  const TestPod lost{.name = "lost", .containers = {{.gpus = {4}}}};
  pods_.Put(lost.Json());
  auto refused = kubelet_->AdmitPod(lost.Spec());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("GPU 4 (" + Uuid(4) + ") has no device in the CDI spec " + spec_path + ": GPU 4 (" + Uuid(4) +
                        "): cannot read " + dir_ + "/proc/0000:14:00.0/information"));

  plugin_.reset();
  o.device_list_strategy = DeviceListStrategy::kVolumeMounts;
  StartPlugin(o);
  EXPECT_FALSE(std::filesystem::exists(spec_path));
}

TEST(DevicePluginOptionsTest, BadOptionsFailAtStart) {
  EXPECT_FALSE(ValidateOptions(DevicePluginOptions{}).ok());  // no node
  EXPECT_THAT(ValidateOptions(DevicePluginOptions{.node_name = "n", .resources = {"aliyun.com/gpu-mem"}}).message(),
              HasSubstr("unsupported resource"));
  EXPECT_THAT(ValidateOptions(DevicePluginOptions{.node_name = "n", .replicas = 0}).message(),
              HasSubstr("replicas must be 1..1000"));
  EXPECT_THAT(
      ValidateOptions(DevicePluginOptions{.node_name = "n", .plugin_dir = "/" + std::string(120, 'x')}).message(),
      HasSubstr("longer than"));
  EXPECT_THAT(ValidateOptions(DevicePluginOptions{.node_name = "n", .nvidia_gpu_replicas = 0}).message(),
              HasSubstr("nvidia_gpu_replicas must be 1..1000"));
  EXPECT_TRUE(ValidateOptions(DevicePluginOptions{.node_name = "n"}).ok());
  EXPECT_EQ(SocketName("gpusched", "gpusched.io/gpu"), "gpusched-gpusched-io-gpu.sock");
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
