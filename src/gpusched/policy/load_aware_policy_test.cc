#include "gpusched/policy/load_aware_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/registry.h"
#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using core::GpuMetric;
using gpusched::testing::GpuIndices;
using gpusched::testing::Pod;
using gpusched::testing::View;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1'700'000'000'000;

// A small table with round figures: the largest memory is 80000 MiB, bandwidth 2000 GB/s, compute 40 TFLOPS.
std::vector<GpuModelSpec> TestTable() {
  return {
      {.name = "BIG", .aliases = {}, .memory_mib = 80000, .bandwidth_gbps = 2000, .fp32_tflops = 40, .tdp_w = 400},
      {.name = "SMALL", .aliases = {}, .memory_mib = 20000, .bandwidth_gbps = 500, .fp32_tflops = 10, .tdp_w = 100},
  };
}

// Static weights 1 + 1 + 2 = 4; dynamic 4 (util) + 2 (memory used) + 1 each for the other five = 11.
LoadAwareOptions TestWeights() {
  return {.memory_size_weight = 1,
          .memory_bandwidth_weight = 1,
          .compute_weight = 2,
          .gpu_util_weight = 4,
          .memory_used_weight = 2,
          .memory_copy_util_weight = 1,
          .power_weight = 1,
          .temperature_weight = 1,
          .encoder_util_weight = 1,
          .decoder_util_weight = 1,
          .models = TestTable()};
}

std::unique_ptr<LoadAwarePolicy> Make(LoadAwareOptions options) {
  auto p = LoadAwarePolicy::Create(PolicyOptions{.load_aware = std::move(options)});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::unique_ptr<LoadAwarePolicy>(static_cast<LoadAwarePolicy*>(p.value().release()));
}

// One sample of a GPU: (node, GPU index, metric, value, age in ms at kNow).
struct Sample {
  std::string node;
  int32_t gpu = 0;
  GpuMetric metric = GpuMetric::kGpuUtil;
  double value = 0;
  int64_t age_ms = 0;
};

core::GpuMetricsMap Metrics(const std::vector<Sample>& samples) {
  core::GpuMetricsMap m;
  for (const Sample& s : samples) {
    m[common::GpuUuid("GPU-" + s.node + "-" + std::to_string(s.gpu))].Set(
        s.metric, core::MetricSample{.value = s.value, .timestamp_ms = kNow - s.age_ms});
  }
  return m;
}

Snapshot At(const core::GpuMetricsMap& m) {
  return Snapshot{.gpu_metrics = &m, .now_ms = kNow, .staleness_ms = 30000, .metrics_generation = 1};
}

