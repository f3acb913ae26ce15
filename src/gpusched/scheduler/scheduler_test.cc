#include "gpusched/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpusched/common/rng.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/testing/fake_clock.h"
#include "gpusched/testing/fake_cluster.h"
#include "gpusched/testing/fake_metrics_source.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::scheduler {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

json Node(const std::string& name, int gpus, const json& labels = json::object(), const json& taints = nullptr,
          const std::string& cpu = "32", const std::string& max_pods = "110") {
  testing::GpuNodeJson n(name);
  n.Gpus(gpus).Labels(labels).EmptySpec().Cpu(cpu).Pods(max_pods);
  if (!taints.is_null()) {
    n.Taints(taints);
  }
  return n;
}

// Pending, for gpusched, created at 10:00 unless told, requesting 1 CPU and 1 GiB besides `limits`.
json Pod(const std::string& name, const json& limits, int32_t priority = 0, const std::string& created = "") {
  return testing::PodJson(name)
      .Created(created.empty() ? "2026-11-25T10:00:00Z" : created)
      .SchedulerName("gpusched")
      .Priority(priority)
      .Limits(limits)
      .Requests({{"cpu", "1"}, {"memory", "1Gi"}})
      .Phase("Pending");
}

json WholeGpu() { return {{"nvidia.com/gpu", "1"}}; }
json Share(int core) { return testing::ShareLimits(core, 10000); }

// The pod as the watch shows it once bound by `allocation` (the Binding's annotations copied onto it).
json AsBound(json pod, const core::Allocation& allocation, const std::string& annotation) {
  pod["spec"]["nodeName"] = allocation.node.str();
  if (!annotation.empty()) {
    pod["metadata"]["annotations"]["gpusched.io/allocation"] = annotation;
  }
  return pod;
}

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(SchedulerOptions{}); }

  void Make(SchedulerOptions options) {
    scheduler_.reset();
    mirror_ = std::make_unique<ClusterCache>(sched::CacheOptions{.clock = &clock_,
                                                                 .wall_ms = [] { return int64_t{1'700'000'000'000}; },
                                                                 .id_nonce = 7,
                                                                 .charge_every_pod = true,
                                                                 .share_within = options.resources.share_within});
    options.clock = &clock_;
    options.seed = 1;
    auto made = Scheduler::Create(
        *mirror_, binder_, [this](PodEvent e) { events_.push_back(std::move(e)); }, std::move(options));
    ASSERT_TRUE(made.ok()) << made.status().message();
    scheduler_ = std::move(made).value();
  }

  // Runs attempts until none is ready; returns how many ran.
  int Drain() {
    int n = 0;
    while (scheduler_->ScheduleOne()) {
      ++n;
    }
    return n;
  }

  std::vector<PodEvent> EventsFor(const std::string& name, const std::string& reason) const {
    std::vector<PodEvent> out;
    for (const auto& e : events_) {
      if (e.name == name && e.reason == reason) {
        out.push_back(e);
      }
    }
    return out;
  }

  // Schedules and binds the pod through the scheduler, and shows it bound; returns the pod as the watch shows it.
  json Running(json pod) {
    scheduler_->OnPod(EventType::kAdded, pod);
    const size_t before = binder_.bound().size();
    Drain();
    EXPECT_EQ(binder_.bound().size(), before + 1) << pod["metadata"]["name"];
    return ShowLastBound(pod);
  }

  // Shows `pod` bound where the last Binding put it, its allocation annotation included; returns it as shown.
  json ShowLastBound(const json& pod) {
    const core::Allocation a = binder_.bound().back();
    json bound = AsBound(pod, a, kube::EncodeAllocation(a));
    scheduler_->OnPod(EventType::kModified, bound);
    return bound;
  }

  // Feeds the watch event of a bound pod back (what the API server would send after the Binding).
  void ShowBound(const json& pod, const core::Allocation& allocation) {
    scheduler_->OnPod(EventType::kModified, AsBound(pod, allocation, allocation.containers.empty() ? "" : "x"));
  }

  testing::FakeClock clock_;
  testing::RecordingBinder binder_;
  std::vector<PodEvent> events_;
  std::unique_ptr<ClusterCache> mirror_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BindsAGpuShareWithAFreshAllocationIdAndSaysSo) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnPod(EventType::kAdded, Pod("p", Share(30)));
  EXPECT_EQ(Drain(), 1);
  ASSERT_EQ(binder_.bound().size(), 1U);
  const core::Allocation& a = binder_.bound()[0];
  EXPECT_EQ(a.node.str(), "a");
  EXPECT_EQ(a.pod.str(), "uid-p");
  EXPECT_EQ(a.cpu.value(), 1000);
  EXPECT_NE(a.id, 0U);
  EXPECT_EQ(a.id & 0xffff, 7U) << "the id carries the process nonce";
  ASSERT_EQ(EventsFor("p", "Scheduled").size(), 1U);
  EXPECT_EQ(EventsFor("p", "Scheduled")[0].message, "Successfully assigned default/p to a, GPU 0 (30%)");
  auto lock = mirror_->ReadLock();
  EXPECT_TRUE(mirror_->state().IsConfirmed(common::PodUid("uid-p")));
  EXPECT_EQ(scheduler_->stats().binds_ok, 1U);
}

// A policy that reads what the scheduler does not provide (live metrics, a forecast) is refused at start, not run
// on empty inputs.
TEST_F(SchedulerTest, RefusesAPolicyThatReadsInputsItIsNotGiven) {
  for (const auto& [name, needs] : {std::pair<std::string, std::string>{"load-aware", "reads live GPU metrics"},
                                    {"interference-aware", "reads an interference forecast"}}) {
    auto made = Scheduler::Create(
        *mirror_, binder_, [](PodEvent) {}, SchedulerOptions{.policy = name, .clock = &clock_});
    ASSERT_FALSE(made.ok()) << name;
    EXPECT_THAT(made.status().message(), HasSubstr("policy " + name)) << name;
    EXPECT_THAT(made.status().message(), HasSubstr(needs)) << name;
  }
}

// load-aware in the scheduler, from a metrics cache as the extender reads it: a pod goes to the idle node, and on a
// node to its idle GPU; a source that fails keeps its last samples until they are stale.
TEST_F(SchedulerTest, LoadAwarePlacesByLiveMetrics) {
  auto source = std::make_unique<testing::FakeMetricsSource>("prometheus fake");
  testing::FakeMetricsSource* fake = source.get();
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (int g = 0; g < 2; ++g) {
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kGpuUtil, 95, now);
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kMemoryUsedMib, 70000, now);
    fake->Set("GPU-b-" + std::to_string(g), core::GpuMetric::kGpuUtil, 2, now);
    fake->Set("GPU-b-" + std::to_string(g), core::GpuMetric::kMemoryUsedMib, 1000, now);
  }
  fake->Set("GPU-b-0", core::GpuMetric::kGpuUtil, 60, now);  // b's GPU 1 is the idlest of all
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  sources.push_back(std::move(source));
  sched::MetricsCache cache(std::move(sources), sched::MetricsCacheOptions{.interval = std::chrono::hours(1)});
  cache.RefreshOnce();
  Make(SchedulerOptions{.policy = "load-aware", .snapshots = sched::SnapshotSources{.metrics = &cache}});
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2));
  Running(Pod("p1", Share(30)));
  EXPECT_EQ(binder_.bound().back().node.str(), "b") << "the idle node";
  EXPECT_EQ(binder_.bound().back().containers[0].gpus[0].index, 1) << "its idle GPU";
  // b turns busy, a idle: the next pod follows the metrics.
  for (int g = 0; g < 2; ++g) {
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kGpuUtil, 1, now);
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kMemoryUsedMib, 500, now);
    fake->Set("GPU-b-" + std::to_string(g), core::GpuMetric::kGpuUtil, 99, now);
  }
  cache.RefreshOnce();
  Running(Pod("p2", Share(30)));
  EXPECT_EQ(binder_.bound().back().node.str(), "a");
  // The source fails: its last samples still count.
  fake->Fail(common::Unavailable("connection refused"));
  cache.RefreshOnce();
  EXPECT_THAT(cache.Degraded(), HasSubstr("connection refused"));
  Running(Pod("p3", Share(30)));
  EXPECT_EQ(binder_.bound().back().node.str(), "a");
}

// weights: the profile scores with a weighted mix (here spread alone), while binpack still filters and picks GPUs.
TEST_F(SchedulerTest, WeightsScoreWithAMixOfPolicies) {
  for (const bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "weights {spread: 1}" : "binpack");
    const size_t before = binder_.bound().size();
    Make(SchedulerOptions{.policy = "binpack",
                          .weights = mixed ? std::vector<std::pair<std::string, double>>{{"spread", 1}}
                                           : std::vector<std::pair<std::string, double>>{}});
    scheduler_->OnNode(EventType::kAdded, Node("a", 2));
    Running(Pod("first", Share(30)));
    scheduler_->OnNode(EventType::kAdded, Node("b", 2));
    scheduler_->OnPod(EventType::kAdded, Pod("second", Share(30)));
    Drain();
    ASSERT_EQ(binder_.bound().size(), before + 2);
    EXPECT_EQ(binder_.bound()[before + 1].node.str(), mixed ? "b" : "a");
  }
  auto refused = Scheduler::Create(
      *mirror_, binder_, [](PodEvent) {}, SchedulerOptions{.weights = {{"load-aware", 1}}, .clock = &clock_});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("weights: policy load-aware reads live GPU metrics"));
  auto zero = Scheduler::Create(
      *mirror_, binder_, [](PodEvent) {}, SchedulerOptions{.weights = {{"fgd", 0}}, .clock = &clock_});
  ASSERT_FALSE(zero.ok());
  EXPECT_THAT(zero.status().message(), HasSubstr("fgd has weight"));
}

json GangMember(const std::string& name, const std::string& group, int min_available, int gpus = 1) {
  json p = Pod(name, {{"nvidia.com/gpu", std::to_string(gpus)}});
  p["metadata"]["annotations"] = {{"gpusched.io/pod-group", group},
                                  {"gpusched.io/min-available", std::to_string(min_available)}};
  return p;
}

size_t BoundOf(const testing::RecordingBinder& binder, const std::string& prefix) {
  return static_cast<size_t>(
      std::count_if(binder.bound().begin(), binder.bound().end(),
                    [&](const core::Allocation& a) { return a.pod.str().starts_with("uid-" + prefix); }));
}

