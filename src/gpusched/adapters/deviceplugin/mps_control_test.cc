#include "gpusched/adapters/deviceplugin/mps_control.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/deviceplugin/share_within.h"
#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A stand-in for nvidia-cuda-mps-control's client mode: reads one command from standard input and appends it to
// $CUDA_MPS_LOG_DIRECTORY/commands; get_server_list answers the server PIDs in $CUDA_MPS_PIPE_DIRECTORY/servers;
// the default thread percentage it reports is the last one set since the "daemon" started (100 before, as
// NVIDIA's); a command named in $CUDA_MPS_PIPE_DIRECTORY/fail exits 1 as a refused command would. A restart of the
// daemon is the test deleting `state` and writing another pid file.
constexpr const char* kFakeControl = R"sh(#!/bin/sh
read cmd
echo "$cmd" >> "$CUDA_MPS_LOG_DIRECTORY/commands"
verb=${cmd%% *}
if [ -f "$CUDA_MPS_PIPE_DIRECTORY/fail" ] && [ "$(cat "$CUDA_MPS_PIPE_DIRECTORY/fail")" = "$verb" ]; then
  echo "refused $verb"; exit 1
fi
case "$verb" in
  get_server_list) cat "$CUDA_MPS_PIPE_DIRECTORY/servers" 2>/dev/null ;;
  get_default_active_thread_percentage) cat "$CUDA_MPS_PIPE_DIRECTORY/state" 2>/dev/null || echo 100.0 ;;
  set_default_active_thread_percentage) echo "${cmd#* }.0" > "$CUDA_MPS_PIPE_DIRECTORY/state" ;;
  set_default_device_pinned_mem_limit|set_active_thread_percentage|set_device_pinned_mem_limit) ;;
  *) echo "unknown command $verb"; exit 2 ;;
esac
exit 0
)sh";

core::GpuShare Share(const std::string& uuid, int64_t milli, int64_t mib, bool exclusive = false) {
  return core::GpuShare{.uuid = common::GpuUuid(uuid),
                        .milli = common::MilliGpu{milli},
                        .memory = common::MiB{mib},
                        .exclusive = exclusive};
}

MpsClient Client(const std::string& pod, std::optional<int64_t> uid, std::vector<core::GpuShare> gpus) {
  return MpsClient{.pod_key = pod, .container = "main", .uid = uid, .gpus = std::move(gpus)};
}

class MpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    common::SetLogLevel(common::LogLevel::kError);
    char tmpl[] = "/tmp/gpmpsc-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* d : {"/pipe", "/log", "/proc"}) {
      std::filesystem::create_directories(dir_ + d);
    }
    const std::string control = dir_ + "/nvidia-cuda-mps-control";
    std::ofstream(control) << kFakeControl;
    ::chmod(control.c_str(), 0755);
    Write("/pipe/nvidia-cuda-mps-control.pid", "4000\n");
    runner_ = NewProcessMpsRunner(ProcessMpsRunnerOptions{.control = control,
                                                          .pipe_dir = dir_ + "/pipe",
                                                          .log_dir = dir_ + "/log",
                                                          .proc_dir = dir_ + "/proc",
                                                          .timeout = std::chrono::milliseconds(5000)});
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  void Write(const std::string& rel, const std::string& text) const { std::ofstream(dir_ + rel) << text; }
  // A server process `pid` running as `uid`, as /proc shows it.
  void Server(int64_t pid, int64_t uid) const {
    std::filesystem::create_directories(dir_ + "/proc/" + std::to_string(pid));
    Write("/proc/" + std::to_string(pid) + "/status",
          "Name:\tnvidia-cuda-mps\nUid:\t" + std::to_string(uid) + "\t" + std::to_string(uid) + "\t0\t0\n");
  }
  void Servers(const std::string& pids) const { Write("/pipe/servers", pids); }
  // The commands the fake received since the last call.
  std::vector<std::string> Commands() {
    std::ifstream in(dir_ + "/log/commands");
    std::vector<std::string> all;
    for (std::string line; std::getline(in, line);) {
      all.push_back(line);
    }
    std::vector<std::string> fresh(all.begin() + static_cast<std::ptrdiff_t>(std::min(seen_, all.size())), all.end());
    seen_ = all.size();
    return fresh;
  }

  std::string dir_;
  std::unique_ptr<MpsControlRunner> runner_;
  size_t seen_ = 0;
};