TEST(LoadAwarePolicyTest, ScoreArithmetic) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<Sample> samples;
    int64_t want = 0;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      // memory 80000/80000 = 100, bandwidth 2000/2000 = 100, compute 40/40 = 100 -> (1·100 + 1·100 + 2·100) / 4
      {.name = "no metrics: static only, the largest model",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .want = 100},
      // 20000/80000 = 25, 500/2000 = 25, 10/40 = 25 -> (25 + 25 + 2·25) / 4 = 25
      {.name = "no metrics: static only, a smaller model",
       .view = View("n").Gpus(1, "SMALL", 20000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .want = 25},
      // model not in the table: only memory 40000/80000 = 50 is known -> 1·50 / 1 = 50
      {.name = "unknown model: bandwidth and compute drop out",
       .view = View("n").Gpus(1, "G2", 40000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .want = 50},
      // static 400 (weight 4); util 50 -> 4·50 = 200; memory used 20000/80000 = 25% -> 2·75 = 150; copy 10 -> 90;
      // power 200/400 W = 50% -> 50; temperature (60-30)/60 = 50% -> 50; encoder 0 -> 100; decoder 20 -> 80
      // -> (400 + 200 + 150 + 90 + 50 + 50 + 100 + 80) / 15 = 1120 / 15 = 74.67 -> 75
      {.name = "every metric, each normalisation",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 50},
                   {"n", 0, GpuMetric::kMemoryUsedMib, 20000},
                   {"n", 0, GpuMetric::kMemoryCopyUtil, 10},
                   {"n", 0, GpuMetric::kPowerW, 200},
                   {"n", 0, GpuMetric::kTemperatureC, 60},
                   {"n", 0, GpuMetric::kEncoderUtil, 0},
                   {"n", 0, GpuMetric::kDecoderUtil, 20}},
       .want = 75},
      // static (25 + 25 + 2·25) = 100; util 100 -> 0; power 150/100 W = 150% clamped to 100% -> 0; temperature
      // 20 °C below 30 -> 0% -> 100 -> (100 + 4·0 + 1·0 + 1·100) / (4 + 4 + 1 + 1) = 200 / 10 = 20
      {.name = "power and temperature are clamped",
       .view = View("n").Gpus(1, "SMALL", 20000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 100},
                   {"n", 0, GpuMetric::kPowerW, 150},
                   {"n", 0, GpuMetric::kTemperatureC, 20}},
       .want = 20},
      // util 100 is 60 s old (> 30 s): unknown; memory used 0 -> 2·100 -> (400 + 200) / (4 + 2) = 100
      // (were it counted: (400 + 0 + 200) / 10 = 60)
      {.name = "a stale sample is ignored",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 100, 60000}, {"n", 0, GpuMetric::kMemoryUsedMib, 0}},
       .want = 100},
      // exactly 30 s old is still fresh: util 100 -> (400 + 4·0) / 8 = 50
      {.name = "a sample at the staleness bound counts",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 100, 30000}},
       .want = 50},
      // unknown model: memory 50; power 120 W over the default 400 W = 30% -> 70 -> (50 + 70) / 2 = 60
      {.name = "power of a model not in the table is over 400 W",
       .view = View("n").Gpus(1, "G2", 40000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kPowerW, 120}},
       .want = 60},
      // the node reports 0 MiB: the table's 20000 serves for the memory term (25) and memory used 5000/20000 =
      // 25% -> 75 -> (25 + 25 + 2·25 + 2·75) / 6 = 250 / 6 = 41.67 -> 42
      {.name = "memory unknown on the node comes from the table",
       .view = View("n").Gpus(1, "SMALL", 0).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kMemoryUsedMib, 5000}},
       .want = 42},
      // NaN util is unknown: static only -> 100
      {.name = "a NaN sample is unknown",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, nan}},
       .want = 100},
      // 2 GPUs of 4: loads 90, 10, 30, unknown (ranks 50) -> GPUs 1 and 2; util headroom (90 + 70) / 2 = 80
      // -> (400 + 4·80) / 8 = 90
      {.name = "dynamic terms average over the chosen GPUs",
       .view = View("n").Gpus(4, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 90},
                   {"n", 1, GpuMetric::kGpuUtil, 10},
                   {"n", 2, GpuMetric::kGpuUtil, 30}},
       .want = 90},
      // samples of another node's GPUs are not this node's: static only
      {.name = "metrics of other GPUs do not count",
       .view = View("n").Gpus(1, "SMALL", 20000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"other", 0, GpuMetric::kGpuUtil, 100}},
       .want = 25},
      {.name = "a CPU-only pod scores 0 everywhere",
       .view = View("n").Gpus(1, "BIG", 80000).Build(),
       .pod = Pod("p").Build(),
       .want = 0},
  };
  const auto policy = Make(TestWeights());
  EXPECT_EQ(policy->Name(), "load-aware");
  EXPECT_TRUE(policy->Reads().gpu_metrics);
  EXPECT_FALSE(policy->Reads().interference_forecast);
  EXPECT_TRUE(policy->ScoresFromSnapshot());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const core::GpuMetricsMap m = Metrics(c.samples);
    ASSERT_TRUE(policy->Filter(c.pod, c.view).fits());
    EXPECT_EQ(policy->Score(c.pod, c.view, At(m)), c.want);
    if (c.samples.empty()) {
      EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);  // no map at all: the same
    }
  }
}

