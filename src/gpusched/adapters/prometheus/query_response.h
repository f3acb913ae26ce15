#pragma once

// Decoding of Prometheus HTTP API answers (/api/v1/query and /api/v1/query_range, k8s-gpu-protocols.md section
// 6.1): the envelope {"status","data":{"resultType","result"},"errorType","error","warnings"} and the vector,
// matrix, scalar and string result types.
//
// Sample values arrive as JSON strings so that "NaN", "+Inf" and "-Inf" fit; they decode to the IEEE values
// (callers that need finite numbers filter them). Timestamps are float seconds and become Unix milliseconds,
// rounded to the nearest millisecond (Prometheus keeps millisecond precision).
//
// Speed: a scheduler refresh for 5000 nodes x 8 GPUs is 40,000 series per metric (3.7 MB of JSON with the default
// `max by (UUID)` queries, 13 MB with the agent's whole label set), so the decoder is simdjson's DOM parser, which
// picks its SIMD kernel (haswell, icelake) at run time. (Its on-demand API would skip more, but it compiles only the
// kernel the build's -march allows, the portable fallback here, which measured 3x slower.) Visit() hands each
// series' UUID and samples to a callback as views into the parser's buffers: no allocation per series.
//
// Thread-safety: a QueryResponseParser is used by one thread at a time (it reuses simdjson's buffers).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"

namespace gpusched::adapters::prometheus {

// One series of a vector (one sample) or a matrix (samples in time order), or the single value of a scalar or
// string result (no labels).
struct Series {
  std::vector<std::pair<std::string, std::string>> labels;  // in the server's order
  std::vector<core::MetricSample> samples;

  // The label's value, or nullptr when the series has no such label.
  [[nodiscard]] const std::string* Label(std::string_view name) const;
};

struct QueryResult {
  std::string result_type;  // "vector", "matrix", "scalar" or "string"
  std::vector<Series> series;
  std::vector<std::string> warnings;
};

struct ParseOptions {
  // Non-empty: keep only this label of each series (the fast path for Fetch); empty: keep every label.
  std::string only_label;
};

class QueryResponseParser {
 public:
  QueryResponseParser();
  ~QueryResponseParser();
  QueryResponseParser(const QueryResponseParser&) = delete;
  QueryResponseParser& operator=(const QueryResponseParser&) = delete;

  // Decodes a response body. Errors:
  //   * {"status":"error"} -> the errorType and error, as "bad_data: 1:5: parse error: ..." (InvalidArgument for
  //     bad_data and execution, DeadlineExceeded for timeout, Unavailable otherwise);
  //   * malformed JSON or an unexpected shape -> InvalidArgument saying what was wrong and where.
  // `body` may have its capacity grown (simdjson reads up to 64 bytes past the end); its contents stay the same.
  [[nodiscard]] common::Result<QueryResult> Parse(std::string& body, const ParseOptions& options = {});

  // The fast path: for each series of a vector or matrix answer, calls `visit` with the value of label `label`
  // ("" when the series has none) and the series' samples. The views are valid during the call only. Returns
  // the number of series. Errors as Parse; a scalar or string result is InvalidArgument.
  using SeriesVisitor = std::function<void(std::string_view label_value, std::span<const core::MetricSample>)>;
  [[nodiscard]] common::Result<int64_t> Visit(std::string& body, std::string_view label, const SeriesVisitor& visit);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Convenience for tests and one-off callers: copies `body` and parses it with a fresh parser.
[[nodiscard]] common::Result<QueryResult> ParseQueryResponse(std::string_view body, const ParseOptions& options = {});

// "87", "0.5", "NaN", "+Inf", "-Inf", "Inf" -> the value; nullopt for anything else.
[[nodiscard]] std::optional<double> ParseSampleValue(std::string_view s);

}  // namespace gpusched::adapters::prometheus