TEST_F(MpsControlTest, DefaultsAtStartAreTheSmallestShareOnEveryGpu) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a", "GPU-b"}, .fallback_pinned_mib = 1});
  ASSERT_TRUE(c.ValidateOptions().ok());
  // No MPS pod yet: the fallbacks (100 %: nothing reserved; 1 MiB on each GPU: nobody is entitled to memory).
  ASSERT_TRUE(c.Apply({}).ok());
  EXPECT_THAT(Commands(), ElementsAre("get_server_list", "set_default_active_thread_percentage 100",
                                      "set_default_device_pinned_mem_limit GPU-a 1M",
                                      "set_default_device_pinned_mem_limit GPU-b 1M"));
  // Two pods on GPU-a (30 % / 20000 MiB and 50 % / 8000 MiB): defaults = min = 30 %, 8000 MiB on GPU-a.
  const std::vector<MpsClient> clients = {Client("a/p1", 1000, {Share("GPU-a", 300, 20000)}),
                                          Client("a/p2", 1001, {Share("GPU-a", 500, 8000)})};
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_THAT(Commands(), ElementsAre("get_default_active_thread_percentage", "get_server_list",
                                      "set_default_active_thread_percentage 30",
                                      "set_default_device_pinned_mem_limit GPU-a 8000M"));
  // Nothing changed: only the checks are sent.
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_THAT(Commands(), ElementsAre("get_default_active_thread_percentage", "get_server_list"));
  EXPECT_EQ(c.restarts_seen(), 0u);
}

TEST_F(MpsControlTest, ANewPodsServerGetsItsShareAndExclusiveGpusAreNotClients) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a", "GPU-b"}});
  ASSERT_TRUE(c.Apply({}).ok());
  Commands();
  // The pod (uid 1000, 25 % and 4096 MiB of GPU-b, and an exclusive GPU-a) started: its server is pid 77.
  Server(77, 1000);
  Servers("77\n");
  const std::vector<MpsClient> clients = {
      Client("team/infer", 1000, {Share("GPU-b", 250, 4096), Share("GPU-a", 1000, 81920, true)})};
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_THAT(Commands(),
              ElementsAre("get_default_active_thread_percentage", "get_server_list",
                          "set_default_active_thread_percentage 25", "set_default_device_pinned_mem_limit GPU-b 4096M",
                          "set_active_thread_percentage 77 25", "set_device_pinned_mem_limit 77 GPU-b 4096M"));
  const auto applied = c.applied();
  ASSERT_TRUE(applied.has_value());
  EXPECT_EQ(applied->servers.at(77), (MpsLimits{.thread_percentage = 25, .pinned_mib = {{"GPU-b", 4096}}}));
}

TEST_F(MpsControlTest, TwoUidsGetTwoServersEachWithItsOwnShare) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a"}});
  Server(10, 1000);
  Server(11, 2000);
  Servers("10\n11\n");
  const std::vector<MpsClient> clients = {Client("a/small", 1000, {Share("GPU-a", 200, 2000)}),
                                          Client("b/big", 2000, {Share("GPU-a", 600, 30000)})};
  ASSERT_TRUE(c.Apply(clients).ok());
  // defaults: min over both (20 %, 2000 MiB); server 10 (uid 1000): a/small's share; server 11 (uid 2000): b/big's.
  EXPECT_THAT(Commands(),
              ElementsAre("get_server_list", "set_default_active_thread_percentage 20",
                          "set_default_device_pinned_mem_limit GPU-a 2000M", "set_active_thread_percentage 10 20",
                          "set_device_pinned_mem_limit 10 GPU-a 2000M", "set_active_thread_percentage 11 60",
                          "set_device_pinned_mem_limit 11 GPU-a 30000M"));
  // A pod of unknown uid (it may run as root and become anyone) joins: every server drops to its share too.
  std::vector<MpsClient> more = clients;
  more.push_back(Client("c/anyone", std::nullopt, {Share("GPU-a", 100, 1000)}));
  ASSERT_TRUE(c.Apply(more).ok());
  EXPECT_THAT(Commands(),
              ElementsAre("get_default_active_thread_percentage", "get_server_list",
                          "set_default_active_thread_percentage 10", "set_default_device_pinned_mem_limit GPU-a 1000M",
                          "set_active_thread_percentage 10 10", "set_device_pinned_mem_limit 10 GPU-a 1000M",
                          "set_active_thread_percentage 11 10", "set_device_pinned_mem_limit 11 GPU-a 1000M"));
  // It leaves, and a second pod of uid 2000 with a smaller share shares server 11: the smallest of the two.
  std::vector<MpsClient> same_uid = clients;
  same_uid.push_back(Client("b/second", 2000, {Share("GPU-a", 100, 5000)}));
  ASSERT_TRUE(c.Apply(same_uid).ok());
  EXPECT_THAT(Commands(),
              ElementsAre("get_default_active_thread_percentage", "get_server_list",
                          "set_default_device_pinned_mem_limit GPU-a 2000M", "set_active_thread_percentage 10 20",
                          "set_device_pinned_mem_limit 10 GPU-a 2000M", "set_device_pinned_mem_limit 11 GPU-a 5000M"));
  // A server whose uid cannot be read (no /proc entry) gets the defaults.
  Servers("10\n11\n12\n");
  ASSERT_TRUE(c.Apply(same_uid).ok());
  EXPECT_THAT(Commands(),
              ElementsAre("get_default_active_thread_percentage", "get_server_list",
                          "set_active_thread_percentage 12 10", "set_device_pinned_mem_limit 12 GPU-a 2000M"));
}