// A gang is placed when min-available members exist and fit together, never member by member.
TEST_F(SchedulerTest, AGangWaitsForItsMembersThenBindsTogether) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnPod(EventType::kAdded, GangMember("t-0", "train", 3));
  scheduler_->OnPod(EventType::kAdded, GangMember("t-1", "train", 3));
  Drain();
  EXPECT_TRUE(binder_.bound().empty()) << "two of three members must not hold GPUs";
  ASSERT_FALSE(EventsFor("t-0", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("t-0", "FailedScheduling").back().message,
              HasSubstr("pod group default/train (min-available 3): 0 placed and 2 pending"));
  {
    auto lock = mirror_->ReadLock();
    EXPECT_EQ(mirror_->state().FindAllocation(common::PodUid("uid-t-0")), nullptr);
  }
  EXPECT_EQ(Drain(), 0) << "the members wait for the third, not a timer";

  scheduler_->OnPod(EventType::kAdded, GangMember("t-2", "train", 3));
  Drain();
  EXPECT_EQ(BoundOf(binder_, "t-"), 3U);

  // A fourth member beyond min-available is placed like any pod.
  scheduler_->OnPod(EventType::kAdded, GangMember("t-3", "train", 3));
  Drain();
  EXPECT_EQ(BoundOf(binder_, "t-"), 4U);
  EXPECT_EQ(scheduler_->stats().gangs_placed, 1U);

  // Members end: at three placed the group still has its minimum; below it, the others are told, once.
  std::vector<json> bound;
  for (const core::Allocation& a : binder_.bound()) {
    const std::string name = a.pod.str().substr(4);
    bound.push_back(AsBound(GangMember(name, "train", 3), a, kube::EncodeAllocation(a)));
    scheduler_->OnPod(EventType::kModified, bound.back());
  }
  scheduler_->OnPod(EventType::kDeleted, bound[3]);
  EXPECT_TRUE(EventsFor("t-0", "GangBelowMinimum").empty());
  scheduler_->OnPod(EventType::kDeleted, bound[2]);
  ASSERT_EQ(EventsFor("t-0", "GangBelowMinimum").size(), 1U);
  EXPECT_EQ(EventsFor("t-0", "GangBelowMinimum")[0].message,
            "pod group default/train has 2 member(s) placed, fewer than its min-available 3 (default/t-2 ended)");
  EXPECT_EQ(EventsFor("t-1", "GangBelowMinimum").size(), 1U);
  scheduler_->OnPod(EventType::kDeleted, bound[1]);
  EXPECT_EQ(EventsFor("t-0", "GangBelowMinimum").size(), 1U) << "said once";
  EXPECT_EQ(scheduler_->stats().gangs_below_minimum, 1U);
}

// Two gangs that each fit alone but not together: exactly one runs, the other holds nothing, and it runs once the
// first is gone. Members arrive interleaved, the case where member-by-member placement deadlocks.
TEST_F(SchedulerTest, TwoGangsThatDoNotFitTogetherNeverDeadlock) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnNode(EventType::kAdded, Node("b", 4));
  std::vector<json> a, b;
  for (int i = 0; i < 3; ++i) {
    a.push_back(GangMember("a-" + std::to_string(i), "ga", 3, 2));
    b.push_back(GangMember("b-" + std::to_string(i), "gb", 3, 2));
  }
  for (int i = 0; i < 3; ++i) {
    scheduler_->OnPod(EventType::kAdded, a[i]);
    scheduler_->OnPod(EventType::kAdded, b[i]);
  }
  Drain();
  const size_t ran_a = BoundOf(binder_, "a-");
  const size_t ran_b = BoundOf(binder_, "b-");
  EXPECT_TRUE((ran_a == 3 && ran_b == 0) || (ran_a == 0 && ran_b == 3)) << ran_a << " and " << ran_b;
  const std::string waiting = ran_a == 3 ? "b-" : "a-";
  {
    auto lock = mirror_->ReadLock();
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(mirror_->state().FindAllocation(common::PodUid("uid-" + waiting + std::to_string(i))), nullptr)
          << "a waiting member holds GPUs";
    }
  }
  ASSERT_FALSE(EventsFor(waiting + "0", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor(waiting + "0", "FailedScheduling").back().message, HasSubstr("none is placed"));
  EXPECT_GE(scheduler_->stats().gangs_refused, 1U);
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_gangs_total{outcome=\"refused\"}"));

  // The running gang is deleted: the other one runs, whole.
  const std::vector<json>& running = ran_a == 3 ? a : b;
  const size_t bound_before = binder_.bound().size();
  for (size_t i = 0; i < 3; ++i) {
    const core::Allocation& alloc = binder_.bound()[i];
    for (const json& p : running) {
      if ("uid-" + p["metadata"]["name"].get<std::string>() == alloc.pod.str()) {
        scheduler_->OnPod(EventType::kModified, AsBound(p, alloc, kube::EncodeAllocation(alloc)));
        scheduler_->OnPod(EventType::kDeleted, AsBound(p, alloc, kube::EncodeAllocation(alloc)));
      }
    }
  }
  Drain();
  EXPECT_EQ(binder_.bound().size(), bound_before + 3);
  EXPECT_EQ(BoundOf(binder_, waiting), 3U);
}

TEST_F(SchedulerTest, AnInvalidMinAvailableIsNamed) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  json p = GangMember("bad", "g", 1);
  p["metadata"]["annotations"]["gpusched.io/min-available"] = "zero";
  scheduler_->OnPod(EventType::kAdded, p);
  Drain();
  EXPECT_TRUE(binder_.bound().empty());
  ASSERT_FALSE(EventsFor("bad", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("bad", "FailedScheduling").back().message, HasSubstr("gpusched.io/min-available"));
}

TEST_F(SchedulerTest, IgnoresPodsOfOtherSchedulersAndBoundOrTerminatingOnes) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  json other = Pod("other", WholeGpu());
  other["spec"]["schedulerName"] = "default-scheduler";
  json terminating = Pod("terminating", WholeGpu());
  terminating["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z";
  json done = Pod("done", WholeGpu());
  done["status"]["phase"] = "Succeeded";
  for (const json& p : {other, terminating, done}) {
    scheduler_->OnPod(EventType::kAdded, p);
  }
  EXPECT_EQ(Drain(), 0);
  EXPECT_TRUE(binder_.bound().empty());
}

TEST_F(SchedulerTest, HigherPriorityFirstThenOlder) {
  scheduler_->OnPod(EventType::kAdded, Pod("low", WholeGpu(), 10, "2026-11-25T09:00:00Z"));
  scheduler_->OnPod(EventType::kAdded, Pod("high-new", WholeGpu(), 1000, "2026-11-25T10:00:01Z"));
  scheduler_->OnPod(EventType::kAdded, Pod("high-old", WholeGpu(), 1000, "2026-11-25T10:00:00Z"));
  EXPECT_EQ(Drain(), 3);  // no node yet: each is tried once and parked
  EXPECT_EQ(EventsFor("low", "FailedScheduling").size(), 1U);
  EXPECT_THAT(EventsFor("low", "FailedScheduling")[0].message, HasSubstr("0/0 nodes are available"));
  EXPECT_TRUE(EventsFor("low", "FailedScheduling")[0].unschedulable_condition);
  EXPECT_EQ(Drain(), 0) << "parked pods wait for an event, not a timer";

  scheduler_->OnNode(EventType::kAdded, Node("a", 2));  // room for two of the three
  Drain();
  ASSERT_EQ(binder_.bound().size(), 2U);
  EXPECT_EQ(binder_.bound()[0].pod.str(), "uid-high-old");
  EXPECT_EQ(binder_.bound()[1].pod.str(), "uid-high-new");
  EXPECT_EQ(EventsFor("low", "FailedScheduling").size(), 2U);
}

TEST_F(SchedulerTest, APodBlockedByGpusRunsAgainWhenAHolderIsDeleted) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  const json first = Pod("first", WholeGpu());
  scheduler_->OnPod(EventType::kAdded, first);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  const core::Allocation held = binder_.bound()[0];
  ShowBound(first, held);
  scheduler_->OnPod(EventType::kAdded, Pod("second", WholeGpu()));
  Drain();
  ASSERT_EQ(EventsFor("second", "FailedScheduling").size(), 1U);
  EXPECT_THAT(EventsFor("second", "FailedScheduling")[0].message,
              HasSubstr("0/1 nodes are available: 1 x container main: needs 1 fully free GPU(s)"));
  EXPECT_EQ(scheduler_->queue_counts().unschedulable, 1U);

  // A status-only update (the condition this scheduler wrote) does not requeue it.
  json status_only = Pod("second", WholeGpu());
  status_only["status"]["conditions"] = json::array({{{"type", "PodScheduled"}, {"status", "False"}}});
  scheduler_->OnPod(EventType::kModified, status_only);
  EXPECT_EQ(Drain(), 0);

  scheduler_->OnPod(EventType::kDeleted, AsBound(first, held, "x"));
  EXPECT_EQ(scheduler_->queue_counts().active, 1U) << "the deletion freed a GPU: straight back to active";
  Drain();
  ASSERT_EQ(binder_.bound().size(), 2U);
  EXPECT_EQ(binder_.bound()[1].pod.str(), "uid-second");
}

// gpusched_scheduler_oldest_pending_seconds: how long the pod that has waited longest has waited (the pending-pod
// alert of deploy/monitoring); 0 once nothing waits.
TEST_F(SchedulerTest, TheMetricsTellHowLongTheOldestPendingPodHasWaited) {
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_oldest_pending_seconds 0\n"));
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  Running(Pod("first", WholeGpu()));
  scheduler_->OnPod(EventType::kAdded, Pod("second", WholeGpu()));  // no GPU left: waits
  Drain();
  clock_.AdvanceMs(90'000);
  scheduler_->OnPod(EventType::kAdded, Pod("third", WholeGpu()));
  Drain();
  clock_.AdvanceMs(30'000);
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_oldest_pending_seconds 120\n"));
  scheduler_->OnPod(EventType::kDeleted, Pod("second", WholeGpu()));
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_oldest_pending_seconds 30\n"));
}

TEST_F(SchedulerTest, ReasonsNameEachPredicate) {
  scheduler_->OnNode(
      EventType::kAdded,
      Node("tainted", 8, {{"zone", "a"}}, json::array({{{"key", "team"}, {"value", "a"}, {"effect", "NoSchedule"}}})));
  scheduler_->OnNode(EventType::kAdded, Node("small", 8, {{"zone", "b"}}, nullptr, "500m"));
  json cordoned = Node("cordoned", 8, {{"zone", "a"}});
  cordoned["spec"]["unschedulable"] = true;
  scheduler_->OnNode(EventType::kAdded, cordoned);
  scheduler_->OnNode(EventType::kAdded, Node("full", 8, {{"zone", "c"}}, nullptr, "32", "1"));
  // One pod without GPUs fills "full" (max 1 pod); it is bound there by another scheduler.
  json filler = Pod("filler", json::object());
  filler["spec"]["schedulerName"] = "default-scheduler";
  filler["spec"]["nodeName"] = "full";
  scheduler_->OnPod(EventType::kAdded, filler);

  scheduler_->OnPod(EventType::kAdded, Pod("p", Share(10)));
  Drain();
  ASSERT_TRUE(binder_.bound().empty());
  ASSERT_EQ(EventsFor("p", "FailedScheduling").size(), 1U);
  const std::string m = EventsFor("p", "FailedScheduling")[0].message;
  EXPECT_THAT(m, HasSubstr("0/4 nodes are available"));
  EXPECT_THAT(m, HasSubstr("untolerated taint"));
  EXPECT_THAT(m, HasSubstr("Insufficient cpu"));
  EXPECT_THAT(m, HasSubstr("unschedulable"));
  EXPECT_THAT(m, HasSubstr("Too many pods"));

  // A toleration opens the tainted node.
  json tolerant = Pod("tolerant", Share(10));
  tolerant["spec"]["tolerations"] = json::array({{{"key", "team"}, {"operator", "Equal"}, {"value", "a"}}});
  scheduler_->OnPod(EventType::kAdded, tolerant);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].node.str(), "tainted");

  // A node selector that only "small" matches: it is considered only there.
  json selective = Pod("selective", Share(10));
  selective["spec"]["nodeSelector"] = {{"zone", "b"}};
  scheduler_->OnPod(EventType::kAdded, selective);
  Drain();
  EXPECT_THAT(EventsFor("selective", "FailedScheduling").at(0).message,
              HasSubstr("0/4 nodes are available: 2 x node(s) didn't match Pod's node affinity/selector, 1 x "
                        "Insufficient cpu: needs 1000m, 1 x node(s) were unschedulable"));
}

