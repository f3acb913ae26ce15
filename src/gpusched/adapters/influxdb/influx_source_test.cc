// InfluxSource without a network: the default statements, options validation and the decoding of /query answers.
// Requests against a real influxd are in tests/integration/metrics_sources_test.cc.
#include "gpusched/adapters/influxdb/influx_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace gpusched::adapters::influxdb {
namespace {

using common::GpuUuid;
using common::StatusCode;
using core::GpuMetric;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(InfluxSourceTest, DefaultQueriesReadTheAgentsFields) {
  const auto q = DefaultInfluxQueries();
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kGpuUtil)],
            R"(SELECT last("gpu_util") FROM "gpu" WHERE time > now() - 300s GROUP BY "uuid")");
  EXPECT_THAT(q[static_cast<size_t>(GpuMetric::kMemoryUsedMib)], HasSubstr(R"(last("fb_used_mib"))"));
  EXPECT_THAT(q[static_cast<size_t>(GpuMetric::kMemoryCopyUtil)], HasSubstr(R"(last("mem_copy_util"))"));
  EXPECT_THAT(q[static_cast<size_t>(GpuMetric::kPowerW)], HasSubstr(R"(last("power_w"))"));
  EXPECT_THAT(q[static_cast<size_t>(GpuMetric::kTemperatureC)], HasSubstr(R"(last("temperature_c"))"));
  // The agent writes no encoder/decoder utilisation.
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kEncoderUtil)], "");
  EXPECT_EQ(q[static_cast<size_t>(GpuMetric::kDecoderUtil)], "");
  EXPECT_EQ(DefaultInfluxQueries("my \"gpu\"", "UUID", std::chrono::seconds(60))[0],
            R"(SELECT last("gpu_util") FROM "my \"gpu\"" WHERE time > now() - 60s GROUP BY "UUID")");
}

TEST(InfluxSourceTest, CreateValidatesOptions) {
  EXPECT_EQ(InfluxSource::Create({.url = "influx:8086", .database = "d"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(InfluxSource::Create({.url = "http://i"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(InfluxSource::Create({.url = "http://i", .database = "d", .queries = {}}).status().code(),
            StatusCode::kInvalidArgument);
  InfluxSourceOptions two;
  two.url = "http://i";
  two.database = "d";
  two.queries[0] = "SELECT last(a) FROM b; DROP DATABASE d";
  auto r = InfluxSource::Create(two);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("';'"));
  auto ok = InfluxSource::Create({.url = "http://influx:8086/", .database = "gpusched"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->Describe(), "influxdb http://influx:8086 db=gpusched");
}

// InfluxDB 1.x takes its credentials as u and p in the query string; they never show in what is printed.
TEST(InfluxSourceTest, DescribeAndErrorsNeverShowCredentials) {
  auto ok = InfluxSource::Create({.url = "http://influx:8086/?u=admin&p=pw", .database = "gpu"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->Describe(), "influxdb http://influx:8086/?u=***&p=*** db=gpu");
  auto userinfo = InfluxSource::Create({.url = "https://admin:pw@influx:8086", .database = "gpu"});
  ASSERT_TRUE(userinfo.ok()) << userinfo.status();
  EXPECT_EQ((*userinfo)->Describe(), "influxdb https://***@influx:8086 db=gpu");
  auto bad = InfluxSource::Create({.url = "influx:8086/?p=pw", .database = "gpu"});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), Not(HasSubstr("pw")));
}

const std::vector<GpuMetric> kMetrics = {GpuMetric::kGpuUtil, GpuMetric::kMemoryUsedMib, GpuMetric::kPowerW};

TEST(InfluxSourceTest, ParsesPerStatementSeries) {
  // Statement 0: two GPUs; statement 1: one GPU with an integer field; statement 2: no data (no "series").
  const std::string body = R"({"results":[
    {"statement_id":0,"series":[
      {"name":"gpu","tags":{"uuid":"GPU-a"},"columns":["time","last"],"values":[[1700000000000,87.5]]},
      {"name":"gpu","tags":{"uuid":"GPU-b"},"columns":["time","last"],"values":[[1700000001000,3]]}]},
    {"statement_id":1,"series":[
      {"name":"gpu","tags":{"uuid":"GPU-a"},"columns":["time","last"],"values":[[1700000000500,20480]]}]},
    {"statement_id":2}]})";
  core::GpuMetricsMap out;
  ASSERT_TRUE(ParseInfluxResponse(body, kMetrics, "uuid", out).ok());
  ASSERT_EQ(out.size(), 2u);
  const auto& a = out.at(GpuUuid("GPU-a"));
  EXPECT_EQ(a.Get(GpuMetric::kGpuUtil)->value, 87.5);
  EXPECT_EQ(a.Get(GpuMetric::kGpuUtil)->timestamp_ms, 1700000000000);
  EXPECT_EQ(a.Get(GpuMetric::kMemoryUsedMib)->value, 20480);
  EXPECT_EQ(a.Get(GpuMetric::kMemoryUsedMib)->timestamp_ms, 1700000000500);
  EXPECT_FALSE(a.Get(GpuMetric::kPowerW).has_value());
  EXPECT_EQ(out.at(GpuUuid("GPU-b")).Get(GpuMetric::kGpuUtil)->value, 3);
}

TEST(InfluxSourceTest, SkipsWhatIsNotAGpuSample) {
  // No tags (not grouped by uuid), another tag, an empty uuid, a null value, a string value, an RFC3339 time (no
  // epoch), a bool (-> 1), and two rows (the newer wins).
  const std::string body = R"({"results":[{"statement_id":0,"series":[
    {"name":"gpu","columns":["time","last"],"values":[[1,1]]},
    {"name":"gpu","tags":{"host":"n1"},"columns":["time","last"],"values":[[1,1]]},
    {"name":"gpu","tags":{"uuid":""},"columns":["time","last"],"values":[[1,1]]},
    {"name":"gpu","tags":{"uuid":"GPU-null"},"columns":["time","last"],"values":[[1,null]]},
    {"name":"gpu","tags":{"uuid":"GPU-str"},"columns":["time","last"],"values":[[1,"x"]]},
    {"name":"gpu","tags":{"uuid":"GPU-rfc"},"columns":["time","last"],"values":[["2024-01-01T00:00:00Z",1]]},
    {"name":"gpu","tags":{"uuid":"GPU-bool"},"columns":["time","last"],"values":[[5,true]]},
    {"name":"gpu","tags":{"uuid":"GPU-two"},"columns":["time","mean"],"values":[[10,1],[20,2]]}]}]})";
  core::GpuMetricsMap out;
  ASSERT_TRUE(ParseInfluxResponse(body, kMetrics, "uuid", out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out.at(GpuUuid("GPU-bool")).Get(GpuMetric::kGpuUtil)->value, 1);
  EXPECT_EQ(out.at(GpuUuid("GPU-two")).Get(GpuMetric::kGpuUtil)->value, 2);
  EXPECT_EQ(out.at(GpuUuid("GPU-two")).Get(GpuMetric::kGpuUtil)->timestamp_ms, 20);
}

