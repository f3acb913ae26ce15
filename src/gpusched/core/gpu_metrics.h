#pragma once

// Live GPU metrics as the scheduler sees them: the latest sample of each metric per GPU, each with its own
// timestamp (from Prometheus or InfluxDB, through ports::MetricsSource and the background cache). Policies read
// them from the Snapshot; a sample older than the staleness bound counts as unknown.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "gpusched/common/ids.h"

namespace gpusched::core {

enum class GpuMetric : uint8_t {
  kGpuUtil,         // percent 0..100           DCGM_FI_DEV_GPU_UTIL
  kMemoryUsedMib,   // MiB                      DCGM_FI_DEV_FB_USED
  kMemoryCopyUtil,  // percent 0..100           DCGM_FI_DEV_MEM_COPY_UTIL
  kPowerW,          // watts                    DCGM_FI_DEV_POWER_USAGE
  kTemperatureC,    // degrees Celsius          DCGM_FI_DEV_GPU_TEMP
  kEncoderUtil,     // percent 0..100           DCGM_FI_DEV_ENC_UTIL
  kDecoderUtil,     // percent 0..100           DCGM_FI_DEV_DEC_UTIL
};
inline constexpr size_t kGpuMetricCount = 7;

// "gpu_util", "memory_used_mib", ... (config keys and log lines).
constexpr std::string_view GpuMetricName(GpuMetric m) {
  constexpr std::array<std::string_view, kGpuMetricCount> kNames = {
      "gpu_util", "memory_used_mib", "memory_copy_util", "power_w", "temperature_c", "encoder_util", "decoder_util"};
  return kNames[static_cast<size_t>(m)];
}

struct MetricSample {
  double value = 0;
  int64_t timestamp_ms = 0;  // Unix milliseconds of the sample (the source's, not the fetch time)
};

struct GpuMetrics {
  std::array<std::optional<MetricSample>, kGpuMetricCount> samples;
  [[nodiscard]] const std::optional<MetricSample>& Get(GpuMetric m) const { return samples[static_cast<size_t>(m)]; }
  void Set(GpuMetric m, MetricSample s) { samples[static_cast<size_t>(m)] = s; }
  // The value when present and not older than `staleness_ms` at `now_ms`.
  [[nodiscard]] std::optional<double> Fresh(GpuMetric m, int64_t now_ms, int64_t staleness_ms) const {
    const auto& s = Get(m);
    if (!s.has_value() || now_ms - s->timestamp_ms > staleness_ms) {
      return std::nullopt;
    }
    return s->value;
  }
};

using GpuMetricsMap = std::unordered_map<common::GpuUuid, GpuMetrics>;

}  // namespace gpusched::core
