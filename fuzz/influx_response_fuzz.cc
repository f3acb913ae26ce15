// Fuzz target: the decoder of InfluxDB 1.x /query answers.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpusched/adapters/influxdb/influx_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpusched::core::GpuMetric;
  static constexpr std::array<GpuMetric, 3> kMetrics = {GpuMetric::kGpuUtil, GpuMetric::kMemoryUsedMib,
                                                        GpuMetric::kPowerW};
  gpusched::core::GpuMetricsMap out;
  (void)gpusched::adapters::influxdb::ParseInfluxResponse(std::string_view(reinterpret_cast<const char*>(data), size),
                                                          kMetrics, "uuid", out);
  return 0;
}