TEST_F(MpsControlTest, ADaemonRestartIsNoticedAndEveryLimitIsSetAgain) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a"}});
  Server(10, 1000);
  Servers("10\n");
  const std::vector<MpsClient> clients = {Client("a/p", 1000, {Share("GPU-a", 400, 10000)})};
  ASSERT_TRUE(c.Apply(clients).ok());
  Commands();
  // The daemon restarts (new pid file, fresh state, the server 10 gone, a new server 20 for the same uid).
  std::filesystem::remove(dir_ + "/pipe/state");
  Write("/pipe/nvidia-cuda-mps-control.pid", "5000\n");
  Server(20, 1000);
  Servers("20\n");
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_EQ(c.restarts_seen(), 1u);
  EXPECT_THAT(Commands(),
              ElementsAre("get_server_list", "set_default_active_thread_percentage 40",
                          "set_default_device_pinned_mem_limit GPU-a 10000M", "set_active_thread_percentage 20 40",
                          "set_device_pinned_mem_limit 20 GPU-a 10000M"));
  // A restart without a pid file (older drivers): the default percentage it reports (100) is not the one set.
  std::filesystem::remove(dir_ + "/pipe/nvidia-cuda-mps-control.pid");
  // The pid file going away counts as a restart too (everything is set again, which is harmless).
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_EQ(c.restarts_seen(), 2u);
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_EQ(c.restarts_seen(), 2u) << "no pid file, the percentage as set: no restart";
  Commands();
  std::filesystem::remove(dir_ + "/pipe/state");
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_EQ(c.restarts_seen(), 3u);
  EXPECT_THAT(Commands(),
              ElementsAre("get_default_active_thread_percentage", "get_server_list",
                          "set_default_active_thread_percentage 40", "set_default_device_pinned_mem_limit GPU-a 10000M",
                          "set_active_thread_percentage 20 40", "set_device_pinned_mem_limit 20 GPU-a 10000M"));
}

TEST_F(MpsControlTest, ARefusedCommandIsAnErrorNamingItAndTheNextRoundSendsEverything) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a"}});
  Write("/pipe/fail", "set_default_device_pinned_mem_limit");
  const std::vector<MpsClient> clients = {Client("a/p", 1000, {Share("GPU-a", 400, 10000)})};
  const common::Status s = c.Apply(clients);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("set_default_device_pinned_mem_limit GPU-a 10000M"));
  EXPECT_THAT(s.message(), HasSubstr("exited with 1: refused set_default_device_pinned_mem_limit"));
  EXPECT_FALSE(c.applied().has_value());
  EXPECT_EQ(c.failures(), 1u);
  std::filesystem::remove(dir_ + "/pipe/fail");
  Commands();
  ASSERT_TRUE(c.Apply(clients).ok());
  EXPECT_THAT(Commands(), ElementsAre("get_server_list", "set_default_active_thread_percentage 40",
                                      "set_default_device_pinned_mem_limit GPU-a 10000M"));
}

TEST_F(MpsControlTest, GarbageFromTheDaemonIsAnErrorNotACommand) {
  MpsController c(*runner_, MpsPlanOptions{.gpus = {"GPU-a"}});
  Servers("10\nrm -rf /\n");
  const common::Status s = c.Apply({});
  EXPECT_THAT(s.message(), HasSubstr("get_server_list answered \"rm -rf /\", not a server PID"));
  Commands();
  // A client naming a GPU with white space could smuggle a second command word: refused before anything is sent.
  Servers("");
  const std::vector<MpsClient> bad = {Client("a/p", 1000, {Share("GPU-a 1 1G", 400, 10000)})};
  EXPECT_THAT(c.Apply(bad).message(), HasSubstr("with white space"));
  EXPECT_TRUE(Commands().empty());
}

TEST(MpsPlanTest, OptionsAreChecked) {
  struct NoRunner : MpsControlRunner {
    common::Result<std::string> Run(std::string_view) override { return std::string(); }
    std::optional<int64_t> ProcessUid(int64_t) override { return std::nullopt; }
    std::string DaemonIdentity() override { return ""; }
  } runner;
  EXPECT_THAT(MpsController(runner, MpsPlanOptions{.fallback_thread_percentage = 0}).ValidateOptions().message(),
              HasSubstr("1..100"));
  EXPECT_THAT(MpsController(runner, MpsPlanOptions{.fallback_pinned_mib = -1}).ValidateOptions().message(),
              HasSubstr(">= 0 MiB"));
  EXPECT_THAT(MpsController(runner, MpsPlanOptions{.gpus = {"GPU-a b"}}).ValidateOptions().message(),
              HasSubstr("white space"));
}

