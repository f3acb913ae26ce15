#include "gpusched/adapters/prometheus/prometheus_source.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpusched/common/redact.h"
#include "gpusched/net/http_client.h"

namespace gpusched::adapters::prometheus {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MicrosSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
}

// Unix milliseconds as the API's float seconds: 1700000000123 -> "1700000000.123".
std::string UnixSeconds(int64_t ms) {
  const bool negative = ms < 0;
  const int64_t abs_ms = negative ? -ms : ms;
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s%lld.%03lld", negative ? "-" : "", static_cast<long long>(abs_ms / 1000),
                static_cast<long long>(abs_ms % 1000));
  return buf;
}

// A Status with the same code and `prefix` before its message.
common::Status Prefixed(const std::string& prefix, const common::Status& s) { return {s.code(), prefix + s.message()}; }

}  // namespace

std::string_view DcgmMetricName(core::GpuMetric metric) {
  constexpr std::array<std::string_view, core::kGpuMetricCount> kNames = {
      "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",  "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_POWER_USAGE",
      "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL"};
  return kNames[static_cast<size_t>(metric)];
}

std::array<std::string, core::kGpuMetricCount> DefaultQueries(std::string_view uuid_label) {
  std::array<std::string, core::kGpuMetricCount> out;
  for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
    out[i] = "max by (" + std::string(uuid_label) + ") (" +
             std::string(DcgmMetricName(static_cast<core::GpuMetric>(i))) + ")";
  }
  return out;
}

namespace {

// Adds samples to a GpuMetricsMap by UUID without allocating for GPUs it already holds.
// Lookups are memory-latency bound at 40,000 GPUs (a hash table of scattered nodes: ~250 ns a lookup, 10 ms a
// metric), so the builder first tries the GPU that followed the previous one in the first metric's answer:
// Prometheus answers each metric's query in the same series order when the GPUs are the same, which makes the
// usual lookup one comparison of 40 bytes read in sequence. On a mismatch it falls back to the hash index (views
// into the map's own keys, which stay put in a node-based map) and continues from there.
class GpuMapBuilder {
 public:
  explicit GpuMapBuilder(core::GpuMetricsMap& out) : out_(out) {
    for (auto& [uuid, metrics] : out_) {
      Append(uuid.str(), &metrics);
    }
  }
  void Reserve(size_t n) {
    out_.reserve(n);
    index_.reserve(n);
    order_.reserve(n);
  }
  // Call before each metric's answer.
  void Rewind() { cursor_ = 0; }
  // Keeps the newer sample, then the larger value.
  void Add(std::string_view uuid, core::GpuMetric metric, const core::MetricSample& sample) {
    core::GpuMetrics* gpu = nullptr;
    if (cursor_ < order_.size() && order_[cursor_].first == uuid) {
      gpu = order_[cursor_].second;
      ++cursor_;
    } else if (const auto it = index_.find(uuid); it != index_.end()) {
      gpu = order_[it->second].second;
      cursor_ = it->second + 1;
    } else {
      auto [mit, inserted] = out_.try_emplace(common::GpuUuid(uuid));
      gpu = &mit->second;
      Append(mit->first.str(), gpu);
      cursor_ = order_.size();
    }
    const std::optional<core::MetricSample>& have = gpu->Get(metric);
    if (!have.has_value() || sample.timestamp_ms > have->timestamp_ms ||
        (sample.timestamp_ms == have->timestamp_ms && sample.value > have->value)) {
      gpu->Set(metric, sample);
    }
  }

 private:
  void Append(std::string_view uuid, core::GpuMetrics* gpu) {
    index_.emplace(uuid, order_.size());
    order_.emplace_back(uuid, gpu);
  }

