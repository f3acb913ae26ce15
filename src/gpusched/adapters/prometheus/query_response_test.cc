#include "gpusched/adapters/prometheus/query_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace gpusched::adapters::prometheus {
namespace {

using common::StatusCode;
using ::testing::HasSubstr;

// A vector answer as Prometheus 2.42 writes it (label order as the server sorts them).
constexpr std::string_view kVector = R"({"status":"success","data":{"resultType":"vector","result":[
 {"metric":{"Hostname":"n1","UUID":"GPU-a","__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","modelName":"NVIDIA A100"},
  "value":[1700000000.781,"87"]},
 {"metric":{"UUID":"GPU-b","gpu":"1"},"value":[1700000001,"12.5"]}]}})";

TEST(QueryResponseTest, VectorKeepsEveryLabelAndMillisecondTimestamps) {
  auto r = ParseQueryResponse(kVector);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result_type, "vector");
  ASSERT_EQ(r->series.size(), 2u);
  const Series& a = r->series[0];
  EXPECT_EQ(a.labels.size(), 5u);
  ASSERT_NE(a.Label("UUID"), nullptr);
  EXPECT_EQ(*a.Label("UUID"), "GPU-a");
  EXPECT_EQ(*a.Label("modelName"), "NVIDIA A100");
  EXPECT_EQ(a.Label("pod"), nullptr);
  ASSERT_EQ(a.samples.size(), 1u);
  // 1700000000.781 s -> 1700000000781 ms
  EXPECT_EQ(a.samples[0].timestamp_ms, 1700000000781);
  EXPECT_EQ(a.samples[0].value, 87);
  // An integral timestamp (no fraction) -> x 1000
  EXPECT_EQ(r->series[1].samples[0].timestamp_ms, 1700000001000);
  EXPECT_EQ(r->series[1].samples[0].value, 12.5);
}

TEST(QueryResponseTest, OnlyLabelKeepsJustThatLabel) {
  auto r = ParseQueryResponse(kVector, {.only_label = "UUID"});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->series.size(), 2u);
  ASSERT_EQ(r->series[0].labels.size(), 1u);
  EXPECT_EQ(r->series[0].labels[0], (std::pair<std::string, std::string>{"UUID", "GPU-a"}));
  EXPECT_EQ(r->series[1].labels[0].second, "GPU-b");
}

TEST(QueryResponseTest, MatrixSamplesInOrder) {
  constexpr std::string_view kMatrix = R"({"status":"success","data":{"resultType":"matrix","result":[
    {"metric":{"UUID":"GPU-a"},"values":[[1700000000,"1"],[1700000015,"2"],[1700000030,"3"]]}]}})";
  auto r = ParseQueryResponse(kMatrix);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->result_type, "matrix");
  ASSERT_EQ(r->series.size(), 1u);
  ASSERT_EQ(r->series[0].samples.size(), 3u);
  EXPECT_EQ(r->series[0].samples[2].timestamp_ms, 1700000030000);
  EXPECT_EQ(r->series[0].samples[2].value, 3);
}

TEST(QueryResponseTest, SpecialValuesDecode) {
  constexpr std::string_view kBody = R"({"status":"success","data":{"resultType":"vector","result":[
    {"metric":{"UUID":"a"},"value":[1,"NaN"]},{"metric":{"UUID":"b"},"value":[1,"+Inf"]},
    {"metric":{"UUID":"c"},"value":[1,"-Inf"]},{"metric":{"UUID":"d"},"value":[1,"1e3"]}]}})";
  auto r = ParseQueryResponse(kBody);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->series.size(), 4u);
  EXPECT_TRUE(std::isnan(r->series[0].samples[0].value));
  EXPECT_EQ(r->series[1].samples[0].value, std::numeric_limits<double>::infinity());
  EXPECT_EQ(r->series[2].samples[0].value, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(r->series[3].samples[0].value, 1000);
}

TEST(QueryResponseTest, ScalarAndEmptyResults) {
  auto scalar =
      ParseQueryResponse(R"({"status":"success","data":{"resultType":"scalar","result":[1700000000.5,"2"]}})");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  ASSERT_EQ(scalar->series.size(), 1u);
  EXPECT_TRUE(scalar->series[0].labels.empty());
  EXPECT_EQ(scalar->series[0].samples[0].timestamp_ms, 1700000000500);
  EXPECT_EQ(scalar->series[0].samples[0].value, 2);

  auto text = ParseQueryResponse(R"({"status":"success","data":{"resultType":"string","result":[1,"hello"]}})");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(std::isnan(text->series[0].samples[0].value));

  auto empty = ParseQueryResponse(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->series.empty());
}

