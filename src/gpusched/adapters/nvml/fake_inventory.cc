#include "gpusched/adapters/nvml/fake_inventory.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <string_view>
#include <utility>

#include "gpusched/adapters/nvml/xid.h"

namespace gpusched::adapters::nvml {

namespace {

// A known model: what NVML would call it and how it behaves between idle and full load.
struct Model {
  std::string_view spec_name;
  std::string_view nvml_name;
  int64_t memory_mib;
  double idle_w;
  double tdp_w;
  int64_t sm_idle_mhz;
  int64_t sm_max_mhz;
  int64_t memory_clock_mhz;
  bool nvswitch;  // SXM boards: GPUs of one group are all NVLinked
};

using common::MiB;
using common::Result;
using common::Status;

constexpr std::array<Model, 8> kModels = {{
    {"A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, 60, 400, 210, 1410, 1593, true},
    {"A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, 55, 400, 210, 1410, 1215, true},
    {"H100-80GB", "NVIDIA H100 80GB HBM3", 81559, 70, 700, 345, 1980, 2619, true},
    {"H200-141GB", "NVIDIA H200", 143771, 75, 700, 345, 1980, 3201, true},
    {"V100-32GB", "Tesla V100-SXM2-32GB", 32768, 40, 300, 135, 1530, 877, true},
    {"T4", "Tesla T4", 15360, 10, 70, 300, 1590, 5000, false},
    {"L4", "NVIDIA L4", 23034, 16, 72, 210, 2040, 6250, false},
    {"A10", "NVIDIA A10", 23028, 20, 150, 210, 1695, 6251, false},
}};

// Unknown models (their memory comes from the spec).
constexpr Model kGenericModel = {"", "", 0, 30, 250, 210, 1500, 1500, false};

constexpr double kIdleTemperature = 30;
constexpr double kFullLoadTemperature = 80;

const Model* FindModel(std::string_view name) {
  for (const auto& m : kModels) {
    if (m.spec_name.size() == name.size() &&
        std::equal(name.begin(), name.end(), m.spec_name.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      return &m;
    }
  }
  return nullptr;
}

std::string KnownModels() {
  std::string out;
  for (const auto& m : kModels) {
    out += (out.empty() ? "" : ", ") + std::string(m.spec_name);
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) {
    s.remove_prefix(1);
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) {
    s.remove_suffix(1);
  }
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// "24GB" / "24GiB" / "24G" -> 24576 MiB; "1000MiB" / "1000MB" / "1000M" -> 1000 MiB.
Result<MiB> ParseMemory(std::string_view text, const std::string& spec) {
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
  if (ec != std::errc() || n <= 0) {
    return common::InvalidArgument("fake GPUs \"" + spec + "\": memory \"" + std::string(text) +
                                   "\" is not a positive number with a unit (e.g. 24GB or 24576MiB)");
  }
  if (IEquals(unit, "GB") || IEquals(unit, "GiB") || IEquals(unit, "G")) {
    return MiB(n * 1024);
  }
  if (IEquals(unit, "MB") || IEquals(unit, "MiB") || IEquals(unit, "M")) {
    return MiB(n);
  }
  return common::InvalidArgument("fake GPUs \"" + spec + "\": memory \"" + std::string(text) +
                                 "\" needs a unit: GB, GiB, MB or MiB");
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27U)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31U);
}

// Uniform in [lo, hi) from a 64-bit hash.
double Uniform(uint64_t h, double lo, double hi) {
  return lo + (hi - lo) * static_cast<double>(h >> 11U) * 0x1.0p-53;  // 53 random bits in [0, 1)
}

std::string PciBusId(int32_t index) {
  std::array<char, 32> buf{};
  const auto i = static_cast<unsigned>(index);
  std::snprintf(buf.data(), buf.size(), "%08X:%02X:00.0", i / 32U, 7U + 8U * (i % 32U));
  return {buf.data()};
}

// The NUMA node of GPU i of n when the spec does not say: first half 0, second half 1.
int32_t DefaultNuma(size_t i, size_t n) { return n >= 2 && i >= (n + 1) / 2 ? 1 : 0; }

}  // namespace

Result<std::vector<FakeGpuSpec>> FakeInventory::ParseSpec(const std::string& spec) {
  std::vector<FakeGpuSpec> out;
  std::string_view rest = spec;
  if (Trim(rest).empty()) {
    return common::InvalidArgument("fake GPUs: empty spec (want e.g. 4xA100-80GB or 2xH100-80GB,1xT4)");
  }
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = Trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) {
      return common::InvalidArgument("fake GPUs \"" + spec + "\": empty group between commas");
    }
    // [<count>x]<model>[:<memory>]
    std::string_view body = item;
    int64_t count = 1;
    size_t digits = 0;
    while (digits < body.size() && std::isdigit(static_cast<unsigned char>(body[digits])) != 0) {
      ++digits;
    }
    if (digits > 0 && digits < body.size() && (body[digits] == 'x' || body[digits] == 'X')) {
      std::from_chars(body.data(), body.data() + digits, count);
      body.remove_prefix(digits + 1);
      if (count <= 0 || count > 1024) {
        return common::InvalidArgument("fake GPUs \"" + spec + "\": count in \"" + std::string(item) +
                                       "\" must be 1..1024");
      }
    }
    const size_t colon = body.find(':');
    const std::string_view model_name = Trim(body.substr(0, colon));
    if (model_name.empty()) {
      return common::InvalidArgument("fake GPUs \"" + spec + "\": no model in \"" + std::string(item) + "\"");
    }
    const Model* model = FindModel(model_name);
    MiB memory{0};
    if (colon != std::string_view::npos) {
      GPUSCHED_ASSIGN_OR_RETURN(parsed, ParseMemory(Trim(body.substr(colon + 1)), spec));
      memory = parsed;
    } else if (model != nullptr) {
      memory = MiB(model->memory_mib);
    } else {
      return common::InvalidArgument("fake GPUs \"" + spec + "\": unknown model \"" + std::string(model_name) +
                                     "\" needs its memory (e.g. " + std::string(model_name) +
                                     ":24GB); known models: " + KnownModels());
    }
    const size_t first = out.size();
    for (int64_t k = 0; k < count; ++k) {
      out.push_back(
          {.model = model != nullptr ? std::string(model->spec_name) : std::string(model_name), .memory = memory});
    }
    if (model != nullptr && model->nvswitch && count > 1) {
      for (size_t a = first; a < out.size(); ++a) {
        for (size_t b = first; b < out.size(); ++b) {
          if (a != b) {
            out[a].nvlink_peers.push_back(static_cast<int32_t>(b));
          }
        }
      }
    }
  }
  if (out.size() > 1024) {
    return common::InvalidArgument("fake GPUs \"" + spec + "\": more than 1024 GPUs");
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].numa_node = DefaultNuma(i, out.size());
  }
  return out;
}

