// The metric names, their parsing and the per-GPU statistics: what `top` (the daemon binary) and the monitor's
// report share. No plotting here, so `top` links without cairo.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/monitor/report.h"

namespace gpusched::monitor {

const std::vector<MetricInfo>& KnownMetrics() {
  static const std::vector<MetricInfo> kMetrics = {
      {"util", "DCGM_FI_DEV_GPU_UTIL", "gpu_util", "%", "GPU utilisation"},
      {"temp", "DCGM_FI_DEV_GPU_TEMP", "temperature_c", "C", "temperature"},
      {"memcopy", "DCGM_FI_DEV_MEM_COPY_UTIL", "mem_copy_util", "%", "memory-copy utilisation"},
      {"power", "DCGM_FI_DEV_POWER_USAGE", "power_w", "W", "power"},
      {"fb_used", "DCGM_FI_DEV_FB_USED", "fb_used_mib", "MiB", "GPU memory used"},
      {"fb_free", "DCGM_FI_DEV_FB_FREE", "fb_free_mib", "MiB", "GPU memory free"},
      {"sm_clock", "DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "MHz", "SM clock"},
      {"mem_clock", "DCGM_FI_DEV_MEM_CLOCK", "mem_clock_mhz", "MHz", "memory clock"},
  };
  return kMetrics;
}

std::string DefaultMetricList() { return "util,temp,memcopy,power,fb_used"; }

common::Result<std::vector<MetricInfo>> ParseMetricList(std::string_view list) {
  std::vector<MetricInfo> out;
  std::set<std::string> seen;
  std::string known;
  for (const MetricInfo& m : KnownMetrics()) {
    known += (known.empty() ? "" : ", ") + m.name;
  }
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    std::string item(list.substr(start, comma - start));
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    start = comma + 1;
    if (item.empty()) {
      return common::InvalidArgument("--metrics: an empty entry in \"" + std::string(list) + "\"");
    }
    if (!seen.insert(item).second) {
      return common::InvalidArgument("--metrics: " + item + " is listed twice");
    }
    auto it = std::find_if(KnownMetrics().begin(), KnownMetrics().end(),
                           [&](const MetricInfo& m) { return m.name == item || m.dcgm == item; });
    if (it != KnownMetrics().end()) {
      out.push_back(*it);
    } else if (item.starts_with("DCGM_") && std::all_of(item.begin(), item.end(), [](char c) {
                 return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
               })) {
      out.push_back(MetricInfo{.name = item, .dcgm = item, .influx = "", .unit = "", .title = item});
    } else {
      return common::InvalidArgument("--metrics: unknown metric \"" + item + "\"; known: " + known +
                                     ", or a DCGM_* series name (Prometheus)");
    }
    if (comma == list.size()) {
      break;
    }
  }
  return out;
}

std::string GpuRef::Label() const {
  return node + "/GPU " + (index >= 0 ? std::to_string(index) : uuid) + " (" + pod + ")";
}

Stats Summarize(const std::vector<Sample>& samples, bool is_power, double max_gap_s) {
  Stats st;
  std::vector<double> values;
  double sum = 0;
  for (const Sample& s : samples) {
    if (std::isfinite(s.value) && std::isfinite(s.t)) {
      values.push_back(s.value);
      sum += s.value;
    }
  }
  st.count = values.size();
  if (values.empty()) {
    if (is_power) {
      st.energy_j = 0.0;
    }
    return st;
  }
  st.mean = sum / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(values.size())));
  st.p95 = values[std::max<size_t>(rank, 1) - 1];
  st.max = values.back();
  if (is_power) {
    double e = 0;
    for (size_t i = 1; i < samples.size(); ++i) {
      const Sample& a = samples[i - 1];
      const Sample& b = samples[i];
      const double dt = b.t - a.t;
      if (std::isfinite(a.value) && std::isfinite(b.value) && dt > 0 && dt <= max_gap_s) {
        e += (a.value + b.value) / 2 * dt;
      }
    }
    st.energy_j = e;
  }
  return st;
}

}  // namespace gpusched::monitor