TEST(LoadAwarePolicyTest, DefaultWeightsAndTableLetLoadDominate) {
  // Default table: largest memory 144384 MiB (H200), bandwidth 4800 GB/s (H200), FP32 91.6 TFLOPS (L40S).
  // A100-SXM4-80GB: 81920/144384 = 56.74, 2039/4800 = 42.48, 19.5/91.6 = 21.29
  //   -> static sum 5·56.74 + 5·42.48 + 10·21.29 = 708.97 (weights 20)
  // T4 (15360 MiB): 10.64, 320/4800 = 6.67, 8.1/91.6 = 8.84 -> 5·10.64 + 5·6.67 + 10·8.84 = 174.95
  struct Case {
    std::string name;
    core::NodeView view;
    std::vector<Sample> samples;
    int64_t want = 0;
  };
  const std::vector<Case> cases = {
      // 708.97 / 20 = 35.45 -> 35
      {.name = "A100 without metrics", .view = View("a").Gpus(1, "A100-SXM4-80GB", 81920).Build(), .want = 35},
      // util 0 -> 30·100, memory used 0 -> 20·100: (708.97 + 5000) / 70 = 81.56 -> 82
      {.name = "idle A100",
       .view = View("a").Gpus(1, "A100-SXM4-80GB", 81920).Build(),
       .samples = {{"a", 0, GpuMetric::kGpuUtil, 0}, {"a", 0, GpuMetric::kMemoryUsedMib, 0}},
       .want = 82},
      // util 100, memory full -> 708.97 / 70 = 10.13 -> 10
      {.name = "busy A100",
       .view = View("a").Gpus(1, "A100-SXM4-80GB", 81920).Build(),
       .samples = {{"a", 0, GpuMetric::kGpuUtil, 100}, {"a", 0, GpuMetric::kMemoryUsedMib, 81920}},
       .want = 10},
      // (174.95 + 5000) / 70 = 73.93 -> 74: an idle T4 beats a busy A100
      {.name = "idle T4 (trace name)",
       .view = View("t").Gpus(1, "T4", 15360).Build(),
       .samples = {{"t", 0, GpuMetric::kGpuUtil, 0}, {"t", 0, GpuMetric::kMemoryUsedMib, 0}},
       .want = 74},
      // 174.95 / 20 = 8.75 -> 9
      {.name = "T4 without metrics", .view = View("t").Gpus(1, "T4", 15360).Build(), .want = 9},
  };
  const auto policy = Make({});
  const core::PodRequest pod = Pod("p").Gpus(1).Build();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const core::GpuMetricsMap m = Metrics(c.samples);
    EXPECT_EQ(policy->Score(pod, c.view, At(m)), c.want);
  }
}

