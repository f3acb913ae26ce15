// load-aware end to end through the scheduling cycle (sched::CycleRunner, as the simulator and the extender run it):
// pods land on GPUs that live metrics show idle, because of those metrics; stale metrics fall back to the static
// attributes; a metrics refresh (a new generation) moves the next pods, score cache and all. No servers needed:
// the metrics map is what the background cache would hand over.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/testing/builders.h"

namespace gpusched {
namespace {

constexpr int64_t kNow = 1'700'000'000'000;

// a1: 4 busy A100s. a2: A100s, GPUs 0-1 busy, 2-3 idle. t1: 4 idle T4s.
core::ClusterState Cluster() {
  core::ClusterState state;
  EXPECT_TRUE(state.AddNode(testing::Node("a1").Gpus(4, "A100-SXM4-80GB", 81920).Build()).ok());
  EXPECT_TRUE(state.AddNode(testing::Node("a2").Gpus(4, "A100-SXM4-80GB", 81920).Build()).ok());
  EXPECT_TRUE(state.AddNode(testing::Node("t1").Gpus(4, "T4", 15360).Build()).ok());
  return state;
}

void SetGpu(core::GpuMetricsMap& m, const std::string& node, int gpu, double util, double used_mib, int64_t ts) {
  core::GpuMetrics& g = m[common::GpuUuid("GPU-" + node + "-" + std::to_string(gpu))];
  g.Set(core::GpuMetric::kGpuUtil, {.value = util, .timestamp_ms = ts});
  g.Set(core::GpuMetric::kMemoryUsedMib, {.value = used_mib, .timestamp_ms = ts});
  g.Set(core::GpuMetric::kTemperatureC, {.value = util > 50 ? 80.0 : 35.0, .timestamp_ms = ts});
}

// Busy: util 95 %, 70000 MiB used. Idle: util 2 %, 500 MiB used.
core::GpuMetricsMap Metrics(int64_t ts) {
  core::GpuMetricsMap m;
  for (int g = 0; g < 4; ++g) {
    SetGpu(m, "a1", g, 95, 70000, ts);
    SetGpu(m, "a2", g, g < 2 ? 95 : 2, g < 2 ? 70000 : 500, ts);
    SetGpu(m, "t1", g, 0, 0, ts);
  }
  return m;
}

std::unique_ptr<policy::PlacementPolicy> LoadAware() {
  auto p = policy::MakePolicy("load-aware", {});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

// node/GPU of each pod's single GPU.
std::string Placed(const core::Allocation& a) {
  return a.node.str() + "/" + std::to_string(a.containers.at(0).gpus.at(0).index);
}

std::vector<std::string> ScheduleWholeGpuPods(core::ClusterState& state, sched::CycleRunner& runner,
                                              const policy::Snapshot& snapshot, int n, const std::string& prefix) {
  common::Rng rng(42);
  std::vector<std::string> out;
  for (int k = 0; k < n; ++k) {
    auto r = runner.Schedule(testing::Pod(prefix + std::to_string(k)).Cpu(1000).Gpus(1).Build(), state, snapshot, rng);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->allocation.has_value()) {
      out.emplace_back("-");
      continue;
    }
    out.push_back(Placed(*r->allocation));
  }
  return out;
}

TEST(LoadAwareIntegrationTest, PodsLandOnIdleGpusBecauseOfMetrics) {
  const auto policy = LoadAware();
  const core::GpuMetricsMap metrics = Metrics(kNow - 5000);
  const policy::Snapshot snapshot{.gpu_metrics = &metrics, .now_ms = kNow, .metrics_generation = 1};
  core::ClusterState state = Cluster();
  sched::CycleRunner runner(*policy, {});
  // Default weights; A100 static sum 708.97, T4 174.95 (load_aware_policy_test.cc).
  //   idle A100 (util 2, 500/81920 used, 35 °C = 8.3 %): (708.97 + 30·98 + 20·99.39 + 5·91.67) / 75 = 81.8
  //   idle T4 (util 0, 0 used, 35 °C): (174.95 + 3000 + 2000 + 458.3) / 75 = 75.1
  //   busy A100 (util 95, 70000 used, 80 °C = 83.3 %): (708.97 + 150 + 290.9 + 83.3) / 75 = 16.4
  // -> a2's two idle GPUs first, then the four idle T4s, and only then the busy A100s.
  const std::vector<std::string> placed = ScheduleWholeGpuPods(state, runner, snapshot, 6, "p");
  const std::vector<std::string> want = {"a2/2", "a2/3", "t1/0", "t1/1", "t1/2", "t1/3"};
  EXPECT_EQ(placed, want);
  EXPECT_TRUE(state.CheckInvariants().ok());

  // The 7th pod has only busy GPUs left: a1 and a2's GPUs 0-1 score alike, and it still gets one.
  const std::vector<std::string> seventh = ScheduleWholeGpuPods(state, runner, snapshot, 1, "q");
  ASSERT_EQ(seventh.size(), 1U);
  EXPECT_TRUE(seventh[0].starts_with("a1/") || seventh[0].starts_with("a2/")) << seventh[0];
}

TEST(LoadAwareIntegrationTest, WithoutMetricsTheChoiceIsStatic) {
  // The same cluster with no metrics: the A100 nodes (35) beat the T4 node (9), and inside a node the lowest-index
  // free GPU (best fit): a busy GPU 0 is taken, because nothing says it is busy.
  const auto policy = LoadAware();
  core::ClusterState state = Cluster();
  sched::CycleRunner runner(*policy, {});
  const std::vector<std::string> placed = ScheduleWholeGpuPods(state, runner, policy::Snapshot{}, 1, "p");
  ASSERT_EQ(placed.size(), 1U);
  EXPECT_TRUE(placed[0] == "a1/0" || placed[0] == "a2/0") << placed[0];
}

TEST(LoadAwareIntegrationTest, StaleMetricsFallBackToStaticAttributes) {
  // Samples 10 minutes old at now (staleness 30 s) are unknown: the choice is the static one (an A100 node,
  // lowest-index free GPU), so pods land on GPUs 0-1, which the old samples call busy.
  const auto policy = LoadAware();
  const int64_t sampled = kNow - 600'000;
  const core::GpuMetricsMap metrics = Metrics(sampled);
  const policy::Snapshot stale{.gpu_metrics = &metrics, .now_ms = kNow, .staleness_ms = 30000, .metrics_generation = 1};
  core::ClusterState state = Cluster();
  sched::CycleRunner runner(*policy, {});
  for (const std::string& p : ScheduleWholeGpuPods(state, runner, stale, 2, "p")) {
    EXPECT_TRUE(p == "a1/0" || p == "a1/1" || p == "a2/0" || p == "a2/1") << p;
  }
  // The same samples judged 1 s after they were taken are fresh: the next pod goes to a2's idle GPU 2 (the
  // runner's score cache sees a different now and recomputes).
  const policy::Snapshot fresh{.gpu_metrics = &metrics, .now_ms = sampled + 1000, .metrics_generation = 1};
  EXPECT_EQ(ScheduleWholeGpuPods(state, runner, fresh, 1, "q"), std::vector<std::string>{"a2/2"});
}

TEST(LoadAwareIntegrationTest, ARefreshMovesTheNextPodsDespiteTheScoreCache) {
  const auto policy = LoadAware();
  core::ClusterState state = Cluster();
  sched::CycleRunner runner(*policy, {.use_score_cache = true});
  const core::GpuMetricsMap before = Metrics(kNow - 5000);
  const policy::Snapshot s1{.gpu_metrics = &before, .now_ms = kNow, .metrics_generation = 1};
  EXPECT_EQ(ScheduleWholeGpuPods(state, runner, s1, 1, "p"), std::vector<std::string>{"a2/2"});

  // The next refresh: a1's jobs ended (idle), a2 and t1 got busy. Same map object, new generation.
  core::GpuMetricsMap after = before;
  for (int g = 0; g < 4; ++g) {
    SetGpu(after, "a1", g, 1, 300, kNow + 10000);
    SetGpu(after, "a2", g, 97, 75000, kNow + 10000);
    SetGpu(after, "t1", g, 99, 15000, kNow + 10000);
  }
  const policy::Snapshot s2{.gpu_metrics = &after, .now_ms = kNow + 12000, .metrics_generation = 2};
  EXPECT_EQ(ScheduleWholeGpuPods(state, runner, s2, 2, "q"), (std::vector<std::string>{"a1/0", "a1/1"}));
}

}  // namespace
}  // namespace gpusched
