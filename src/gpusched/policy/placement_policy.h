#pragma once

// The placement policy interface, with the Kubernetes phase names. A policy is a pure function of
// (request, node view, snapshot): const methods, no I/O, no clock, no globals; randomness only from the generator
// passed in. The cycle runner (sched/) calls Filter on every node, Score on the feasible ones, normalises when the
// policy asks, picks the best node (ties broken at random), then SelectGpus on it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node_view.h"

namespace gpusched::policy {

// Filter's answer. Not an error: "does not fit here" is a normal outcome.
struct Fit {
  enum class Code {
    kFits,
    kUnschedulable,  // evicting pods on the node could make it fit
    kUnresolvable,   // nothing on this node could make it fit
  };
  Code code = Code::kFits;
  std::string reason;  // human, names the GPU and the numbers; empty when it fits

  [[nodiscard]] bool fits() const { return code == Code::kFits; }
  static Fit Fits() { return {}; }
  static Fit Unschedulable(std::string why) { return {Code::kUnschedulable, std::move(why)}; }
  static Fit Unresolvable(std::string why) { return {Code::kUnresolvable, std::move(why)}; }
};

// Cluster-wide inputs copied in before a cycle (live metrics, model predictions: later policies). Empty for the
// benchmark policies.
struct Snapshot {};

inline constexpr int64_t kMaxScore = 100;

class PlacementPolicy {
 public:
  PlacementPolicy() = default;
  PlacementPolicy(const PlacementPolicy&) = delete;
  PlacementPolicy& operator=(const PlacementPolicy&) = delete;
  virtual ~PlacementPolicy() = default;

  [[nodiscard]] virtual std::string_view Name() const = 0;

  // Whether the node's GPUs can host the pod's GPU containers (CPU and memory are the runner's node predicates).
  // Default: FitGpus (gpu_fit.h).
  [[nodiscard]] virtual Fit Filter(const core::PodRequest& pod, const core::NodeView& node) const;

  // 0..kMaxScore, higher is better. Called only on nodes that passed Filter.
  [[nodiscard]] virtual int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                                      const Snapshot& snapshot) const = 0;

  // Whether the runner min-max normalises the feasible nodes' scores to 0..kMaxScore.
  [[nodiscard]] virtual bool NormalizesScores() const { return false; }

  // Whether the node is a uniformly random feasible one, whatever the scores and the runner's tie rule (the
  // random policy: KSS picks its node in PreScore).
  [[nodiscard]] virtual bool ChoosesNodeAtRandom() const { return false; }

  // Chooses the GPUs for every GPU container. Precondition: Filter(pod, node) fits. Default: the tightest
  // fitting GPU for a shared GPU, the lowest-index fully free GPUs for whole ones (SelectGpusBest).
  [[nodiscard]] virtual std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                          const core::NodeView& node,
                                                                          common::Rng& rng) const;
};

}  // namespace gpusched::policy
