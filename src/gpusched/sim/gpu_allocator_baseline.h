#pragma once

// Baselines for the GPU choice inside a node, for `gpusched-lab simulate --topology`:
//
// go-gpuallocator (NVIDIA's library behind the NVIDIA device plugin's topology-aware allocation), written from its
// documented algorithm: to hand out `size` GPUs, consider every way of dividing all available GPUs of the node
// into groups of `size` (the last group padded with placeholders when the count does not divide; a group holds no
// placeholder or all of them), score each division by the sum of its groups' set scores (pair scores summed,
// policy/topology.h), take the best division (the first found on ties, groups enumerated with their first GPU in
// ascending order), and return its best-scoring real group (the first on ties). One GPU: the first available.
// The scheduler picks the node without looking at links, as kube-scheduler does before the device plugin chooses;
// the library then chooses on that node.
//
// First fit: the lowest-numbered free GPUs (what a topology-blind scheduler does).

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/policy/placement_policy.h"

namespace gpusched::sim {

// Available GPU indices (ascending) -> the `size` chosen. Divisions are enumerated exactly up to
// kMaxGoAllocatorGpus available GPUs; beyond that the best set alone is taken (ChooseWholeGpus), which no openb
// node needs (8 GPUs at most). Precondition: 1 <= size <= available.size().
inline constexpr size_t kMaxGoAllocatorGpus = 12;
[[nodiscard]] std::vector<size_t> GoGpuAllocatorChoice(const core::Node& node, std::span<const size_t> available,
                                                       size_t size);

// A placement policy whose node choice is `inner`'s and whose whole-GPU containers get the GPUs GoGpuAllocatorChoice
// picks on the node's real topology (`real_nodes`, by name: the view the policy sees may have the links removed).
// Shares keep inner's choice.
class GoGpuAllocatorPlacement final : public policy::PlacementPolicy {
 public:
  GoGpuAllocatorPlacement(const policy::PlacementPolicy& inner,
                          std::unordered_map<std::string, const core::Node*> real_nodes)
      : inner_(inner), real_nodes_(std::move(real_nodes)) {}

  [[nodiscard]] std::string_view Name() const override { return inner_.Name(); }
  [[nodiscard]] policy::Fit Filter(const core::PodRequest& pod, const core::NodeView& node) const override {
    return inner_.Filter(pod, node);
  }
  [[nodiscard]] policy::Fit FilterWithSnapshot(const core::PodRequest& pod, const core::NodeView& node,
                                               const policy::Snapshot& snapshot) const override {
    return inner_.FilterWithSnapshot(pod, node, snapshot);
  }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const policy::Snapshot& snapshot) const override {
    return inner_.Score(pod, node, snapshot);
  }
  [[nodiscard]] policy::Inputs Reads() const override { return inner_.Reads(); }
  [[nodiscard]] bool NormalizesScores() const override { return inner_.NormalizesScores(); }
  [[nodiscard]] bool ChoosesNodeAtRandom() const override { return inner_.ChoosesNodeAtRandom(); }
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                              const core::NodeView& node,
                                                                              const policy::Snapshot& snapshot,
                                                                              common::Rng& rng) const override;

 private:
  [[nodiscard]] std::vector<core::ContainerAllocation> Rechoose(const core::PodRequest& pod, const core::NodeView& node,
                                                                std::vector<core::ContainerAllocation> chosen) const;

  const policy::PlacementPolicy& inner_;
  std::unordered_map<std::string, const core::Node*> real_nodes_;
};

}  // namespace gpusched::sim
