#include "gpusched/adapters/deviceplugin/mps_daemon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "gpusched/common/log.h"
#include "gpusched/proc/subprocess.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// A stand-in for nvidia-cuda-mps-control with the same interface: `-d` starts a background "daemon" and returns;
// without arguments it is a client that reads one command from its standard input and answers (exit 0) only while
// that daemon lives, otherwise it says so and exits 1, as the real client does. The daemon's pid is kept in the pipe
// directory, as the real one keeps its pipes there; every launch is logged in the log directory.
constexpr const char* kStandIn = R"(#!/bin/sh
if [ "$1" = "-d" ]; then
  echo launch >> "$CUDA_MPS_LOG_DIRECTORY/launches"
  sleep 600 </dev/null >/dev/null 2>&1 &
  echo $! > "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid"
  exit 0
fi
read cmd
pid=$(cat "$CUDA_MPS_PIPE_DIRECTORY/daemon.pid" 2>/dev/null)
if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null || grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
  echo "Cannot find MPS control daemon process"
  exit 1
fi
[ "$cmd" = get_server_list ] || { echo "unknown command $cmd"; exit 2; }
exit 0
)";

class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    common::SetLogLevel(common::LogLevel::kError);
    char tmpl[] = "/tmp/gpmps-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    control_ = Script("nvidia-cuda-mps-control", kStandIn);
  }
  void TearDown() override {
    KillDaemon();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string Script(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
    return path;
  }

  MpsDaemonOptions Options(bool manage) const {
    return MpsDaemonOptions{.control = control_,
                            .pipe_dir = dir_ + "/pipe",
                            .log_dir = dir_ + "/log",
                            .manage = manage,
                            .check_interval = milliseconds(50),
                            .command_timeout = milliseconds(3000)};
  }

  int DaemonPid() const {
    std::ifstream in(dir_ + "/pipe/daemon.pid");
    int pid = 0;
    in >> pid;
    return pid;
  }
  void KillDaemon() const {
    if (int pid = DaemonPid(); pid > 0) {
      ::kill(pid, SIGKILL);
    }
  }
  int Launches() const {
    std::ifstream in(dir_ + "/log/launches");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
    }
    return n;
  }
  // Waits until the stand-in's daemon is gone (reaped or a zombie), so that the next check sees it dead.
  void WaitDead(int pid) const {
    for (int i = 0; i < 200; ++i) {
      std::ifstream status("/proc/" + std::to_string(pid) + "/status");
      std::stringstream text;
      text << status.rdbuf();
      if (!status || text.str().find("State:\tZ") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  }

  std::string dir_;
  std::string control_;
};

TEST_F(MpsDaemonTest, RunModeStartsTheDaemonAndStartsItAgainWhenItDies) {
  MpsDaemon daemon(Options(/*manage=*/true));
  ASSERT_TRUE(daemon.Start().ok());
  EXPECT_TRUE(daemon.up()) << daemon.Status();
  EXPECT_EQ(daemon.launches(), 1u);
  EXPECT_EQ(daemon.restarts(), 0u);
  EXPECT_EQ(Launches(), 1);
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/pipe"));
  const int first = DaemonPid();
  ASSERT_GT(first, 0);
  // A daemon that answers is left alone.
  daemon.CheckNow();
  EXPECT_EQ(daemon.launches(), 1u);
  // It dies: the supervisor starts it again.
  KillDaemon();
  WaitDead(first);
  for (int i = 0; i < 200 && daemon.restarts() == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(daemon.restarts(), 1u);
  for (int i = 0; i < 200 && !daemon.up(); ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(daemon.up()) << daemon.Status();
  EXPECT_NE(DaemonPid(), first);
  daemon.Stop();
  // Stop leaves it running: containers keep their MPS server while the agent restarts.
  EXPECT_EQ(::kill(DaemonPid(), 0), 0);
}

TEST_F(MpsDaemonTest, ExternalModeOnlyChecks) {
  MpsDaemon daemon(Options(/*manage=*/false));
  ASSERT_TRUE(daemon.Start().ok());
  EXPECT_FALSE(daemon.up());
  EXPECT_EQ(daemon.launches(), 0u);
  EXPECT_EQ(Launches(), 0);
  EXPECT_THAT(daemon.Status().message(), HasSubstr(control_ + " (pipe directory " + dir_ +
                                                   "/pipe) exited with 1: "
                                                   "Cannot find MPS control daemon process"));
  // Someone else starts it: the next check sees it.
  std::filesystem::create_directories(dir_ + "/pipe");
  std::filesystem::create_directories(dir_ + "/log");
  auto r = proc::RunCommand({control_, "-d"}, proc::CommandOptions{.env = {{"CUDA_MPS_PIPE_DIRECTORY", dir_ + "/pipe"},
                                                                           {"CUDA_MPS_LOG_DIRECTORY", dir_ + "/log"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->output;
  daemon.CheckNow();
  EXPECT_TRUE(daemon.up()) << daemon.Status();
  EXPECT_EQ(daemon.launches(), 0u);
}

TEST_F(MpsDaemonTest, AControlBinaryThatHangsOrIsMissingIsReportedNotWaitedFor) {
  MpsDaemonOptions o = Options(/*manage=*/false);
  o.control = Script("hangs", "#!/bin/sh\nsleep 600\n");
  o.command_timeout = milliseconds(200);
  MpsDaemon hangs(o);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(hangs.Start().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_THAT(hangs.Status().message(), HasSubstr("did not answer within 200 ms"));
  hangs.Stop();

  o.control = dir_ + "/no-such-binary";
  o.manage = true;
  MpsDaemon missing(o);
  ASSERT_TRUE(missing.Start().ok());
  EXPECT_FALSE(missing.up());
  EXPECT_THAT(missing.Status().message(), HasSubstr("cannot run " + dir_ + "/no-such-binary"));
}

TEST_F(MpsDaemonTest, BadOptionsAreErrors) {
  MpsDaemonOptions o = Options(true);
  o.pipe_dir = "relative";
  EXPECT_THAT(MpsDaemon(o).Start().message(), HasSubstr("must be absolute paths"));
  o = Options(true);
  o.check_interval = milliseconds(0);
  EXPECT_THAT(MpsDaemon(o).Start().message(), HasSubstr("must be positive"));
  o = Options(true);
  o.control = "";
  EXPECT_THAT(MpsDaemon(o).Start().message(), HasSubstr("no control binary"));
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