Result<std::vector<FakeGpuSpec>> FakeInventory::LoadYaml(const std::string& path) {
  std::vector<FakeGpuSpec> out;
  try {
    const YAML::Node file = YAML::LoadFile(path);
    const YAML::Node root = file.IsMap() && file["gpus"] ? file["gpus"] : file;
    if (!root.IsSequence() || root.size() == 0) {
      return common::InvalidArgument("fake GPUs " + path +
                                     ": want a non-empty list of {model, memory_mib, numa, nvlink_peers}");
    }
    for (size_t i = 0; i < root.size(); ++i) {
      const YAML::Node g = root[i];
      const std::string where = "fake GPUs " + path + ": GPU " + std::to_string(i);
      if (!g.IsMap() || !g["model"]) {
        return common::InvalidArgument(where + " has no model");
      }
      FakeGpuSpec spec;
      spec.model = g["model"].as<std::string>();
      const Model* model = FindModel(spec.model);
      if (model != nullptr) {
        spec.model = std::string(model->spec_name);
      }
      if (g["memory_mib"]) {
        spec.memory = MiB(g["memory_mib"].as<int64_t>());
      } else if (model != nullptr) {
        spec.memory = MiB(model->memory_mib);
      } else {
        return common::InvalidArgument(where + ": unknown model \"" + spec.model +
                                       "\" needs memory_mib; known models: " + KnownModels());
      }
      if (spec.memory.value() <= 0) {
        return common::InvalidArgument(where + ": memory_mib must be positive");
      }
      spec.numa_node = g["numa"] ? g["numa"].as<int32_t>() : DefaultNuma(i, root.size());
      if (g["nvlink_peers"]) {
        for (const auto& p : g["nvlink_peers"]) {
          const auto peer = p.as<int32_t>();
          if (peer < 0 || static_cast<size_t>(peer) >= root.size() || static_cast<size_t>(peer) == i) {
            return common::InvalidArgument(where + ": nvlink peer " + std::to_string(peer) +
                                           " is not another GPU of the list");
          }
          spec.nvlink_peers.push_back(peer);
        }
        std::sort(spec.nvlink_peers.begin(), spec.nvlink_peers.end());
      }
      if (g["utilization"]) {
        const auto u = g["utilization"].as<double>();
        if (!(u >= 0 && u <= 100)) {
          return common::InvalidArgument(where + ": utilization " + g["utilization"].as<std::string>() +
                                         " is outside 0..100");
        }
        spec.utilization = u;
      }
      if (g["memory_used_mib"]) {
        const auto used = g["memory_used_mib"].as<int64_t>();
        if (used < 0 || used > spec.memory.value()) {
          return common::InvalidArgument(where + ": memory_used_mib " + std::to_string(used) + " is outside 0.." +
                                         std::to_string(spec.memory.value()));
        }
        spec.memory_used = MiB(used);
      }
      out.push_back(std::move(spec));
    }
  } catch (const YAML::Exception& e) {
    return common::InvalidArgument("fake GPUs " + path + ": " + e.what());
  }
  return out;
}