TEST_F(SchedulerTest, CpuOfEveryBoundPodIsCharged) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1, json::object(), nullptr, "1500m"));
  json other = Pod("other", json::object());  // 1 CPU, bound by someone else, no annotation
  other["spec"]["schedulerName"] = "default-scheduler";
  other["spec"]["nodeName"] = "a";
  scheduler_->OnPod(EventType::kAdded, other);
  scheduler_->OnPod(EventType::kAdded, Pod("p", Share(10)));
  Drain();
  EXPECT_TRUE(binder_.bound().empty());
  EXPECT_THAT(EventsFor("p", "FailedScheduling").at(0).message, HasSubstr("Insufficient cpu"));
  json gone = other;
  gone["status"]["phase"] = "Succeeded";
  scheduler_->OnPod(EventType::kModified, gone);
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U) << "the finished pod's CPU is free again";
}

TEST_F(SchedulerTest, PodsRebuiltFromTheirAnnotationAreChargedTheirCpuToo) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, json::object(), nullptr, "1500m"));
  // Bound by an earlier run of this scheduler: the annotation names the GPU; the CPU comes from the pod.
  const core::Allocation earlier{
      .pod = common::PodUid("uid-earlier"),
      .node = common::NodeName("a"),
      .containers = {core::ContainerAllocation{
          .container = "main",
          .gpus = {core::GpuShare{
              .index = 0, .milli = common::MilliGpu{1000}, .memory = common::MiB{81920}, .exclusive = true}}}},
      .id = 42};
  scheduler_->OnPod(EventType::kAdded, AsBound(Pod("earlier", WholeGpu()), earlier, kube::EncodeAllocation(earlier)));
  json broken = Pod("broken", WholeGpu());  // an annotation that cannot be used: still charged CPU and a slot
  broken["spec"]["nodeName"] = "a";
  broken["metadata"]["annotations"]["gpusched.io/allocation"] = "{not json";
  scheduler_->OnPod(EventType::kAdded, broken);
  scheduler_->OnPod(EventType::kAdded, Pod("p", Share(10)));
  Drain();
  EXPECT_TRUE(binder_.bound().empty());
  EXPECT_THAT(EventsFor("p", "FailedScheduling").at(0).message, HasSubstr("Insufficient cpu: needs 1000m"));
  auto lock = mirror_->ReadLock();
  EXPECT_EQ(mirror_->state().Find(common::NodeName("a"))->cpu_free.value(), -500) << "2 x 1000m on 1500m: shown";
  EXPECT_EQ(mirror_->state().Find(common::NodeName("a"))->gpus[0].holders, 1);
}

TEST_F(SchedulerTest, ConstraintsItDoesNotEvaluateAreNeverIgnoredSilently) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  json soft = Pod("soft", Share(10));
  soft["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = json::array(
      {{{"weight", 1}, {"preference", {{"matchExpressions", {{{"key", "zone"}, {"operator", "Exists"}}}}}}}});
  scheduler_->OnPod(EventType::kAdded, soft);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].pod.str(), "uid-soft");
  const PodEvent scheduled = EventsFor("soft", "Scheduled").at(0);
  EXPECT_EQ(scheduled.type, "Warning");
  EXPECT_THAT(scheduled.message,
              HasSubstr("not evaluated: spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"));
}

json WithLabels(json pod, const json& labels) {
  pod["metadata"]["labels"] = labels;
  return pod;
}

json AntiAffinity(json pod, const std::string& app, const std::string& key) {
  pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      json::array({{{"topologyKey", key}, {"labelSelector", {{"matchLabels", {{"app", app}}}}}}});
  return pod;
}

json Namespace(const std::string& name, const json& labels) {
  return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}, {"labels", labels}}}};
}

// A term that selects namespaces by their labels, from the namespace watch: team-a's db pod keeps the pod off its
// node, team-c's does not; relabelling team-c wakes nothing that could now fit, but a pod waiting on team-a's
// labels binds as soon as team-a's labels stop matching.
TEST_F(SchedulerTest, NamespaceSelectorsReadTheLabelsOfTheWatchedNamespaces) {
  scheduler_->OnNamespace(EventType::kAdded, Namespace("team-a", {{"team", "a"}}));
  scheduler_->OnNamespace(EventType::kAdded, Namespace("team-c", {{"team", "c"}}));
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"kubernetes.io/hostname", "a"}}));
  json db_a = WithLabels(Pod("db-a", Share(10)), {{"app", "db"}});
  db_a["metadata"]["namespace"] = "team-a";
  Running(db_a);
  scheduler_->OnNode(EventType::kAdded, Node("c", 2, {{"kubernetes.io/hostname", "c"}}));
  json db_c = WithLabels(Pod("db-c", Share(10)), {{"app", "db"}});
  db_c["metadata"]["namespace"] = "team-c";
  db_c["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "c"}};
  Running(db_c);
  auto away_from = [](const std::string& name, const json& team) {
    json p = Pod(name, Share(10));
    p["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
        json::array({{{"topologyKey", "kubernetes.io/hostname"},
                      {"labelSelector", {{"matchLabels", {{"app", "db"}}}}},
                      {"namespaceSelector", {{"matchLabels", team}}}}});
    return p;
  };
  scheduler_->OnPod(EventType::kAdded, away_from("p", {{"team", "a"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 3U);
  EXPECT_EQ(binder_.bound()[2].pod.str(), "uid-p");
  EXPECT_EQ(binder_.bound()[2].node.str(), "c") << "team-a's db pod is on a; team-c's on c does not count";

  // Away from the db pods of teams a and c: nowhere, until team-c's labels change (the event wakes it).
  json q = away_from("q", json::object());
  q["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"] = {
      {"matchExpressions", json::array({{{"key", "team"}, {"operator", "In"}, {"values", {"a", "c"}}}})}};
  scheduler_->OnPod(EventType::kAdded, q);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 3U);
  ASSERT_FALSE(EventsFor("q", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("q", "FailedScheduling").back().message, HasSubstr("anti-affinity"));
  scheduler_->OnNamespace(EventType::kModified, Namespace("team-c", {{"team", "z"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 4U);
  EXPECT_EQ(binder_.bound()[3].pod.str(), "uid-q");
  EXPECT_EQ(binder_.bound()[3].node.str(), "c");
}

// Replicas with anti-affinity on the hostname: each pod assumed counts at once, before the watch shows it bound,
// so two replicas scheduled back to back never share a node; the third waits until one leaves.
TEST_F(SchedulerTest, AntiAffinityKeepsReplicasApartAndWaitsForOneToLeave) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"kubernetes.io/hostname", "a"}}));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2, {{"kubernetes.io/hostname", "b"}}));
  std::vector<json> pods;
  for (const char* name : {"web-0", "web-1", "web-2"}) {
    pods.push_back(AntiAffinity(WithLabels(Pod(name, Share(10)), {{"app", "web"}}), "web", "kubernetes.io/hostname"));
    scheduler_->OnPod(EventType::kAdded, pods.back());
  }
  Drain();
  ASSERT_EQ(binder_.bound().size(), 2U);
  EXPECT_NE(binder_.bound()[0].node, binder_.bound()[1].node);
  EXPECT_THAT(EventsFor("web-2", "FailedScheduling").at(0).message,
              HasSubstr("0/2 nodes are available: 2 x node(s) didn't match pod anti-affinity rules"));
  // The watch shows the two bound; a pod of another app is not kept away.
  for (size_t i = 0; i < 2; ++i) {
    ShowBound(pods[i], binder_.bound()[i]);
  }
  scheduler_->OnPod(EventType::kAdded, WithLabels(Pod("db", Share(10)), {{"app", "db"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 3U);
  EXPECT_EQ(binder_.bound()[2].pod.str(), "uid-db");
  // web-0 leaves: web-2 takes its node.
  const std::string freed = binder_.bound()[0].node.str();
  scheduler_->OnPod(EventType::kDeleted, AsBound(pods[0], binder_.bound()[0], "x"));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 4U);
  EXPECT_EQ(binder_.bound()[3].pod.str(), "uid-web-2");
  EXPECT_EQ(binder_.bound()[3].node.str(), freed);
}

// A pod bound by another scheduler with anti-affinity keeps matching pods out of its zone.
TEST_F(SchedulerTest, AntiAffinityOfPodsBoundByOthersIsHonoured) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"zone", "z1"}}));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2, {{"zone", "z1"}}));
  scheduler_->OnNode(EventType::kAdded, Node("c", 2, {{"zone", "z2"}}));
  json other = AntiAffinity(WithLabels(Pod("other", json::object()), {{"app", "db"}}), "db", "zone");
  other["spec"]["schedulerName"] = "default-scheduler";
  other["spec"]["nodeName"] = "a";
  scheduler_->OnPod(EventType::kAdded, other);
  scheduler_->OnPod(EventType::kAdded, WithLabels(Pod("db", Share(10)), {{"app", "db"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].node.str(), "c");
}

// A pod with affinity to a cache waits (no timer) until a cache pod is placed, then joins its zone.
TEST_F(SchedulerTest, PodAffinityWaitsForAPeerAndJoinsItsZone) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"zone", "z1"}}));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2, {{"zone", "z2"}}));
  json web = WithLabels(Pod("web", Share(10)), {{"app", "web"}});
  web["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      json::array({{{"topologyKey", "zone"}, {"labelSelector", {{"matchLabels", {{"app", "cache"}}}}}}});
  scheduler_->OnPod(EventType::kAdded, web);
  Drain();
  EXPECT_TRUE(binder_.bound().empty());
  EXPECT_THAT(EventsFor("web", "FailedScheduling").at(0).message,
              HasSubstr("2 x node(s) didn't match pod affinity rules"));
  json cache = WithLabels(Pod("cache", json::object()), {{"app", "cache"}});
  cache["spec"]["schedulerName"] = "default-scheduler";
  cache["spec"]["nodeName"] = "b";
  scheduler_->OnPod(EventType::kAdded, cache);
  EXPECT_EQ(Drain(), 1) << "the placed cache pod woke it";
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].node.str(), "b");
}

// Topology spread over zones, counting this scheduler's own placements as they are made; and a bind refused for
// good frees the domain it was counted in.
TEST_F(SchedulerTest, TopologySpreadBalancesZones) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 8, {{"zone", "z1"}}));
  scheduler_->OnNode(EventType::kAdded, Node("b", 8, {{"zone", "z2"}}));
  scheduler_->OnNode(EventType::kAdded, Node("bare", 8));
  for (int i = 0; i < 4; ++i) {
    json p = WithLabels(Pod("w" + std::to_string(i), Share(10)), {{"app", "w"}});
    p["spec"]["topologySpreadConstraints"] =
        json::array({{{"maxSkew", 1}, {"topologyKey", "zone"}, {"labelSelector", {{"matchLabels", {{"app", "w"}}}}}}});
    scheduler_->OnPod(EventType::kAdded, p);
  }
  Drain();
  ASSERT_EQ(binder_.bound().size(), 4U);
  std::map<std::string, int> per_node;
  for (const auto& a : binder_.bound()) {
    per_node[a.node.str()] += 1;
  }
  // Binpack alone would stack all four on one node; spread puts two in each zone and none on the unlabelled node.
  EXPECT_EQ(per_node, (std::map<std::string, int>{{"a", 2}, {"b", 2}}));
}

