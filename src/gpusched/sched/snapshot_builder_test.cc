#include "gpusched/sched/snapshot_builder.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/testing/builders.h"
#include "gpusched/testing/fake_metrics_source.h"
#include "gpusched/testing/fake_slowdown_model.h"

namespace gpusched::sched {
namespace {

core::Allocation Share(const std::string& pod, int32_t gpu) {
  return core::Allocation{
      .pod = common::PodUid(pod),
      .node = common::NodeName("n1"),
      .containers = {core::ContainerAllocation{
          .container = "main",
          .gpus = {core::GpuShare{.index = gpu, .milli = common::MilliGpu{300}, .memory = common::MiB{0}}}}}};
}

std::unique_ptr<policy::PlacementPolicy> Make(const std::string& name) {
  auto p = policy::MakePolicy(name, policy::PolicyOptions{.target_workload = policy::DefaultTargetWorkload()});
  EXPECT_TRUE(p.ok()) << p.status().message();
  return std::move(p).value();
}

// Without sources the snapshot is empty and policies that read something are not provided for; with a metrics
// cache it carries the cache's current map and generation, judged at the whole second of the injected wall clock;
// with a model, each forecast wanted gets a new number and covers the pods of the given slots.
TEST(SnapshotBuilderTest, BuildsWhatItIsGivenAndNumbersEveryForecast) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("n1").Gpus(2, "A100", 40960).Build()).ok());
  ASSERT_TRUE(state.Assume(Share("resident", 0)).ok());
  const std::vector<size_t> slots = {*state.SlotOf(common::NodeName("n1"))};
  const AppOfPod app_of = [](const common::PodUid&) { return std::string("noisy"); };
  const auto load_aware = Make("load-aware");
  const auto interference = Make("interference-aware");
  const auto binpack = Make("binpack");
  const std::vector<const policy::PlacementPolicy*> both = {binpack.get(), interference.get()};

  SnapshotBuilder empty;
  SnapshotBuilder::Hold hold;
  policy::Snapshot s = empty.Build("vgg", state, slots, app_of, /*forecast=*/true, hold);
  EXPECT_EQ(s.gpu_metrics, nullptr);
  EXPECT_EQ(s.interference, nullptr);
  EXPECT_EQ(s.now_ms, 0);
  EXPECT_FALSE(empty.Provides(load_aware->Reads()));
  EXPECT_FALSE(empty.Provides(interference->Reads()));
  EXPECT_TRUE(empty.Provides(binpack->Reads()));
  EXPECT_FALSE(empty.WantsForecast(both));

  auto source = std::make_unique<testing::FakeMetricsSource>();
  source->Set("GPU-0", core::GpuMetric::kGpuUtil, 50, 1'700'000'000'000);
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  sources.push_back(std::move(source));
  MetricsCache cache(std::move(sources), MetricsCacheOptions{.interval = std::chrono::hours(1)});
  cache.RefreshOnce();
  auto model = std::make_shared<const testing::FakeSlowdownModel>(
      testing::FakeSlowdownModel().Set("vgg", "noisy", {.incoming = 2.0, .resident = 1.8}));
  SnapshotBuilder full(
      SnapshotSources{.metrics = &cache, .staleness_ms = 20000, .slowdown_model = model, .wall_ms = [] {
                        return int64_t{1'700'000'001'234};
                      }});
  EXPECT_TRUE(full.Provides(load_aware->Reads()));
  EXPECT_TRUE(full.Provides(interference->Reads()));
  EXPECT_TRUE(full.WantsForecast(both));
  EXPECT_FALSE(full.WantsForecast(std::vector<const policy::PlacementPolicy*>{binpack.get()}));
  s = full.Build("vgg", state, slots, app_of, /*forecast=*/true, hold);
  EXPECT_EQ(s.gpu_metrics, hold.metrics.get());
  ASSERT_NE(s.gpu_metrics, nullptr);
  EXPECT_EQ(s.gpu_metrics->size(), 1U);
  EXPECT_EQ(s.metrics_generation, cache.generation());
  EXPECT_EQ(s.now_ms, 1'700'000'001'000) << "judged at the second";
  EXPECT_EQ(s.staleness_ms, 20000);
  ASSERT_EQ(s.interference, &hold.forecast);
  const policy::GpuInterference* on0 = s.interference->Find(common::NodeName("n1"), 0);
  ASSERT_NE(on0, nullptr);
  EXPECT_DOUBLE_EQ(on0->incoming, 2.0);
  const uint64_t first = s.interference_generation;
  EXPECT_NE(first, 0U);
  SnapshotBuilder::Hold again;
  EXPECT_EQ(full.Build("vgg", state, slots, app_of, true, again).interference_generation, first + 1);
  EXPECT_EQ(full.Build("vgg", state, slots, app_of, /*forecast=*/false, again).interference, nullptr);
}

}  // namespace
}  // namespace gpusched::sched
