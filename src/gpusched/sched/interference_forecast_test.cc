#include "gpusched/sched/interference_forecast.h"
#include "gpusched/testing/fake_slowdown_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::sched {
namespace {

using testing::FakeSlowdownModel;

core::ContainerAllocation On(std::vector<int32_t> gpus, int64_t milli = 300) {
  core::ContainerAllocation c{.container = "main"};
  for (int32_t i : gpus) {
    c.gpus.push_back(core::GpuShare{.index = i, .milli = common::MilliGpu{milli}, .memory = common::MiB{1000}});
  }
  return c;
}

core::Allocation Alloc(const std::string& pod, const std::string& node, std::vector<core::ContainerAllocation> cs) {
  return core::Allocation{.pod = common::PodUid(pod), .node = common::NodeName(node), .containers = std::move(cs)};
}

TEST(ForecastInterferenceTest, JoinsTheResidentsOfEveryHeldGpu) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(3, "V100").Build()).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("b").Gpus(1, "P100").Build()).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("idle").Gpus(2).Build()).ok());
  // a: GPU 0 holds resnet and bert, GPU 1 holds lstm, GPU 2 is empty. b: GPU 0 holds resnet (its two containers
  // count once). idle: nothing.
  ASSERT_TRUE(state.Assume(Alloc("r1", "a", {On({0})})).ok());
  ASSERT_TRUE(state.Assume(Alloc("b1", "a", {On({0})})).ok());
  ASSERT_TRUE(state.Assume(Alloc("l1", "a", {On({1})})).ok());
  ASSERT_TRUE(state.Assume(Alloc("r2", "b", {On({0}, 200), On({0}, 200)})).ok());
  const std::map<std::string, std::string> apps = {{"r1", "resnet"}, {"b1", "bert"}, {"l1", "lstm"}, {"r2", "resnet"}};
  const AppOfPod app_of = [&apps](const common::PodUid& pod) {
    auto it = apps.find(pod.str());
    return it == apps.end() ? std::string() : it->second;
  };
  FakeSlowdownModel model;
  model.Set("vgg", "resnet", {.incoming = 1.4, .resident = 1.2});
  model.Set("vgg", "bert", {.incoming = 1.3, .resident = 1.1});
  model.Set("vgg", "lstm", {.feasible = false});

  const policy::InterferenceForecast f = ForecastInterference("vgg", state, app_of, model);
  EXPECT_EQ(f.app, "vgg");
  EXPECT_EQ(f.nodes.size(), 2U) << "the idle node has no entry";
  EXPECT_EQ(f.Find(common::NodeName("idle"), 0), nullptr);

  // a/0: incoming 1 + 0.4 + 0.3 = 1.7, residents added 0.2 + 0.1 = 0.3, cost 2.0.
  const policy::GpuInterference* a0 = f.Find(common::NodeName("a"), 0);
  ASSERT_NE(a0, nullptr);
  EXPECT_EQ(a0->residents, 2);
  EXPECT_TRUE(a0->feasible);
  EXPECT_DOUBLE_EQ(a0->incoming, 1.7);
  EXPECT_DOUBLE_EQ(a0->residents_added, 0.3);
  EXPECT_DOUBLE_EQ(a0->Cost(), 2.0);
  // a/1: vgg and lstm do not fit together.
  const policy::GpuInterference* a1 = f.Find(common::NodeName("a"), 1);
  ASSERT_NE(a1, nullptr);
  EXPECT_EQ(a1->residents, 1);
  EXPECT_FALSE(a1->feasible);
  // a/2: empty.
  const policy::GpuInterference* a2 = f.Find(common::NodeName("a"), 2);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(a2->residents, 0);
  EXPECT_DOUBLE_EQ(a2->Cost(), 1.0);
  // b/0: one resident (one pod, two containers): 1.4 and 0.2.
  const policy::GpuInterference* b0 = f.Find(common::NodeName("b"), 0);
  ASSERT_NE(b0, nullptr);
  EXPECT_EQ(b0->residents, 1);
  EXPECT_DOUBLE_EQ(b0->incoming, 1.4);
  EXPECT_DOUBLE_EQ(b0->residents_added, 0.2);

  // The GPU type handed to the model is the GPU's model string.
  const std::vector<std::string> asked = model.GpusAsked();
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "V100"), 3);
  EXPECT_EQ(std::count(asked.begin(), asked.end(), "P100"), 1);
}

TEST(ForecastInterferenceTest, UnknownClassesGetTheModelsPrior) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(2).Build()).ok());
  // One pod spanning both GPUs: a resident of each.
  ASSERT_TRUE(state.Assume(Alloc("x", "a", {On({0, 1})})).ok());
  FakeSlowdownModel model;
  // No app_of at all: every resident is "" and the fake's prior {1.5, 1.5} applies: cost 1.5 + 0.5 = 2.0.
  const policy::InterferenceForecast f = ForecastInterference("", state, AppOfPod(), model);
  for (size_t i = 0; i < 2; ++i) {
    const policy::GpuInterference* g = f.Find(common::NodeName("a"), i);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->residents, 1);
    EXPECT_DOUBLE_EQ(g->Cost(), 2.0);
  }
}

