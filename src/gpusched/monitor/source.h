#pragma once

// Where `gpusched-lab monitor` reads GPU metrics: a Prometheus server that scrapes the gpusched agent or dcgm-exporter
// (DCGM_* series, UUID label), or an InfluxDB 1.x database the agent writes (measurement `gpu`, tag `uuid`).
//
//   Latest: each GPU's current value, for the live status line and as a fallback record.
//     Prometheus: max by (UUID) (DCGM_FI_DEV_GPU_UTIL{UUID=~"GPU-a|GPU-b"})
//     InfluxDB:   SELECT last("gpu_util") FROM "gpu" WHERE ("uuid"='GPU-a' OR ...) AND time > now() - 60s
//                 GROUP BY "uuid"
//   Range: the whole window at once, after the run: Prometheus's query_range with step = the interval (so a missed
//     instant query loses nothing); InfluxDB's raw points of the window.
//   GpusOfPod: the GPUs whose series carry the pod's pod/namespace labels (dcgm-exporter's and the agent's pod
//     attribution), for clusters where pods carry no gpusched.io/allocation (NVIDIA device plugin, HAMi).
//     InfluxDB has no such tags: always empty.
// Each GPU is matched by its UUID; a GPU several pods share has one series per pod with the same values, hence
// max by (UUID).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/monitor/report.h"

namespace gpusched::monitor {

using Points = std::vector<std::pair<int64_t, double>>;  // (Unix ms, value)

class GpuMetricSource {
 public:
  virtual ~GpuMetricSource() = default;
  [[nodiscard]] virtual std::string Describe() const = 0;
  // OK when the server answers a query; the error otherwise (checked before anything is created).
  [[nodiscard]] virtual common::Status Check() = 0;
  [[nodiscard]] virtual common::Result<std::map<std::string, double>> Latest(const MetricInfo& metric,
                                                                             const std::vector<std::string>& uuids) = 0;
  [[nodiscard]] virtual common::Result<std::map<std::string, Points>> Range(const MetricInfo& metric,
                                                                            const std::vector<std::string>& uuids,
                                                                            int64_t start_ms, int64_t end_ms,
                                                                            std::chrono::milliseconds step) = 0;
  [[nodiscard]] virtual common::Result<std::vector<GpuRef>> GpusOfPod(const std::string& ns,
                                                                      const std::string& pod) = 0;
};

struct SourceOptions {
  std::string prometheus_url;
  std::string influxdb_url;
  std::string influxdb_db = "gpusched";
  std::string bearer_token;  // Prometheus
  std::chrono::milliseconds timeout{5000};
};

// Exactly one of the URLs must be set. InvalidArgument otherwise, or for a metric InfluxDB does not hold.
[[nodiscard]] common::Result<std::unique_ptr<GpuMetricSource>> MakeSource(const SourceOptions& options);

// The PromQL regex alternation of the UUIDs, each escaped for the regex and the string literal.
[[nodiscard]] std::string UuidRegex(const std::vector<std::string>& uuids);

}  // namespace gpusched::monitor