// Host ports and other resources are evaluated, and charged for pods bound by anyone.
TEST_F(SchedulerTest, HostPortsAndOtherResourcesAreEvaluated) {
  json node = Node("a", 2);
  node["status"]["allocatable"]["ephemeral-storage"] = "10Gi";
  scheduler_->OnNode(EventType::kAdded, node);
  json other = Pod("other", json::object());  // bound by someone else, with a host port and 8Gi of scratch space
  other["spec"]["schedulerName"] = "default-scheduler";
  other["spec"]["nodeName"] = "a";
  other["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 80}, {"hostPort", 8080}}});
  other["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "8Gi";
  scheduler_->OnPod(EventType::kAdded, other);
  json port = Pod("port", Share(10));
  port["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 80}, {"hostPort", 8080}}});
  json disk = Pod("disk", Share(10));
  disk["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "4Gi";
  json fits = Pod("fits", Share(10));
  fits["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "2Gi";
  fits["spec"]["containers"][0]["ports"] = json::array({{{"containerPort", 80}, {"hostPort", 8081}}});
  for (const json& p : {port, disk, fits}) {
    scheduler_->OnPod(EventType::kAdded, p);
  }
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].pod.str(), "uid-fits");
  EXPECT_THAT(EventsFor("port", "FailedScheduling").at(0).message,
              HasSubstr("didn't have free ports for the requested pod ports"));
  EXPECT_THAT(EventsFor("disk", "FailedScheduling").at(0).message, HasSubstr("Insufficient ephemeral-storage"));
  EXPECT_EQ(EventsFor("fits", "Scheduled").at(0).type, "Normal") << "nothing left unevaluated";
  // The other pod goes: its port and space are free again, and both waiting pods fit.
  scheduler_->OnPod(EventType::kDeleted, other);
  Drain();
  EXPECT_EQ(binder_.bound().size(), 3U);
}

TEST_F(SchedulerTest, AnInvalidRequestIsReportedAndWaitsForAChange) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnPod(EventType::kAdded, Pod("bad", {{"gpusched.io/gpu-core", "150"}}));
  Drain();
  EXPECT_THAT(EventsFor("bad", "FailedScheduling").at(0).message, HasSubstr("invalid"));
  scheduler_->OnNode(EventType::kModified, Node("a", 2, {{"new", "label"}}));
  EXPECT_EQ(Drain(), 0) << "no cluster event can fix a bad request";
  scheduler_->OnPod(EventType::kModified, Pod("bad", Share(50)));  // the spec changed
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U);
}

TEST_F(SchedulerTest, AnUnknownBindOutcomeKeepsTheGpusAndRetriesTheSameBinding) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  binder_.FailNext(1, common::Unavailable("apiserver timed out"));
  const json p = Pod("p", WholeGpu());
  scheduler_->OnPod(EventType::kAdded, p);
  Drain();
  ASSERT_EQ(binder_.failed().size(), 1U);
  EXPECT_EQ(scheduler_->stats().binds_unknown, 1U);
  {
    auto lock = mirror_->ReadLock();
    EXPECT_NE(mirror_->state().FindAllocation(common::PodUid("uid-p")), nullptr) << "still assumed";
  }
  scheduler_->OnPod(EventType::kAdded, Pod("q", WholeGpu()));
  Drain();
  EXPECT_TRUE(binder_.bound().empty()) << "q must not get p's GPU while p's binding may have landed";
  clock_.AdvanceMs(1000);  // p's backoff
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(binder_.bound()[0].pod.str(), "uid-p");
  EXPECT_EQ(binder_.bound()[0].id, binder_.failed()[0].id) << "the same Binding again";
}

TEST_F(SchedulerTest, ARefusedBindFreesTheGpusAtOnce) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  binder_.FailNext(1, common::NotFound("pod is gone"));
  scheduler_->OnPod(EventType::kAdded, Pod("p", WholeGpu()));
  Drain();
  auto lock = mirror_->ReadLock();
  EXPECT_EQ(mirror_->state().FindAllocation(common::PodUid("uid-p")), nullptr);
  EXPECT_THAT(EventsFor("p", "FailedScheduling").at(0).message, HasSubstr("binding rejected"));
}

TEST_F(SchedulerTest, AnAssumptionThatNeverShowsUpExpires) {
  Make(SchedulerOptions{.assumed_ttl_ms = 5000});
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  binder_.FailNext(1, common::DeadlineExceeded("timeout"));
  scheduler_->OnPod(EventType::kAdded, Pod("p", WholeGpu()));
  Drain();
  EXPECT_EQ(scheduler_->ExpireAssumed(), 0U);
  clock_.AdvanceMs(5001);  // the watch never showed p bound
  EXPECT_EQ(scheduler_->ExpireAssumed(), 1U);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 1U) << "p is placed anew";
  EXPECT_EQ(binder_.bound()[0].pod.str(), "uid-p");
  EXPECT_NE(binder_.bound()[0].id, binder_.failed()[0].id);
  EXPECT_EQ(scheduler_->stats().expired_assumptions, 1U);
}

TEST_F(SchedulerTest, OnlyTheLeaderSchedules) {
  bool leader = false;
  Make(SchedulerOptions{.may_bind = [&leader] { return leader; }});
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  scheduler_->OnPod(EventType::kAdded, Pod("p", WholeGpu()));
  EXPECT_FALSE(scheduler_->ScheduleOne());
  EXPECT_EQ(scheduler_->queue_counts().active, 1U);
  leader = true;
  EXPECT_TRUE(scheduler_->ScheduleOne());
  EXPECT_EQ(binder_.bound().size(), 1U);
}

TEST_F(SchedulerTest, ABoundPodIsNotScheduledAgainBeforeTheWatchShowsIt) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  json p = Pod("p", WholeGpu());
  scheduler_->OnPod(EventType::kAdded, p);
  Drain();
  p["metadata"]["labels"]["changed"] = "yes";  // a late update without nodeName, after the bind succeeded
  scheduler_->OnPod(EventType::kModified, p);
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U);
}

TEST_F(SchedulerTest, RunsOnItsOwnThreads) {
  Make(SchedulerOptions{.bind_workers = 1});  // RecordingBinder is not thread-safe
  scheduler_->Start();
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  for (int i = 0; i < 8; ++i) {
    scheduler_->OnPod(EventType::kAdded, Pod("p" + std::to_string(i), Share(40)));
  }
  for (int i = 0; i < 500 && scheduler_->stats().binds_ok < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  scheduler_->Stop();
  EXPECT_EQ(scheduler_->stats().binds_ok, 8U);
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_binds_total{result=\"ok\"} 8"));
}

// --- preemption -------------------------------------------------------------------------------------------------

// Records what preemption asks of the cluster; evictions refused on request (as a budget would).
class RecordingPreemptor : public ports::Preemptor {
 public:
  common::Status Evict(const std::string& ns, const std::string& name, const common::PodUid& uid) override {
    if (refuse_ == name) {
      refused_.push_back(ns + "/" + name);
      return common::Unavailable("POST /api/v1/namespaces/" + ns + "/pods/" + name +
                                 "/eviction: HTTP 429: Cannot evict pod as it would violate the pod's disruption "
                                 "budget.");
    }
    evicted_.push_back(ns + "/" + name + "@" + uid.str());
    return common::Status::Ok();
  }
  common::Status Nominate(const std::string& ns, const std::string& name, const std::string& node) override {
    nominated_.push_back(ns + "/" + name + "->" + node);
    return common::Status::Ok();
  }
  std::string refuse_;
  std::vector<std::string> evicted_, refused_, nominated_;
};

class SchedulerPreemptionTest : public SchedulerTest {
 protected:
  void SetUp() override { Make(SchedulerOptions{.preemptor = &preemptor_}); }

  bool Holds(const std::string& reservation) {
    auto lock = mirror_->ReadLock();
    return mirror_->state().FindAllocation(common::PodUid(reservation)) != nullptr;
  }

  RecordingPreemptor preemptor_;
};

// The room held for a preemptor counts as that pod for inter-pod constraints while its victims leave: a replica
// with anti-affinity to it cannot take the node meanwhile (kube-scheduler counts nominated pods the same way).
TEST_F(SchedulerPreemptionTest, HeldRoomCountsAsThePreemptorForAntiAffinity) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1, {{"kubernetes.io/hostname", "a"}}));
  Running(Pod("low", WholeGpu(), 0));
  scheduler_->OnPod(EventType::kAdded, AntiAffinity(WithLabels(Pod("h", WholeGpu(), 10), {{"app", "web"}}), "web",
                                                    "kubernetes.io/hostname"));
  Drain();
  ASSERT_TRUE(Holds("nominated/uid-h"));
  ASSERT_EQ(preemptor_.evicted_, std::vector<std::string>{"default/low@uid-low"});
  // A replica that needs no GPU: node a has room for it, but h will run there.
  scheduler_->OnPod(EventType::kAdded, AntiAffinity(WithLabels(Pod("web-1", json::object(), 10), {{"app", "web"}}),
                                                    "web", "kubernetes.io/hostname"));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U) << "web-1 must not take node a beside h's held room";
  ASSERT_FALSE(EventsFor("web-1", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("web-1", "FailedScheduling").back().message, HasSubstr("anti-affinity"));
  // The reservation is never a victim, and a pod that is not a replica is not kept away.
  scheduler_->OnPod(EventType::kAdded, WithLabels(Pod("db", json::object(), 10), {{"app", "db"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 2U);
  EXPECT_EQ(binder_.bound()[1].pod.str(), "uid-db");
  EXPECT_EQ(preemptor_.evicted_.size(), 1U);
}

// Preemption for inter-pod constraints, as kube-scheduler's: the counts follow the victims taken off a candidate
// node. A pod of priority 10 with anti-affinity (zone) to app=web: both nodes of zone z1 fail it because of web-0 on
// b; only evicting web-0 on b helps, so b is the candidate (nothing on a would help, and nothing there is evicted).
TEST_F(SchedulerPreemptionTest, EvictsTheLowerPriorityPodThatItsAntiAffinityRepels) {
  scheduler_->OnNode(EventType::kAdded, Node("b", 2, {{"kubernetes.io/hostname", "b"}, {"zone", "z1"}}));
  Running(WithLabels(Pod("web-0", Share(10), 0), {{"app", "web"}}));
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"kubernetes.io/hostname", "a"}, {"zone", "z1"}}));
  Running(Pod("other", Share(10), 0));
  scheduler_->OnPod(EventType::kAdded,
                    AntiAffinity(WithLabels(Pod("h", Share(10), 10), {{"app", "api"}}), "web", "zone"));
  Drain();
  EXPECT_EQ(preemptor_.evicted_, std::vector<std::string>{"default/web-0@uid-web-0"});
  EXPECT_EQ(preemptor_.nominated_, std::vector<std::string>{"default/h->b"});
  ASSERT_FALSE(EventsFor("h", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("h", "FailedScheduling").back().message,
              HasSubstr("; preempting 1 pod(s) of lower priority on b"));
}

// A pod of lower priority whose own anti-affinity keeps the preemptor away is evicted for it.
TEST_F(SchedulerPreemptionTest, EvictsALowerPriorityPodWhoseAntiAffinityKeepsThePreemptorAway) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"kubernetes.io/hostname", "a"}}));
  Running(AntiAffinity(WithLabels(Pod("loner", Share(10), 0), {{"app", "loner"}}), "web", "kubernetes.io/hostname"));
  Running(Pod("bystander", Share(10), 0));
  scheduler_->OnPod(EventType::kAdded, WithLabels(Pod("web", Share(10), 10), {{"app", "web"}}));
  Drain();
  EXPECT_EQ(preemptor_.evicted_, std::vector<std::string>{"default/loner@uid-loner"});
}

