// MpsDaemon against the real nvidia-cuda-mps-control on a GPU machine (ctest label `gpu`: `ctest -L gpu`). Skipped,
// with the reason, where the control binary is not on PATH or no NVIDIA device is present. The daemon is started in
// managed mode in private pipe and log directories, must answer, must be found answering by a second, external-mode
// supervisor (what a restarted agent does), and is told to quit at the end.
//
// The escape test: the agent's MpsController sets the limits in a real control daemon (a 20 % / 1024 MiB share on
// GPU 0), then a process that unsets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT before
// cuInit (this binary again, test EscapeChild, through the driver API by dlopen: no CUDA toolkit needed) must not
// allocate more than its share, and its server must report the share's thread percentage.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "gpusched/adapters/deviceplugin/mps_control.h"
#include "gpusched/adapters/deviceplugin/mps_daemon.h"
#include "gpusched/proc/subprocess.h"

namespace gpusched::adapters::deviceplugin {
namespace {

std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string candidate = dirs.substr(start, end - start) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return "";
}

TEST(MpsGpuTest, TheRealControlDaemonIsStartedFoundAndStopped) {
  const std::string control = OnPath("nvidia-cuda-mps-control");
  if (control.empty()) {
    GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH (no NVIDIA driver utilities here)";
  }
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    GTEST_SKIP() << "no /dev/nvidiactl: no NVIDIA device here";
  }
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpusched-mps-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const MpsDaemonOptions options{.control = control,
                                 .pipe_dir = tmpl + "/pipe",
                                 .log_dir = tmpl + "/log",
                                 .manage = true,
                                 .check_interval = std::chrono::milliseconds(500),
                                 .command_timeout = std::chrono::milliseconds(10000)};
  {
    MpsDaemon daemon(options);
    ASSERT_TRUE(daemon.Start().ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!daemon.up() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ASSERT_TRUE(daemon.up()) << daemon.Status();
    EXPECT_EQ(daemon.launches(), 1U);
    std::printf("MPS control daemon up: pipe %s, %llu launch(es)\n", options.pipe_dir.c_str(),
                static_cast<unsigned long long>(daemon.launches()));
  }
  // A second supervisor, external mode, finds the daemon the first one left running.
  MpsDaemonOptions external = options;
  external.manage = false;
  MpsDaemon watcher(external);
  ASSERT_TRUE(watcher.Start().ok());
  EXPECT_TRUE(watcher.up()) << watcher.Status();
  EXPECT_EQ(watcher.launches(), 0U);
  watcher.Stop();
  // Quit it, as an operator would.
  const std::string quit = "echo quit | CUDA_MPS_PIPE_DIRECTORY=" + options.pipe_dir + " " + control;
  EXPECT_EQ(std::system(quit.c_str()), 0);
  std::filesystem::remove_all(tmpl);
}

constexpr int64_t kEscapeLimitMib = 1024;

// The child: runs only when the parent test starts this binary with GPUSCHED_MPS_ESCAPE_CHILD=1.
TEST(MpsGpuTest, EscapeChild) {
  if (std::getenv("GPUSCHED_MPS_ESCAPE_CHILD") == nullptr) {
    GTEST_SKIP() << "run by TheLimitsHoldForAProcessThatUnsetsTheEnvironment";
  }
  // What a tenant would do before CUDA starts.
  ::unsetenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
  ::unsetenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW);
  ASSERT_NE(cuda, nullptr) << ::dlerror();
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int*, int);
  using CtxCreate = int (*)(void**, unsigned, int);
  using MemAlloc = int (*)(unsigned long long*, size_t);
  using Attribute = int (*)(int*, int, int);
  auto init = reinterpret_cast<Init>(::dlsym(cuda, "cuInit"));
  auto device_get = reinterpret_cast<DeviceGet>(::dlsym(cuda, "cuDeviceGet"));
  auto ctx_create = reinterpret_cast<CtxCreate>(::dlsym(cuda, "cuCtxCreate_v2"));
  auto mem_alloc = reinterpret_cast<MemAlloc>(::dlsym(cuda, "cuMemAlloc_v2"));
  auto attribute = reinterpret_cast<Attribute>(::dlsym(cuda, "cuDeviceGetAttribute"));
  ASSERT_TRUE(init && device_get && ctx_create && mem_alloc && attribute);
  ASSERT_EQ(init(0), 0);
  int device = 0;
  ASSERT_EQ(device_get(&device, 0), 0);
  void* ctx = nullptr;
  ASSERT_EQ(ctx_create(&ctx, 0, device), 0);
  int sms = 0;
  (void)attribute(&sms, 16 /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */, device);
  unsigned long long small = 0;
  unsigned long long big = 0;
  const int small_rc = mem_alloc(&small, static_cast<size_t>(kEscapeLimitMib / 4) << 20);
  const int big_rc = mem_alloc(&big, static_cast<size_t>(kEscapeLimitMib * 2) << 20);
  std::printf("RESULT mps_escape small_alloc_rc=%d over_limit_alloc_rc=%d sms_seen=%d\n", small_rc, big_rc, sms);
  EXPECT_EQ(small_rc, 0) << "a quarter of the share must fit";
  EXPECT_NE(big_rc, 0) << "twice the share was allocated: the limit did not hold";
}

