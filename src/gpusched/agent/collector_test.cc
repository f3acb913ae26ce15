#include "gpusched/agent/collector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "gpusched/adapters/nvml/fake_inventory.h"

namespace gpusched::agent {
namespace {

using adapters::nvml::FakeInventory;
using common::StatusCode;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr milliseconds kDeadline{10000};

bool WaitFor(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

struct Fixture {
  FakeInventory* fake = nullptr;  // owned by the collector
  std::unique_ptr<Collector> collector;
};

Fixture Make(const std::string& spec, CollectorOptions options = {}) {
  auto inv = FakeInventory::Create(spec, {.node_name = "n1"});
  EXPECT_TRUE(inv.ok()) << inv.status();
  Fixture f;
  f.fake = inv->get();
  f.collector = std::make_unique<Collector>(std::move(inv).value(), std::move(options));
  return f;
}

TEST(CollectorTest, SampleOnceMakesASnapshot) {
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  auto f = Make("2xT4", {.clock = [t] { return t; }});
  EXPECT_EQ(f.collector->Latest(), nullptr);
  ASSERT_TRUE(f.fake->SetUtilization(1, 42).ok());
  ASSERT_TRUE(f.collector->SampleOnce().ok());
  auto snap = f.collector->Latest();
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->sequence, 1u);
  EXPECT_EQ(snap->time, t);
  ASSERT_EQ(snap->samples.size(), 2u);
  EXPECT_EQ(snap->samples[1].gpu_utilization, 42);
  const std::string page = f.collector->RenderMetrics({}, {}, "n1");
  EXPECT_THAT(page, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",UUID=\"GPU-fake-n1-1\""));
  EXPECT_THAT(page, HasSubstr("Hostname=\"n1\",hostname=\"n1\"} 42\n"));
  EXPECT_THAT(page, HasSubstr("gpusched_agent_samples_total 1\n"));
  EXPECT_THAT(page, HasSubstr("gpusched_agent_sample_errors_total 0\n"));
  EXPECT_THAT(page, HasSubstr("gpusched_agent_last_sample_timestamp_seconds 1700000000\n"));
}

TEST(CollectorTest, ErrorsAreCountedAndTheLastSnapshotIsKept) {
  auto f = Make("1xT4");
  ASSERT_TRUE(f.collector->SampleOnce().ok());
  f.fake->SetSampleError(common::Unavailable("driver gone"));
  EXPECT_EQ(f.collector->SampleOnce().code(), StatusCode::kUnavailable);
  EXPECT_EQ(f.collector->SampleOnce().code(), StatusCode::kUnavailable);
  EXPECT_EQ(f.collector->sample_errors(), 2u);
  EXPECT_THAT(f.collector->last_error().message(), HasSubstr("driver gone"));
  ASSERT_NE(f.collector->Latest(), nullptr);
  EXPECT_EQ(f.collector->Latest()->sequence, 1u);
  EXPECT_THAT(f.collector->RenderMetrics({}, {}, ""), HasSubstr("gpusched_agent_sample_errors_total 2\n"));
  EXPECT_THAT(f.collector->RenderMetrics({}, {}, ""), HasSubstr("DCGM_FI_DEV_GPU_UTIL{"));
  f.fake->SetSampleError(common::Status::Ok());
  EXPECT_TRUE(f.collector->SampleOnce().ok());
  EXPECT_TRUE(f.collector->last_error().ok());
  EXPECT_EQ(f.collector->Latest()->sequence, 2u);
}

TEST(CollectorTest, NoSnapshotYetServesOnlyTheAgentCounters) {
  auto f = Make("1xT4");
  f.fake->SetSampleError(common::Unavailable("no driver"));
  const std::string page = f.collector->RenderMetrics({}, {}, "n1");
  EXPECT_THAT(page, Not(HasSubstr("DCGM_")));
  EXPECT_THAT(page, HasSubstr("gpusched_agent_samples_total 0\n"));
}

TEST(CollectorTest, ThreadSamplesAtTheIntervalAndStops) {
  std::atomic<uint64_t> seen{0};
  auto f =
      Make("4xA100-80GB", {.interval = milliseconds(5), .on_sample = [&](const GpuSnapshot& s) { seen = s.sequence; }});
  ASSERT_TRUE(f.collector->Start().ok());
  EXPECT_GE(f.collector->samples_taken(), 1u);  // the first sample is taken before Start returns
  EXPECT_EQ(f.collector->Start().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(f.fake->SetUtilization(2, 77).ok());
  ASSERT_TRUE(WaitFor([&] {
    auto s = f.collector->Latest();
    return s->sequence >= 5 && s->samples[2].gpu_utilization == 77;
  }));
  EXPECT_GE(seen.load(), 5u);
  f.collector->Stop();
  const uint64_t after_stop = f.collector->samples_taken();
  std::this_thread::sleep_for(milliseconds(30));  // checks that nothing happens, not a wait for something
  EXPECT_EQ(f.collector->samples_taken(), after_stop);
  f.collector->Stop();  // idempotent
}

TEST(CollectorTest, RejectsAZeroInterval) {
  auto f = Make("1xT4", {.interval = milliseconds(0)});
  EXPECT_EQ(f.collector->Start().code(), StatusCode::kInvalidArgument);
}

TEST(CollectorTest, ReadersAndTheSamplerRunConcurrently) {
  auto f = Make("8xH100-80GB", {.interval = milliseconds(1)});
  ASSERT_TRUE(f.collector->Start().ok());
  std::atomic<bool> done{false};
  std::thread scripter([&] {
    for (int i = 0; !done; ++i) {
      (void)f.fake->SetUtilization(i % 8, i % 100);
      std::this_thread::yield();
    }
  });
  const PodAttribution pods = {{common::GpuUuid("GPU-fake-n1-0"), {{"ns", "p", "c"}}}};
  for (int i = 0; i < 200; ++i) {
    const std::string page = f.collector->RenderMetrics(pods, {}, "n1");
    ASSERT_THAT(page, HasSubstr("pod=\"p\""));
  }
  done = true;
  scripter.join();
  f.collector->Stop();
}

}  // namespace
}  // namespace gpusched::agent