  core::GpuMetricsMap& out_;
  std::vector<std::pair<std::string_view, core::GpuMetrics*>> order_;  // in first-seen order
  std::unordered_map<std::string_view, size_t> index_;                 // uuid -> position in order_
  size_t cursor_ = 0;
};

// One series' contribution: its last (newest) sample, unless it has no UUID or the value is not finite.
void AddSeries(GpuMapBuilder& builder, std::string_view uuid, std::span<const core::MetricSample> samples,
               core::GpuMetric metric, MergeCounts& counts) {
  if (uuid.empty()) {
    ++counts.no_uuid;
    return;
  }
  if (samples.empty()) {
    return;
  }
  if (!std::isfinite(samples.back().value)) {
    ++counts.not_finite;
    return;
  }
  builder.Add(uuid, metric, samples.back());
}

}  // namespace

struct InstantDecoder::Impl {
  Impl(QueryResponseParser& p, std::string label, size_t expected) : parser(p), uuid_label(std::move(label)) {
    builder.Reserve(expected);
  }
  QueryResponseParser& parser;
  std::string uuid_label;
  core::GpuMetricsMap map;
  GpuMapBuilder builder{map};
  MergeCounts counts;
};

InstantDecoder::InstantDecoder(QueryResponseParser& parser, std::string uuid_label, size_t expected_gpus)
    : impl_(std::make_unique<Impl>(parser, std::move(uuid_label), expected_gpus)) {}
InstantDecoder::~InstantDecoder() = default;

common::Result<int64_t> InstantDecoder::Add(std::string& body, core::GpuMetric metric) {
  impl_->builder.Rewind();
  return impl_->parser.Visit(body, impl_->uuid_label,
                             [&](std::string_view uuid, std::span<const core::MetricSample> samples) {
                               AddSeries(impl_->builder, uuid, samples, metric, impl_->counts);
                             });
}

const MergeCounts& InstantDecoder::counts() const { return impl_->counts; }

core::GpuMetricsMap InstantDecoder::Take() { return std::move(impl_->map); }

MergeCounts MergeSeries(const QueryResult& result, core::GpuMetric metric, std::string_view uuid_label,
                        core::GpuMetricsMap& out) {
  MergeCounts counts;
  GpuMapBuilder builder(out);
  builder.Rewind();
  for (const Series& series : result.series) {
    const std::string* uuid = series.Label(uuid_label);
    AddSeries(builder, uuid != nullptr ? std::string_view(*uuid) : std::string_view(), series.samples, metric, counts);
  }
  return counts;
}

struct PrometheusSource::Impl {
  PrometheusSourceOptions options;
  std::string base;  // url without a trailing slash, credentials redacted: for messages only
  std::string timeout_param;
  mutable std::mutex mu;
  std::unique_ptr<net::HttpClient> http;
  QueryResponseParser parser;  // GUARDED_BY(mu)
  FetchStats stats;            // GUARDED_BY(mu)
  size_t last_gpus = 0;        // GUARDED_BY(mu)

  static std::string Escape(std::string_view s) { return net::UrlEncode(s); }

  // POSTs the form `body` to base + `path` and leaves the answer in `response`. A transport failure or an HTTP
  // status other than 200 with a body that is not Prometheus's error envelope is a Status; a Prometheus error
  // envelope (any HTTP status) is left for the decoder, which turns it into errorType: error.
  common::Status Post(const std::string& path, const std::string& body, std::string& response, int64_t& http_us) {
    net::ClientRequest request{.method = "POST", .target = path, .body = body};
    request.headers.emplace_back("Content-Type: application/x-www-form-urlencoded");
    if (!options.bearer_token.empty()) {
      request.headers.push_back("Authorization: Bearer " + options.bearer_token);
    }
    const auto start = Clock::now();
    common::Result<net::ClientResponse> answer = http->Send(request);
    http_us += MicrosSince(start);
    if (!answer.ok()) {
      return answer.status();
    }
    response = std::move(answer->body);
    const long code = answer->status;
    if (code == 200) {
      return common::Status::Ok();
    }
    // Prometheus answers errors with its envelope (400 bad_data, 422 execution, 503 timeout); a proxy or a wrong
    // URL answers with something else.
    if (response.find("\"status\"") != std::string::npos && response.find("\"error\"") != std::string::npos) {
      return common::Status::Ok();
    }
    const std::string what = "HTTP " + std::to_string(code) + " " + net::ShortenBody(response);
    switch (code) {
      case 400:
      case 422:
        return common::InvalidArgument(what);
      case 401:
        return common::Unauthenticated(what);
      case 403:
        return common::PermissionDenied(what);
      case 404:
        return common::NotFound(what + " (is the URL a Prometheus server?)");
      default:
        return common::Unavailable(what);
    }
  }

