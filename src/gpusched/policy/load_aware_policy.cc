#include "gpusched/policy/load_aware_policy.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "gpusched/core/gpu_model.h"
#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {

using core::GpuMetric;

namespace {

constexpr double kDefaultTdpW = 400;
constexpr double kUnknownGpuRank = 50;  // a GPU without a known load ranks as half loaded
constexpr double kIdleTemperatureC = 30;
constexpr double kHotTemperatureC = 90;

double Clamp100(double v) { return std::clamp(v, 0.0, 100.0); }

// Weighted mean of the known terms: Σ w·t / Σ w, or unknown when no term with a positive weight is known.
class WeightedMean {
 public:
  void Add(int64_t weight, std::optional<double> term) {
    if (weight > 0 && term.has_value()) {
      const auto w = static_cast<double>(weight);
      sum_ += w * *term;
      weights_ += w;
    }
  }
  [[nodiscard]] std::optional<double> Value() const {
    if (weights_ <= 0) {
      return std::nullopt;
    }
    return sum_ / weights_;
  }

 private:
  double sum_ = 0;
  double weights_ = 0;
};

// Plain mean of the known values over GPUs.
class Mean {
 public:
  void Add(std::optional<double> v) {
    if (v.has_value()) {
      sum_ += *v;
      ++n_;
    }
  }
  [[nodiscard]] std::optional<double> Value() const {
    if (n_ == 0) {
      return std::nullopt;
    }
    return sum_ / n_;
  }

 private:
  double sum_ = 0;
  double n_ = 0;
};

common::Status CheckWeight(std::string_view name, int64_t w) {
  if (w < 0) {
    return common::InvalidArgument("load-aware: " + std::string(name) + " is " + std::to_string(w) + ", must be >= 0");
  }
  return common::Status::Ok();
}

}  // namespace

std::vector<GpuModelSpec> DefaultGpuModelTable() {
  // name, aliases, nominal memory MiB, memory bandwidth GB/s, FP32 TFLOPS, board power W
  return {
      {"H200-SXM-141GB", {"H200", "H200-141GB", "H200-SXM5-141GB"}, 144384, 4800, 67.0, 700},
      {"H100-SXM5-80GB", {"H100", "H100-80GB", "H100-SXM", "H100-80GB-HBM3"}, 81920, 3350, 67.0, 700},
      {"H100-PCIE-80GB", {"H100-PCIE"}, 81920, 2000, 51.0, 350},
      {"A100-SXM4-80GB", {"A100", "A100-80GB", "A100-SXM", "A100-SXM4"}, 81920, 2039, 19.5, 400},
      {"A100-PCIE-80GB", {}, 81920, 1935, 19.5, 300},
      {"A100-SXM4-40GB", {"A100-40GB"}, 40960, 1555, 19.5, 400},
      {"A100-PCIE-40GB", {}, 40960, 1555, 19.5, 250},
      {"L40S", {"L40S-48GB"}, 49152, 864, 91.6, 350},
      {"A30", {"A30-24GB"}, 24576, 933, 10.3, 165},
      {"A10", {"A10-24GB"}, 24576, 600, 31.2, 150},
      {"L4", {"L4-24GB"}, 24576, 300, 30.3, 72},
      {"V100-SXM2-32GB", {"V100M32", "V100-32GB"}, 32768, 900, 15.7, 300},
      {"V100-SXM2-16GB", {"V100", "V100M16", "V100-16GB"}, 16384, 900, 15.7, 300},
      {"T4", {"T4-16GB"}, 15360, 320, 8.1, 70},
      {"P100-PCIE-16GB", {"P100", "P100-16GB"}, 16384, 732, 9.3, 250},
  };
}

std::string NormalizeModelName(std::string_view model) { return core::GpuModelKey(model); }

