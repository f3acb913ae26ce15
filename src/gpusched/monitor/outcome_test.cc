#include "gpusched/monitor/outcome.h"

#include <gtest/gtest.h>

namespace gpusched::monitor {
namespace {

using nlohmann::json;

TEST(OutcomeTest, Pod) {
  struct Case {
    std::string name;
    json pod;
    Phase phase;
    bool scheduled;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"unschedulable",
       json::parse(R"({"spec":{},"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
         "reason":"Unschedulable","message":"0/2 nodes are available: 2 Insufficient gpusched.io/gpu."}]}})"),
       Phase::kPending, false, "Unschedulable: 0/2 nodes are available: 2 Insufficient gpusched.io/gpu."},
      {"new", json::parse(R"({"spec":{}})"), Phase::kPending, false, "waiting to be scheduled"},
      {"pulling",
       json::parse(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Pending","containerStatuses":[{"name":"main",
         "state":{"waiting":{"reason":"ContainerCreating"}}}]}})"),
       Phase::kPending, true, "main: ContainerCreating"},
      {"bound", json::parse(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Pending"}})"), Phase::kPending, true,
       "scheduled to n1, starting"},
      {"running", json::parse(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Running"}})"), Phase::kRunning, true, ""},
      {"succeeded", json::parse(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Succeeded"}})"), Phase::kSucceeded,
       true, ""},
      {"failed with exit code",
       json::parse(R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed","containerStatuses":[{"name":"main",
         "state":{"terminated":{"reason":"Error","exitCode":3}}}]}})"),
       Phase::kFailed, true, "main: Error (exit code 3)"},
      {"evicted",
       json::parse(
           R"({"spec":{"nodeName":"n1"},"status":{"phase":"Failed","reason":"Evicted","message":"low memory"}})"),
       Phase::kFailed, true, "Evicted: low memory"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const ObjectState s = PodState(c.pod);
    EXPECT_EQ(s.phase, c.phase);
    EXPECT_EQ(s.scheduled, c.scheduled);
    EXPECT_EQ(s.reason, c.reason);
  }
}

TEST(OutcomeTest, Job) {
  EXPECT_EQ(JobState(json::parse(R"({"status":{}})")).phase, Phase::kPending);
  EXPECT_EQ(JobState(json::parse(R"({"status":{"active":1}})")).phase, Phase::kRunning);
  EXPECT_EQ(JobState(json::parse(R"({"status":{"conditions":[{"type":"Complete","status":"True"}]}})")).phase,
            Phase::kSucceeded);
  EXPECT_EQ(
      JobState(json::parse(R"({"status":{"conditions":[{"type":"Complete","status":"False"}],"active":1}})")).phase,
      Phase::kRunning);
  const ObjectState failed = JobState(json::parse(
      R"({"status":{"conditions":[{"type":"Failed","status":"True","reason":"BackoffLimitExceeded",
          "message":"Job has reached the specified backoff limit"}]}})"));
  EXPECT_EQ(failed.phase, Phase::kFailed);
  EXPECT_EQ(failed.reason, "BackoffLimitExceeded: Job has reached the specified backoff limit");
}

TEST(OutcomeTest, DeploymentNeverEndsByItself) {
  EXPECT_EQ(DeploymentState(json::parse(R"({"spec":{"replicas":2},"status":{"availableReplicas":1}})")).phase,
            Phase::kPending);
  EXPECT_EQ(DeploymentState(json::parse(R"({"spec":{"replicas":2},"status":{"availableReplicas":2}})")).phase,
            Phase::kRunning);
  EXPECT_EQ(DeploymentState(json::parse(R"({"spec":{},"status":{"availableReplicas":1}})")).phase, Phase::kRunning);
  EXPECT_EQ(StateOf(WaitKind::kDeployment, std::nullopt).phase, Phase::kFailed);
}

TEST(OutcomeTest, CombineFailsFastAndSucceedsWhenAllDid) {
  const ObjectState ok{.phase = Phase::kSucceeded, .scheduled = true, .reason = ""};
  const ObjectState run{.phase = Phase::kRunning, .scheduled = true, .reason = ""};
  const ObjectState wait{.phase = Phase::kPending, .scheduled = false, .reason = "no GPU"};
  const ObjectState bad{.phase = Phase::kFailed, .scheduled = true, .reason = "exit 1"};
  EXPECT_EQ(Combine({ok, ok}).phase, Phase::kSucceeded);
  EXPECT_EQ(Combine({ok, run}).phase, Phase::kRunning);
  EXPECT_EQ(Combine({run, wait}).phase, Phase::kPending);
  EXPECT_EQ(Combine({run, wait}).reason, "no GPU");
  EXPECT_EQ(Combine({wait, bad}).phase, Phase::kFailed);
  EXPECT_EQ(Combine({wait, bad}).reason, "exit 1");
  EXPECT_EQ(Combine({}).phase, Phase::kSucceeded);
}

}  // namespace
}  // namespace gpusched::monitor
