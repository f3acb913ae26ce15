#include "gpusched/policy/interference_aware_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/gpu_fit.h"
#include "gpusched/policy/registry.h"
#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::GpuIndices;
using gpusched::testing::Pod;
using gpusched::testing::View;
using ::testing::HasSubstr;
using Objective = InterferenceAwareOptions::Objective;

std::unique_ptr<InterferenceAwarePolicy> Make(InterferenceAwareOptions options = {}) {
  auto p = InterferenceAwarePolicy::Create(PolicyOptions{.interference_aware = options});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::unique_ptr<InterferenceAwarePolicy>(static_cast<InterferenceAwarePolicy*>(p.value().release()));
}

// A GPU with one resident and the predicted slowdowns of the pod joining it.
GpuInterference Resident(double incoming, double added) {
  return {.residents = 1, .incoming = incoming, .residents_added = added};
}
GpuInterference Infeasible() { return {.residents = 1, .feasible = false}; }

// node -> (GPU index -> entry); GPUs not named are empty.
using ForecastSpec = std::map<std::string, std::map<size_t, GpuInterference>>;

InterferenceForecast Forecast(const ForecastSpec& spec) {
  InterferenceForecast f{.app = "incoming"};
  for (const auto& [node, gpus] : spec) {
    std::vector<GpuInterference>& v = f.nodes[common::NodeName(node)];
    for (const auto& [i, g] : gpus) {
      if (v.size() <= i) {
        v.resize(i + 1);
      }
      v[i] = g;
    }
  }
  return f;
}

core::GpuRequest Shares(int32_t count, int64_t milli) {
  return {.container = "main", .count = count, .milli_per_gpu = common::MilliGpu{milli}};
}