TEST(ForecastInterferenceTest, ReleasedPodsLeaveNoTrace) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(1).Build()).ok());
  ASSERT_TRUE(state.Assume(Alloc("x", "a", {On({0})})).ok());
  ASSERT_TRUE(state.Release(common::PodUid("x")).ok());
  FakeSlowdownModel model;
  EXPECT_TRUE(ForecastInterference("vgg", state, AppOfPod(), model).nodes.empty());
}

}  // namespace
}  // namespace gpusched::sched

namespace gpusched::sched {
namespace {

TEST(ForecastInterferenceTest, OnlyTheGivenSlots) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(1).Build()).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("b").Gpus(1).Build()).ok());
  ASSERT_TRUE(state.Assume(Alloc("p1", "a", {On({0})})).ok());
  ASSERT_TRUE(state.Assume(Alloc("p2", "b", {On({0})})).ok());
  FakeSlowdownModel model;
  const std::vector<size_t> only_b = {*state.SlotOf(common::NodeName("b")), 99};  // an unknown slot is skipped
  const policy::InterferenceForecast f = ForecastInterference("x", state, only_b, AppOfPod(), model);
  EXPECT_EQ(f.nodes.size(), 1u);
  EXPECT_NE(f.Find(common::NodeName("b"), 0), nullptr);
  EXPECT_EQ(f.Find(common::NodeName("a"), 0), nullptr);
  EXPECT_EQ(ForecastInterference("x", state, AppOfPod(), model).nodes.size(), 2u);
}

}  // namespace
}  // namespace gpusched::sched

namespace gpusched::sched {
namespace {

TEST(ForecastCacheTest, ReusesUnchangedNodesAndRecomputesChangedOnes) {
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(2).Build()).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("b").Gpus(1).Build()).ok());
  ASSERT_TRUE(state.Assume(Alloc("p1", "a", {On({0})})).ok());
  ASSERT_TRUE(state.Assume(Alloc("p2", "b", {On({0})})).ok());
  std::map<std::string, std::string> apps = {{"p1", "resnet"}, {"p2", "bert"}, {"p3", "lstm"}};
  const AppOfPod app_of = [&apps](const common::PodUid& p) { return apps.at(p.str()); };
  FakeSlowdownModel model;
  model.Set("vgg", "resnet", {.incoming = 1.4, .resident = 1.2});
  model.Set("vgg", "lstm", {.incoming = 1.9, .resident = 1.1});
  const std::vector<size_t> slots = {*state.SlotOf(common::NodeName("a")), *state.SlotOf(common::NodeName("b"))};
  ForecastCache cache;
  auto same = [&](const policy::InterferenceForecast& f) {
    const policy::InterferenceForecast fresh = ForecastInterference(f.app, state, slots, app_of, model);
    ASSERT_EQ(f.nodes.size(), fresh.nodes.size());
    for (const auto& [node, gpus] : fresh.nodes) {
      ASSERT_EQ(f.nodes.at(node).size(), gpus.size());
      for (size_t i = 0; i < gpus.size(); ++i) {
        EXPECT_EQ(f.nodes.at(node)[i].residents, gpus[i].residents);
        EXPECT_EQ(f.nodes.at(node)[i].feasible, gpus[i].feasible);
        EXPECT_DOUBLE_EQ(f.nodes.at(node)[i].Cost(), gpus[i].Cost());
      }
    }
  };
  same(cache.Forecast("vgg", state, slots, app_of, model));
  EXPECT_EQ(cache.misses(), 2u);
  same(cache.Forecast("vgg", state, slots, app_of, model));
  EXPECT_EQ(cache.misses(), 2u) << "nothing changed: both nodes reused";
  same(cache.Forecast("bert", state, slots, app_of, model));
  EXPECT_EQ(cache.misses(), 4u) << "another application class has its own entries";
  // A pod joins a's GPU 1: only a is recomputed, and the forecast sees it.
  ASSERT_TRUE(state.Assume(Alloc("p3", "a", {On({1})})).ok());
  const policy::InterferenceForecast f = cache.Forecast("vgg", state, slots, app_of, model);
  EXPECT_EQ(cache.misses(), 5u);
  same(f);
  EXPECT_EQ(f.Find(common::NodeName("a"), 1)->residents, 1);
  EXPECT_DOUBLE_EQ(f.Find(common::NodeName("a"), 1)->incoming, 1.9);
  // Released: a is recomputed again, GPU 1 is empty.
  ASSERT_TRUE(state.Release(common::PodUid("p3")).ok());
  const policy::InterferenceForecast g = cache.Forecast("vgg", state, slots, app_of, model);
  EXPECT_EQ(g.Find(common::NodeName("a"), 1)->residents, 0);
  same(g);
  // Another state: everything is forgotten.
  core::ClusterState other;
  ASSERT_TRUE(other.AddNode(testing::Node("a").Gpus(2).Build()).ok());
  EXPECT_TRUE(cache.Forecast("vgg", other, std::vector<size_t>{0}, app_of, model).nodes.empty());
}

}  // namespace
}  // namespace gpusched::sched
