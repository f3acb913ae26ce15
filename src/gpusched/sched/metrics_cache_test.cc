#include "gpusched/sched/metrics_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/common/log.h"
#include "gpusched/testing/fake_metrics_source.h"

namespace gpusched::sched {
namespace {

using common::GpuUuid;
using core::GpuMetric;
using testing::FakeMetricsSource;
using ::testing::HasSubstr;

// 2024-01-01T12:00:00Z
constexpr int64_t kT0 = 1704110400000;

// A cache over fakes with a scripted clock; the fakes stay reachable through raw pointers.
struct Fixture {
  std::vector<FakeMetricsSource*> fakes;
  std::shared_ptr<std::atomic<int64_t>> now = std::make_shared<std::atomic<int64_t>>(kT0);
  std::unique_ptr<MetricsCache> cache;

  explicit Fixture(std::vector<std::string> names) {
    std::vector<std::unique_ptr<ports::MetricsSource>> sources;
    for (const auto& n : names) {
      auto f = std::make_unique<FakeMetricsSource>(n);
      fakes.push_back(f.get());
      sources.push_back(std::move(f));
    }
    cache = std::make_unique<MetricsCache>(std::move(sources),
                                           MetricsCacheOptions{.now_ms = [c = now] { return c->load(); }});
  }
};

std::optional<double> Value(const core::GpuMetricsMap& m, const std::string& uuid, GpuMetric metric) {
  const auto it = m.find(GpuUuid(uuid));
  if (it == m.end() || !it->second.Get(metric).has_value()) {
    return std::nullopt;
  }
  return it->second.Get(metric)->value;
}

TEST(MetricsCacheTest, EmptyBeforeTheFirstRefresh) {
  Fixture f({"fake"});
  ASSERT_NE(f.cache->Current(), nullptr);
  EXPECT_TRUE(f.cache->Current()->empty());
  EXPECT_EQ(f.cache->generation(), 0u);
  EXPECT_EQ(f.cache->Degraded(), "");
}

TEST(MetricsCacheTest, PublishesAndBumpsGenerationOnlyOnChange) {
  Fixture f({"fake"});
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 80, kT0);
  f.cache->RefreshOnce();
  EXPECT_EQ(f.cache->generation(), 1u);
  const auto first = f.cache->Current();
  EXPECT_EQ(Value(*first, "GPU-a", GpuMetric::kGpuUtil), 80);

  // Same data: no new snapshot, same generation, the very same pointer.
  f.cache->RefreshOnce();
  EXPECT_EQ(f.cache->generation(), 1u);
  EXPECT_EQ(f.cache->Current().get(), first.get());

  // A new sample: new snapshot; the old one a reader holds is unchanged.
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 10, kT0 + 15000);
  f.cache->RefreshOnce();
  EXPECT_EQ(f.cache->generation(), 2u);
  EXPECT_EQ(Value(*f.cache->Current(), "GPU-a", GpuMetric::kGpuUtil), 10);
  EXPECT_EQ(Value(*first, "GPU-a", GpuMetric::kGpuUtil), 80);
  EXPECT_EQ(f.cache->refreshes(), 3);
}

