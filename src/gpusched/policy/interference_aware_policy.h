#pragma once

// interference-aware: places a shared-GPU pod where co-location slows applications down least, from the slowdown
// forecast the front end copied into the Snapshot (policy/interference_forecast.h, built by
// sched::ForecastInterference from a ports::SlowdownModel). The objective: prefer the GPU where the predicted sum
// of slowdowns of the incoming pod and the pods already on that GPU is least, empty GPUs first (Co-scheML's rule,
// with the residents' share of the harm counted).
//
// Per GPU g of the node, with the forecast entry F = snapshot.interference->Find(node, g):
//   cost c(g)      1 when there is no forecast, no entry or F.residents == 0 (an empty GPU: the pod alone);
//                  objective kSum: F.Cost() = incoming + residents_added; kIncomingOnly: F.incoming.
//                  F.feasible == false: the GPU is unusable for this policy (predicted not to fit in memory);
//                  so is a harmful pair when refuse_harmful_pairs is on (policy_options.h): 1/F.incoming is less
//                  than what the residents lose, Σ (1 − 1/s_r) with s_r = 1 + F.residents_added / F.residents.
//   interference   I(g) = 100 / max(c(g), 1): 100 for an empty GPU, 50 at a cost of 2 (the incoming pod alone
//                  time-sliced with an unaffected resident), 33 at 3 (both slowed as by time slicing). Monotonic
//                  and never saturating, so a bad GPU still ranks above a worse one.
//   packing        P(g) = (GPU usage + node usage after placement) / 2, 0..100: GPU usage = (1000 − free milli of
//                  g) / 10, how full g already is; node usage = UsageAfterPercent (binpack_policy.h), so between
//                  two nodes with equally good GPUs the fuller one wins when packing counts.
//   term           T(g) = (wi · I(g) + wp · P(g)) / (wi + wp), weights from InterferenceAwareOptions.
//
// GPU choice (SelectGpusWithSnapshot, and the GPUs Score rates): a single shared GPU per container takes the usable
// fitting GPU of highest T(g); ties go to the tightest fit (least free milli, SelectGpusBest's rule), then the
// lowest index. When no fitting GPU is usable it takes the tightest fitting one (the placement must still be
// valid: the forecast is a prediction, Filter is the fit). Whole GPUs take the lowest-index fully free GPUs (empty
// by definition, I = 100). A container asking for several shared GPUs takes the fitting GPUs of highest T(g),
// unusable ones last, lowest index on ties (SelectGpusRanked).
//
// Score of a node = round(mean T(g) over the chosen GPUs), 0 when any chosen GPU is unusable (for a single shared
// GPU: the best usable GPU's term, 0 when the node has none). A pod without GPUs scores (wi · 100 + wp · node
// usage after placement) / (wi + wp).
//
// Filter is FitGpus. FilterWithSnapshot, which the cycle runner calls, also rejects a node whose chosen GPUs
// include an unusable one (Unschedulable: the pod waits until a resident leaves rather than starting into an
// out-of-memory failure or a harmful pair), unless avoid_predicted_oom is off: then such a node passes with score 0
// and is chosen only when no other node fits.
//
// Without a forecast (snapshot.interference null, as in the benchmark or when no model is configured) every GPU
// counts as empty: with the default weights every node scores 100 and the GPU choice is the tightest fit, i.e. the
// default policy; with packing_weight > 0 it is a packing policy.
//
// Scores read the snapshot (Reads), so the cycle runner caches them per snapshot, and the front end
// numbers each forecast it builds (Snapshot::interference_generation). Thread-safety: immutable after Create.

#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

class InterferenceAwarePolicy final : public PlacementPolicy {
 public:
  // InvalidArgument naming the field for a negative weight, both weights zero, or an unknown objective.
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);

  [[nodiscard]] std::string_view Name() const override { return "interference-aware"; }
  [[nodiscard]] Fit FilterWithSnapshot(const core::PodRequest& pod, const core::NodeView& node,
                                       const Snapshot& snapshot) const override;
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] Inputs Reads() const override { return {.interference_forecast = true}; }
  // Without a snapshot: SelectGpusBest (the default).
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                              const core::NodeView& node,
                                                                              const Snapshot& snapshot,
                                                                              common::Rng& rng) const override;

  // c(g) of GPU i of the node (see above); nullopt when the forecast says the pod does not fit next to a resident.
  [[nodiscard]] std::optional<double> GpuCost(const core::NodeView& node, size_t i, const Snapshot& snapshot) const;
  // T(g) of GPU i with the GPU states `gpus` (node.gpus, or a copy SelectGpus is filling); nullopt when unusable.
  // node_usage is UsageAfterPercent of the pod on the node.
  [[nodiscard]] std::optional<double> GpuTerm(const core::NodeView& node, std::span<const core::GpuState> gpus,
                                              size_t i, int64_t node_usage, const Snapshot& snapshot) const;

 private:
  explicit InterferenceAwarePolicy(InterferenceAwareOptions options) : options_(options) {}

  [[nodiscard]] std::vector<core::ContainerAllocation> Choose(const core::PodRequest& pod, const core::NodeView& node,
                                                              const Snapshot& snapshot) const;

  InterferenceAwareOptions options_;
};

}  // namespace gpusched::policy
