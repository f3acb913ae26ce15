#include "gpusched/agent/dcgm_metrics.h"

#include <array>
#include <charconv>
#include <cmath>

namespace gpusched::agent {
namespace {

using ValueFn = double (*)(const ports::GpuSample&);

struct Family {
  std::string_view name;
  std::string_view help;
  ValueFn value;  // < 0: unknown, the line is left out
};

// HELP texts as in dcgm-exporter's etc/default-counters.csv.
constexpr std::array<Family, 9> kDcgmFamilies = {{
    {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
     [](const ports::GpuSample& s) { return static_cast<double>(s.sm_clock_mhz); }},
    {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).",
     [](const ports::GpuSample& s) { return static_cast<double>(s.memory_clock_mhz); }},
    {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", [](const ports::GpuSample& s) { return s.temperature_c; }},
    {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", [](const ports::GpuSample& s) { return s.power_w; }},
    {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", [](const ports::GpuSample& s) { return s.gpu_utilization; }},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
     [](const ports::GpuSample& s) { return s.memory_utilization; }},
    {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
     [](const ports::GpuSample& s) { return static_cast<double>(s.memory_free.value()); }},
    {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
     [](const ports::GpuSample& s) { return static_cast<double>(s.memory_used.value()); }},
    {"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
     [](const ports::GpuSample& s) { return static_cast<double>(s.last_xid); }},
}};

void AppendHeader(std::string& out, std::string_view name, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;  // our own constant texts: no backslash or newline to escape
  out += "\n# TYPE ";
  out += name;
  out += " gauge\n";
}

void AppendLabel(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += "=\"";
  AppendEscapedLabelValue(out, value);
  out += "\",";
}

void AppendInt(std::string& out, int64_t v) {
  std::array<char, 24> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

// `gpu="0",UUID="GPU-..",...,` (with a trailing comma, which the format allows and we strip at the end). `dcgm`:
// dcgm-exporter's label names (UUID, modelName, Hostname and/or hostname per the options); else Prometheus's
// snake_case ones (uuid, model_name, hostname) for gpusched's own series.
std::string GpuLabels(const ports::GpuSample& s, const DcgmRenderOptions& options, bool dcgm) {
  std::string out;
  out.reserve(192);
  out += "gpu=\"";
  AppendInt(out, s.index);
  out += "\",";
  AppendLabel(out, dcgm ? "UUID" : "uuid", s.uuid.str());
  if (!s.pci_bus_id.empty()) {
    AppendLabel(out, "pci_bus_id", s.pci_bus_id);
  }
  out += "device=\"nvidia";
  AppendInt(out, s.index);
  out += "\",";
  AppendLabel(out, dcgm ? "modelName" : "model_name", s.name.empty() ? s.model : s.name);
  if (!options.hostname.empty()) {
    const bool both = options.hostname_labels == HostnameLabels::kBoth;
    if (dcgm && (both || options.hostname_labels == HostnameLabels::kLegacy)) {
      AppendLabel(out, "Hostname", options.hostname);
    }
    if (!dcgm || both || options.hostname_labels == HostnameLabels::kLowercase) {
      AppendLabel(out, "hostname", options.hostname);
    }
  }
  return out;
}

// One `,pod=..,namespace=..,container=..` suffix per pod holding the GPU, or one empty suffix.
std::vector<std::string> PodSuffixes(const ports::GpuSample& s, const PodAttribution& attribution) {
  const auto it = attribution.find(s.uuid);
  if (it == attribution.end() || it->second.empty()) {
    return {std::string()};
  }
  std::vector<std::string> out;
  out.reserve(it->second.size());
  for (const PodRef& p : it->second) {
    std::string suffix;
    AppendLabel(suffix, "pod", p.pod);
    AppendLabel(suffix, "namespace", p.namespace_name);
    AppendLabel(suffix, "container", p.container);
    out.push_back(std::move(suffix));
  }
  return out;
}

void AppendLine(std::string& out, std::string_view name, std::string_view labels, std::string_view suffix,
                double value) {
  out += name;
  out += '{';
  out += labels;
  out += suffix;
  out.back() = '}';  // replaces the trailing comma
  out += ' ';
  AppendMetricValue(out, value);
  out += '\n';
}

}  // namespace

void AppendEscapedLabelValue(std::string& out, std::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
}

void AppendMetricValue(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  if (std::abs(v) < 1e15 && v == std::trunc(v)) {  // whole numbers without exponent: 1700000000, not 1.7e+09
    AppendInt(out, static_cast<int64_t>(v));
    return;
  }
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  out.append(buf.data(), r.ptr);
}

std::string RenderDcgmMetrics(std::span<const ports::GpuSample> samples, const PodAttribution& attribution,
                              const AllocationMap& allocations, const DcgmRenderOptions& options) {
  std::vector<std::string> labels;
  std::vector<std::vector<std::string>> pods;
  labels.reserve(samples.size());
  pods.reserve(samples.size());
  size_t lines_per_family = 0;
  for (const auto& s : samples) {
    labels.push_back(GpuLabels(s, options, /*dcgm=*/true));
    pods.push_back(PodSuffixes(s, attribution));
    lines_per_family += pods.back().size();
  }
  std::string out;
  out.reserve(1024 + (kDcgmFamilies.size() + 3) * lines_per_family * (labels.empty() ? 0 : labels[0].size() + 64));

  for (const Family& f : kDcgmFamilies) {
    bool header = false;
    for (size_t i = 0; i < samples.size(); ++i) {
      const double v = f.value(samples[i]);
      if (v < 0) {
        continue;
      }
      if (!header) {
        AppendHeader(out, f.name, f.help);
        header = true;
      }
      for (const std::string& suffix : pods[i]) {
        AppendLine(out, f.name, labels[i], suffix, v);
      }
    }
  }

  if (samples.empty()) {
    return out;
  }
  std::vector<std::string> own;
  own.reserve(samples.size());
  for (const auto& s : samples) {
    own.push_back(GpuLabels(s, options, /*dcgm=*/false));
  }
  AppendHeader(out, "gpusched_gpu_healthy", "1 when the GPU is healthy, 0 after a critical XID or when it is lost.");
  for (size_t i = 0; i < samples.size(); ++i) {
    AppendLine(out, "gpusched_gpu_healthy", own[i], "", samples[i].healthy ? 1 : 0);
  }
  AppendHeader(out, "gpusched_gpu_allocated_milli", "GPU compute gpusched has allocated to pods (1000 = one GPU).");
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto it = allocations.find(samples[i].uuid);
    AppendLine(out, "gpusched_gpu_allocated_milli", own[i], "",
               it == allocations.end() ? 0 : static_cast<double>(it->second.milli.value()));
  }
  AppendHeader(out, "gpusched_gpu_allocated_memory_mib", "GPU memory gpusched has allocated to pods (in MiB).");
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto it = allocations.find(samples[i].uuid);
    AppendLine(out, "gpusched_gpu_allocated_memory_mib", own[i], "",
               it == allocations.end() ? 0 : static_cast<double>(it->second.memory.value()));
  }
  // Per container: the share its pod's allocation gives it on each GPU.
  for (const bool memory : {false, true}) {
    const std::string_view name = memory ? "gpusched_pod_gpu_allocated_memory_mib" : "gpusched_pod_gpu_allocated_milli";
    AppendHeader(out, name,
                 memory ? "GPU memory gpusched has allocated to a container (in MiB)."
                        : "GPU compute gpusched has allocated to a container (1000 = one GPU).");
    for (size_t i = 0; i < samples.size(); ++i) {
      const auto it = allocations.find(samples[i].uuid);
      if (it == allocations.end()) {
        continue;
      }
      for (const PodShare& p : it->second.pods) {
        std::string suffix;
        AppendLabel(suffix, "namespace", p.ref.namespace_name);
        AppendLabel(suffix, "pod", p.ref.pod);
        AppendLabel(suffix, "container", p.ref.container);
        AppendLine(out, name, own[i], suffix, static_cast<double>(memory ? p.memory.value() : p.milli.value()));
      }
    }
  }
  return out;
}

}  // namespace gpusched::agent