TEST(QueryResponseTest, WarningsAndUnknownMembersAndEscapes) {
  auto r = ParseQueryResponse(R"({"status":"success","warnings":["partial \"data\""],"infos":[1,{"x":[]}],
    "data":{"resultType":"vector","extra":{"a":[1,2]},"result":[
      {"metric":{"pod":"we\"ird\\pod \u00e9","UUID":"GPU-x"},"value":[1,"1"],"histogram":[1,{"count":"2"}]}]}})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->warnings, std::vector<std::string>{"partial \"data\""});
  ASSERT_EQ(r->series.size(), 1u);
  EXPECT_EQ(*r->series[0].Label("pod"), "we\"ird\\pod \xc3\xa9");
  EXPECT_EQ(*r->series[0].Label("UUID"), "GPU-x");
}

struct ErrorCase {
  std::string name;
  std::string body;
  StatusCode code;
  std::string message;
};

TEST(QueryResponseTest, Errors) {
  const std::vector<ErrorCase> cases = {
      {.name = "bad_data from the server",
       .body = R"({"status":"error","errorType":"bad_data","error":"1:5: parse error: unclosed left parenthesis"})",
       .code = StatusCode::kInvalidArgument,
       .message = "Prometheus bad_data: 1:5: parse error: unclosed left parenthesis"},
      {.name = "execution error",
       .body = R"({"status":"error","errorType":"execution","error":"many-to-many matching not allowed"})",
       .code = StatusCode::kInvalidArgument,
       .message = "execution: many-to-many"},
      {.name = "server timeout",
       .body = R"({"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"})",
       .code = StatusCode::kDeadlineExceeded,
       .message = "timeout: query timed out"},
      {.name = "unavailable",
       .body = R"({"status":"error","errorType":"unavailable","error":"TSDB not ready"})",
       .code = StatusCode::kUnavailable,
       .message = "unavailable: TSDB not ready"},
      {.name = "not JSON", .body = "404 page not found", .code = StatusCode::kInvalidArgument, .message = "document"},
      {.name = "truncated",
       .body = std::string(kVector.substr(0, 120)),
       .code = StatusCode::kInvalidArgument,
       .message = "Prometheus response"},
      {.name = "no status",
       .body = R"({"data":{"resultType":"vector","result":[]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "status: missing"},
      {.name = "no resultType",
       .body = R"({"status":"success","data":{"result":[]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "no resultType"},
      {.name = "value not a number",
       .body = R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x1"]}]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "sample value \"x1\" is not a number"},
      {.name = "value not a string",
       .body = R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "series value value"},
      {.name = "three-element sample",
       .body = R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"2","3"]}]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "got 3 elements"},
      {.name = "label value not a string",
       .body =
           R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"UUID":7},"value":[1,"2"]}]}})",
       .code = StatusCode::kInvalidArgument,
       .message = "label UUID"},
      {.name = "top level not an object", .body = "[1,2]", .code = StatusCode::kInvalidArgument, .message = "document"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = ParseQueryResponse(c.body);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

TEST(QueryResponseTest, ParseSampleValue) {
  EXPECT_EQ(ParseSampleValue("87"), 87);
  EXPECT_EQ(ParseSampleValue("-0.25"), -0.25);
  EXPECT_EQ(ParseSampleValue("+3"), 3);
  EXPECT_EQ(ParseSampleValue("Inf"), std::numeric_limits<double>::infinity());
  EXPECT_FALSE(ParseSampleValue("").has_value());
  EXPECT_FALSE(ParseSampleValue("12 ").has_value());
  EXPECT_FALSE(ParseSampleValue("abc").has_value());
}

TEST(QueryResponseTest, ParserIsReusable) {
  QueryResponseParser parser;
  for (int i = 0; i < 3; ++i) {
    std::string body(kVector);
    auto r = parser.Parse(body, {.only_label = "UUID"});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->series.size(), 2u);
    EXPECT_EQ(body, kVector);  // contents unchanged
  }
}

}  // namespace
}  // namespace gpusched::adapters::prometheus