Result<std::unique_ptr<FakeInventory>> FakeInventory::Create(const std::string& spec_or_path,
                                                             FakeInventoryOptions options) {
  const std::string_view s = spec_or_path;
  const bool yaml =
      (s.size() > 5 && s.substr(s.size() - 5) == ".yaml") || (s.size() > 4 && s.substr(s.size() - 4) == ".yml");
  if (yaml) {
    GPUSCHED_ASSIGN_OR_RETURN(gpus, LoadYaml(spec_or_path));
    const std::string description = "fake " + spec_or_path + " (" + std::to_string(gpus.size()) + " GPUs)";
    return std::make_unique<FakeInventory>(std::move(gpus), description, std::move(options));
  }
  GPUSCHED_ASSIGN_OR_RETURN(gpus, ParseSpec(spec_or_path));
  return std::make_unique<FakeInventory>(std::move(gpus), "fake " + spec_or_path, std::move(options));
}

FakeInventory::FakeInventory(std::vector<FakeGpuSpec> gpus, std::string description, FakeInventoryOptions options)
    : description_(std::move(description)),
      options_(std::move(options)),
      start_(options_.clock ? options_.clock() : std::chrono::steady_clock::now()) {
  const std::string owner = options_.node_name.empty() ? std::to_string(options_.seed) : options_.node_name;
  gpus_.reserve(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) {
    Gpu g;
    g.spec = std::move(gpus[i]);
    const Model* model = FindModel(g.spec.model);
    const Model& m = model != nullptr ? *model : kGenericModel;
    g.name = model != nullptr ? std::string(model->nvml_name) : g.spec.model;
    g.idle_w = m.idle_w;
    g.tdp_w = m.tdp_w;
    g.sm_idle_mhz = m.sm_idle_mhz;
    g.sm_max_mhz = m.sm_max_mhz;
    g.memory_clock_mhz = m.memory_clock_mhz;
    const auto index = static_cast<int32_t>(i);
    g.uuid = common::GpuUuid("GPU-fake-" + owner + "-" + std::to_string(i));
    g.pci_bus_id = PciBusId(index);
    uint64_t h = SplitMix64(options_.seed ^ SplitMix64(i + 1));
    g.base = Uniform(h, 20, 70);
    h = SplitMix64(h);
    g.amplitude = Uniform(h, 10, 30);
    h = SplitMix64(h);
    g.period_s = Uniform(h, 30, 300);
    h = SplitMix64(h);
    g.phase = Uniform(h, 0, 2 * std::numbers::pi);
    h = SplitMix64(h);
    g.memory_share = Uniform(h, 0.05, 0.6);
    g.noise_seed = SplitMix64(h);
    g.utilization = g.spec.utilization;
    g.memory_used = g.spec.memory_used;
    gpus_.push_back(std::move(g));
  }
}