TEST(InfluxSourceTest, EmptyResults) {
  core::GpuMetricsMap out;
  EXPECT_TRUE(
      ParseInfluxResponse(R"({"results":[{"statement_id":0},{"statement_id":1}]})", kMetrics, "uuid", out).ok());
  EXPECT_TRUE(ParseInfluxResponse(R"({"results":[]})", kMetrics, "uuid", out).ok());
  EXPECT_TRUE(out.empty());
}

struct ErrorCase {
  std::string name;
  std::string body;
  StatusCode code;
  std::string message;
};

TEST(InfluxSourceTest, Errors) {
  const std::vector<ErrorCase> cases = {
      {.name = "statement error names the metric",
       .body = R"j({"results":[{"statement_id":0},{"statement_id":1,"error":"undefined function lastt()"}]})j",
       .code = StatusCode::kInvalidArgument,
       .message = "metric memory_used_mib: undefined function lastt()"},
      {.name = "missing database",
       .body = R"({"results":[{"statement_id":0,"error":"database not found: nope"}]})",
       .code = StatusCode::kNotFound,
       .message = "database not found: nope"},
      {.name = "request error",
       .body = R"({"error":"error parsing query: found EOF, expected FROM at line 1, char 9"})",
       .code = StatusCode::kInvalidArgument,
       .message = "InfluxDB: error parsing query"},
      {.name = "not JSON", .body = "<html>", .code = StatusCode::kInvalidArgument, .message = "not a JSON object"},
      {.name = "no results", .body = "{}", .code = StatusCode::kInvalidArgument, .message = "no \"results\""},
      {.name = "unknown statement",
       .body = R"({"results":[{"statement_id":7}]})",
       .code = StatusCode::kInvalidArgument,
       .message = "unexpected statement_id 7"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    core::GpuMetricsMap out;
    const common::Status s = ParseInfluxResponse(c.body, kMetrics, "uuid", out);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace gpusched::adapters::influxdb