  // One query; `what` names it in errors ("metric gpu_util, query `...`").
  common::Result<QueryResult> Query(const std::string& path, const std::string& form, const std::string& what,
                                    const ParseOptions& parse, FetchStats& fs) {
    std::string response;
    const common::Status sent = Post(path, form, response, fs.http_us);
    const std::string prefix = "prometheus " + base + ": " + what + ": ";
    if (!sent.ok()) {
      return Prefixed(prefix, sent);
    }
    fs.response_bytes += static_cast<int64_t>(response.size());
    ++fs.queries;
    const auto start = Clock::now();
    common::Result<QueryResult> result = parser.Parse(response, parse);
    fs.parse_us += MicrosSince(start);
    if (!result.ok()) {
      return Prefixed(prefix, result.status());
    }
    return result;
  }

  std::string InstantForm(std::string_view promql, std::optional<int64_t> time_ms) const {
    std::string form = "query=" + Escape(promql) + "&timeout=" + timeout_param;
    if (time_ms.has_value()) {
      form += "&time=" + UnixSeconds(*time_ms);
    }
    return form;
  }
};

PrometheusSource::PrometheusSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PrometheusSource::~PrometheusSource() = default;

common::Result<std::unique_ptr<PrometheusSource>> PrometheusSource::Create(PrometheusSourceOptions options) {
  if (options.url.rfind("http://", 0) != 0 && options.url.rfind("https://", 0) != 0) {
    return common::InvalidArgument("Prometheus URL \"" + common::RedactUrl(options.url) +
                                   "\" must start with http:// or https://");
  }
  if (options.timeout.count() <= 0) {
    return common::InvalidArgument("Prometheus: the timeout must be positive");
  }
  if (options.uuid_label.empty()) {
    return common::InvalidArgument("Prometheus: the UUID label name is empty");
  }
  bool any = false;
  for (const std::string& q : options.queries) {
    any = any || !q.empty();
  }
  if (!any) {
    return common::InvalidArgument("Prometheus: every metric is disabled (no query)");
  }
  auto impl = std::make_unique<Impl>();
  GPUSCHED_ASSIGN_OR_RETURN(http, net::HttpClient::Create(net::HttpClientOptions{.base_url = options.url,
                                                                                 .timeout = options.timeout,
                                                                                 .connect_timeout = options.timeout,
                                                                                 .accept_gzip = options.gzip,
                                                                                 .max_idle_handles = 1}));
  impl->http = std::move(http);
  impl->base = common::RedactUrl(options.url);
  while (!impl->base.empty() && impl->base.back() == '/') {
    impl->base.pop_back();
  }
  const int64_t ms = options.timeout.count();
  impl->timeout_param = UnixSeconds(ms);
  impl->options = std::move(options);
  return std::unique_ptr<PrometheusSource>(new PrometheusSource(std::move(impl)));
}

std::string PrometheusSource::Describe() const { return "prometheus " + impl_->base; }

const PrometheusSourceOptions& PrometheusSource::options() const { return impl_->options; }

FetchStats PrometheusSource::last_fetch_stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