double FakeInventory::ElapsedSeconds() const {
  if (frozen_at_) {
    return *frozen_at_;
  }
  const auto now = options_.clock ? options_.clock() : std::chrono::steady_clock::now();
  return std::chrono::duration<double>(now - start_).count();
}

ports::GpuSample FakeInventory::SampleOne(const Gpu& g, double t) const {
  ports::GpuSample s;
  s.uuid = g.uuid;
  s.name = g.name;
  s.model = g.spec.model;
  s.pci_bus_id = g.pci_bus_id;
  s.numa_node = g.spec.numa_node;
  s.memory_total = g.spec.memory;
  s.nvlink_peers = g.spec.nvlink_peers;
  // Links as NVML would give them: NVLink to the listed peers (one link), else by NUMA node.
  for (size_t j = 0; j < gpus_.size(); ++j) {
    const auto peer = static_cast<int32_t>(j);
    const FakeGpuSpec& other = gpus_[j].spec;
    if (&gpus_[j] == &g) {
      continue;
    }
    core::GpuLink l{.peer = peer};
    if (std::find(g.spec.nvlink_peers.begin(), g.spec.nvlink_peers.end(), peer) != g.spec.nvlink_peers.end()) {
      l.kind = core::LinkKind::kNvlink;
      l.nvlinks = 1;
    } else if (g.spec.numa_node >= 0 && other.numa_node >= 0) {
      l.kind = g.spec.numa_node == other.numa_node ? core::LinkKind::kSameNuma : core::LinkKind::kCrossSocket;
    } else {
      continue;
    }
    s.links.push_back(l);
  }
  s.processes = g.processes;
  s.healthy = g.healthy;
  s.last_xid = g.last_xid;

  double u = 0;
  if (g.utilization) {
    u = *g.utilization;
  } else {
    const double second = std::floor(t);
    const double noise = Uniform(SplitMix64(g.noise_seed ^ static_cast<uint64_t>(second)), -3, 3);
    u = g.base + g.amplitude * std::sin(2 * std::numbers::pi * t / g.period_s + g.phase) + noise;
    u = std::round(std::clamp(u, 0.0, 100.0));  // NVML reports whole percent
  }
  s.gpu_utilization = u;
  s.memory_utilization = std::round(0.6 * u);
  const double load = u / 100.0;
  s.temperature_c = std::round(kIdleTemperature + (kFullLoadTemperature - kIdleTemperature) * load);
  s.power_w = std::round((g.idle_w + (g.tdp_w - g.idle_w) * load) * 1000.0) / 1000.0;
  s.sm_clock_mhz = u > 0 ? g.sm_max_mhz : g.sm_idle_mhz;
  s.memory_clock_mhz = g.memory_clock_mhz;
  const int64_t total = g.spec.memory.value();
  int64_t used = 0;
  if (g.memory_used) {
    used = g.memory_used->value();
  } else {
    used = std::llround(static_cast<double>(total) * g.memory_share * (0.6 + 0.4 * load));
  }
  s.memory_used = MiB(std::clamp<int64_t>(used, 0, total));
  s.memory_free = MiB(total - s.memory_used.value());
  return s;
}