json SpreadOnHostname(json pod, const std::string& app) {
  pod["spec"]["topologySpreadConstraints"] = json::array({{{"maxSkew", 1},
                                                           {"topologyKey", "kubernetes.io/hostname"},
                                                           {"whenUnsatisfiable", "DoNotSchedule"},
                                                           {"labelSelector", {{"matchLabels", {{"app", app}}}}}}});
  return pod;
}

// Spread: node b has no room (its GPU holder has priority 20), node a would have skew 3 with its two web pods of
// priority 0; evicting both brings it to 1.
TEST_F(SchedulerPreemptionTest, EvictsForATopologySpreadSkew) {
  scheduler_->OnNode(EventType::kAdded, Node("b", 1, {{"kubernetes.io/hostname", "b"}}));
  Running(Pod("big", WholeGpu(), 20));
  scheduler_->OnNode(EventType::kAdded, Node("a", 2, {{"kubernetes.io/hostname", "a"}}));
  Running(WithLabels(Pod("web-0", Share(10), 0), {{"app", "web"}}));
  Running(WithLabels(Pod("web-1", Share(10), 0), {{"app", "web"}}));
  scheduler_->OnPod(EventType::kAdded,
                    SpreadOnHostname(WithLabels(Pod("web-2", Share(10), 10), {{"app", "web"}}), "web"));
  Drain();
  std::vector<std::string> evicted = preemptor_.evicted_;
  std::sort(evicted.begin(), evicted.end());
  EXPECT_EQ(evicted, (std::vector<std::string>{"default/web-0@uid-web-0", "default/web-1@uid-web-1"}));
  EXPECT_EQ(preemptor_.nominated_, std::vector<std::string>{"default/web-2->a"});
}

// Affinity needs a pod placed, not one removed: it never leads to an eviction.
TEST_F(SchedulerPreemptionTest, AffinityNeverLeadsToPreemption) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1, {{"kubernetes.io/hostname", "a"}}));
  Running(Pod("low", WholeGpu(), 0));
  json h = Pod("h", Share(10), 10);
  h["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] =
      json::array({{{"topologyKey", "kubernetes.io/hostname"}, {"labelSelector", {{"matchLabels", {{"app", "db"}}}}}}});
  scheduler_->OnPod(EventType::kAdded, h);
  Drain();
  EXPECT_TRUE(preemptor_.evicted_.empty());
  ASSERT_FALSE(EventsFor("h", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("h", "FailedScheduling").back().message, HasSubstr("pod affinity"));
}

// One GPU, two shares of 50 of priorities 1 and 0; a pod of priority 10 needs 50: the pod of priority 0 goes, the
// other is spared; the room is held while it leaves, and a pod of low priority cannot take it.
TEST_F(SchedulerPreemptionTest, EvictsTheLeastImportantShareAndHoldsTheRoomForThePreemptor) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  Running(Pod("l1", Share(50), 1));
  const json l2 = Running(Pod("l2", Share(50), 0));
  scheduler_->OnPod(EventType::kAdded, Pod("h", Share(50), 10));
  Drain();
  EXPECT_EQ(preemptor_.nominated_, std::vector<std::string>{"default/h->a"});
  EXPECT_EQ(preemptor_.evicted_, std::vector<std::string>{"default/l2@uid-l2"});
  ASSERT_EQ(EventsFor("l2", "Preempted").size(), 1U);
  EXPECT_EQ(EventsFor("l2", "Preempted")[0].message, "Preempted by default/h on node a");
  ASSERT_EQ(EventsFor("h", "FailedScheduling").size(), 1U);
  EXPECT_THAT(EventsFor("h", "FailedScheduling")[0].message, HasSubstr("; preempting 1 pod(s) of lower priority on a"));
  EXPECT_TRUE(Holds("nominated/uid-h"));
  EXPECT_EQ(scheduler_->stats().preemptions, 1U);
  EXPECT_EQ(scheduler_->stats().victims, 1U);

  // l2 is terminating (the eviction was accepted); a low-priority pod arrives: the held room is not for it, and
  // the terminating pod is not chosen again.
  json leaving = l2;
  leaving["metadata"]["deletionTimestamp"] = "2026-11-25T10:01:00Z";
  scheduler_->OnPod(EventType::kModified, leaving);
  scheduler_->OnPod(EventType::kAdded, Pod("m", Share(40), 0));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 2U) << "m must not take the room held for h";
  EXPECT_EQ(preemptor_.evicted_.size(), 1U);

  // l2 is gone: h is tried first (higher priority), gets the room, m still waits.
  scheduler_->OnPod(EventType::kDeleted, leaving);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 3U);
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-h");
  EXPECT_EQ(binder_.bound().back().node.str(), "a");
  EXPECT_FALSE(Holds("nominated/uid-h"));
  EXPECT_THAT(EventsFor("m", "FailedScheduling").back().message, HasSubstr("0/1 nodes are available"));
  auto lock = mirror_->ReadLock();
  EXPECT_TRUE(mirror_->state().CheckInvariants().ok());
  EXPECT_TRUE(mirror_->state().Overcommits().empty());
}

TEST_F(SchedulerPreemptionTest, NeverPreemptsForPreemptionPolicyNeverOrEqualPriority) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  Running(Pod("l", WholeGpu(), 0));
  json never = Pod("never", WholeGpu(), 100);
  never["spec"]["preemptionPolicy"] = "Never";
  scheduler_->OnPod(EventType::kAdded, never);
  scheduler_->OnPod(EventType::kAdded, Pod("same", WholeGpu(), 0));
  Drain();
  EXPECT_TRUE(preemptor_.evicted_.empty());
  EXPECT_TRUE(preemptor_.nominated_.empty());
  EXPECT_THAT(EventsFor("never", "FailedScheduling").back().message, Not(HasSubstr("preempt")));
  EXPECT_EQ(EventsFor("same", "FailedScheduling").size(), 1U);
}

// kube-scheduler's candidate order: a node whose victims no budget protects wins over one whose victim of lower
// priority a budget protects.
TEST_F(SchedulerPreemptionTest, PrefersTheNodeWithoutBudgetViolations) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  json db = Pod("db", WholeGpu(), 0);
  db["metadata"]["labels"] = {{"app", "db"}};
  json pinned_a = db;
  pinned_a["spec"]["nodeSelector"] = {{"kubernetes.io/hostname", "a"}};
  scheduler_->OnNode(EventType::kModified, Node("a", 1, {{"kubernetes.io/hostname", "a"}}));
  Running(pinned_a);
  scheduler_->OnNode(EventType::kAdded, Node("b", 1, {{"kubernetes.io/hostname", "b"}}));
  Running(Pod("batch", WholeGpu(), 5));
  scheduler_->OnDisruptionBudget(EventType::kAdded, {{"metadata", {{"namespace", "default"}, {"name", "db-pdb"}}},
                                                     {"spec", {{"selector", {{"matchLabels", {{"app", "db"}}}}}}},
                                                     {"status", {{"disruptionsAllowed", 0}}}});
  scheduler_->OnPod(EventType::kAdded, Pod("h", WholeGpu(), 10));
  Drain();
  EXPECT_EQ(preemptor_.evicted_, std::vector<std::string>{"default/batch@uid-batch"});
  EXPECT_EQ(preemptor_.nominated_, std::vector<std::string>{"default/h->b"});

  // A budget that cannot be read leaves its last readable version in place (the victim choice above stands).
  scheduler_->OnDisruptionBudget(EventType::kModified, {{"metadata", {{"namespace", "default"}, {"name", "db-pdb"}}},
                                                        {"spec", {{"selector", {{"matchLabels", {{"app", 7}}}}}}}});
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_disruption_budgets 1"));

  // Without the budget the victim of lower priority (db on a) would have been chosen.
  scheduler_->OnDisruptionBudget(EventType::kDeleted, {{"metadata", {{"namespace", "default"}, {"name", "db-pdb"}}}});
  scheduler_->OnPod(EventType::kAdded, Pod("h2", WholeGpu(), 10));
  Drain();
  ASSERT_EQ(preemptor_.evicted_.size(), 2U);
  EXPECT_EQ(preemptor_.evicted_[1], "default/db@uid-db");
  EXPECT_THAT(scheduler_->Metrics(), HasSubstr("gpusched_scheduler_disruption_budgets 0"));
}

TEST_F(SchedulerPreemptionTest, ARefusedEvictionGivesTheRoomBack) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  Running(Pod("l", WholeGpu(), 0));
  preemptor_.refuse_ = "l";
  scheduler_->OnPod(EventType::kAdded, Pod("h", WholeGpu(), 10));
  Drain();
  EXPECT_EQ(preemptor_.refused_, std::vector<std::string>{"default/l"});
  EXPECT_FALSE(Holds("nominated/uid-h"));
  EXPECT_EQ(preemptor_.nominated_, (std::vector<std::string>{"default/h->a", "default/h->"}));
  ASSERT_EQ(EventsFor("h", "FailedPreemption").size(), 1U);
  EXPECT_THAT(EventsFor("h", "FailedPreemption")[0].message, HasSubstr("disruption budget"));
  EXPECT_THAT(EventsFor("h", "FailedScheduling").back().message, HasSubstr("preemption on a failed"));
  EXPECT_EQ(scheduler_->stats().preemption_failures, 1U);
  EXPECT_EQ(scheduler_->stats().preemptions, 0U);
}

TEST_F(SchedulerPreemptionTest, WaitsForItsVictimsAndFreesTheRoomWhenDeleted) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 1));
  Running(Pod("l", WholeGpu(), 0));
  const json h = Pod("h", WholeGpu(), 10);
  scheduler_->OnPod(EventType::kAdded, h);
  Drain();
  ASSERT_EQ(preemptor_.evicted_.size(), 1U);
  // Another node arrives (too small: no GPU): h is tried again while its victim is still there, and waits.
  scheduler_->OnNode(EventType::kAdded, Node("b", 0));
  Drain();
  EXPECT_EQ(preemptor_.evicted_.size(), 1U) << "no second preemption while the victims leave";
  EXPECT_THAT(EventsFor("h", "FailedScheduling").back().message,
              HasSubstr("waiting for 1 preempted pod(s) to leave a"));
  EXPECT_TRUE(Holds("nominated/uid-h"));
  // h is deleted: its room is free again.
  scheduler_->OnPod(EventType::kDeleted, h);
  EXPECT_FALSE(Holds("nominated/uid-h"));
}

// The room is held by the cache like a bound pod's allocation: when its node is deleted it waits for the node to
// come back. A nominee deleted meanwhile must not leave it waiting there.
TEST_F(SchedulerPreemptionTest, ARoomWaitingForItsNodeIsDroppedWithItsPod) {
  const json node = Node("a", 1);
  scheduler_->OnNode(EventType::kAdded, node);
  Running(Pod("l", WholeGpu(), 0));
  const json h = Pod("h", WholeGpu(), 10);
  scheduler_->OnPod(EventType::kAdded, h);
  Drain();
  ASSERT_TRUE(Holds("nominated/uid-h"));
  scheduler_->OnNode(EventType::kDeleted, node);
  scheduler_->OnPod(EventType::kDeleted, h);
  scheduler_->OnNode(EventType::kAdded, node);
  EXPECT_FALSE(Holds("nominated/uid-h"));
  auto lock = mirror_->ReadLock();
  EXPECT_EQ(mirror_->state().Find(common::NodeName("a"))->gpus[0].holders, 1) << "l only";
  EXPECT_EQ(mirror_->PendingAllocations(), 0U);
}

