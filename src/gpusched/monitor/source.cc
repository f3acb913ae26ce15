#include "gpusched/monitor/source.h"

#include "gpusched/adapters/influxdb/influx_source.h"
#include "gpusched/adapters/prometheus/prometheus_source.h"

namespace gpusched::monitor {
namespace {

namespace prom = adapters::prometheus;
namespace influx = adapters::influxdb;

// A label value in a PromQL double-quoted string.
std::string PromString(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// An InfluxQL single-quoted string literal.
std::string InfluxString(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out + "'";
}

class PrometheusGpuSource final : public GpuMetricSource {
 public:
  explicit PrometheusGpuSource(std::unique_ptr<prom::PrometheusSource> p) : p_(std::move(p)) {}
  std::string Describe() const override { return p_->Describe(); }
  common::Status Check() override {
    auto r = p_->InstantQuery("vector(1)");
    return r.ok() ? common::Status::Ok() : r.status();
  }
  common::Result<std::map<std::string, double>> Latest(const MetricInfo& m,
                                                       const std::vector<std::string>& uuids) override {
    GPUSCHED_ASSIGN_OR_RETURN(r, p_->InstantQuery(Query(m, uuids)));
    std::map<std::string, double> out;
    for (const prom::Series& s : r.series) {
      const std::string* uuid = s.Label("UUID");
      if (uuid != nullptr && !s.samples.empty()) {
        out[*uuid] = s.samples.back().value;
      }
    }
    return out;
  }
  common::Result<std::map<std::string, Points>> Range(const MetricInfo& m, const std::vector<std::string>& uuids,
                                                      int64_t start_ms, int64_t end_ms,
                                                      std::chrono::milliseconds step) override {
    GPUSCHED_ASSIGN_OR_RETURN(r, p_->RangeQuery(Query(m, uuids), start_ms, end_ms, step));
    std::map<std::string, Points> out;
    for (const prom::Series& s : r.series) {
      const std::string* uuid = s.Label("UUID");
      if (uuid == nullptr) {
        continue;
      }
      Points& p = out[*uuid];
      for (const core::MetricSample& x : s.samples) {
        p.emplace_back(x.timestamp_ms, x.value);
      }
    }
    return out;
  }
  common::Result<std::vector<GpuRef>> GpusOfPod(const std::string& ns, const std::string& pod) override {
    GPUSCHED_ASSIGN_OR_RETURN(r, p_->InstantQuery("DCGM_FI_DEV_GPU_UTIL{pod=\"" + PromString(pod) + "\",namespace=\"" +
                                                  PromString(ns) + "\"}"));
    std::vector<GpuRef> out;
    for (const prom::Series& s : r.series) {
      const std::string* uuid = s.Label("UUID");
      if (uuid == nullptr) {
        continue;
      }
      GpuRef g{.ns = ns, .pod = pod};
      g.uuid = *uuid;
      if (const std::string* c = s.Label("container")) {
        g.container = *c;
      }
      for (const char* host : {"Hostname", "hostname"}) {
        if (const std::string* h = s.Label(host); h != nullptr && g.node.empty()) {
          g.node = *h;
        }
      }
      if (const std::string* i = s.Label("gpu")) {
        g.index = std::atoi(i->c_str());
      }
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  static std::string Query(const MetricInfo& m, const std::vector<std::string>& uuids) {
    return "max by (UUID) (" + m.dcgm + "{UUID=~\"" + UuidRegex(uuids) + "\"})";
  }
  std::unique_ptr<prom::PrometheusSource> p_;
};

class InfluxGpuSource final : public GpuMetricSource {
 public:
  explicit InfluxGpuSource(std::unique_ptr<influx::InfluxSource> s) : s_(std::move(s)) {}
  std::string Describe() const override { return s_->Describe(); }
  common::Status Check() override {
    auto r = s_->Query("SELECT last(\"gpu_util\") FROM \"gpu\" WHERE time > now() - 1m");
    return r.ok() ? common::Status::Ok() : r.status();
  }
  common::Result<std::map<std::string, double>> Latest(const MetricInfo& m,
                                                       const std::vector<std::string>& uuids) override {
    GPUSCHED_ASSIGN_OR_RETURN(field, Field(m));
    GPUSCHED_ASSIGN_OR_RETURN(series, s_->Query("SELECT last(\"" + field + "\") FROM \"gpu\" WHERE " + Where(uuids) +
                                                " AND time > now() - 60s GROUP BY \"uuid\""));
    std::map<std::string, double> out;
    for (const influx::InfluxSeries& s : series) {
      if (auto it = s.tags.find("uuid"); it != s.tags.end() && !s.points.empty()) {
        out[it->second] = s.points.back().second;
      }
    }
    return out;
  }
  common::Result<std::map<std::string, Points>> Range(const MetricInfo& m, const std::vector<std::string>& uuids,
                                                      int64_t start_ms, int64_t end_ms,
                                                      std::chrono::milliseconds) override {
    GPUSCHED_ASSIGN_OR_RETURN(field, Field(m));
    GPUSCHED_ASSIGN_OR_RETURN(series, s_->Query("SELECT \"" + field + "\" FROM \"gpu\" WHERE " + Where(uuids) +
                                                " AND time >= " + std::to_string(start_ms) +
                                                "ms AND time <= " + std::to_string(end_ms) + "ms GROUP BY \"uuid\""));
    std::map<std::string, Points> out;
    for (const influx::InfluxSeries& s : series) {
      if (auto it = s.tags.find("uuid"); it != s.tags.end()) {
        Points& p = out[it->second];
        p.insert(p.end(), s.points.begin(), s.points.end());
      }
    }
    return out;
  }
  common::Result<std::vector<GpuRef>> GpusOfPod(const std::string&, const std::string&) override {
    return std::vector<GpuRef>{};
  }

 private:
  static common::Result<std::string> Field(const MetricInfo& m) {
    if (m.influx.empty()) {
      return common::InvalidArgument("metric " + m.name + " is not in the agent's InfluxDB schema");
    }
    return m.influx;
  }
  static std::string Where(const std::vector<std::string>& uuids) {
    std::string w = "(";
    for (size_t i = 0; i < uuids.size(); ++i) {
      w += (i ? " OR " : "") + std::string("\"uuid\"=") + InfluxString(uuids[i]);
    }
    return w + ")";
  }
  std::unique_ptr<influx::InfluxSource> s_;
};

}  // namespace

std::string UuidRegex(const std::vector<std::string>& uuids) {
  std::string out;
  for (const std::string& u : uuids) {
    if (!out.empty()) {
      out += '|';
    }
    for (const char c : u) {
      const bool plain =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
      if (!plain) {
        out += "\\\\";  // a regex escape, itself escaped for the string literal
      }
      if (c == '"') {
        out += "\\";
      }
      out += c;
    }
  }
  return out;
}

common::Result<std::unique_ptr<GpuMetricSource>> MakeSource(const SourceOptions& o) {
  if (o.prometheus_url.empty() == o.influxdb_url.empty()) {
    return common::InvalidArgument("give one metrics source: --prometheus URL or --influxdb URL");
  }
  if (!o.prometheus_url.empty()) {
    prom::PrometheusSourceOptions po{.url = o.prometheus_url, .timeout = o.timeout};
    po.bearer_token = o.bearer_token;
    GPUSCHED_ASSIGN_OR_RETURN(p, prom::PrometheusSource::Create(std::move(po)));
    return std::unique_ptr<GpuMetricSource>(new PrometheusGpuSource(std::move(p)));
  }
  influx::InfluxSourceOptions io{.url = o.influxdb_url, .database = o.influxdb_db, .timeout = o.timeout};
  GPUSCHED_ASSIGN_OR_RETURN(s, influx::InfluxSource::Create(std::move(io)));
  return std::unique_ptr<GpuMetricSource>(new InfluxGpuSource(std::move(s)));
}

}  // namespace gpusched::monitor
