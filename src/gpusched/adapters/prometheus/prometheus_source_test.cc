// PrometheusSource without a network: options validation, the default queries and the mapping of results to GPUs.
// Requests against real and fake servers are in tests/integration/metrics_sources_test.cc.
#include "gpusched/adapters/prometheus/prometheus_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>

namespace gpusched::adapters::prometheus {
namespace {

using common::GpuUuid;
using common::StatusCode;
using core::GpuMetric;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(PrometheusSourceTest, DefaultQueriesUseTheDcgmNamesAndTheUuidLabel) {
  const auto q = DefaultQueries();
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kGpuUtil)], "max by (UUID) (DCGM_FI_DEV_GPU_UTIL)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kMemoryUsedMib)], "max by (UUID) (DCGM_FI_DEV_FB_USED)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kMemoryCopyUtil)], "max by (UUID) (DCGM_FI_DEV_MEM_COPY_UTIL)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kPowerW)], "max by (UUID) (DCGM_FI_DEV_POWER_USAGE)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kTemperatureC)], "max by (UUID) (DCGM_FI_DEV_GPU_TEMP)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kEncoderUtil)], "max by (UUID) (DCGM_FI_DEV_ENC_UTIL)");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kDecoderUtil)], "max by (UUID) (DCGM_FI_DEV_DEC_UTIL)");
  EXPECT_EQ(DefaultQueries("uuid")[0], "max by (uuid) (DCGM_FI_DEV_GPU_UTIL)");
}

TEST(PrometheusSourceTest, CreateValidatesOptions) {
  EXPECT_EQ(PrometheusSource::Create({.url = "prom:9090"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PrometheusSource::Create({.url = "http://p", .timeout = std::chrono::milliseconds(0)}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PrometheusSource::Create({.url = "http://p", .uuid_label = ""}).status().code(),
            StatusCode::kInvalidArgument);
  auto none = PrometheusSource::Create({.url = "http://p", .queries = {}});
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("every metric is disabled"));
  auto ok = PrometheusSource::Create({.url = "http://prom:9090/"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->Describe(), "prometheus http://prom:9090");
  EXPECT_EQ((*ok)->RangeQuery("up", 10, 5, std::chrono::seconds(1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*ok)->RangeQuery("up", 5, 10, std::chrono::seconds(0)).status().code(), StatusCode::kInvalidArgument);
}

// The URL is used as given; what is printed of it (Describe, errors, and so /readyz, /metrics, logs) is not.
TEST(PrometheusSourceTest, DescribeAndErrorsNeverShowCredentials) {
  auto ok = PrometheusSource::Create({.url = "https://reader:s3cret@prom.example:9090/prom?token=t0k/"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->Describe(), "prometheus https://***@prom.example:9090/prom?token=***");
  auto bad = PrometheusSource::Create({.url = "ftp://reader:s3cret@prom"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("ftp://***@prom"));
  EXPECT_THAT(bad.status().message(), Not(HasSubstr("s3cret")));
}

QueryResult Vector(std::vector<std::pair<std::string, core::MetricSample>> by_uuid) {
  QueryResult r{.result_type = "vector"};
  for (auto& [uuid, sample] : by_uuid) {
    Series s;
    if (!uuid.empty()) {
      s.labels = {{"gpu", "0"}, {"UUID", uuid}};
    }
    s.samples = {sample};
    r.series.push_back(std::move(s));
  }
  return r;
}

TEST(PrometheusSourceTest, MergeSeriesMapsByUuid) {
  core::GpuMetricsMap out;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  // a: two series (a shared GPU seen per pod): the newer one (t=2000) wins, then on equal times the larger value.
  // b: NaN -> left out; c: +Inf -> left out; "" -> no UUID label.
  const MergeCounts counts = MergeSeries(Vector({{"GPU-a", {.value = 10, .timestamp_ms = 1000}},
                                                 {"GPU-a", {.value = 20, .timestamp_ms = 2000}},
                                                 {"GPU-a", {.value = 5, .timestamp_ms = 1500}},
                                                 {"GPU-b", {.value = nan, .timestamp_ms = 1000}},
                                                 {"GPU-c", {.value = inf, .timestamp_ms = 1000}},
                                                 {"", {.value = 1, .timestamp_ms = 1000}}}),
                                         GpuMetric::kGpuUtil, "UUID", out);
  EXPECT_EQ(counts.no_uuid, 1);
  EXPECT_EQ(counts.not_finite, 2);
  ASSERT_EQ(out.size(), 1u);
  const auto& a = out.at(GpuUuid("GPU-a")).Get(GpuMetric::kGpuUtil);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->value, 20);
  EXPECT_EQ(a->timestamp_ms, 2000);

  // Same time, two values: the larger (busier) one.
  MergeSeries(Vector({{"GPU-d", {.value = 30, .timestamp_ms = 1000}}, {"GPU-d", {.value = 40, .timestamp_ms = 1000}}}),
              GpuMetric::kPowerW, "UUID", out);
  EXPECT_EQ(out.at(GpuUuid("GPU-d")).Get(GpuMetric::kPowerW)->value, 40);
  // A second metric for a known GPU lands beside the first.
  MergeSeries(Vector({{"GPU-a", {.value = 2048, .timestamp_ms = 2000}}}), GpuMetric::kMemoryUsedMib, "UUID", out);
  EXPECT_EQ(out.at(GpuUuid("GPU-a")).Get(GpuMetric::kMemoryUsedMib)->value, 2048);
  EXPECT_EQ(out.at(GpuUuid("GPU-a")).Get(GpuMetric::kGpuUtil)->value, 20);
  // Another label name: nothing matches "UUID" -> every series counted as without UUID.
  core::GpuMetricsMap other;
  EXPECT_EQ(
      MergeSeries(Vector({{"GPU-a", {.value = 1, .timestamp_ms = 1}}}), GpuMetric::kGpuUtil, "uuid", other).no_uuid, 1);
  EXPECT_TRUE(other.empty());
}

}  // namespace
}  // namespace gpusched::adapters::prometheus
