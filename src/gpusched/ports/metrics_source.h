#pragma once

// MetricsSource: where live GPU metrics come from (Prometheus, InfluxDB). Fetch is called by the background
// refresher (never by a scheduling cycle) and may block on the network up to the source's timeout.

#include <string>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"

namespace gpusched::ports {

class MetricsSource {
 public:
  virtual ~MetricsSource() = default;
  // The latest sample of every configured metric for every GPU the source knows, keyed by GPU UUID. An error
  // means the source could not be read at all (down, bad address, query error); partial data is not an error.
  [[nodiscard]] virtual common::Result<core::GpuMetricsMap> Fetch() = 0;
  // "prometheus http://prom:9090" or "influxdb http://influx:8086 db=gpusched", for logs and /readyz.
  [[nodiscard]] virtual std::string Describe() const = 0;
};

}  // namespace gpusched::ports