TEST(InterferenceAwarePolicyTest, ScoresNodes) {
  struct Case {
    std::string name;
    std::vector<core::NodeView> nodes;
    core::PodRequest pod;
    std::optional<ForecastSpec> forecast;  // nullopt: no forecast in the snapshot
    InterferenceAwareOptions options;
    std::map<std::string, int64_t> want;
  };
  const core::PodRequest share = Pod("p").Share(300).Build();
  const std::vector<Case> cases = {
      // n1: cost 1.2 + 0.1 = 1.3 -> 100 / 1.3 = 76.9 -> 77;  n2: empty -> 100
      {.name = "an empty GPU beats any resident",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Resident(1.2, 0.1)}}}},
       .want = {{"n1", 77}, {"n2", 100}}},
      // n1: 1.3 -> 77;  n2: 1.5 + 0.5 = 2.0 -> 50
      {.name = "the resident with the least summed slowdown wins",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Free({400}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Resident(1.2, 0.1)}}}, {"n2", {{0, Resident(1.5, 0.5)}}}},
       .want = {{"n1", 77}, {"n2", 50}}},
      // n1's only fitting GPU is predicted not to fit in memory -> 0;  n2: 2.0 -> 50
      {.name = "a node with no usable GPU scores 0",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Free({400}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Infeasible()}}}, {"n2", {{0, Resident(1.5, 0.5)}}}},
       .want = {{"n1", 0}, {"n2", 50}}},
      // n1: GPU 0 infeasible, GPU 1 at 1.25 -> 80: the best usable GPU counts
      {.name = "an infeasible GPU is skipped for the node's best usable one",
       .nodes = {View("n1").Gpus(2).Free({400, 500}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Infeasible()}, {1, Resident(1.25, 0.0)}}}},
       .want = {{"n1", 80}}},
      {.name = "without a forecast every GPU is empty",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Build()},
       .pod = share,
       .forecast = std::nullopt,
       .want = {{"n1", 100}, {"n2", 100}}},
      // kSum: n1 1.1 + 0.9 = 2.0 -> 50, n2 1.4 + 0 = 1.4 -> 71.4 -> 71
      {.name = "kSum counts the harm done to residents",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Free({400}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Resident(1.1, 0.9)}}}, {"n2", {{0, Resident(1.4, 0.0)}}}},
       .want = {{"n1", 50}, {"n2", 71}}},
      // kIncomingOnly: n1 1.1 -> 90.9 -> 91, n2 1.4 -> 71: the opposite choice
      {.name = "kIncomingOnly sees only the incoming pod's slowdown",
       .nodes = {View("n1").Gpus(1).Free({400}).Build(), View("n2").Gpus(1).Free({400}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n1", {{0, Resident(1.1, 0.9)}}}, {"n2", {{0, Resident(1.4, 0.0)}}}},
       .options = {.objective = Objective::kIncomingOnly},
       .want = {{"n1", 91}, {"n2", 71}}},
      // wi = wp = 1. n1 (empty GPU): I 100, P = (GPU 0% + node (0 + 300) / 1000 = 30%) / 2 = 15 -> 57.5 -> 58.
      // n2: I = 100 / 1.5 = 66.7, P = (GPU 60% + node (600 + 300) / 1000 = 90%) / 2 = 75 -> 70.8 -> 71
      {.name = "packing weight trades interference for consolidation",
       .nodes = {View("n1").Gpus(1).Build(), View("n2").Gpus(1).Free({400}).Build()},
       .pod = share,
       .forecast = ForecastSpec{{"n2", {{0, Resident(1.5, 0.0)}}}},
       .options = {.interference_weight = 1, .packing_weight = 1},
       .want = {{"n1", 58}, {"n2", 71}}},
      // A whole GPU is empty by definition: the free GPU 1 is taken, 100 whatever GPU 0's forecast.
      {.name = "whole GPUs are empty",
       .nodes = {View("n1").Gpus(2).Free({400}).Build()},
       .pod = Pod("p").Gpus(1).Build(),
       .forecast = ForecastSpec{{"n1", {{0, Resident(3.0, 1.0)}}}},
       .want = {{"n1", 100}}},
      // Two shares: GPU 1 (empty, 100) and GPU 2 (1.2 -> 83.3); mean 91.7 -> 92. GPU 0 (3.0) and the infeasible
      // GPU 3 are left.
      {.name = "several shared GPUs average the chosen ones",
       .nodes = {View("n1").Gpus(4).Free({400, 1000, 500, 900}).Build()},
       .pod = Pod("p").Container(Shares(2, 300)).Build(),
       .forecast = ForecastSpec{{"n1", {{0, Resident(2.0, 1.0)}, {2, Resident(1.2, 0.0)}, {3, Infeasible()}}}},
       .want = {{"n1", 92}}},
      // CPU-only pod: interference 100 (no GPU), packing off by default.
      {.name = "a CPU pod ties everywhere",
       .nodes = {View("n1").Gpus(1).Free({400}).Build()},
       .pod = Pod("p").Cpu(1000).Build(),
       .forecast = ForecastSpec{{"n1", {{0, Resident(1.5, 0.5)}}}},
       .want = {{"n1", 100}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto policy = Make(c.options);
    const InterferenceForecast forecast = Forecast(c.forecast.value_or(ForecastSpec{}));
    const Snapshot snapshot{.interference = c.forecast.has_value() ? &forecast : nullptr, .interference_generation = 1};
    std::map<std::string, int64_t> got;
    for (const core::NodeView& n : c.nodes) {
      ASSERT_TRUE(policy->Filter(c.pod, n).fits());
      got[n.name().str()] = policy->Score(c.pod, n, snapshot);
    }
    EXPECT_EQ(got, c.want);
  }
}

TEST(InterferenceAwarePolicyTest, SelectsGpus) {
  struct Case {
    std::string name;
    core::NodeView node;
    core::PodRequest pod;
    std::optional<ForecastSpec> forecast;  // for node "n"
    InterferenceAwareOptions options;
    std::vector<int32_t> want;
  };
  const core::PodRequest share = Pod("p").Share(300).Build();
  const std::vector<Case> cases = {
      {.name = "an empty GPU first",
       .node = View("n").Gpus(2).Free({400}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Resident(1.2, 0.1)}}}},
       .want = {1}},
      // costs 2.0, 1.3, 1.6: GPU 1
      {.name = "the least summed slowdown among residents",
       .node = View("n").Gpus(3).Free({500, 600, 700}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Resident(1.5, 0.5)}, {1, Resident(1.2, 0.1)}, {2, Resident(1.3, 0.3)}}}},
       .want = {1}},
      // The tightest fit would be GPU 0, predicted not to fit next to its resident.
      {.name = "an infeasible GPU is avoided",
       .node = View("n").Gpus(2).Free({400, 800}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Infeasible()}, {1, Resident(1.4, 0.4)}}}},
       .want = {1}},
      {.name = "nothing usable: the tightest fit, still a valid placement",
       .node = View("n").Gpus(2).Free({800, 400}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Infeasible()}, {1, Infeasible()}}}},
       .want = {1}},
      // Equal costs: GPUs 1 and 2 are the tightest (500 free); the lower index wins.
      {.name = "ties go to the tightest fit, then the lowest index",
       .node = View("n").Gpus(3).Free({600, 500, 500}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Resident(1.2, 0.1)}, {1, Resident(1.2, 0.1)}, {2, Resident(1.2, 0.1)}}}},
       .want = {1}},
      {.name = "without a forecast: the tightest fit (the default)",
       .node = View("n").Gpus(2).Free({400}).Build(),
       .pod = share,
       .forecast = std::nullopt,
       .want = {0}},
      // kSum: GPU 0 2.0 vs GPU 1 1.4 -> GPU 1
      {.name = "kSum avoids hurting a resident",
       .node = View("n").Gpus(2).Free({500, 500}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Resident(1.1, 0.9)}, {1, Resident(1.4, 0.0)}}}},
       .want = {1}},
      // kIncomingOnly: GPU 0 1.1 vs GPU 1 1.4 -> GPU 0
      {.name = "kIncomingOnly is greedy for the incoming pod",
       .node = View("n").Gpus(2).Free({500, 500}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{0, Resident(1.1, 0.9)}, {1, Resident(1.4, 0.0)}}}},
       .options = {.objective = Objective::kIncomingOnly},
       .want = {0}},
      // wi 1, wp 3; node usage u is common to both. GPU 0 empty: (100 + 3 (0 + u) / 2) / 4; GPU 1 (60% used,
      // 1.5): (66.7 + 3 (60 + u) / 2) / 4, larger by (−33.3 + 90) / 4: GPU 1.
      {.name = "packing weight prefers the used GPU",
       .node = View("n").Gpus(2).Free({1000, 400}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{1, Resident(1.5, 0.0)}}}},
       .options = {.interference_weight = 1, .packing_weight = 3},
       .want = {1}},
      {.name = "the same node with the default weights takes the empty GPU",
       .node = View("n").Gpus(2).Free({1000, 400}).Build(),
       .pod = share,
       .forecast = ForecastSpec{{"n", {{1, Resident(1.5, 0.0)}}}},
       .want = {0}},
      // terms: GPU 0 33.3, GPU 1 100, GPU 2 83.3, GPU 3 unusable
      {.name = "several shared GPUs take the best terms",
       .node = View("n").Gpus(4).Free({400, 1000, 500, 900}).Build(),
       .pod = Pod("p").Container(Shares(2, 300)).Build(),
       .forecast = ForecastSpec{{"n", {{0, Resident(2.0, 1.0)}, {2, Resident(1.2, 0.0)}, {3, Infeasible()}}}},
       .want = {1, 2}},
      {.name = "whole GPUs: the lowest-index free ones",
       .node = View("n").Gpus(3).Free({400}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .forecast = ForecastSpec{{"n", {{0, Resident(1.1, 0.0)}}}},
       .want = {1, 2}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto policy = Make(c.options);
    const InterferenceForecast forecast = Forecast(c.forecast.value_or(ForecastSpec{}));
    const Snapshot snapshot{.interference = c.forecast.has_value() ? &forecast : nullptr, .interference_generation = 1};
    ASSERT_TRUE(policy->Filter(c.pod, c.node).fits());
    common::Rng rng(1);
    EXPECT_EQ(GpuIndices(policy->SelectGpusWithSnapshot(c.pod, c.node, snapshot, rng)), c.want);
  }
}