TEST(MpsGpuTest, TheLimitsHoldForAProcessThatUnsetsTheEnvironment) {
  const std::string control = OnPath("nvidia-cuda-mps-control");
  if (control.empty()) {
    GTEST_SKIP() << "nvidia-cuda-mps-control is not on PATH (no NVIDIA driver utilities here)";
  }
  if (!std::filesystem::exists("/dev/nvidiactl")) {
    GTEST_SKIP() << "no /dev/nvidiactl: no NVIDIA device here";
  }
  if (void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW); cuda == nullptr) {
    GTEST_SKIP() << "no libcuda.so.1: " << ::dlerror();
  }
  const std::string smi = OnPath("nvidia-smi");
  if (smi.empty()) {
    GTEST_SKIP() << "nvidia-smi is not on PATH (needed for GPU 0's UUID)";
  }
  auto uuid = proc::RunCommand({smi, "--query-gpu=uuid", "--format=csv,noheader", "-i", "0"}, {});
  ASSERT_TRUE(uuid.ok() && uuid->exit_code == 0) << (uuid.ok() ? uuid->output : uuid.status().message());
  const std::string gpu = uuid->output.substr(0, uuid->output.find('\n'));
  std::string tmpl = (std::filesystem::temp_directory_path() / "gpusched-mps-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string pipe = tmpl + "/pipe";
  const std::string log = tmpl + "/log";
  std::filesystem::create_directories(pipe);
  std::filesystem::create_directories(log);
  auto started = proc::RunCommand({control, "-d"}, proc::CommandOptions{.env = {{"CUDA_MPS_PIPE_DIRECTORY", pipe},
                                                                                {"CUDA_MPS_LOG_DIRECTORY", log}}});
  ASSERT_TRUE(started.ok() && started->exit_code == 0);
  auto runner = NewProcessMpsRunner(ProcessMpsRunnerOptions{
      .control = control, .pipe_dir = pipe, .log_dir = log, .timeout = std::chrono::milliseconds(10000)});
  MpsController limits(*runner, MpsPlanOptions{.gpus = {gpu}});
  // The pod's share: 200 milli (20 %) and 1024 MiB of GPU 0, running as this test's uid.
  const std::vector<MpsClient> clients = {MpsClient{
      .pod_key = "tenant/escape",
      .container = "main",
      .uid = static_cast<int64_t>(::getuid()),
      .gpus = {core::GpuShare{
          .uuid = common::GpuUuid(gpu), .milli = common::MilliGpu{200}, .memory = common::MiB{kEscapeLimitMib}}}}};
  const common::Status applied = limits.Apply(clients);
  EXPECT_TRUE(applied.ok()) << applied;
  // The tenant's process: this binary again, with the env it was handed, which it then unsets.
  auto child = proc::RunCommand({"/proc/self/exe", "--gtest_filter=MpsGpuTest.EscapeChild"},
                                proc::CommandOptions{.env = {{"GPUSCHED_MPS_ESCAPE_CHILD", "1"},
                                                             {"CUDA_MPS_PIPE_DIRECTORY", pipe},
                                                             {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"},
                                                             {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=100000M"}},
                                                     .timeout = std::chrono::milliseconds(120000),
                                                     .max_output = 64 * 1024});
  ASSERT_TRUE(child.ok()) << child.status();
  std::printf("%s\n", child->output.c_str());
  EXPECT_EQ(child->exit_code, 0) << child->output << child->errors;
  EXPECT_THAT(child->output, ::testing::HasSubstr("RESULT mps_escape small_alloc_rc=0"));
  // Its server (started for this uid with the defaults just set) reports the share's percentage.
  auto servers = runner->Run("get_server_list");
  ASSERT_TRUE(servers.ok()) << servers.status();
  const std::string pid = servers->substr(0, servers->find('\n'));
  if (!pid.empty()) {
    auto pct = runner->Run("get_active_thread_percentage " + pid);
    ASSERT_TRUE(pct.ok()) << pct.status();
    std::printf("server %s: active thread percentage %s\n", pid.c_str(), pct->c_str());
    EXPECT_EQ(std::stod(*pct), 20.0);
  }
  EXPECT_TRUE(runner->Run("quit").ok());
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