json Prioritised(json pod, int32_t priority) {
  pod["spec"]["priority"] = priority;
  return pod;
}

// Shows each named pod terminating and then gone, as the API server would after their eviction.
void ShowGone(Scheduler& scheduler, const std::vector<json>& pods) {
  for (json p : pods) {
    p["metadata"]["deletionTimestamp"] = "2026-11-25T10:01:00Z";
    scheduler.OnPod(EventType::kModified, p);
    scheduler.OnPod(EventType::kDeleted, p);
  }
}

// A gang that fits nowhere preempts for all its members at once: victims chosen once for the whole group, a room
// held for every member, nothing bound until the victims are gone; then the group binds whole where it was held.
TEST_F(SchedulerPreemptionTest, AGangPreemptsForTheWholeGroupAndBindsWhenTheVictimsAreGone) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2));
  const json l1 = Running(Pod("l1", {{"nvidia.com/gpu", "2"}}, 0));
  const json l2 = Running(Pod("l2", {{"nvidia.com/gpu", "2"}}, 1));
  const json l3 = Running(Pod("l3", {{"nvidia.com/gpu", "2"}}, 0));
  for (int i = 0; i < 3; ++i) {
    scheduler_->OnPod(EventType::kAdded, Prioritised(GangMember("g-" + std::to_string(i), "train", 3, 2), 10));
  }
  const size_t bound_before = binder_.bound().size();
  Drain();
  EXPECT_EQ(binder_.bound().size(), bound_before) << "no member binds while the victims leave";
  std::vector<std::string> evicted = preemptor_.evicted_;
  std::sort(evicted.begin(), evicted.end());
  EXPECT_EQ(evicted, (std::vector<std::string>{"default/l1@uid-l1", "default/l2@uid-l2", "default/l3@uid-l3"}))
      << "each victim once";
  EXPECT_EQ(preemptor_.nominated_.size(), 3U);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Holds("nominated/uid-g-" + std::to_string(i))) << i;
  }
  ASSERT_FALSE(EventsFor("g-0", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("g-0", "FailedScheduling").back().message,
              HasSubstr("none is placed. g-0: 0/2 nodes are available"));
  EXPECT_THAT(EventsFor("g-0", "FailedScheduling").back().message,
              HasSubstr("; preempting 3 pod(s) on 2 node(s) for the whole group"));
  EXPECT_EQ(EventsFor("g-2", "FailedScheduling").back().message, EventsFor("g-0", "FailedScheduling").back().message);
  ASSERT_EQ(EventsFor("l1", "Preempted").size(), 1U);
  EXPECT_EQ(EventsFor("l1", "Preempted")[0].message, "Preempted by pod group default/train");
  EXPECT_EQ(scheduler_->stats().preemptions, 1U);
  EXPECT_EQ(scheduler_->stats().victims, 3U);

  // Two victims are gone, one still leaves: the group still waits, holds its rooms, and preempts no one else.
  ShowGone(*scheduler_, {l1, l3});
  Drain();
  EXPECT_EQ(binder_.bound().size(), bound_before);
  EXPECT_EQ(preemptor_.evicted_.size(), 3U);
  EXPECT_THAT(EventsFor("g-0", "FailedScheduling").back().message,
              HasSubstr("; waiting for 1 preempted pod(s) to leave"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Holds("nominated/uid-g-" + std::to_string(i))) << i;
  }
  // A pod of low priority cannot take the rooms meanwhile.
  scheduler_->OnPod(EventType::kAdded, Pod("m", WholeGpu(), 0));
  Drain();
  EXPECT_EQ(binder_.bound().size(), bound_before);

  ShowGone(*scheduler_, {l2});
  Drain();
  EXPECT_EQ(BoundOf(binder_, "g-"), 3U);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Holds("nominated/uid-g-" + std::to_string(i))) << i;
  }
  EXPECT_EQ(scheduler_->stats().gangs_placed, 1U);
  auto lock = mirror_->ReadLock();
  EXPECT_TRUE(mirror_->state().CheckInvariants().ok());
  EXPECT_TRUE(mirror_->state().Overcommits().empty());
}

// The rules of single-pod preemption hold for the group: it preempts only when every member finds room, never a
// pod of equal or higher priority, and not at all when a member may not preempt.
TEST_F(SchedulerPreemptionTest, AGangPreemptsNothingUnlessEveryMemberFindsRoom) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2));
  Running(Pod("low", {{"nvidia.com/gpu", "2"}}, 0));
  Running(Pod("high", {{"nvidia.com/gpu", "2"}}, 10));
  for (int i = 0; i < 2; ++i) {
    scheduler_->OnPod(EventType::kAdded, Prioritised(GangMember("g-" + std::to_string(i), "train", 2, 2), 10));
  }
  Drain();
  EXPECT_TRUE(preemptor_.evicted_.empty());
  EXPECT_TRUE(preemptor_.nominated_.empty());
  EXPECT_FALSE(Holds("nominated/uid-g-0"));
  EXPECT_FALSE(Holds("nominated/uid-g-1"));
  EXPECT_THAT(EventsFor("g-0", "FailedScheduling").back().message, Not(HasSubstr("preempt")));

  // One member of a group that fits with preemption may not preempt: nor does the group.
  json never = Prioritised(GangMember("n-0", "never", 2, 1), 10);
  never["spec"]["preemptionPolicy"] = "Never";
  scheduler_->OnPod(EventType::kAdded, never);
  scheduler_->OnPod(EventType::kAdded, Prioritised(GangMember("n-1", "never", 2, 1), 10));
  Drain();
  EXPECT_TRUE(preemptor_.evicted_.empty());
  EXPECT_THAT(EventsFor("n-1", "FailedScheduling").back().message, Not(HasSubstr("preempt")));
}

// A pod that preempts a gang member at its minimum takes the whole gang: its other members are evicted too (wherever
// they run), never leaving the group running short.
TEST_F(SchedulerPreemptionTest, PreemptingAGangMemberTakesTheWholeGang) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2));
  for (int i = 0; i < 2; ++i) {
    scheduler_->OnPod(EventType::kAdded, GangMember("g-" + std::to_string(i), "train", 2, 2));
  }
  Drain();
  ASSERT_EQ(BoundOf(binder_, "g-"), 2U);
  for (const core::Allocation& a : binder_.bound()) {
    scheduler_->OnPod(EventType::kModified,
                      AsBound(GangMember(a.pod.str().substr(4), "train", 2, 2), a, kube::EncodeAllocation(a)));
  }
  scheduler_->OnPod(EventType::kAdded, Pod("h", {{"nvidia.com/gpu", "2"}}, 10));
  Drain();
  std::vector<std::string> evicted = preemptor_.evicted_;
  std::sort(evicted.begin(), evicted.end());
  EXPECT_EQ(evicted, (std::vector<std::string>{"default/g-0@uid-g-0", "default/g-1@uid-g-1"}));
  EXPECT_THAT(EventsFor("h", "FailedScheduling").back().message, HasSubstr("preempting 2 pod(s) of lower priority"));
}

// A member that fits as the cluster is keeps its place as a held room while the others' victims leave: nothing
// binds early, and a refused eviction gives every room back.
TEST_F(SchedulerPreemptionTest, AGangWhoseEvictionIsRefusedGivesEveryRoomBack) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnNode(EventType::kAdded, Node("b", 2));
  Running(Pod("l", {{"nvidia.com/gpu", "2"}}, 0));
  preemptor_.refuse_ = "l";
  for (int i = 0; i < 2; ++i) {
    scheduler_->OnPod(EventType::kAdded, Prioritised(GangMember("g-" + std::to_string(i), "train", 2, 2), 10));
  }
  Drain();
  EXPECT_EQ(preemptor_.refused_, std::vector<std::string>{"default/l"});
  EXPECT_EQ(BoundOf(binder_, "g-"), 0U);
  EXPECT_FALSE(Holds("nominated/uid-g-0"));
  EXPECT_FALSE(Holds("nominated/uid-g-1"));
  ASSERT_EQ(EventsFor("g-0", "FailedPreemption").size(), 1U);
  EXPECT_THAT(EventsFor("g-0", "FailedPreemption")[0].message,
              HasSubstr("pod group default/train: evicting default/l"));
  EXPECT_THAT(EventsFor("g-0", "FailedScheduling").back().message, HasSubstr("preemption for the group failed"));
  EXPECT_EQ(preemptor_.nominated_.size(), 4U) << "each member nominated, then cleared";
  EXPECT_EQ(scheduler_->stats().preemption_failures, 1U);
  auto lock = mirror_->ReadLock();
  EXPECT_EQ(mirror_->state().Find(common::NodeName("a"))->gpus[0].holders +
                mirror_->state().Find(common::NodeName("b"))->gpus[0].holders,
            1)
      << "l only";
}

// A pod named into a group by the coscheduling label, without gpusched.io/min-available, takes its PodGroup's
// minMember: placed alone while no PodGroup is known, waiting for its members once it is.
TEST_F(SchedulerTest, TheCoschedulingPodGroupsMinMemberMakesAGang) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  auto member = [](const std::string& name) {
    json p = Pod(name, WholeGpu());
    p["metadata"]["labels"] = {{"scheduling.x-k8s.io/pod-group", "pg"}};
    return p;
  };
  const json pod_group = {{"apiVersion", "scheduling.x-k8s.io/v1alpha1"},
                          {"kind", "PodGroup"},
                          {"metadata", {{"namespace", "default"}, {"name", "pg"}}},
                          {"spec", {{"minMember", 3}}}};
  scheduler_->OnPodGroup(EventType::kAdded, pod_group);
  scheduler_->OnPod(EventType::kAdded, member("m-0"));
  scheduler_->OnPod(EventType::kAdded, member("m-1"));
  Drain();
  EXPECT_EQ(BoundOf(binder_, "m-"), 0U);
  EXPECT_THAT(EventsFor("m-0", "FailedScheduling").back().message,
              HasSubstr("pod group default/pg (min-available 3): 0 placed and 2 pending"));

  // The PodGroup lowers its minimum: the waiting members are tried again and placed.
  json two = pod_group;
  two["spec"]["minMember"] = 2;
  scheduler_->OnPodGroup(EventType::kModified, two);
  Drain();
  EXPECT_EQ(BoundOf(binder_, "m-"), 2U);
  EXPECT_EQ(scheduler_->stats().gangs_placed, 1U);

  // A PodGroup that cannot be read keeps its last version; pods whose min-available is given ignore the object.
  json broken = pod_group;
  broken["spec"]["minMember"] = "three";
  scheduler_->OnPodGroup(EventType::kModified, broken);
  json own = member("own-0");
  own["metadata"]["annotations"] = {{"gpusched.io/min-available", "1"}};
  scheduler_->OnPod(EventType::kAdded, own);
  Drain();
  EXPECT_EQ(BoundOf(binder_, "own-"), 1U) << "its own min-available 1: placed alone although the group says 2";

  // Without a PodGroup a labelled pod is placed alone.
  scheduler_->OnPodGroup(EventType::kDeleted, pod_group);
  scheduler_->OnPod(EventType::kAdded, member("m-2"));
  Drain();
  EXPECT_EQ(BoundOf(binder_, "m-"), 3U);
}