TEST(InterferenceAwarePolicyTest, SelectGpusWithoutSnapshotIsTheDefault) {
  const auto policy = Make();
  const core::NodeView node = View("n").Gpus(3).Free({1000, 400, 700}).Build();
  const core::PodRequest pod = Pod("p").Share(300).Build();
  common::Rng rng(1);
  EXPECT_EQ(GpuIndices(policy->SelectGpus(pod, node, rng)), GpuIndices(SelectGpusBest(pod, node)));
  EXPECT_TRUE(policy->Reads().interference_forecast);
  EXPECT_FALSE(policy->Reads().gpu_metrics);
  EXPECT_TRUE(policy->ScoresFromSnapshot());
}

TEST(InterferenceAwarePolicyTest, PredictedOutOfMemoryIsNotAFit) {
  // GPU 0 has room but its resident is predicted not to fit with the pod; GPU 1 is full.
  const core::NodeView node = View("n").Gpus(2).Free({500, 0}).Build();
  const core::PodRequest pod = Pod("p").Share(500).Build();
  const InterferenceForecast forecast = Forecast({{"n", {{0, Infeasible()}}}});
  const Snapshot snapshot{.interference = &forecast, .interference_generation = 1};
  const auto avoid = Make();
  EXPECT_TRUE(avoid->Filter(pod, node).fits());
  const Fit fit = avoid->FilterWithSnapshot(pod, node, snapshot);
  EXPECT_EQ(fit.code, Fit::Code::kUnschedulable);
  EXPECT_THAT(fit.reason, HasSubstr("GPU 0 is predicted not to fit in memory"));
  // Without a forecast, or with the option off, the node passes (and scores 0 with the forecast).
  EXPECT_TRUE(avoid->FilterWithSnapshot(pod, node, Snapshot{}).fits());
  const auto lenient = Make({.avoid_predicted_oom = false});
  EXPECT_TRUE(lenient->FilterWithSnapshot(pod, node, snapshot).fits());
  EXPECT_EQ(lenient->Score(pod, node, snapshot), 0);
  // A second GPU with room that is usable makes the node a fit again, and it is the one chosen.
  const core::NodeView roomy = View("n").Gpus(2).Free({500, 1000}).Build();
  EXPECT_TRUE(avoid->FilterWithSnapshot(pod, roomy, snapshot).fits());
  common::Rng rng(1);
  EXPECT_EQ(GpuIndices(avoid->SelectGpusWithSnapshot(pod, roomy, snapshot, rng)), std::vector<int32_t>{1});
}

