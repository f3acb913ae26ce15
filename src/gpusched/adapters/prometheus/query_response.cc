#include "gpusched/adapters/prometheus/query_response.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

namespace gpusched::adapters::prometheus {
namespace {

namespace dom = simdjson::dom;

common::Status JsonError(std::string_view where, simdjson::error_code e) {
  return common::InvalidArgument("Prometheus response: " + std::string(where) + ": " + simdjson::error_message(e));
}

common::Status ShapeError(std::string_view where, std::string_view what) {
  return common::InvalidArgument("Prometheus response: " + std::string(where) + ": " + std::string(what));
}

int64_t SecondsToMillis(double seconds) { return std::llround(seconds * 1000.0); }

// [<unix seconds>, "<value>"]. A value that is not a number is an error unless `value_may_be_text` (a string
// result), where it reads as NaN.
common::Status ParsePair(dom::element el, core::MetricSample& out, bool value_may_be_text, std::string_view where) {
  dom::array arr;
  if (auto e = el.get_array().get(arr); e != simdjson::SUCCESS) {
    return JsonError(where, e);
  }
  if (arr.size() != 2) {
    return ShapeError(where, "a sample must be [<time>, \"<value>\"], got " + std::to_string(arr.size()) + " elements");
  }
  auto it = arr.begin();
  double ts = 0;
  if (auto e = (*it).get_double().get(ts); e != simdjson::SUCCESS) {
    return JsonError(std::string(where) + " timestamp", e);
  }
  if (!std::isfinite(ts)) {
    return ShapeError(where, "timestamp is not finite");
  }
  ++it;
  std::string_view text;
  if (auto e = (*it).get_string().get(text); e != simdjson::SUCCESS) {
    return JsonError(std::string(where) + " value", e);
  }
  const std::optional<double> value = ParseSampleValue(text);
  if (!value.has_value() && !value_may_be_text) {
    return ShapeError(where, "sample value \"" + std::string(text.substr(0, 40)) + "\" is not a number");
  }
  out.timestamp_ms = SecondsToMillis(ts);
  out.value = value.value_or(std::numeric_limits<double>::quiet_NaN());
  return common::Status::Ok();
}

// The samples of one series ("value" for a vector, "values" for a matrix) into `samples` (cleared first).
common::Status SeriesSamples(dom::object series, std::vector<core::MetricSample>& samples) {
  samples.clear();
  for (const dom::key_value_pair kv : series) {
    if (kv.key == "value") {
      GPUSCHED_RETURN_IF_ERROR(ParsePair(kv.value, samples.emplace_back(), false, "series value"));
    } else if (kv.key == "values") {
      dom::array values;
      if (auto e = kv.value.get_array().get(values); e != simdjson::SUCCESS) {
        return JsonError("series values", e);
      }
      for (const dom::element v : values) {
        GPUSCHED_RETURN_IF_ERROR(ParsePair(v, samples.emplace_back(), false, "series values"));
      }
    }
    // Other members (native "histogram"s in newer servers) are skipped.
  }
  return common::Status::Ok();
}

// The series' "metric" object; nullopt when it has none (an empty label set).
common::Result<std::optional<dom::object>> SeriesLabels(dom::object series) {
  for (const dom::key_value_pair kv : series) {
    if (kv.key == "metric") {
      dom::object labels;
      if (auto e = kv.value.get_object().get(labels); e != simdjson::SUCCESS) {
        return JsonError("series metric", e);
      }
      return std::optional<dom::object>(labels);
    }
  }
  return std::optional<dom::object>();
}

common::Status ErrorStatus(std::string_view error_type, std::string_view error) {
  std::string what = "Prometheus ";
  what += error_type.empty() ? "error" : error_type;
  what += ": ";
  what += error.empty() ? "(no message)" : error;
  if (error_type == "bad_data" || error_type == "execution") {
    return common::InvalidArgument(std::move(what));
  }
  if (error_type == "timeout" || error_type == "canceled") {
    return common::DeadlineExceeded(std::move(what));
  }
  if (error_type == "not_found") {
    return common::NotFound(std::move(what));
  }
  return common::Unavailable(std::move(what));
}

// The envelope, checked: status, the error fields, warnings, and data's resultType and result.
struct Envelope {
  std::string result_type;
  dom::element result;  // an array (checked)
  dom::array result_array;
  bool has_result = false;
  std::vector<std::string> warnings;
};

common::Result<Envelope> ReadEnvelope(dom::element doc) {
  dom::object top;
  if (auto e = doc.get_object().get(top); e != simdjson::SUCCESS) {
    return JsonError("document", e);
  }
  Envelope env;
  std::string_view status;
  std::string_view error_type;
  std::string_view error;
  dom::object data;
  bool has_data = false;
  for (const dom::key_value_pair kv : top) {
    if (kv.key == "status") {
      if (auto e = kv.value.get_string().get(status); e != simdjson::SUCCESS) {
        return JsonError("status", e);
      }
    } else if (kv.key == "errorType") {
      if (auto e = kv.value.get_string().get(error_type); e != simdjson::SUCCESS) {
        return JsonError("errorType", e);
      }
    } else if (kv.key == "error") {
      if (auto e = kv.value.get_string().get(error); e != simdjson::SUCCESS) {
        return JsonError("error", e);
      }
    } else if (kv.key == "warnings") {
      dom::array warnings;
      if (auto e = kv.value.get_array().get(warnings); e != simdjson::SUCCESS) {
        return JsonError("warnings", e);
      }
      for (const dom::element w : warnings) {
        std::string_view text;
        if (auto e = w.get_string().get(text); e != simdjson::SUCCESS) {
          return JsonError("warnings", e);
        }
        env.warnings.emplace_back(text);
      }
    } else if (kv.key == "data") {
      has_data = kv.value.get_object().get(data) == simdjson::SUCCESS;
      if (!has_data && !kv.value.is_null()) {
        return ShapeError("data", "not an object");
      }
    }
  }
  if (status == "error") {
    return ErrorStatus(error_type, error);
  }
  if (status != "success") {
    return ShapeError("status",
                      status.empty() ? "missing" : "\"" + std::string(status) + "\" is neither success nor error");
  }
  if (!has_data) {
    return ShapeError("data", "missing");
  }
  for (const dom::key_value_pair kv : data) {
    if (kv.key == "resultType") {
      std::string_view type;
      if (auto e = kv.value.get_string().get(type); e != simdjson::SUCCESS) {
        return JsonError("data.resultType", e);
      }
      env.result_type = std::string(type);
    } else if (kv.key == "result") {
      env.result = kv.value;
      env.has_result = true;
    }
  }
  if (env.result_type.empty()) {
    return ShapeError("data", "no resultType");
  }
  if (!env.has_result || env.result.get_array().get(env.result_array) != simdjson::SUCCESS) {
    return ShapeError("data.result", "missing or not an array");
  }
  return env;
}

bool IsSeriesList(const Envelope& env) { return env.result_type == "vector" || env.result_type == "matrix"; }

}  // namespace

const std::string* Series::Label(std::string_view name) const {
  for (const auto& [k, v] : labels) {
    if (k == name) {
      return &v;
    }
  }
  return nullptr;
}

std::optional<double> ParseSampleValue(std::string_view s) {
  if (s == "NaN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (s == "+Inf" || s == "Inf") {
    return std::numeric_limits<double>::infinity();
  }
  if (s == "-Inf") {
    return -std::numeric_limits<double>::infinity();
  }
  if (!s.empty() && s.front() == '+') {
    s.remove_prefix(1);
  }
  double v = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

struct QueryResponseParser::Impl {
  dom::parser parser;
  std::vector<core::MetricSample> scratch;

  common::Result<dom::element> Load(std::string& body) {
    if (body.capacity() < body.size() + simdjson::SIMDJSON_PADDING) {
      body.reserve(body.size() + simdjson::SIMDJSON_PADDING);
    }
    dom::element doc;
    if (auto e = parser.parse(body.data(), body.size(), /*realloc_if_needed=*/false).get(doc); e != simdjson::SUCCESS) {
      return JsonError("document", e);
    }
    return doc;
  }
};

QueryResponseParser::QueryResponseParser() : impl_(std::make_unique<Impl>()) {}
QueryResponseParser::~QueryResponseParser() = default;

common::Result<QueryResult> QueryResponseParser::Parse(std::string& body, const ParseOptions& options) {
  GPUSCHED_ASSIGN_OR_RETURN(doc, impl_->Load(body));
  GPUSCHED_ASSIGN_OR_RETURN(env, ReadEnvelope(doc));
  QueryResult out{.result_type = env.result_type, .warnings = std::move(env.warnings)};
  const dom::array result = env.result_array;
  if (!IsSeriesList(env)) {
    // scalar or string: one [<time>, "<value>"] pair
    Series& s = out.series.emplace_back();
    GPUSCHED_RETURN_IF_ERROR(ParsePair(env.result, s.samples.emplace_back(),
                                       /*value_may_be_text=*/env.result_type == "string", "data.result"));
    return out;
  }
  out.series.reserve(result.size());
  for (const dom::element el : result) {
    dom::object obj;
    if (auto e = el.get_object().get(obj); e != simdjson::SUCCESS) {
      return JsonError("series", e);
    }
    Series& s = out.series.emplace_back();
    GPUSCHED_ASSIGN_OR_RETURN(labels, SeriesLabels(obj));
    if (labels.has_value()) {
      for (const dom::key_value_pair kv : *labels) {
        if (!options.only_label.empty() && kv.key != options.only_label) {
          continue;
        }
        std::string_view value;
        if (auto e = kv.value.get_string().get(value); e != simdjson::SUCCESS) {
          return JsonError("label " + std::string(kv.key), e);
        }
        s.labels.emplace_back(kv.key, value);
      }
    }
    GPUSCHED_RETURN_IF_ERROR(SeriesSamples(obj, s.samples));
  }
  return out;
}

common::Result<int64_t> QueryResponseParser::Visit(std::string& body, std::string_view label,
                                                   const SeriesVisitor& visit) {
  GPUSCHED_ASSIGN_OR_RETURN(doc, impl_->Load(body));
  GPUSCHED_ASSIGN_OR_RETURN(env, ReadEnvelope(doc));
  if (!IsSeriesList(env)) {
    return ShapeError("data.resultType", "a " + env.result_type + " has no per-series labels (want a vector)");
  }
  int64_t n = 0;
  for (const dom::element el : env.result_array) {
    dom::object obj;
    if (auto e = el.get_object().get(obj); e != simdjson::SUCCESS) {
      return JsonError("series", e);
    }
    GPUSCHED_ASSIGN_OR_RETURN(labels, SeriesLabels(obj));
    std::string_view value;
    if (labels.has_value()) {
      for (const dom::key_value_pair kv : *labels) {
        if (kv.key == label) {
          if (auto e = kv.value.get_string().get(value); e != simdjson::SUCCESS) {
            return JsonError("label " + std::string(label), e);
          }
          break;
        }
      }
    }
    GPUSCHED_RETURN_IF_ERROR(SeriesSamples(obj, impl_->scratch));
    visit(value, impl_->scratch);
    ++n;
  }
  return n;
}

common::Result<QueryResult> ParseQueryResponse(std::string_view body, const ParseOptions& options) {
  std::string copy;
  copy.reserve(body.size() + simdjson::SIMDJSON_PADDING);
  copy.assign(body);
  QueryResponseParser parser;
  return parser.Parse(copy, options);
}

}  // namespace gpusched::adapters::prometheus