common::Result<std::unique_ptr<PlacementPolicy>> LoadAwarePolicy::Create(const PolicyOptions& options) {
  const LoadAwareOptions& o = options.load_aware;
  const std::pair<std::string_view, int64_t> weights[] = {
      {"memory_size_weight", o.memory_size_weight},
      {"memory_bandwidth_weight", o.memory_bandwidth_weight},
      {"compute_weight", o.compute_weight},
      {"gpu_util_weight", o.gpu_util_weight},
      {"memory_used_weight", o.memory_used_weight},
      {"memory_copy_util_weight", o.memory_copy_util_weight},
      {"power_weight", o.power_weight},
      {"temperature_weight", o.temperature_weight},
      {"encoder_util_weight", o.encoder_util_weight},
      {"decoder_util_weight", o.decoder_util_weight},
  };
  int64_t total = 0;
  for (const auto& [name, w] : weights) {
    common::Status s = CheckWeight(name, w);
    if (!s.ok()) {
      return s;
    }
    total += w;
  }
  if (total <= 0) {
    return common::InvalidArgument("load-aware: every weight is 0; at least one must be positive");
  }
  std::vector<GpuModelSpec> models = o.models.empty() ? DefaultGpuModelTable() : o.models;
  std::unordered_map<std::string, std::string> seen;  // normalised spelling -> entry name
  for (const GpuModelSpec& m : models) {
    if (NormalizeModelName(m.name).empty()) {
      return common::InvalidArgument("load-aware: a GPU model table entry has no name");
    }
    if (m.memory_mib <= 0 || m.bandwidth_gbps <= 0 || !(m.fp32_tflops > 0) || !std::isfinite(m.fp32_tflops) ||
        m.tdp_w <= 0) {
      return common::InvalidArgument("load-aware: GPU model " + m.name +
                                     ": memory_mib, bandwidth_gbps, fp32_tflops and tdp_w must be positive");
    }
    std::vector<std::string> spellings = {m.name};
    spellings.insert(spellings.end(), m.aliases.begin(), m.aliases.end());
    for (const std::string& sp : spellings) {
      auto [it, inserted] = seen.try_emplace(NormalizeModelName(sp), m.name);
      if (!inserted && !(it->second == m.name && sp != m.name)) {
        return common::InvalidArgument("load-aware: GPU model name '" + sp + "' of " + m.name + " is also " +
                                       it->second);
      }
    }
  }
  return std::unique_ptr<PlacementPolicy>(new LoadAwarePolicy(o, std::move(models)));
}

LoadAwarePolicy::LoadAwarePolicy(LoadAwareOptions options, std::vector<GpuModelSpec> models)
    : options_(std::move(options)), models_(std::move(models)) {
  options_.models.clear();  // models_ holds the table in use
  for (size_t k = 0; k < models_.size(); ++k) {
    by_name_.try_emplace(NormalizeModelName(models_[k].name), k);
    for (const std::string& a : models_[k].aliases) {
      by_name_.try_emplace(NormalizeModelName(a), k);
    }
    max_memory_mib_ = std::max(max_memory_mib_, static_cast<double>(models_[k].memory_mib));
    max_bandwidth_gbps_ = std::max(max_bandwidth_gbps_, static_cast<double>(models_[k].bandwidth_gbps));
    max_tflops_ = std::max(max_tflops_, models_[k].fp32_tflops);
  }
  auto set = [this](GpuMetric m, int64_t w) { metric_weights_[static_cast<size_t>(m)] = w; };
  set(GpuMetric::kGpuUtil, options_.gpu_util_weight);
  set(GpuMetric::kMemoryUsedMib, options_.memory_used_weight);
  set(GpuMetric::kMemoryCopyUtil, options_.memory_copy_util_weight);
  set(GpuMetric::kPowerW, options_.power_weight);
  set(GpuMetric::kTemperatureC, options_.temperature_weight);
  set(GpuMetric::kEncoderUtil, options_.encoder_util_weight);
  set(GpuMetric::kDecoderUtil, options_.decoder_util_weight);
}

const GpuModelSpec* LoadAwarePolicy::FindModel(std::string_view model) const {
  auto it = by_name_.find(NormalizeModelName(model));
  return it == by_name_.end() ? nullptr : &models_[it->second];
}

std::optional<double> LoadAwarePolicy::MetricLoad(GpuMetric m, double v, const core::NodeView& node, size_t i) const {
  if (!std::isfinite(v)) {
    return std::nullopt;  // NaN or Inf from a source counts as unknown
  }
  switch (m) {
    case GpuMetric::kGpuUtil:
    case GpuMetric::kMemoryCopyUtil:
    case GpuMetric::kEncoderUtil:
    case GpuMetric::kDecoderUtil:
      return Clamp100(v);
    case GpuMetric::kMemoryUsedMib: {
      double memory = static_cast<double>(node.node->gpus[i].memory.value());
      if (memory <= 0) {
        const GpuModelSpec* spec = FindModel(node.GpuModel(i));
        memory = spec != nullptr ? static_cast<double>(spec->memory_mib) : 0;
      }
      if (memory <= 0) {
        return std::nullopt;
      }
      return Clamp100(v * 100 / memory);
    }
    case GpuMetric::kPowerW: {
      const GpuModelSpec* spec = FindModel(node.GpuModel(i));
      const double tdp = spec != nullptr ? static_cast<double>(spec->tdp_w) : kDefaultTdpW;
      return Clamp100(v * 100 / tdp);
    }
    case GpuMetric::kTemperatureC:
      return Clamp100((v - kIdleTemperatureC) * 100 / (kHotTemperatureC - kIdleTemperatureC));
  }
  return std::nullopt;
}

