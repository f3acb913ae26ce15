#pragma once

// PrometheusSource: live GPU metrics from a Prometheus server's HTTP API (k8s-gpu-protocols.md section 6.1), as
// ports::MetricsSource for the scheduler's background cache (sched::MetricsCache).
//
// Fetch sends one instant query per enabled metric (POST /api/v1/query, form-encoded, over one keep-alive
// connection) and maps every result series to its GPU by the UUID label. The default queries read the series the
// gpusched agent and dcgm-exporter export (section 5.1), one per metric:
//   max by (UUID) (DCGM_FI_DEV_GPU_UTIL)
// `max by (UUID)` because a GPU shared by several pods has one series per pod (same values, different pod labels),
// and because it cuts the answer to one label per series (about 90 bytes instead of 350 with the agent's label
// set), which is most of the parse cost for 40,000 GPUs.
//
// Timestamps: an instant query's sample carries the evaluation time, not the scrape time; Prometheus itself drops
// a series that has no sample within its lookback window (5 m by default) or that went stale when its target
// disappeared. What the cache's staleness bound ages out, then, is our copy after the server stops answering.
// Samples whose value is NaN or infinite, and series without the UUID label, are left out (counted in
// FetchStats). Two series for one GPU: the newer sample wins, then the larger value.
//
// Errors name the metric, the query and what went wrong: connection refused / DNS (Unavailable), timeout
// (DeadlineExceeded), HTTP 4xx/5xx with Prometheus's errorType and error ("bad_data: 1:5: parse error: ..."), or an
// undecodable body. Fetch stops at the first failing query: the cache then keeps the previous samples.
//
// Thread-safety: all methods may be called from any thread; requests are serialised on one connection.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/adapters/prometheus/query_response.h"
#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/ports/metrics_source.h"

namespace gpusched::adapters::prometheus {

// dcgm-exporter's field for each core::GpuMetric: "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", ...
[[nodiscard]] std::string_view DcgmMetricName(core::GpuMetric metric);
// `max by (<uuid_label>) (<DCGM name>)` for every metric, indexed by core::GpuMetric.
[[nodiscard]] std::array<std::string, core::kGpuMetricCount> DefaultQueries(std::string_view uuid_label = "UUID");

struct PrometheusSourceOptions {
  std::string url;  // "http://127.0.0.1:9090" (a trailing slash or a path prefix such as /prometheus is fine)
  std::chrono::milliseconds timeout{5000};  // per request, connect included; also sent as the query's `timeout`
  std::string uuid_label = "UUID";          // "uuid" for dcgm-exporter --use-old-namespace
  // PromQL per metric, indexed by core::GpuMetric. Empty: that metric is not fetched.
  std::array<std::string, core::kGpuMetricCount> queries = DefaultQueries();
  std::string bearer_token;  // sent as Authorization: Bearer when not empty
  // Ask for gzip. Off by default: inside a cluster the transfer is cheap and compressing 40,000 series costs the
  // server more CPU than the wire saves; on for a remote Prometheus behind a slow link.
  bool gzip = false;
};

// What the last Fetch cost, for logs, the benchmark and bench/metrics-refresh.sh.
struct FetchStats {
  int64_t queries = 0;
  int64_t series = 0;
  int64_t response_bytes = 0;
  int64_t skipped_no_uuid = 0;     // series without the UUID label
  int64_t skipped_not_finite = 0;  // NaN or +-Inf samples
  int64_t http_us = 0;             // time in the HTTP client (request, server, transfer)
  int64_t parse_us = 0;            // decoding and mapping to GPUs
};

// A range query's answer, one Series per label set, samples in time order.
struct RangeResult {
  std::vector<Series> series;
  std::vector<std::string> warnings;
};

class PrometheusSource final : public ports::MetricsSource {
 public:
  // InvalidArgument for a URL that is not http(s)://, a non-positive timeout, an empty UUID label or no enabled
  // query. No request is sent: call Check() for that.
  [[nodiscard]] static common::Result<std::unique_ptr<PrometheusSource>> Create(PrometheusSourceOptions options);
  ~PrometheusSource() override;
  PrometheusSource(const PrometheusSource&) = delete;
  PrometheusSource& operator=(const PrometheusSource&) = delete;

  [[nodiscard]] common::Result<core::GpuMetricsMap> Fetch() override;
  // "prometheus http://prom:9090"
  [[nodiscard]] std::string Describe() const override;

  // Runs every enabled query once: OK when the server answers and each query evaluates (an empty result is OK);
  // otherwise the first error, naming the metric and the query. For start-up and /readyz.
  [[nodiscard]] common::Status Check();

  // An instant query at `time_ms` (Unix ms; nullopt: the server's now). Every label is kept.
  [[nodiscard]] common::Result<QueryResult> InstantQuery(std::string_view promql,
                                                         std::optional<int64_t> time_ms = std::nullopt);
  // /api/v1/query_range from `start_ms` to `end_ms` every `step`. InvalidArgument for end < start or a step that
  // is not positive. Every label is kept.
  [[nodiscard]] common::Result<RangeResult> RangeQuery(std::string_view promql, int64_t start_ms, int64_t end_ms,
                                                       std::chrono::milliseconds step);

  [[nodiscard]] FetchStats last_fetch_stats() const;
  [[nodiscard]] const PrometheusSourceOptions& options() const;

 private:
  struct Impl;
  explicit PrometheusSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct MergeCounts {
  int64_t no_uuid = 0;
  int64_t not_finite = 0;
};

// Fetch's decode step, public for the benchmark: decodes instant-query answers, one per metric, into one
// GpuMetricsMap, looking GPUs up through an index of views so that no allocation happens for a GPU already seen.
// Same rules as Fetch (newest sample wins, then the larger value; no UUID or not finite: left out and counted).
class InstantDecoder {
 public:
  // `parser` is borrowed (its buffers are reused across refreshes); `expected_gpus` sizes the map.
  InstantDecoder(QueryResponseParser& parser, std::string uuid_label, size_t expected_gpus = 0);
  ~InstantDecoder();
  InstantDecoder(const InstantDecoder&) = delete;
  InstantDecoder& operator=(const InstantDecoder&) = delete;

  // Decodes one answer (its capacity may grow, see QueryResponseParser::Parse); returns its series count.
  [[nodiscard]] common::Result<int64_t> Add(std::string& body, core::GpuMetric metric);
  [[nodiscard]] const MergeCounts& counts() const;
  // The map; the decoder is spent afterwards.
  [[nodiscard]] core::GpuMetricsMap Take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Adds the samples of one metric's instant-query result to `out`, keyed by the `uuid_label` value (the mapping
// step of Fetch, public for tests and the benchmark). Returns how many series were left out, by reason.
MergeCounts MergeSeries(const QueryResult& result, core::GpuMetric metric, std::string_view uuid_label,
                        core::GpuMetricsMap& out);

}  // namespace gpusched::adapters::prometheus