Result<std::vector<ports::GpuSample>> FakeInventory::Sample() {
  std::lock_guard lock(mu_);
  if (!sample_error_.ok()) {
    return sample_error_;
  }
  const double t = ElapsedSeconds();
  std::vector<ports::GpuSample> out;
  out.reserve(gpus_.size());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    out.push_back(SampleOne(gpus_[i], t));
    out.back().index = static_cast<int32_t>(i);
  }
  return out;
}

std::string FakeInventory::Describe() const { return description_; }

Status FakeInventory::CheckIndex(int32_t index) const {
  if (index < 0 || static_cast<size_t>(index) >= gpus_.size()) {
    return common::InvalidArgument("fake GPUs: no GPU " + std::to_string(index) + " (have " +
                                   std::to_string(gpus_.size()) + ")");
  }
  return Status::Ok();
}

Status FakeInventory::SetUtilization(int32_t index, double percent) {
  GPUSCHED_RETURN_IF_ERROR(CheckIndex(index));
  if (!(percent >= 0 && percent <= 100)) {
    return common::InvalidArgument("fake GPUs: utilisation " + std::to_string(percent) + " is not in 0..100");
  }
  std::lock_guard lock(mu_);
  gpus_[static_cast<size_t>(index)].utilization = percent;
  return Status::Ok();
}

Status FakeInventory::SetMemoryUsed(int32_t index, MiB used) {
  GPUSCHED_RETURN_IF_ERROR(CheckIndex(index));
  std::lock_guard lock(mu_);
  Gpu& g = gpus_[static_cast<size_t>(index)];
  if (used.value() < 0 || used > g.spec.memory) {
    return common::InvalidArgument("fake GPUs: GPU " + std::to_string(index) + " has " +
                                   std::to_string(g.spec.memory.value()) + " MiB, cannot use " +
                                   std::to_string(used.value()) + " MiB");
  }
  g.memory_used = used;
  return Status::Ok();
}

Status FakeInventory::SetHealthy(int32_t index, bool healthy) {
  GPUSCHED_RETURN_IF_ERROR(CheckIndex(index));
  std::lock_guard lock(mu_);
  Gpu& g = gpus_[static_cast<size_t>(index)];
  g.healthy = healthy;
  if (healthy) {
    g.last_xid = 0;
  }
  return Status::Ok();
}

Status FakeInventory::InjectXid(int32_t index, int64_t xid) {
  GPUSCHED_RETURN_IF_ERROR(CheckIndex(index));
  if (xid <= 0) {
    return common::InvalidArgument("fake GPUs: XID " + std::to_string(xid) + " is not positive");
  }
  std::lock_guard lock(mu_);
  Gpu& g = gpus_[static_cast<size_t>(index)];
  g.last_xid = xid;
  if (IsCriticalXid(xid)) {
    g.healthy = false;
  }
  return Status::Ok();
}

Status FakeInventory::SetProcesses(int32_t index, std::vector<ports::GpuProcess> processes) {
  GPUSCHED_RETURN_IF_ERROR(CheckIndex(index));
  std::lock_guard lock(mu_);
  gpus_[static_cast<size_t>(index)].processes = std::move(processes);
  return Status::Ok();
}

void FakeInventory::SetSampleError(Status status) {
  std::lock_guard lock(mu_);
  sample_error_ = std::move(status);
}

void FakeInventory::Freeze() {
  std::lock_guard lock(mu_);
  if (!frozen_at_) {
    frozen_at_ = ElapsedSeconds();
  }
}

}  // namespace gpusched::adapters::nvml