std::optional<double> LoadAwarePolicy::GpuLoad(const core::NodeView& node, size_t i, const Snapshot& snapshot) const {
  if (snapshot.gpu_metrics == nullptr) {
    return std::nullopt;
  }
  auto it = snapshot.gpu_metrics->find(node.node->gpus[i].uuid);
  if (it == snapshot.gpu_metrics->end()) {
    return std::nullopt;
  }
  WeightedMean load;
  for (size_t k = 0; k < core::kGpuMetricCount; ++k) {
    const auto m = static_cast<GpuMetric>(k);
    if (metric_weights_[k] <= 0) {
      continue;
    }
    const std::optional<double> v = it->second.Fresh(m, snapshot.now_ms, snapshot.staleness_ms);
    if (v.has_value()) {
      load.Add(metric_weights_[k], MetricLoad(m, *v, node, i));
    }
  }
  return load.Value();
}

std::vector<core::ContainerAllocation> LoadAwarePolicy::Choose(const core::PodRequest& pod, const core::NodeView& node,
                                                               const Snapshot& snapshot) const {
  std::vector<double> rank(node.gpus.size(), kUnknownGpuRank);
  bool any = false;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (std::optional<double> load = GpuLoad(node, i, snapshot); load.has_value()) {
      rank[i] = *load;
      any = true;
    }
  }
  return any ? SelectGpusRanked(pod, node, rank) : SelectGpusBest(pod, node);
}

int64_t LoadAwarePolicy::Score(const core::PodRequest& pod, const core::NodeView& node,
                               const Snapshot& snapshot) const {
  if (!pod.RequestsGpu()) {
    return 0;
  }
  Mean memory;
  Mean bandwidth;
  Mean compute;
  std::array<Mean, core::kGpuMetricCount> headroom;
  for (const core::ContainerAllocation& c : Choose(pod, node, snapshot)) {
    for (const core::GpuShare& share : c.gpus) {
      const auto i = static_cast<size_t>(share.index);
      const core::Gpu& gpu = node.node->gpus[i];
      const GpuModelSpec* spec = FindModel(gpu.model);
      double mib = static_cast<double>(gpu.memory.value());
      if (mib <= 0 && spec != nullptr) {
        mib = static_cast<double>(spec->memory_mib);
      }
      if (mib > 0) {
        memory.Add(std::min(100.0, mib * 100 / max_memory_mib_));
      }
      if (spec != nullptr) {
        bandwidth.Add(static_cast<double>(spec->bandwidth_gbps) * 100 / max_bandwidth_gbps_);
        compute.Add(spec->fp32_tflops * 100 / max_tflops_);
      }
      if (snapshot.gpu_metrics == nullptr) {
        continue;
      }
      auto it = snapshot.gpu_metrics->find(gpu.uuid);
      if (it == snapshot.gpu_metrics->end()) {
        continue;
      }
      for (size_t k = 0; k < core::kGpuMetricCount; ++k) {
        const auto m = static_cast<GpuMetric>(k);
        const std::optional<double> v = it->second.Fresh(m, snapshot.now_ms, snapshot.staleness_ms);
        if (!v.has_value()) {
          continue;
        }
        if (std::optional<double> load = MetricLoad(m, *v, node, i); load.has_value()) {
          headroom[k].Add(100 - *load);
        }
      }
    }
  }
  WeightedMean score;
  score.Add(options_.memory_size_weight, memory.Value());
  score.Add(options_.memory_bandwidth_weight, bandwidth.Value());
  score.Add(options_.compute_weight, compute.Value());
  for (size_t k = 0; k < core::kGpuMetricCount; ++k) {
    score.Add(metric_weights_[k], headroom[k].Value());
  }
  const std::optional<double> s = score.Value();
  if (!s.has_value()) {
    return 0;
  }
  return std::clamp<int64_t>(std::llround(*s), 0, kMaxScore);
}

std::vector<core::ContainerAllocation> LoadAwarePolicy::SelectGpus(const core::PodRequest& pod,
                                                                   const core::NodeView& node, common::Rng&) const {
  return SelectGpusBest(pod, node);
}

std::vector<core::ContainerAllocation> LoadAwarePolicy::SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                               const core::NodeView& node,
                                                                               const Snapshot& snapshot,
                                                                               common::Rng&) const {
  return Choose(pod, node, snapshot);
}

}  // namespace gpusched::policy