TEST(MetricsCacheTest, MergesSourcesNewestSampleWins) {
  Fixture f({"prom", "influx"});
  // GPU-a util: prom t0+1s (50) vs influx t0+2s (60) -> influx's 60.  GPU-a memory only from prom.
  // GPU-b util: prom t0+5s (7) vs influx t0+5s (9) -> tie keeps the earlier source: prom's 7.  GPU-c only influx.
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 50, kT0 + 1000);
  f.fakes[0]->Set("GPU-a", GpuMetric::kMemoryUsedMib, 4096, kT0 + 1000);
  f.fakes[0]->Set("GPU-b", GpuMetric::kGpuUtil, 7, kT0 + 5000);
  f.fakes[1]->Set("GPU-a", GpuMetric::kGpuUtil, 60, kT0 + 2000);
  f.fakes[1]->Set("GPU-b", GpuMetric::kGpuUtil, 9, kT0 + 5000);
  f.fakes[1]->Set("GPU-c", GpuMetric::kPowerW, 300, kT0);
  f.cache->RefreshOnce();
  const auto m = f.cache->Current();
  EXPECT_EQ(m->size(), 3u);
  EXPECT_EQ(Value(*m, "GPU-a", GpuMetric::kGpuUtil), 60);
  EXPECT_EQ(m->at(GpuUuid("GPU-a")).Get(GpuMetric::kGpuUtil)->timestamp_ms, kT0 + 2000);
  EXPECT_EQ(Value(*m, "GPU-a", GpuMetric::kMemoryUsedMib), 4096);
  EXPECT_EQ(Value(*m, "GPU-b", GpuMetric::kGpuUtil), 7);
  EXPECT_EQ(Value(*m, "GPU-c", GpuMetric::kPowerW), 300);
  EXPECT_FALSE(Value(*m, "GPU-c", GpuMetric::kGpuUtil).has_value());
}

TEST(MetricsCacheTest, AFailingSourceKeepsItsSamplesWhichAgeOutByStaleness) {
  std::vector<std::string> lines;
  common::SetLogSink([&](common::LogLevel, std::string_view line) { lines.emplace_back(line); });
  Fixture f({"prometheus http://p:9090"});
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 80, kT0);
  f.cache->RefreshOnce();
  ASSERT_EQ(f.cache->generation(), 1u);

  // Down for three refreshes, 15 s apart, starting at 12:00:15Z.
  f.fakes[0]->Fail(common::Unavailable("Couldn't connect to server"));
  for (int i = 1; i <= 3; ++i) {
    *f.now = kT0 + 15000 * i;
    f.cache->RefreshOnce();
  }
  // The last samples are still served, unchanged.
  EXPECT_EQ(f.cache->generation(), 1u);
  const auto m = f.cache->Current();
  EXPECT_EQ(Value(*m, "GPU-a", GpuMetric::kGpuUtil), 80);
  EXPECT_EQ(f.cache->Degraded(),
            "metrics source prometheus http://p:9090: Couldn't connect to server (3 failures since 12:00:15Z)");
  const auto health = f.cache->Health();
  ASSERT_EQ(health.size(), 1u);
  EXPECT_FALSE(health[0].ok);
  EXPECT_EQ(health[0].consecutive_failures, 3);
  EXPECT_EQ(health[0].last_success_ms, kT0);
  EXPECT_EQ(health[0].failing_since_ms, kT0 + 15000);
  EXPECT_EQ(health[0].refreshes_total, 4);
  EXPECT_EQ(health[0].refresh_errors_total, 3);
  EXPECT_EQ(health[0].gpus, 1);
  // The reader's staleness bound (60 s): fresh at t0+45s (45 s old), unknown at t0+61s.
  const core::GpuMetrics& a = m->at(GpuUuid("GPU-a"));
  EXPECT_EQ(a.Fresh(GpuMetric::kGpuUtil, kT0 + 45000, 60000), 80);
  EXPECT_FALSE(a.Fresh(GpuMetric::kGpuUtil, kT0 + 61000, 60000).has_value());

  // Back: one log line for down (on the first failure), one for back; Degraded clears.
  f.fakes[0]->Recover();
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 20, kT0 + 60000);
  *f.now = kT0 + 60000;
  f.cache->RefreshOnce();
  EXPECT_EQ(f.cache->Degraded(), "");
  EXPECT_EQ(f.cache->generation(), 2u);
  EXPECT_EQ(Value(*f.cache->Current(), "GPU-a", GpuMetric::kGpuUtil), 20);
  EXPECT_TRUE(f.cache->Health()[0].ok);
  common::SetLogSink([](common::LogLevel, std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  });
  ASSERT_EQ(lines.size(), 2u) << ::testing::PrintToString(lines);
  EXPECT_THAT(lines[0], HasSubstr("metrics source prometheus http://p:9090 is down: Couldn't connect to server"));
  EXPECT_THAT(lines[1], HasSubstr("is back after 3 failed refreshes (down since 12:00:15Z)"));
}

