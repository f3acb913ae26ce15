#pragma once

// InfluxSource: live GPU metrics from an InfluxDB 1.x server (`/query`, InfluxQL; k8s-gpu-protocols.md section 6.3),
// as ports::MetricsSource, over the schema the agent writes (line_protocol.h: measurement `gpu`, tags
// host/gpu/uuid/model, fields gpu_util, fb_used_mib, mem_copy_util, power_w, temperature_c, ...).
//
// Fetch sends every enabled metric's statement in one request (statements joined by ';', answered per
// statement_id), with epoch=ms so times are integers. Each default statement selects one field's last value per
// GPU within the lookback window:
//   SELECT last("gpu_util") FROM "gpu" WHERE time > now() - 300s GROUP BY "uuid"
// One selector per statement on purpose: with a single selector InfluxDB reports the selected point's own time,
// which becomes the sample's timestamp (with several, it reports the window's start). Series are mapped to GPUs by
// their `uuid` tag (GROUP BY it); the value is the first column after `time`. Booleans read as 1/0; null, strings
// and series without the tag are left out. The agent writes no encoder/decoder utilisation, so those two metrics
// have no default statement (configure one to read them from another writer).
//
// Errors name the server and, for a statement's error, the metric and the statement: connection refused
// (Unavailable), timeout (DeadlineExceeded), HTTP 401/403 (PermissionDenied), 404 or a missing database
// (NotFound), a bad statement (InvalidArgument with InfluxDB's message).
//
// Thread-safety: all methods may be called from any thread; requests are serialised on one connection.

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/ports/metrics_source.h"

namespace gpusched::adapters::influxdb {

// The agent's field for each core::GpuMetric ("gpu_util", "fb_used_mib", ...; "" for encoder/decoder).
[[nodiscard]] std::string_view AgentFieldName(core::GpuMetric metric);
// The default statement for every metric (empty where AgentFieldName is empty), indexed by core::GpuMetric.
[[nodiscard]] std::array<std::string, core::kGpuMetricCount> DefaultInfluxQueries(
    std::string_view measurement = "gpu", std::string_view uuid_tag = "uuid",
    std::chrono::seconds lookback = std::chrono::seconds(300));

struct InfluxSourceOptions {
  std::string url;               // "http://127.0.0.1:8086" (a trailing slash is fine)
  std::string database;          // required
  std::string retention_policy;  // empty: the database's default (sent as rp=)
  std::string username;          // with password: HTTP basic authentication
  std::string password;
  std::chrono::milliseconds timeout{5000};
  std::string uuid_tag = "uuid";
  // InfluxQL per metric, indexed by core::GpuMetric; one statement each, no ';'. Empty: not fetched.
  std::array<std::string, core::kGpuMetricCount> queries = DefaultInfluxQueries();
};

// One series of a statement's answer: its tags (GROUP BY) and its points, (Unix ms, value of the first column
// after `time`), in the server's order; null and string cells are left out, booleans read as 1/0.
struct InfluxSeries {
  std::map<std::string, std::string> tags;
  std::vector<std::pair<int64_t, double>> points;
};

class InfluxSource final : public ports::MetricsSource {
 public:
  // InvalidArgument for a URL that is not http(s)://, no database, a non-positive timeout, no enabled query or a
  // query with ';'. No request is sent: call Check() for that.
  [[nodiscard]] static common::Result<std::unique_ptr<InfluxSource>> Create(InfluxSourceOptions options);
  ~InfluxSource() override;
  InfluxSource(const InfluxSource&) = delete;
  InfluxSource& operator=(const InfluxSource&) = delete;

  [[nodiscard]] common::Result<core::GpuMetricsMap> Fetch() override;
  // "influxdb http://influx:8086 db=gpusched"
  [[nodiscard]] std::string Describe() const override;
  // Runs the statements once: OK when the server answers and every statement runs (an empty result is OK).
  [[nodiscard]] common::Status Check();
  // Runs one InfluxQL statement of the caller's (no ';') against the configured database, times as Unix ms: for
  // range reads such as `SELECT "gpu_util" FROM "gpu" WHERE "uuid"='GPU-1' AND time >= 0ms GROUP BY "uuid"`.
  // Errors as for Fetch, naming the statement.
  [[nodiscard]] common::Result<std::vector<InfluxSeries>> Query(std::string_view statement);

 private:
  struct Impl;
  explicit InfluxSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes a /query answer whose statement `i` is the query of `metrics[i]` into `out` (the decode step of Fetch,
// public for tests). A statement's error -> InvalidArgument (NotFound for "database not found") naming the metric.
[[nodiscard]] common::Status ParseInfluxResponse(std::string_view body, std::span<const core::GpuMetric> metrics,
                                                 std::string_view uuid_tag, core::GpuMetricsMap& out);

}  // namespace gpusched::adapters::influxdb