// Property: random clusters, running pods of random priorities, and gangs and single pods arriving in random order,
// with preemption on; the test plays the kubelet (bound pods shown bound, evicted pods shown gone) until nothing
// changes. After every step: no gang holds GPUs (assumed, bound or a held room) with fewer members than its
// minimum unless the rest hold rooms while victims leave, i.e. never a bound member of a gang not whole; the
// cluster's accounting holds and nothing is overcommitted; every victim was of lower priority than the pod or group
// that preempted it, and none was evicted twice. The seed comes from GPUSCHED_SEED (default fixed) and is printed
// on failure.
TEST_F(SchedulerPreemptionTest, RandomGangsAndPreemptionKeepEveryInvariant) {
  const char* env = std::getenv("GPUSCHED_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : 20261127ULL;
  SCOPED_TRACE("GPUSCHED_SEED=" + std::to_string(seed));
  common::Rng rng(seed);
  for (int round = 0; round < 25; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    Make(SchedulerOptions{.preemptor = &preemptor_});
    preemptor_ = RecordingPreemptor{};
    events_.clear();
    const size_t bound_from = binder_.bound().size();
    const int nodes = 2 + static_cast<int>(rng.Uniform(3));
    for (int n = 0; n < nodes; ++n) {
      scheduler_->OnNode(EventType::kAdded, Node("n" + std::to_string(n), 2 << rng.Uniform(3)));
    }
    std::map<std::string, json> pods;                       // by name, as last shown
    std::map<std::string, int32_t> priority;                // by name
    std::map<std::string, std::vector<std::string>> gangs;  // members by group
    std::map<std::string, size_t> gang_min;
    std::vector<json> arrivals;
    for (int i = 0; i < 4 + static_cast<int>(rng.Uniform(6)); ++i) {
      const std::string name = "s" + std::to_string(i);
      const auto prio = static_cast<int32_t>(rng.Uniform(6));
      arrivals.push_back(Pod(name, {{"nvidia.com/gpu", std::to_string(1 + rng.Uniform(4))}}, prio));
      priority[name] = prio;
    }
    for (int g = 0; g < 1 + static_cast<int>(rng.Uniform(3)); ++g) {
      const std::string group = "g" + std::to_string(g);
      const size_t members = 2 + rng.Uniform(3);
      const int gpus = 1 + static_cast<int>(rng.Uniform(4));
      const auto prio = static_cast<int32_t>(rng.Uniform(6));
      gang_min[group] = members;
      for (size_t m = 0; m < members; ++m) {
        const std::string name = group + "-" + std::to_string(m);
        arrivals.push_back(Prioritised(GangMember(name, group, static_cast<int>(members), gpus), prio));
        gangs[group].push_back(name);
        priority[name] = prio;
      }
    }
    for (size_t i = arrivals.size(); i > 1; --i) {  // a random order of arrival
      std::swap(arrivals[i - 1], arrivals[rng.Uniform(i)]);
    }
    size_t shown = bound_from;
    size_t gone = 0;
    std::set<std::string> evicted;
    // `settled`: every victim evicted so far is gone (while victims leave, a held room overlaps them by design).
    auto check = [&](bool settled) {
      auto lock = mirror_->ReadLock();
      const core::ClusterState& state = mirror_->state();
      ASSERT_TRUE(state.CheckInvariants().ok()) << state.CheckInvariants().message();
      ASSERT_TRUE(!settled || state.Overcommits().empty()) << [&] {
        std::string who =
            state.Overcommits().front().first.str() + ": " + state.Overcommits().front().second + "; on it:";
        for (const auto& p : state.PodsOn(state.Overcommits().front().first)) {
          who += " " + p.str();
        }
        return who;
      }();
      for (const auto& [group, members] : gangs) {
        size_t bound = 0, holding = 0;
        for (const std::string& m : members) {
          const common::PodUid uid("uid-" + m);
          bound += state.FindAllocation(uid) != nullptr ? 1U : 0U;
          holding += state.FindAllocation(uid) != nullptr ||
                             state.FindAllocation(common::PodUid("nominated/uid-" + m)) != nullptr
                         ? 1U
                         : 0U;
        }
        ASSERT_TRUE(bound == 0 || bound >= gang_min[group]) << group << ": " << bound << " bound";
        ASSERT_TRUE(holding == 0 || holding >= gang_min[group]) << group << ": " << holding << " holding";
      }
    };
    for (size_t step = 0; step < arrivals.size() + 20; ++step) {
      if (step < arrivals.size()) {
        pods[arrivals[step]["metadata"]["name"]] = arrivals[step];
        scheduler_->OnPod(EventType::kAdded, arrivals[step]);
      }
      Drain();
      check(preemptor_.evicted_.size() == gone);
      // The kubelet's part: bound pods show up bound; evicted ones terminate and go.
      for (; shown < binder_.bound().size(); ++shown) {
        const core::Allocation& a = binder_.bound()[shown];
        const std::string name = a.pod.str().substr(4);
        pods[name] = AsBound(pods[name], a, kube::EncodeAllocation(a));
        scheduler_->OnPod(EventType::kModified, pods[name]);
      }
      for (; gone < preemptor_.evicted_.size(); ++gone) {
        const std::string& e = preemptor_.evicted_[gone];
        const std::string name = e.substr(e.find('/') + 1, e.find('@') - e.find('/') - 1);
        ASSERT_TRUE(evicted.insert(name).second) << name << " evicted twice";
        ShowGone(*scheduler_, {pods[name]});
        pods.erase(name);
      }
      check(true);
    }
    // Each victim's Preempted event names its preemptor, of higher priority.
    for (const PodEvent& e : events_) {
      if (e.reason != "Preempted") {
        continue;
      }
      const std::string by = e.message.substr(std::string("Preempted by ").size());
      int32_t preemptor_priority = 0;
      if (by.starts_with("pod group default/")) {
        const std::string group = by.substr(std::string("pod group default/").size());
        preemptor_priority = priority.at(gangs.at(group).front());
      } else {
        preemptor_priority = priority.at(by.substr(std::string("default/").size(), by.find(' ') - 8));
      }
      EXPECT_LT(priority.at(e.name), preemptor_priority) << e.name << " preempted by " << by;
    }
  }
}

json InNamespace(json pod, const std::string& ns) {
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["uid"] = "uid-" + ns + "-" + pod["metadata"]["name"].get<std::string>();
  return pod;
}

json GpuQueue(const std::string& name, const std::string& ns, int guaranteed, int limit = -1, double weight = 1) {
  json q = {{"apiVersion", "gpusched.io/v1alpha1"},
            {"kind", "GpuQueue"},
            {"metadata", {{"name", name}}},
            {"spec", {{"namespaces", {ns}}, {"guaranteed", {{"gpus", guaranteed}}}, {"weight", weight}}}};
  if (limit >= 0) {
    q["spec"]["limit"] = {{"gpus", limit}};
  }
  return q;
}

size_t BoundIn(const testing::RecordingBinder& binder, const std::string& ns) {
  return static_cast<size_t>(std::count_if(binder.bound().begin(), binder.bound().end(),
                                           [&](const auto& a) { return a.pod.str().starts_with("uid-" + ns + "-"); }));
}

TEST_F(SchedulerTest, AQueueLimitKeepsPodsWaitingUntilOneOfItsPodsLeaves) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("team-a", "team-a", 0, 1));
  const json first = Running(InNamespace(Pod("p1", WholeGpu()), "team-a"));
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p2", WholeGpu()), "team-a"));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U) << "the queue's limit is one GPU";
  ASSERT_FALSE(EventsFor("p2", "FailedScheduling").empty());
  EXPECT_EQ(EventsFor("p2", "FailedScheduling").back().message, "queue team-a: gpus 2 > limit 1");
  // Pods of other namespaces go to the default queue, which has no limit.
  Running(Pod("other", WholeGpu()));
  auto status = scheduler_->QueueStatuses();
  ASSERT_EQ(status.size(), 2U);
  EXPECT_EQ(status[0].name, "default");
  EXPECT_EQ(status[0].allocated.gpus, 1);
  EXPECT_EQ(status[1].name, "team-a");
  EXPECT_EQ(status[1].allocated.gpus, 1);
  EXPECT_EQ(status[1].pending_pods, 1U);
  // The first pod ends: the second is woken by the quota it frees and runs.
  scheduler_->OnPod(EventType::kDeleted, first);
  Drain();
  ASSERT_EQ(binder_.bound().size(), 3U);
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-team-a-p2");
}

json Labelled(json pod, const std::string& queue) {
  pod["metadata"]["labels"]["gpusched.io/queue"] = queue;
  return pod;
}

TEST_F(SchedulerTest, APodCannotJoinAnotherTeamsQueueByLabel) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("team-a", "team-a", 0, 1));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("team-b", "team-b", 2));
  Running(InNamespace(Pod("p1", WholeGpu()), "team-a"));  // team-a is at its limit
  // Over its own queue's limit, a team-a pod names team-b's queue, then the default queue: it binds in neither.
  scheduler_->OnPod(EventType::kAdded, Labelled(InNamespace(Pod("jump", WholeGpu()), "team-a"), "team-b"));
  scheduler_->OnPod(EventType::kAdded, Labelled(InNamespace(Pod("jump2", WholeGpu()), "team-a"), "default"));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U) << "p1 only";
  ASSERT_FALSE(EventsFor("jump", "FailedScheduling").empty());
  EXPECT_EQ(EventsFor("jump", "FailedScheduling").back().message,
            "pods of namespace team-a may not join queue team-b: it admits namespaces team-b only");
  EXPECT_EQ(EventsFor("jump2", "FailedScheduling").back().message,
            "pods of namespace team-a may not join queue default: namespace team-a is served by queue team-a");
  // Nothing is charged to team-b; the pods count as team-a's demand.
  auto status = scheduler_->QueueStatuses();
  ASSERT_EQ(status.size(), 3U);
  EXPECT_EQ(status[2].name, "team-b");
  EXPECT_TRUE(status[2].allocated.IsZero());
  EXPECT_EQ(status[2].pending_pods, 0U);
  EXPECT_EQ(status[1].name, "team-a");
  EXPECT_EQ(status[1].pending_pods, 2U);
  // A pod bound by someone else with that label (before the rule, or by another scheduler) is charged to its own
  // namespace's queue, never to team-b: reclaim and preemption see it there.
  core::Allocation elsewhere = binder_.bound().back();
  elsewhere.pod = common::PodUid("uid-team-a-bound-elsewhere");
  elsewhere.containers.at(0).gpus.at(0).index = 3;
  elsewhere.containers.at(0).gpus.at(0).uuid = common::GpuUuid("GPU-a-3");
  scheduler_->OnPod(EventType::kAdded,
                    AsBound(Labelled(InNamespace(Pod("bound-elsewhere", WholeGpu()), "team-a"), "team-b"), elsewhere,
                            kube::EncodeAllocation(elsewhere)));
  status = scheduler_->QueueStatuses();
  EXPECT_TRUE(status[2].allocated.IsZero());
  EXPECT_EQ(status[1].allocated.gpus, 2);
}