TEST(MpsPlanTest, MemoryOnlySharesCapNoComputeAndTinySharesGetOnePercent) {
  const std::vector<MpsClient> clients = {Client("a/mem", std::nullopt, {Share("GPU-a", 0, 4096)}),
                                          Client("a/tiny", std::nullopt, {Share("GPU-b", 5, 100)})};
  const MpsPlan plan = PlanMpsLimits(clients, {}, MpsPlanOptions{.gpus = {"GPU-a", "GPU-b"}});
  // compute: only a/tiny has some, 5 milli -> 0 % -> at least 1 %
  EXPECT_EQ(plan.defaults, (MpsLimits{.thread_percentage = 1, .pinned_mib = {{"GPU-a", 4096}, {"GPU-b", 100}}}));
}

nlohmann::json Pod(const std::string& name, nlohmann::json container_sc, nlohmann::json pod_sc = nullptr) {
  testing::PodJson pod(name);
  pod.Namespace("ns").Uid("u-" + name).NodeName("n1").Phase("Running");
  if (!container_sc.is_null()) {
    pod.SecurityContext(container_sc);
  }
  if (!pod_sc.is_null()) {
    pod.PodSecurityContext(pod_sc);
  }
  return pod;
}

TEST(MpsPlanTest, AUidIsKnownOnlyWhenTheContainerCannotLeaveIt) {
  const struct {
    const char* name;
    nlohmann::json pod;
    std::optional<int64_t> want;
  } cases[] = {
      {"runAsUser and no escalation", Pod("a", {{"runAsUser", 1000}, {"allowPrivilegeEscalation", false}}), 1000},
      {"the pod's runAsUser", Pod("b", {{"allowPrivilegeEscalation", false}}, {{"runAsUser", 2000}}), 2000},
      {"escalation allowed (setuid binaries)", Pod("c", {{"runAsUser", 1000}}), std::nullopt},
      {"root may become anyone", Pod("d", {{"runAsUser", 0}, {"allowPrivilegeEscalation", false}}), std::nullopt},
      {"no runAsUser: the image decides", Pod("e", {{"allowPrivilegeEscalation", false}}), std::nullopt},
      {"privileged", Pod("f", {{"runAsUser", 1000}, {"allowPrivilegeEscalation", false}, {"privileged", true}}),
       std::nullopt},
      {"runAsUser not a number", Pod("g", {{"runAsUser", "1000"}, {"allowPrivilegeEscalation", false}}), std::nullopt},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ContainerUid(c.pod, "main"), c.want) << c.name;
  }
  EXPECT_EQ(ContainerUid(cases[0].pod, "other"), std::nullopt);
  EXPECT_EQ(ContainerUid(cases[0].pod, "init:main"), std::nullopt);
}

TEST(MpsPlanTest, ClientsComeFromTheLivePodsAllocationsOnThisNode) {
  auto with_alloc = [](nlohmann::json pod, const std::string& node, bool exclusive) {
    core::Allocation a{
        .pod = common::PodUid(pod["metadata"]["uid"].get<std::string>()),
        .node = common::NodeName(node),
        .containers = {{.container = "main", .gpus = {Share("GPU-a", exclusive ? 1000 : 300, 1000, exclusive)}}},
        .id = 1};
    pod["metadata"]["annotations"] = {{"gpusched.io/allocation", kube::EncodeAllocation(a)}};
    return pod;
  };
  nlohmann::json done = with_alloc(Pod("done", nullptr), "n1", false);
  done["status"]["phase"] = "Succeeded";
  const std::vector<nlohmann::json> pods = {
      with_alloc(Pod("shared", {{"runAsUser", 1000}, {"allowPrivilegeEscalation", false}}), "n1", false),
      with_alloc(Pod("whole", nullptr), "n1", true), done, Pod("none", nullptr)};
  const std::vector<MpsClient> got = MpsClientsFromPods(pods, "n1");
  ASSERT_EQ(got.size(), 1u) << "only the live pod with a shared GPU is an MPS client";
  EXPECT_EQ(got[0].pod_key, "ns/shared");
  EXPECT_EQ(got[0].uid, 1000);
  ASSERT_EQ(got[0].gpus.size(), 1u);
  EXPECT_EQ(got[0].gpus[0].milli.value(), 300);
  EXPECT_TRUE(MpsClientsFromPods(pods, "n2").empty());
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
