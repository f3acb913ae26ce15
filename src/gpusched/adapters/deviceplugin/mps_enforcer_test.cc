#include "gpusched/adapters/deviceplugin/mps_enforcer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// Records every command; answers as a control daemon with no servers whose default percentage is the last set.
class RecordingRunner : public MpsControlRunner {
 public:
  common::Result<std::string> Run(std::string_view command) override {
    commands.emplace_back(command);
    if (command == "get_server_list") {
      return std::string();
    }
    if (command == "get_default_active_thread_percentage") {
      return pct;
    }
    if (command.starts_with("set_default_active_thread_percentage ")) {
      pct = std::string(command.substr(command.rfind(' ') + 1));
    }
    return std::string();
  }
  std::optional<int64_t> ProcessUid(int64_t) override { return std::nullopt; }
  std::string DaemonIdentity() override { return "1"; }

  std::vector<std::string> commands;
  std::string pct = "100";
};

nlohmann::json PodJson(const std::string& name, int64_t milli) {
  core::Allocation a{.pod = common::PodUid("u-" + name),
                     .node = common::NodeName("n1"),
                     .containers = {{.container = "main",
                                     .gpus = {core::GpuShare{.uuid = common::GpuUuid("GPU-a"),
                                                             .milli = common::MilliGpu{milli},
                                                             .memory = common::MiB{1000}}}}},
                     .id = 1};
  return testing::PodJson(name)
      .Namespace("ns")
      .Uid("u-" + name)
      .Annotation("gpusched.io/allocation", kube::EncodeAllocation(a))
      .NodeName("n1")
      .Phase("Running");
}

TEST(MpsEnforcerTest, AnAdmittedContainerKeepsItsLimitsWhileThePodCacheLags) {
  common::SetLogLevel(common::LogLevel::kError);
  RecordingRunner runner;
  std::vector<nlohmann::json> cache = {PodJson("old", 500)};
  std::map<std::string, nlohmann::json> api = {{"new", PodJson("new", 200)}};
  MpsEnforcer e(runner, MpsEnforcerOptions{.node = "n1",
                                           .pods = [&] { return cache; },
                                           .get_pod = [&](const std::string&,
                                                          const std::string& name) -> common::Result<nlohmann::json> {
                                             if (!api.contains(name)) {
                                               return common::NotFound("pod ns/" + name);
                                             }
                                             return api.at(name);
                                           },
                                           .admitted_rounds = 3});
  e.RoundNow();
  ASSERT_TRUE(e.status().ok()) << e.status();
  EXPECT_THAT(runner.commands, Contains("set_default_active_thread_percentage 50"));
  // The new pod (20 %) is admitted before the cache has it: the defaults drop to its share at once.
  kube::PodMeta meta{.namespace_ = "ns", .name = "new", .uid = common::PodUid("u-new"), .node_name = "n1"};
  const std::vector<core::GpuShare> shares = {
      core::GpuShare{.uuid = common::GpuUuid("GPU-a"), .milli = common::MilliGpu{200}, .memory = common::MiB{1000}}};
  ASSERT_TRUE(e.Admit(meta, "main", shares).ok());
  EXPECT_EQ(runner.commands.back(), "set_default_active_thread_percentage 20");
  // A round from the lagging cache keeps it (nothing is raised).
  runner.commands.clear();
  e.RoundNow();
  EXPECT_THAT(runner.commands, Not(Contains(HasSubstr("set_default_active_thread_percentage"))));
  // The cache lists it now; then it leaves: the defaults go back up to the old pod's share.
  cache.push_back(PodJson("new", 200));
  e.RoundNow();
  cache.pop_back();
  runner.commands.clear();
  e.RoundNow();
  EXPECT_THAT(runner.commands, Contains("set_default_active_thread_percentage 50"));
  EXPECT_THAT(e.RenderMetrics(), HasSubstr("\ngpusched_agent_mps_limits_ok 1\n"));
  // A pod that cannot be read is refused (its uid is unknown, and so is whether its limits could be set).
  meta.name = "gone";
  const common::Status s = e.Admit(meta, "main", shares);
  EXPECT_EQ(s.code(), common::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("reading pod ns/gone for its uid"));
}

TEST(MpsEnforcerTest, AnAdmittedPodTheCacheNeverListsIsDroppedAfterSomeRounds) {
  common::SetLogLevel(common::LogLevel::kError);
  RecordingRunner runner;
  MpsEnforcer e(runner, MpsEnforcerOptions{.node = "n1",
                                           .pods = [] { return std::vector<nlohmann::json>{PodJson("old", 500)}; },
                                           .get_pod = [](const std::string&, const std::string&)
                                               -> common::Result<nlohmann::json> { return PodJson("x", 100); },
                                           .admitted_rounds = 2});
  kube::PodMeta meta{.namespace_ = "ns", .name = "x", .uid = common::PodUid("u-x"), .node_name = "n1"};
  const std::vector<core::GpuShare> shares = {
      core::GpuShare{.uuid = common::GpuUuid("GPU-a"), .milli = common::MilliGpu{100}, .memory = common::MiB{1000}}};
  ASSERT_TRUE(e.Admit(meta, "main", shares).ok());
  EXPECT_EQ(runner.pct, "10");
  e.RoundNow();
  e.RoundNow();
  EXPECT_EQ(runner.pct, "10");
  e.RoundNow();  // deleted before the cache saw it: dropped
  EXPECT_EQ(runner.pct, "50");
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
