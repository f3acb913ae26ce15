#pragma once

// load-aware: places a pod on the GPUs that live metrics show least loaded and, between equally loaded GPUs, on the
// stronger model. Reads the metric samples the front end copied into the Snapshot (the background metrics cache);
// never a clock or the network. With no fresh sample it degrades to the static attributes alone.
//
// Per-metric load of GPU g, load_m(g) in 0..100, from a sample that is fresh at snapshot.now_ms
// (core::GpuMetrics::Fresh with snapshot.staleness_ms; a missing or stale sample is unknown):
//   gpu_util, memory_copy_util, encoder_util, decoder_util   the percentage, clamped to 0..100
//   memory_used    used MiB × 100 / device memory (the node's, else the table's; unknown memory -> unknown)
//   power          W × 100 / TDP (the table's, else 400 W), clamped to 0..100
//   temperature    (°C − 30) × 100 / 60, clamped to 0..100 (30 °C idle .. 90 °C throttling)
// GPU load L(g) = Σ w_m · load_m(g) / Σ w_m over g's known metrics with w_m > 0; none known -> unknown.
//
// GPU choice inside a node (SelectGpusWithSnapshot, and the GPUs Score rates): every container takes its fitting
// GPUs of lowest L(g), lowest index on ties (SelectGpusRanked), a GPU of unknown load ranking as 50 (half loaded).
// When no GPU of the node has a known load: SelectGpusBest, as the benchmark policies.
//
// Score of a node, over the chosen GPUs G (each term 0..100, higher = better):
//   memory      memory MiB × 100 / largest memory_mib in the table (the node's memory, else the table's; max 100)
//   bandwidth   GB/s × 100 / largest bandwidth in the table          (model in the table only)
//   compute     FP32 TFLOPS × 100 / largest TFLOPS in the table      (model in the table only)
//   metric m    100 − load_m(g)                                       (fresh samples only)
//   each term averaged over the GPUs of G where it is known; a term known for no GPU of G drops out, so
//   Score = round(Σ w_k · term_k / Σ w_k) over the remaining terms; 0 when none remains (a CPU-only pod: all
//   nodes tie). The weights and their defaults are in LoadAwareOptions (policy_options.h).
//
// Scores read the snapshot (Reads), so the cycle runner caches them per snapshot (cycle_runner.h).
// Thread-safety: immutable after Create; any number of threads may call it.

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

// The built-in model table (FP32 peak, memory bandwidth and board power from NVIDIA's data sheets; SXM figures
// for names without a form factor). Matched by NormalizeModelName, so "A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"
// (GPU feature discovery's product label) and "a100 sxm4 80gb" are one entry.
[[nodiscard]] std::vector<GpuModelSpec> DefaultGpuModelTable();

// Upper-case alphanumerics only, without a leading "NVIDIA" or "TESLA": "Tesla-V100-SXM2-32GB" -> "V100SXM232GB".
[[nodiscard]] std::string NormalizeModelName(std::string_view model);

class LoadAwarePolicy final : public PlacementPolicy {
 public:
  // InvalidArgument for a negative weight, all weights zero, or a bad table entry (empty name, non-positive
  // figure, a name or alias used twice).
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);

  [[nodiscard]] std::string_view Name() const override { return "load-aware"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] Inputs Reads() const override { return {.gpu_metrics = true}; }
  // Without a snapshot: SelectGpusBest.
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
  // The least-loaded fitting GPUs (see above).
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                              const core::NodeView& node,
                                                                              const Snapshot& snapshot,
                                                                              common::Rng& rng) const override;

  // The table entry for a GPU model string, or null.
  [[nodiscard]] const GpuModelSpec* FindModel(std::string_view model) const;
  // L(g) of GPU i of the node, unknown when no weighted metric of it is fresh.
  [[nodiscard]] std::optional<double> GpuLoad(const core::NodeView& node, size_t i, const Snapshot& snapshot) const;

 private:
  LoadAwarePolicy(LoadAwareOptions options, std::vector<GpuModelSpec> models);

  // load_m of GPU i from a fresh value v.
  [[nodiscard]] std::optional<double> MetricLoad(core::GpuMetric m, double v, const core::NodeView& node,
                                                 size_t i) const;
  [[nodiscard]] std::vector<core::ContainerAllocation> Choose(const core::PodRequest& pod, const core::NodeView& node,
                                                              const Snapshot& snapshot) const;

  LoadAwareOptions options_;
  std::vector<GpuModelSpec> models_;
  std::unordered_map<std::string, size_t> by_name_;  // normalised name and aliases -> models_ index
  std::array<int64_t, core::kGpuMetricCount> metric_weights_{};
  double max_memory_mib_ = 0;
  double max_bandwidth_gbps_ = 0;
  double max_tflops_ = 0;
};

}  // namespace gpusched::policy