TEST_F(SchedulerTest, AnInvalidQueueIsLeftOutAndItsPodsGoToTheDefaultQueue) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("bad", "team-b", 4, 2));
  EXPECT_EQ(scheduler_->QueueErrors()["bad"], "guaranteed gpus 4 exceeds its limit 2");
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p", WholeGpu()), "team-b"));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(scheduler_->QueueStatuses().size(), 1U);
  // Corrected, it takes its pods back; deleted, they return to the default queue.
  scheduler_->OnGpuQueue(EventType::kModified, GpuQueue("bad", "team-b", 2, 4));
  EXPECT_TRUE(scheduler_->QueueErrors().empty());
  ASSERT_EQ(scheduler_->QueueStatuses().size(), 2U);
  // By name: "bad", then "default". The pod, assumed (its binding not seen yet), counts in its queue already.
  EXPECT_EQ(scheduler_->QueueStatuses()[0].allocated.gpus, 1);
  EXPECT_EQ(scheduler_->QueueStatuses()[1].allocated.gpus, 0);
  ShowLastBound(InNamespace(Pod("p", WholeGpu()), "team-b"));
  EXPECT_EQ(scheduler_->QueueStatuses()[0].allocated.gpus, 1);
  scheduler_->OnGpuQueue(EventType::kDeleted, GpuQueue("bad", "team-b", 2, 4));
  ASSERT_EQ(scheduler_->QueueStatuses().size(), 1U);
  EXPECT_EQ(scheduler_->QueueStatuses()[0].allocated.gpus, 1);
}

TEST_F(SchedulerTest, IdleGpusAreLentInProportionToWeight) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("a", "ns-a", 0, -1, 1));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("b", "ns-b", 0, -1, 3));
  for (int i = 0; i < 4; ++i) {
    scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p" + std::to_string(i), WholeGpu()), "ns-a"));
    scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p" + std::to_string(i), WholeGpu()), "ns-b"));
  }
  Drain();
  // Fair shares 1 and 3 of the 4 GPUs: a (rank 0, first by name), then b while it is further below its share.
  EXPECT_EQ(BoundIn(binder_, "ns-a"), 1U);
  EXPECT_EQ(BoundIn(binder_, "ns-b"), 3U);
}

TEST_F(SchedulerPreemptionTest, AQueueWithinItsGuaranteeReclaimsFromABorrowerOnly) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 4));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("qa", "ns-a", 2));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("qb", "ns-b", 2));
  // qb borrows the idle half of the node, at a high priority.
  std::vector<json> b;
  for (int i = 0; i < 4; ++i) {
    b.push_back(Running(InNamespace(
        Pod("b" + std::to_string(i), WholeGpu(), 100, "2026-11-25T10:00:0" + std::to_string(i) + "Z"), "ns-b")));
  }
  // A pod of qa, within qa's guarantee, of a lower priority: it reclaims one GPU of qb (the newest of qb's pods).
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("a0", WholeGpu(), 0), "ns-a"));
  Drain();
  ASSERT_EQ(preemptor_.evicted_, std::vector<std::string>{"ns-b/b3@uid-ns-b-b3"});
  EXPECT_THAT(EventsFor("a0", "FailedScheduling").back().message,
              HasSubstr("1 reclaimed for queue qa's guarantee from queues beyond theirs"));
  scheduler_->OnPod(EventType::kDeleted, b[3]);
  Drain();
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-ns-a-a0");
  auto qb = scheduler_->QueueStatuses()[2];
  EXPECT_EQ(qb.name, "qb");
  EXPECT_EQ(qb.reclaimed_pods, 1U);
  ShowLastBound(InNamespace(Pod("a0", WholeGpu(), 0), "ns-a"));
  // A second one: qb still holds 3 > 2: one more.
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("a1", WholeGpu(), 0), "ns-a"));
  Drain();
  ASSERT_EQ(preemptor_.evicted_.size(), 2U);
  EXPECT_EQ(preemptor_.evicted_[1], "ns-b/b2@uid-ns-b-b2");
  scheduler_->OnPod(EventType::kDeleted, b[2]);
  Drain();
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-ns-a-a1");
  ShowLastBound(InNamespace(Pod("a1", WholeGpu(), 0), "ns-a"));
  // qa is at its guarantee: a third pod may not take from qb, which is within its own now, whatever the priorities
  // (qb's pods have priority 100, this one 0); of its own queue only pods of lower priority are victims (none here).
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("a2", WholeGpu(), 0), "ns-a"));
  Drain();
  EXPECT_EQ(preemptor_.evicted_.size(), 2U);
  EXPECT_THAT(EventsFor("a2", "FailedScheduling").back().message, Not(HasSubstr("preempting")));
}

TEST_F(SchedulerTest, QueueMetricsTellAllocationsSharesAndPendingPods) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("team-a", "team-a", 1, 1));
  Running(InNamespace(Pod("p1", WholeGpu()), "team-a"));
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p2", WholeGpu()), "team-a"));
  Drain();
  const std::string m = scheduler_->Metrics();
  EXPECT_THAT(m, HasSubstr("gpusched_queue_allocated{queue=\"team-a\",resource=\"gpus\"} 1"));
  EXPECT_THAT(m, HasSubstr("gpusched_queue_guaranteed{queue=\"team-a\",resource=\"milli\"} 1000"));
  EXPECT_THAT(m, HasSubstr("gpusched_queue_limit{queue=\"team-a\",resource=\"gpus\"} 1"));
  EXPECT_THAT(m, Not(HasSubstr("gpusched_queue_limit{queue=\"default\"")));  // unlimited
  EXPECT_THAT(m, HasSubstr("gpusched_queue_fair_share{queue=\"team-a\",resource=\"gpus\"} 1"));
  EXPECT_THAT(m, HasSubstr("gpusched_queue_pending_pods{queue=\"team-a\"} 1"));
  EXPECT_THAT(m, HasSubstr("gpusched_queue_reclaimed_pods_total{queue=\"team-a\"} 0"));
}

TEST_F(SchedulerTest, QueueStatusSaysWhatTheQueueHoldsOrWhyItIsLeftOut) {
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("team-a", "team-a", 1, 2));
  scheduler_->OnGpuQueue(EventType::kAdded, GpuQueue("bad", "team-b", 3, 2));
  Running(InNamespace(Pod("p1", WholeGpu()), "team-a"));
  auto status = scheduler_->QueueStatusObjects();
  ASSERT_EQ(status.size(), 2U);
  EXPECT_EQ(status["team-a"]["allocated"], json::parse(R"({"gpus": 1, "gpuMilli": 1000, "gpuMemoryMiB": 0})"));
  EXPECT_EQ(status["team-a"]["limit"], json::parse(R"({"gpus": 2, "gpuMilli": 2000})"));
  EXPECT_EQ(status["team-a"]["runningPods"], 1);
  EXPECT_EQ(status["team-a"]["conditions"][0]["status"], "True");
  EXPECT_EQ(status["bad"]["conditions"][0]["status"], "False");
  EXPECT_EQ(status["bad"]["conditions"][0]["message"],
            "left out (its pods go to the default queue): guaranteed gpus 3 exceeds its limit 2");
  EXPECT_TRUE(status["bad"]["allocated"].is_null()) << "a merge patch must remove what a valid version wrote";
  // A status-only update of the object (what writing the status causes) changes nothing.
  json with_status = GpuQueue("team-a", "team-a", 1, 2);
  with_status["status"] = status["team-a"];
  scheduler_->OnGpuQueue(EventType::kModified, with_status);
  EXPECT_EQ(scheduler_->QueueStatusObjects()["team-a"], status["team-a"]);
}

// With the spread policy a lone pod goes to the emptiest node; a gang's members still share nodes: after the first,
// each goes to a node the group already uses while it fits there.
TEST_F(SchedulerTest, AGangPrefersTheNodesItAlreadyUses) {
  SchedulerOptions options;
  options.policy = "spread";
  Make(options);
  for (const char* n : {"a", "b", "c", "d"}) {
    scheduler_->OnNode(EventType::kAdded, Node(n, 8));
  }
  for (int i = 0; i < 4; ++i) {
    scheduler_->OnPod(EventType::kAdded, GangMember("g-" + std::to_string(i), "train", 4, 2));
  }
  Drain();
  ASSERT_EQ(BoundOf(binder_, "g-"), 4U);
  std::set<std::string> nodes;
  for (const core::Allocation& a : binder_.bound()) {
    nodes.insert(a.node.str());
  }
  EXPECT_EQ(nodes.size(), 1U) << "4 members x 2 GPUs fit one node of 8";
  // Single pods still spread.
  scheduler_->OnPod(EventType::kAdded, Pod("lone-0", {{"nvidia.com/gpu", "2"}}));
  scheduler_->OnPod(EventType::kAdded, Pod("lone-1", {{"nvidia.com/gpu", "2"}}));
  Drain();
  ASSERT_EQ(binder_.bound().size(), 6U);
  EXPECT_NE(binder_.bound()[4].node, binder_.bound()[5].node);
}

// shareWithin: namespace. Pods of two namespaces never share a GPU: the second namespace's share goes to another GPU,
// a third namespace finds none (the reason names shareWithin), and a scheduler that starts afresh and rebuilds its
// state from the bound pods' annotations refuses the same.
TEST_F(SchedulerTest, ShareWithinNamespaceKeepsTenantsOffEachOthersSharedGpus) {
  SchedulerOptions options;
  options.resources.share_within = core::ShareWithin::kNamespace;
  Make(options);
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  std::vector<json> bound;
  bound.push_back(Running(InNamespace(Pod("p1", Share(30)), "team-a")));
  const int32_t gpu_a = binder_.bound().back().containers[0].gpus[0].index;
  bound.push_back(Running(InNamespace(Pod("p2", Share(30)), "team-b")));
  const int32_t gpu_b = binder_.bound().back().containers[0].gpus[0].index;
  EXPECT_NE(gpu_a, gpu_b) << "team-b may not share team-a's GPU";
  bound.push_back(Running(InNamespace(Pod("p3", Share(30)), "team-a")));
  EXPECT_EQ(binder_.bound().back().containers[0].gpus[0].index, gpu_a) << "team-a shares its own GPU";
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p4", Share(30)), "team-c"));
  Drain();
  EXPECT_EQ(binder_.bound().size(), 3U);
  ASSERT_FALSE(EventsFor("p4", "FailedScheduling").empty());
  EXPECT_THAT(EventsFor("p4", "FailedScheduling").back().message, HasSubstr("shareWithin"));
  {
    auto lock = mirror_->ReadLock();
    EXPECT_TRUE(mirror_->state().CheckInvariants().ok());
  }
  // Afresh, from what the watch shows.
  const size_t binds = binder_.bound().size();
  Make(options);
  scheduler_->OnNode(EventType::kAdded, Node("a", 2));
  for (const json& pod : bound) {
    scheduler_->OnPod(EventType::kAdded, pod);
  }
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p4", Share(30)), "team-c"));
  scheduler_->OnPod(EventType::kAdded, InNamespace(Pod("p5", Share(30)), "team-b"));
  Drain();
  ASSERT_EQ(binder_.bound().size(), binds + 1) << "only team-b's pod binds";
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-team-b-p5");
  EXPECT_EQ(binder_.bound().back().containers[0].gpus[0].index, gpu_b);
  // team-b's pods leave: their GPU is anyone's again.
  scheduler_->OnPod(EventType::kDeleted, bound[1]);
  scheduler_->OnPod(EventType::kDeleted, AsBound(InNamespace(Pod("p5", Share(30)), "team-b"), binder_.bound().back(),
                                                 kube::EncodeAllocation(binder_.bound().back())));
  Drain();
  ASSERT_EQ(binder_.bound().size(), binds + 2);
  EXPECT_EQ(binder_.bound().back().pod.str(), "uid-team-c-p4");
  EXPECT_EQ(binder_.bound().back().containers[0].gpus[0].index, gpu_b);
}

}  // namespace
}  // namespace gpusched::scheduler
