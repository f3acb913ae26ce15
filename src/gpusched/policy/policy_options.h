#pragma once

// Typed options every policy factory receives; each factory validates the fields it needs.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/policy/target_workload.h"

namespace gpusched::policy {

// One GPU model's static attributes, from public spec sheets (load_aware_policy.h has the default table).
struct GpuModelSpec {
  std::string name;                  // canonical, e.g. "A100-SXM4-80GB"
  std::vector<std::string> aliases;  // other spellings: "A100-80GB", "A100" (the trace), GFD's product label
  int64_t memory_mib = 0;            // nominal device memory (used when the node does not report it)
  int64_t bandwidth_gbps = 0;        // memory bandwidth, GB/s
  double fp32_tflops = 0;            // FP32 (non-tensor) peak, TFLOPS
  int64_t tdp_w = 0;                 // board power limit, W: the scale of the power metric
};

// load-aware: Score = Σ weight · term / Σ weight over the terms that are known, each term 0..100 (higher = better).
// Weights are non-negative integers (0 switches a term off); at least one must be positive. The defaults give the
// dynamic terms 80 of 100 when all metrics are present, so live load dominates and the static attributes decide
// between equally loaded GPUs (and alone when no fresh metric exists). Formulas in load_aware_policy.h.
struct LoadAwareOptions {
  // Static attributes of the GPUs the pod would get, each relative to the largest in the model table.
  int64_t memory_size_weight = 5;       // device memory / largest in the table
  int64_t memory_bandwidth_weight = 5;  // GB/s / largest in the table
  int64_t compute_weight = 10;          // FP32 TFLOPS / largest in the table
  // Dynamic metrics (core::GpuMetric), each as 100 − load%; a missing or stale sample drops out.
  int64_t gpu_util_weight = 30;          // DCGM_FI_DEV_GPU_UTIL
  int64_t memory_used_weight = 20;       // DCGM_FI_DEV_FB_USED / device memory
  int64_t memory_copy_util_weight = 10;  // DCGM_FI_DEV_MEM_COPY_UTIL
  int64_t power_weight = 5;              // DCGM_FI_DEV_POWER_USAGE / TDP
  int64_t temperature_weight = 5;        // DCGM_FI_DEV_GPU_TEMP, 30 °C = 0% .. 90 °C = 100%
  int64_t encoder_util_weight = 5;       // DCGM_FI_DEV_ENC_UTIL
  int64_t decoder_util_weight = 5;       // DCGM_FI_DEV_DEC_UTIL
  // The model table, matched by the GPU's model string ignoring case and every non-alphanumeric character, and a
  // leading "NVIDIA"/"Tesla". Empty = DefaultGpuModelTable().
  std::vector<GpuModelSpec> models;
};

// interference-aware (interference_aware_policy.h has the formulas). Score = round((wi · interference + wp ·
// packing) / (wi + wp)), both terms 0..100. Weights are non-negative integers; at least one must be positive.
// The defaults rank by interference alone: an empty GPU first, then the GPU where the placement adds the least
// predicted slowdown.
struct InterferenceAwareOptions {
  enum class Objective {
    // The predicted slowdown the placement adds in all: the incoming pod's own plus what it adds to each resident
    // (GpuInterference::Cost). Minimises the sum of slowdowns on the GPU.
    kSum,
    // The incoming pod's own predicted slowdown only: Co-scheML's greedy rule, kept as a baseline for the
    // simulator. It ignores what the pod does to the residents.
    kIncomingOnly,
  };
  Objective objective = Objective::kSum;
  int64_t interference_weight = 100;
  int64_t packing_weight = 0;  // > 0 trades interference for consolidation (binpack-style)
  // A GPU the forecast predicts not to fit in memory next to its residents is not a fit (FilterWithSnapshot), so
  // the pod waits rather than being started into an out-of-memory failure. false: such a GPU only scores 0.
  bool avoid_predicted_oom = true;
  // A GPU where sharing is predicted to be worse than taking turns is unusable too: with the incoming pod's
  // slowdown s and each resident's s_r after it joins, the co-located progress rate 1/s + Σ 1/s_r falls below the
  // rate the residents have now (below 1 for one resident: both jobs would finish sooner one after the other).
  // The pod then waits for a better GPU (Unschedulable) instead of slowing everyone down.
  bool refuse_harmful_pairs = true;
  // With refuse_harmful_pairs, the least gain in progress rate sharing must bring: the GPU is unusable when
  // 1/s + Σ 1/s_r − (what the residents have now) < min_sharing_gain. 0 = only sharing worse than taking turns;
  // the default 0.25: a pair must progress at least 1.25 times as fast as one job alone (docs/interference.md);
  // higher waits for better partners (the queue lets later pods take the GPU meanwhile). 0..1.
  double min_sharing_gain = 0.25;
};

struct PolicyOptions {
  // fgd: the target workload M (TypicalPods of the trace or of the cluster's recent pods). Required by fgd.
  std::shared_ptr<const TargetWorkload> target_workload;
  // The cluster's GPUs by model (how many of each): how scarce each model is next to the model-constrained pods
  // of the target workload. Empty: no model is scarce.
  std::map<std::string, int64_t> gpus_by_model;
  LoadAwareOptions load_aware;
  InterferenceAwareOptions interference_aware;
};

}  // namespace gpusched::policy
