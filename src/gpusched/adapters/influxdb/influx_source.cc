#include "gpusched/adapters/influxdb/influx_source.h"
#include "gpusched/adapters/influxdb/influx_http.h"
#include "gpusched/common/redact.h"

#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace gpusched::adapters::influxdb {
namespace {

using nlohmann::json;

// InfluxQL identifier quoting: "name" with " and \ escaped.
std::string QuoteIdent(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  out += '"';
  return out;
}

// The value of a result cell as a double: numbers, and booleans as 1/0; nullopt for null and strings.
std::optional<double> CellValue(const json& v) {
  if (v.is_number()) {
    return v.get<double>();
  }
  if (v.is_boolean()) {
    return v.get<bool>() ? 1.0 : 0.0;
  }
  return std::nullopt;
}

common::Status StatementError(std::string_view metric, std::string_view error) {
  std::string what = "metric " + std::string(metric) + ": " + std::string(error);
  if (error.find("database not found") != std::string_view::npos) {
    return common::NotFound(std::move(what));
  }
  return common::InvalidArgument(std::move(what));
}

}  // namespace

std::string_view AgentFieldName(core::GpuMetric metric) {
  constexpr std::array<std::string_view, core::kGpuMetricCount> kFields = {
      "gpu_util", "fb_used_mib", "mem_copy_util", "power_w", "temperature_c", "", ""};
  return kFields[static_cast<size_t>(metric)];
}

std::array<std::string, core::kGpuMetricCount> DefaultInfluxQueries(std::string_view measurement,
                                                                    std::string_view uuid_tag,
                                                                    std::chrono::seconds lookback) {
  std::array<std::string, core::kGpuMetricCount> out;
  for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
    const std::string_view field = AgentFieldName(static_cast<core::GpuMetric>(i));
    if (field.empty()) {
      continue;
    }
    out[i] = "SELECT last(" + QuoteIdent(field) + ") FROM " + QuoteIdent(measurement) + " WHERE time > now() - " +
             std::to_string(lookback.count()) + "s GROUP BY " + QuoteIdent(uuid_tag);
  }
  return out;
}

namespace {
common::Status ParseInfluxResponseUnchecked(std::string_view body, std::span<const core::GpuMetric> metrics,
                                            std::string_view uuid_tag, core::GpuMetricsMap& out);
}  // namespace

common::Status ParseInfluxResponse(std::string_view body, std::span<const core::GpuMetric> metrics,
                                   std::string_view uuid_tag, core::GpuMetricsMap& out) {
  // A field of an unexpected type makes nlohmann throw (influx_response_fuzz found one: a non-integer
  // statement_id); any such shape is a bad answer, not a crash. `out` is only written on success.
  core::GpuMetricsMap decoded = out;
  try {
    GPUSCHED_RETURN_IF_ERROR(ParseInfluxResponseUnchecked(body, metrics, uuid_tag, decoded));
  } catch (const json::exception& e) {
    return common::InvalidArgument(std::string("InfluxDB response has an unexpected shape: ") + e.what());
  }
  out = std::move(decoded);
  return common::Status::Ok();
}

