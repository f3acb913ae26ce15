#include "gpusched/proc/subprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace gpusched::proc {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

TEST(RunCommandTest, PassesInputAndEnvironmentAndCapturesBothStreams) {
  auto r = RunCommand({"sh", "-c", "read x; echo \"$x $GPUSCHED_T\"; echo err >&2; exit 3"},
                      CommandOptions{.env = {{"GPUSCHED_T", "env"}}, .input = "input\n"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->output, "input env");
  EXPECT_EQ(r->errors, "err");
}

TEST(RunCommandTest, KillsWhatRunsPastItsTimeout) {
  const auto start = std::chrono::steady_clock::now();
  auto r = RunCommand({"sh", "-c", "echo started; sleep 600"}, CommandOptions{.timeout = milliseconds(300)});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->output, "started");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(RunCommandTest, KeepsAtMostTheLimitOfOutputAndStillFinishes) {
  auto r = RunCommand({"sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' x"},
                      CommandOptions{.timeout = milliseconds(10000), .max_output = 100});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->output, std::string(100, 'x'));
}

TEST(RunCommandTest, AChildThatIgnoresItsInputOrLeavesADaemonBehindDoesNotHangOrKillUs) {
  // A large input the child never reads: the write gives EPIPE once it exits, never SIGPIPE.
  auto r = RunCommand({"true"}, CommandOptions{.input = std::string(1 << 20, 'y')});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  // It exits at once but leaves a process holding its output open: we return at its exit.
  const auto start = std::chrono::steady_clock::now();
  auto d = RunCommand({"sh", "-c", "sleep 3 & echo forked"}, CommandOptions{.timeout = milliseconds(10000)});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->exit_code, 0);
  EXPECT_EQ(d->output, "forked");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(RunCommandTest, AProgramThatCannotStartIsAnError) {
  auto r = RunCommand({"/nonexistent/gpusched-helper"}, CommandOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cannot run /nonexistent/gpusched-helper"));
  EXPECT_FALSE(RunCommand({}, CommandOptions{}).ok());
}

}  // namespace
}  // namespace gpusched::proc
