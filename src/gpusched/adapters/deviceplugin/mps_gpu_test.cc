// MpsDaemon against the real nvidia-cuda-mps-control on a GPU machine (ctest label `gpu`: `ctest -L gpu`). Skipped,
// with the reason, where the control binary is not on PATH or no NVIDIA device is present. The daemon is started in
// managed mode in private pipe and log directories, must answer, must be found answering by a second, external-mode
// supervisor (what a restarted agent does), and is told to quit at the end.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "gpusched/adapters/deviceplugin/mps_daemon.h"

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

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