namespace {
common::Status ParseInfluxResponseUnchecked(std::string_view body, std::span<const core::GpuMetric> metrics,
                                            std::string_view uuid_tag, core::GpuMetricsMap& out) {
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return common::InvalidArgument("InfluxDB response is not a JSON object: " + net::ShortenBody(std::string(body)));
  }
  if (const auto err = doc.find("error"); err != doc.end() && err->is_string()) {
    return common::InvalidArgument("InfluxDB: " + err->get<std::string>());
  }
  const auto results = doc.find("results");
  if (results == doc.end() || !results->is_array()) {
    return common::InvalidArgument("InfluxDB response has no \"results\" array");
  }
  for (const json& statement : *results) {
    if (!statement.is_object()) {
      return common::InvalidArgument("InfluxDB response: a result is not an object");
    }
    const int64_t id = statement.value("statement_id", int64_t{-1});
    if (id < 0 || static_cast<size_t>(id) >= metrics.size()) {
      return common::InvalidArgument("InfluxDB response: unexpected statement_id " + std::to_string(id));
    }
    const core::GpuMetric metric = metrics[static_cast<size_t>(id)];
    const std::string_view name = core::GpuMetricName(metric);
    if (const auto err = statement.find("error"); err != statement.end() && err->is_string()) {
      return StatementError(name, err->get<std::string>());
    }
    const auto series = statement.find("series");
    if (series == statement.end()) {
      continue;  // no data in the window
    }
    if (!series->is_array()) {
      return common::InvalidArgument("InfluxDB response: metric " + std::string(name) + ": series is not an array");
    }
    for (const json& s : *series) {
      const auto tags = s.find("tags");
      const auto values = s.find("values");
      if (tags == s.end() || !tags->is_object() || values == s.end() || !values->is_array()) {
        continue;  // not grouped by the UUID tag, or no rows
      }
      const auto uuid = tags->find(uuid_tag);
      if (uuid == tags->end() || !uuid->is_string() || uuid->get_ref<const std::string&>().empty()) {
        continue;
      }
      // The newest row with a time and a numeric value in the first column after time.
      std::optional<core::MetricSample> best;
      for (const json& row : *values) {
        if (!row.is_array() || row.size() < 2 || !row[0].is_number_integer()) {
          continue;
        }
        const std::optional<double> v = CellValue(row[1]);
        if (!v.has_value()) {
          continue;
        }
        const core::MetricSample sample{.value = *v, .timestamp_ms = row[0].get<int64_t>()};
        if (!best.has_value() || sample.timestamp_ms >= best->timestamp_ms) {
          best = sample;
        }
      }
      if (!best.has_value()) {
        continue;
      }
      core::GpuMetrics& gpu = out[common::GpuUuid(uuid->get<std::string>())];
      const auto& have = gpu.Get(metric);
      if (!have.has_value() || best->timestamp_ms >= have->timestamp_ms) {
        gpu.Set(metric, *best);
      }
    }
  }
  return common::Status::Ok();
}
}  // namespace

struct InfluxSource::Impl {
  InfluxSourceOptions options;
  std::string base;
  std::string params;                    // db, rp and epoch, form-encoded
  std::string form;                      // params and all statements
  std::vector<core::GpuMetric> metrics;  // statement i -> metric
  std::mutex mu;
  std::unique_ptr<net::HttpClient> http;

  static std::string Escape(std::string_view s) { return net::UrlEncode(s); }

  common::Result<std::string> Post(const std::string& body) {
    std::string response;
    const std::string prefix = "influxdb " + base + " db=" + options.database + ": ";
    GPUSCHED_ASSIGN_OR_RETURN(
        code, detail::Post(*http, "/query", body, "Content-Type: application/x-www-form-urlencoded", response, prefix));
    if (code == 200) {
      return response;
    }
    return detail::HttpError(code, prefix, response);
  }

  // The statement for error messages.
  std::string StatementOf(const common::Status& s) const {
    for (const core::GpuMetric m : metrics) {
      if (s.message().find("metric " + std::string(core::GpuMetricName(m)) + ":") == 0) {
        return " (statement `" + options.queries[static_cast<size_t>(m)] + "`)";
      }
    }
    return "";
  }
};

InfluxSource::InfluxSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
InfluxSource::~InfluxSource() = default;

common::Result<std::unique_ptr<InfluxSource>> InfluxSource::Create(InfluxSourceOptions options) {
  GPUSCHED_RETURN_IF_ERROR(detail::ValidateEndpoint(options.url, options.database, options.timeout));
  if (options.uuid_tag.empty()) {
    return common::InvalidArgument("InfluxDB: the UUID tag name is empty");
  }
  auto impl = std::make_unique<Impl>();
  GPUSCHED_ASSIGN_OR_RETURN(http, detail::Connect(options.url, options.timeout, options.username, options.password));
  impl->http = std::move(http);
  std::string statements;
  for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
    const std::string& q = options.queries[i];
    if (q.empty()) {
      continue;
    }
    const auto metric = static_cast<core::GpuMetric>(i);
    if (q.find(';') != std::string::npos) {
      return common::InvalidArgument("InfluxDB: the query of metric " + std::string(core::GpuMetricName(metric)) +
                                     " has a ';' (one statement per metric): " + q);
    }
    if (!statements.empty()) {
      statements += "; ";
    }
    statements += q;
    impl->metrics.push_back(metric);
  }
  if (impl->metrics.empty()) {
    return common::InvalidArgument("InfluxDB: every metric is disabled (no query)");
  }
  impl->base = common::RedactUrl(options.url);  // for messages only
  while (!impl->base.empty() && impl->base.back() == '/') {
    impl->base.pop_back();
  }
  impl->params = "db=" + impl->Escape(options.database) + "&epoch=ms";
  if (!options.retention_policy.empty()) {
    impl->params += "&rp=" + impl->Escape(options.retention_policy);
  }
  impl->form = impl->params + "&q=" + impl->Escape(statements);
  impl->options = std::move(options);
  return std::unique_ptr<InfluxSource>(new InfluxSource(std::move(impl)));
}