TEST(InterferenceAwarePolicyTest, HarmfulPairsWaitUnlessAllowed) {
  const core::NodeView node = View("n").Gpus(2).Free({500, 0}).Build();
  const core::PodRequest pod = Pod("p").Share(500).Build();
  auto fits = [&](const InterferenceAwarePolicy& p, GpuInterference g) {
    const InterferenceForecast f = Forecast({{"n", {{0, g}}}});
    return p.FilterWithSnapshot(pod, node, Snapshot{.interference = &f, .interference_generation = 1});
  };
  const auto policy = Make();
  // 1/3 + 1/2 < 1: both would finish sooner taking turns.
  const Fit harmful = fits(*policy, Resident(3.0, 1.0));
  EXPECT_EQ(harmful.code, Fit::Code::kUnschedulable);
  EXPECT_THAT(harmful.reason, HasSubstr("slower shared than its residents taking turns"));
  // Gain 1/1.6 − (1 − 1/1.7) = 0.21: below the default 0.25, above 0.2.
  EXPECT_FALSE(fits(*policy, Resident(1.6, 0.7)).fits());
  EXPECT_TRUE(fits(*Make({.min_sharing_gain = 0.2}), Resident(1.6, 0.7)).fits());
  // Gain 1/1.25 − (1 − 1/1.25) = 0.6.
  EXPECT_TRUE(fits(*policy, Resident(1.25, 0.25)).fits());
  // Break-even (1/2 + 1/2 = 1) passes only with no minimum gain.
  EXPECT_FALSE(fits(*policy, Resident(2.0, 1.0)).fits());
  EXPECT_TRUE(fits(*Make({.min_sharing_gain = 0}), Resident(2.0, 1.0)).fits());
  const auto allow = Make({.refuse_harmful_pairs = false});
  EXPECT_TRUE(fits(*allow, Resident(3.0, 1.0)).fits());
  const InterferenceForecast f = Forecast({{"n", {{0, Resident(3.0, 1.0)}}}});
  EXPECT_EQ(allow->Score(pod, node, Snapshot{.interference = &f, .interference_generation = 1}), 25);  // 100 / 4
}

TEST(InterferenceAwarePolicyTest, RejectsBadOptions) {
  struct Case {
    std::string name;
    InterferenceAwareOptions options;
    std::string want;  // "" = accepted; else a substring of the InvalidArgument
  };
  const std::vector<Case> cases = {
      {.name = "defaults", .options = {}, .want = ""},
      {.name = "packing only", .options = {.interference_weight = 0, .packing_weight = 1}, .want = ""},
      {.name = "negative interference weight",
       .options = {.interference_weight = -1},
       .want = "interference_weight is -1"},
      {.name = "negative packing weight", .options = {.packing_weight = -5}, .want = "packing_weight is -5"},
      {.name = "both zero",
       .options = {.interference_weight = 0, .packing_weight = 0},
       .want = "interference_weight and packing_weight are both 0"},
      {.name = "gain above 1", .options = {.min_sharing_gain = 1.5}, .want = "min_sharing_gain is 1.5"},
      {.name = "unknown objective",
       .options = {.objective = static_cast<Objective>(7)},
       .want = "objective 7 is unknown"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto p = MakePolicy("interference-aware", PolicyOptions{.interference_aware = c.options});
    if (c.want.empty()) {
      EXPECT_TRUE(p.ok()) << p.status();
      continue;
    }
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(c.want));
  }
}

}  // namespace
}  // namespace gpusched::policy