common::Result<core::GpuMetricsMap> PrometheusSource::Fetch() {
  std::lock_guard lock(impl_->mu);
  FetchStats fs;
  // The cluster's size changes slowly: last time's GPU count sizes the map, so filling it never rehashes.
  InstantDecoder decoder(impl_->parser, impl_->options.uuid_label, impl_->last_gpus);
  for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
    const std::string& promql = impl_->options.queries[i];
    if (promql.empty()) {
      continue;
    }
    const auto metric = static_cast<core::GpuMetric>(i);
    const std::string prefix = "prometheus " + impl_->base + ": metric " + std::string(core::GpuMetricName(metric)) +
                               ", query `" + promql + "`: ";
    std::string response;
    const common::Status sent =
        impl_->Post("/api/v1/query", impl_->InstantForm(promql, std::nullopt), response, fs.http_us);
    if (!sent.ok()) {
      impl_->stats = fs;
      return Prefixed(prefix, sent);
    }
    ++fs.queries;
    fs.response_bytes += static_cast<int64_t>(response.size());
    const auto start = Clock::now();
    common::Result<int64_t> series = decoder.Add(response, metric);
    fs.parse_us += MicrosSince(start);
    if (!series.ok()) {
      impl_->stats = fs;
      return Prefixed(prefix, series.status());
    }
    fs.series += *series;
  }
  fs.skipped_no_uuid = decoder.counts().no_uuid;
  fs.skipped_not_finite = decoder.counts().not_finite;
  core::GpuMetricsMap out = decoder.Take();
  impl_->stats = fs;
  impl_->last_gpus = out.size();
  return out;
}

common::Status PrometheusSource::Check() {
  std::lock_guard lock(impl_->mu);
  FetchStats fs;
  for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
    const std::string& promql = impl_->options.queries[i];
    if (promql.empty()) {
      continue;
    }
    const auto metric = static_cast<core::GpuMetric>(i);
    const std::string what = "metric " + std::string(core::GpuMetricName(metric)) + ", query `" + promql + "`";
    common::Result<QueryResult> result = impl_->Query("/api/v1/query", impl_->InstantForm(promql, std::nullopt), what,
                                                      ParseOptions{.only_label = impl_->options.uuid_label}, fs);
    if (!result.ok()) {
      return result.status();
    }
    if (result->result_type != "vector") {
      return common::InvalidArgument("prometheus " + impl_->base + ": " + what + ": the result is a " +
                                     result->result_type + ", not an instant vector of per-GPU series");
    }
  }
  return common::Status::Ok();
}

common::Result<QueryResult> PrometheusSource::InstantQuery(std::string_view promql, std::optional<int64_t> time_ms) {
  std::lock_guard lock(impl_->mu);
  FetchStats fs;
  return impl_->Query("/api/v1/query", impl_->InstantForm(promql, time_ms), "query `" + std::string(promql) + "`",
                      ParseOptions{}, fs);
}

common::Result<RangeResult> PrometheusSource::RangeQuery(std::string_view promql, int64_t start_ms, int64_t end_ms,
                                                         std::chrono::milliseconds step) {
  const std::string what = "range query `" + std::string(promql) + "`";
  if (end_ms < start_ms) {
    return common::InvalidArgument("prometheus " + impl_->base + ": " + what + ": end is before start");
  }
  if (step.count() <= 0) {
    return common::InvalidArgument("prometheus " + impl_->base + ": " + what + ": the step must be positive");
  }
  std::lock_guard lock(impl_->mu);
  const std::string form = "query=" + impl_->Escape(promql) + "&start=" + UnixSeconds(start_ms) +
                           "&end=" + UnixSeconds(end_ms) + "&step=" + UnixSeconds(step.count()) +
                           "&timeout=" + impl_->timeout_param;
  FetchStats fs;
  GPUSCHED_ASSIGN_OR_RETURN(result, impl_->Query("/api/v1/query_range", form, what, ParseOptions{}, fs));
  if (result.result_type != "matrix") {
    return common::InvalidArgument("prometheus " + impl_->base + ": " + what + ": expected a matrix, got " +
                                   result.result_type);
  }
  return RangeResult{.series = std::move(result.series), .warnings = std::move(result.warnings)};
}

}  // namespace gpusched::adapters::prometheus