std::string InfluxSource::Describe() const { return "influxdb " + impl_->base + " db=" + impl_->options.database; }

common::Result<core::GpuMetricsMap> InfluxSource::Fetch() {
  std::lock_guard lock(impl_->mu);
  GPUSCHED_ASSIGN_OR_RETURN(body, impl_->Post(impl_->form));
  core::GpuMetricsMap out;
  common::Status parsed = ParseInfluxResponse(body, impl_->metrics, impl_->options.uuid_tag, out);
  if (!parsed.ok() && parsed.message().find("not executed") != std::string::npos) {
    // InfluxDB 1.6 answers a multi-statement request against a missing database with only "not executed"; the
    // first statement alone says why.
    const core::GpuMetric first = impl_->metrics.front();
    GPUSCHED_ASSIGN_OR_RETURN(
        alone, impl_->Post(impl_->params + "&q=" + impl_->Escape(impl_->options.queries[static_cast<size_t>(first)])));
    core::GpuMetricsMap ignored;
    const common::Status why = ParseInfluxResponse(alone, std::span(&first, 1), impl_->options.uuid_tag, ignored);
    if (!why.ok()) {
      parsed = why;
    }
  }
  if (!parsed.ok()) {
    return common::Status(parsed.code(), "influxdb " + impl_->base + " db=" + impl_->options.database + ": " +
                                             parsed.message() + impl_->StatementOf(parsed));
  }
  return out;
}

common::Status InfluxSource::Check() {
  auto r = Fetch();
  return r.status();
}

common::Result<std::vector<InfluxSeries>> InfluxSource::Query(std::string_view statement) {
  const std::string where =
      "influxdb " + impl_->base + " db=" + impl_->options.database + ": statement `" + std::string(statement) + "`: ";
  if (statement.find(';') != std::string_view::npos) {
    return common::InvalidArgument(where + "has a ';' (one statement at a time)");
  }
  std::lock_guard lock(impl_->mu);
  GPUSCHED_ASSIGN_OR_RETURN(body, impl_->Post(impl_->params + "&q=" + impl_->Escape(statement)));
  const json doc = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    return common::Internal(where + "the answer is not JSON");
  }
  if (doc.contains("error") && doc["error"].is_string()) {
    return StatementError("query", doc["error"].get<std::string>());
  }
  std::vector<InfluxSeries> out;
  const json results = doc.value("results", json::array());
  if (!results.is_array()) {
    return common::Internal(where + "no results array in the answer");
  }
  for (const json& r : results) {
    if (r.contains("error") && r["error"].is_string()) {
      const common::Status e = StatementError("query", r["error"].get<std::string>());
      return common::Status(e.code(), where + r["error"].get<std::string>());
    }
    if (!r.contains("series") || !r["series"].is_array()) {
      continue;
    }
    for (const json& s : r["series"]) {
      InfluxSeries series;
      if (s.contains("tags") && s["tags"].is_object()) {
        for (const auto& [k, v] : s["tags"].items()) {
          if (v.is_string()) {
            series.tags[k] = v.get<std::string>();
          }
        }
      }
      const json columns = s.value("columns", json::array());
      if (!columns.is_array() || columns.size() < 2 || columns[0] != "time") {
        return common::Internal(where + "a series without a time column and a value column");
      }
      for (const json& row : s.value("values", json::array())) {
        if (!row.is_array() || row.size() < 2 || !row[0].is_number_integer()) {
          continue;
        }
        if (const auto v = CellValue(row[1])) {
          series.points.emplace_back(row[0].get<int64_t>(), *v);
        }
      }
      out.push_back(std::move(series));
    }
  }
  return out;
}

}  // namespace gpusched::adapters::influxdb