TEST(LoadAwarePolicyTest, ModelNamesMatchTheTableInAnySpelling) {
  const auto policy = Make({});
  struct Case {
    std::string model;
    std::string want;  // canonical name, empty = not in the table
  };
  const std::vector<Case> cases = {
      {"A100-SXM4-80GB", "A100-SXM4-80GB"},
      {"NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB"},  // GPU feature discovery's product label
      {"A100 SXM4,80GB", "A100-SXM4-80GB"},
      {"A100-80GB", "A100-SXM4-80GB"},
      {"A100", "A100-SXM4-80GB"},  // the trace
      {"A100-40GB", "A100-SXM4-40GB"},
      {"NVIDIA-A100-PCIE-40GB", "A100-PCIE-40GB"},
      {"a10", "A10"},
      {"H100", "H100-SXM5-80GB"},
      {"NVIDIA-H100-80GB-HBM3", "H100-SXM5-80GB"},
      {"H200", "H200-SXM-141GB"},
      {"V100M32", "V100-SXM2-32GB"},  // the trace
      {"Tesla-V100-SXM2-32GB", "V100-SXM2-32GB"},
      {"V100M16", "V100-SXM2-16GB"},
      {"Tesla-T4", "T4"},
      {"P100", "P100-PCIE-16GB"},
      {"NVIDIA-L4", "L4"},
      {"G2", ""},
      {"", ""},
      {"NVIDIA", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const GpuModelSpec* spec = policy->FindModel(c.model);
    EXPECT_EQ(spec == nullptr ? std::string() : spec->name, c.want);
  }
}

TEST(LoadAwarePolicyTest, SelectsTheLeastLoadedFittingGpus) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<Sample> samples;
    std::vector<int32_t> want;
  };
  const std::vector<Case> cases = {
      // loads 80, 20, 20, unknown (50): the lowest load, the lower index of the tie
      {.name = "one GPU: least loaded, ties by index",
       .view = View("n").Gpus(4, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 80},
                   {"n", 1, GpuMetric::kGpuUtil, 20},
                   {"n", 2, GpuMetric::kGpuUtil, 20}},
       .want = {1}},
      {.name = "three GPUs: an unknown GPU ranks as half loaded",
       .view = View("n").Gpus(4, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(3).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 80},
                   {"n", 1, GpuMetric::kGpuUtil, 20},
                   {"n", 2, GpuMetric::kGpuUtil, 20}},
       .want = {1, 2, 3}},
      // GPU 0 util 10 but memory 72000/80000 = 90% used: load (4·10 + 2·90) / 6 = 36.7; GPU 1 util 30, memory 0:
      // (4·30 + 0) / 6 = 20 -> GPU 1
      {.name = "load weighs every fresh metric",
       .view = View("n").Gpus(2, "BIG", 80000).Build(),
       .pod = Pod("p").Gpus(1).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 10},
                   {"n", 0, GpuMetric::kMemoryUsedMib, 72000},
                   {"n", 1, GpuMetric::kGpuUtil, 30},
                   {"n", 1, GpuMetric::kMemoryUsedMib, 0}},
       .want = {1}},
      // GPU 0 is held (300 free): best fit would take it; GPU 1 is idle by metrics
      {.name = "a share goes to the idle GPU, not the tightest",
       .view = View("n").Gpus(2, "BIG", 80000).Free({300, 1000}).Build(),
       .pod = Pod("p").Share(200).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 90}, {"n", 1, GpuMetric::kGpuUtil, 10}},
       .want = {1}},
      // the same with the samples stale: no known load -> SelectGpusBest, the tightest GPU 0
      {.name = "stale metrics fall back to best fit",
       .view = View("n").Gpus(2, "BIG", 80000).Free({300, 1000}).Build(),
       .pod = Pod("p").Share(200).Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 90, 40000}, {"n", 1, GpuMetric::kGpuUtil, 10, 40000}},
       .want = {0}},
      {.name = "no metrics fall back to best fit",
       .view = View("n").Gpus(2, "BIG", 80000).Free({300, 1000}).Build(),
       .pod = Pod("p").Share(200).Build(),
       .want = {0}},
      // container a (share 500) would take idle GPU 0, leaving container b (a whole GPU) nothing: the pod falls
      // back to best fit, a on the tightest GPU 1 (600 free), b on GPU 0
      {.name = "a greedy pick that strands a later container falls back",
       .view = View("n").Gpus(2, "BIG", 80000).Free({1000, 600}).Build(),
       .pod = Pod("p")
                  .Container({.container = "a", .count = 1, .milli_per_gpu = common::MilliGpu{500}})
                  .Container({.container = "b", .count = 1, .milli_per_gpu = common::kGpuMilli, .exclusive = true})
                  .Build(),
       .samples = {{"n", 0, GpuMetric::kGpuUtil, 0}, {"n", 1, GpuMetric::kGpuUtil, 90}},
       .want = {1, 0}},
  };
  const auto policy = Make(TestWeights());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const core::GpuMetricsMap m = Metrics(c.samples);
    common::Rng rng(1);
    ASSERT_TRUE(policy->Filter(c.pod, c.view).fits());
    const auto alloc = policy->SelectGpusWithSnapshot(c.pod, c.view, At(m), rng);
    EXPECT_EQ(GpuIndices(alloc), c.want);
  }
}

TEST(LoadAwarePolicyTest, WithoutTheSnapshotSelectsBestFit) {
  const auto policy = Make(TestWeights());
  const core::NodeView view = View("n").Gpus(2, "BIG", 80000).Free({300, 1000}).Build();
  common::Rng rng(1);
  EXPECT_EQ(GpuIndices(policy->SelectGpus(Pod("p").Share(200).Build(), view, rng)), std::vector<int32_t>{0});
}

TEST(LoadAwarePolicyTest, GpuLoad) {
  const auto policy = Make(TestWeights());
  const core::NodeView view = View("n").Gpus(2, "BIG", 80000).Build();
  // util 40, memory 40000/80000 = 50%: (4·40 + 2·50) / 6 = 43.33
  const core::GpuMetricsMap m =
      Metrics({{"n", 0, GpuMetric::kGpuUtil, 40}, {"n", 0, GpuMetric::kMemoryUsedMib, 40000}});
  ASSERT_TRUE(policy->GpuLoad(view, 0, At(m)).has_value());
  EXPECT_NEAR(*policy->GpuLoad(view, 0, At(m)), 43.333, 0.001);
  EXPECT_FALSE(policy->GpuLoad(view, 1, At(m)).has_value());
  EXPECT_FALSE(policy->GpuLoad(view, 0, Snapshot{}).has_value());
  Snapshot later = At(m);
  later.now_ms += 31000;  // both samples now stale
  EXPECT_FALSE(policy->GpuLoad(view, 0, later).has_value());
  // a zero weight switches a metric off: with util's weight 0 only memory counts -> 50
  LoadAwareOptions no_util = TestWeights();
  no_util.gpu_util_weight = 0;
  EXPECT_NEAR(*Make(no_util)->GpuLoad(view, 0, At(m)), 50.0, 1e-9);
}

