#pragma once

// InfluxDB 1.x line protocol (k8s-gpu-protocols.md section 6.3) for GPU samples.
//
// Schema: one measurement, `gpu` by default, one point per GPU per interval:
//   gpu,host=<node>,gpu=<index>,uuid=<GPU-...>,model=<model> gpu_util=87,mem_copy_util=52,temperature_c=61,
//       power_w=312.5,fb_used_mib=20480i,fb_free_mib=61440i,fb_total_mib=81920i,sm_clock_mhz=1410i,
//       mem_clock_mhz=1593i,last_xid=0i,healthy=true,processes=2i <unix ms>
// Why one measurement with fields rather than a measurement per metric (as the KETI collector writes): one line per
// GPU is a ninth of the points to write and store, the fields of one instant stay together (SELECT gpu_util,
// power_w ... returns them in one row), and per-metric series are still a SELECT of one field away. Values a
// backend could not read (-1) are left out; `healthy` is always there, so no point is ever without a field.
// Percentages, temperature and power are floats; MiB, MHz, XID and the process count are integers (suffix i), so
// a field's type never changes between writes (InfluxDB rejects that).
//
// Escaping: measurement: `,` and space; tag keys, tag values and field keys: `,`, `=` and space; string field
// values are double-quoted with `"` and `\` escaped. Line protocol allows no newline in a tag or field, so
// newlines (and carriage returns) become spaces. An empty tag value is not allowed either: such tags are dropped.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::influxdb {

[[nodiscard]] std::string EscapeMeasurement(std::string_view s);
// For tag keys, tag values and field keys.
[[nodiscard]] std::string EscapeTag(std::string_view s);
// A string field value with its quotes.
[[nodiscard]] std::string QuoteFieldString(std::string_view s);

struct GpuLineOptions {
  std::string measurement = "gpu";
  std::string hostname;  // the `host` tag; left out when empty
};

// One line per sample, each ending in '\n', timestamps in milliseconds (write with precision=ms).
[[nodiscard]] std::string GpuSampleLines(std::span<const ports::GpuSample> samples, const GpuLineOptions& options,
                                         int64_t timestamp_ms);

}  // namespace gpusched::adapters::influxdb