TEST(MetricsCacheTest, DegradedListsEveryFailingSource) {
  Fixture f({"a", "b", "c"});
  f.fakes[0]->Fail(common::DeadlineExceeded("timeout after 5000 ms"));
  f.fakes[2]->Fail(common::InvalidArgument("bad_data: parse error"));
  f.cache->RefreshOnce();
  // Never succeeded: nothing to serve, and both failing sources are named; b is healthy.
  EXPECT_TRUE(f.cache->Current()->empty());
  EXPECT_EQ(f.cache->Degraded(),
            "metrics source a: timeout after 5000 ms (1 failure since 12:00:00Z); "
            "metrics source c: bad_data: parse error (1 failure since 12:00:00Z)");
  EXPECT_EQ(f.cache->Health()[0].last_success_ms, 0);
}

TEST(MetricsCacheTest, AGpuThatLeavesTheSourceLeavesTheCache) {
  Fixture f({"fake"});
  f.fakes[0]->Set("GPU-a", GpuMetric::kGpuUtil, 1, kT0);
  f.fakes[0]->Set("GPU-b", GpuMetric::kGpuUtil, 2, kT0);
  f.cache->RefreshOnce();
  f.fakes[0]->Remove("GPU-b");
  f.cache->RefreshOnce();
  EXPECT_EQ(f.cache->Current()->size(), 1u);
  EXPECT_EQ(f.cache->generation(), 2u);
}

TEST(MetricsCacheTest, StartRefreshesInTheBackgroundAndStops) {
  // A long interval: the first refresh runs at once, the next would be an hour later.
  auto cache = std::make_unique<MetricsCache>(
      [&] {
        std::vector<std::unique_ptr<ports::MetricsSource>> v;
        auto fake = std::make_unique<FakeMetricsSource>("bg");
        fake->Set("GPU-a", GpuMetric::kGpuUtil, 5, kT0);
        v.push_back(std::move(fake));
        return v;
      }(),
      MetricsCacheOptions{.interval = std::chrono::hours(1)});
  ASSERT_TRUE(cache->Start().ok());
  EXPECT_EQ(cache->Start().code(), common::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cache->WaitForRefreshes(1, std::chrono::seconds(30)));
  EXPECT_EQ(Value(*cache->Current(), "GPU-a", GpuMetric::kGpuUtil), 5);
  cache->Stop();  // returns without waiting for the hour
  EXPECT_EQ(cache->refreshes(), 1);
  MetricsCache zero({}, {.interval = std::chrono::milliseconds(0)});
  EXPECT_EQ(zero.Start().code(), common::StatusCode::kFailedPrecondition);
}

TEST(MetricsCacheTest, SameMetricsComparesValuesAndTimes) {
  core::GpuMetricsMap a;
  a[GpuUuid("g")].Set(GpuMetric::kGpuUtil, {.value = 1, .timestamp_ms = 5});
  core::GpuMetricsMap b = a;
  EXPECT_TRUE(SameMetrics(a, b));
  b[GpuUuid("g")].Set(GpuMetric::kGpuUtil, {.value = 1, .timestamp_ms = 6});
  EXPECT_FALSE(SameMetrics(a, b));
  b = a;
  b[GpuUuid("g")].Set(GpuMetric::kPowerW, {.value = 1, .timestamp_ms = 5});
  EXPECT_FALSE(SameMetrics(a, b));
  b = a;
  b[GpuUuid("h")];
  EXPECT_FALSE(SameMetrics(a, b));
}

}  // namespace
}  // namespace gpusched::sched