TEST(LoadAwarePolicyTest, OptionsAreValidated) {
  struct Case {
    std::string name;
    LoadAwareOptions options;
    std::string want_message;  // empty = valid
  };
  auto with = [](auto edit) {
    LoadAwareOptions o;
    edit(o);
    return o;
  };
  const std::vector<Case> cases = {
      {.name = "defaults", .options = {}, .want_message = ""},
      {.name = "negative weight",
       .options = with([](LoadAwareOptions& o) { o.gpu_util_weight = -1; }),
       .want_message = "gpu_util_weight is -1, must be >= 0"},
      {.name = "negative static weight",
       .options = with([](LoadAwareOptions& o) { o.compute_weight = -5; }),
       .want_message = "compute_weight is -5"},
      {.name = "all weights zero",
       .options = with([](LoadAwareOptions& o) {
         o = LoadAwareOptions{.memory_size_weight = 0,
                              .memory_bandwidth_weight = 0,
                              .compute_weight = 0,
                              .gpu_util_weight = 0,
                              .memory_used_weight = 0,
                              .memory_copy_util_weight = 0,
                              .power_weight = 0,
                              .temperature_weight = 0,
                              .encoder_util_weight = 0,
                              .decoder_util_weight = 0};
       }),
       .want_message = "at least one must be positive"},
      {.name = "static only is valid",
       .options = with([](LoadAwareOptions& o) {
         o.gpu_util_weight = o.memory_used_weight = o.memory_copy_util_weight = o.power_weight = 0;
         o.temperature_weight = o.encoder_util_weight = o.decoder_util_weight = 0;
       }),
       .want_message = ""},
      {.name = "table entry without a name",
       .options = with([](LoadAwareOptions& o) {
         o.models = {{.name = "--", .memory_mib = 1, .bandwidth_gbps = 1, .fp32_tflops = 1, .tdp_w = 1}};
       }),
       .want_message = "has no name"},
      {.name = "table entry with zero TDP",
       .options = with([](LoadAwareOptions& o) {
         o.models = TestTable();
         o.models[1].tdp_w = 0;
       }),
       .want_message = "GPU model SMALL"},
      {.name = "table entry with NaN TFLOPS",
       .options = with([](LoadAwareOptions& o) {
         o.models = TestTable();
         o.models[0].fp32_tflops = std::nan("");
       }),
       .want_message = "must be positive"},
      {.name = "alias of another entry",
       .options = with([](LoadAwareOptions& o) {
         o.models = TestTable();
         o.models[1].aliases = {"big"};
       }),
       .want_message = "'big' of SMALL is also BIG"},
      {.name = "an alias spelling its own name differently is fine",
       .options = with([](LoadAwareOptions& o) {
         o.models = TestTable();
         o.models[1].aliases = {"small", "Small-GPU"};
       }),
       .want_message = ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto p = MakePolicy("load-aware", PolicyOptions{.load_aware = c.options});
    if (c.want_message.empty()) {
      EXPECT_TRUE(p.ok()) << p.status();
    } else {
      ASSERT_FALSE(p.ok());
      EXPECT_EQ(p.status().code(), common::StatusCode::kInvalidArgument);
      EXPECT_THAT(p.status().message(), HasSubstr(c.want_message));
    }
  }
}

TEST(LoadAwarePolicyTest, DefaultTableIsValidAndNamed) {
  const std::vector<GpuModelSpec> table = DefaultGpuModelTable();
  EXPECT_GE(table.size(), 10U);
  EXPECT_TRUE(MakePolicy("load-aware", PolicyOptions{.load_aware = {.models = table}}).ok());
  EXPECT_EQ(NormalizeModelName("Tesla-V100-SXM2-32GB"), "V100SXM232GB");
  EXPECT_EQ(NormalizeModelName("nvidia a100"), "A100");
}

}  // namespace
}  // namespace gpusched::policy
