#pragma once

// topology: for a pod with a container of 2 or more whole GPUs, the node where those GPUs are best connected.
// Meant as a weight beside a packing policy (`weights: {fgd: 10, topology: 1}`), or alone on clusters of NVLink
// machines. GPU choice: SelectGpusBest (shares on the tightest GPU, whole GPUs by ChooseWholeGpus, topology.h), which
// already keeps NVLink groups whole inside the node.
//
// Score, for the GPUs SelectGpusBest would give the pod on the node:
//   quality = for each container with 2 or more whole GPUs, SetScore(its GPUs) / SetScore(the best set of that size
//             on the empty node) (1 when that is 0); the lowest over the containers;
//   score   = round(100 · quality).
// Every other pod (one GPU, shares, no GPU), and every node without known topology (no links, no nvlink_peers),
// scores 50 on every node: their GPUs need no links between them, and a score that varied with what they leave
// behind would spread them over the nodes (on the openb trace, a weight of 1 in 31 for "keep the NVLink groups
// whole" cost fgd 0.8 points of allocation), so a mix leaves their placement to the other policy.

#include <memory>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

inline constexpr int64_t kTopologyNeutralScore = 50;

class TopologyPolicy final : public PlacementPolicy {
 public:
  static common::Result<std::unique_ptr<PlacementPolicy>> Create(const PolicyOptions& options);
  [[nodiscard]] std::string_view Name() const override { return "topology"; }
  [[nodiscard]] int64_t Score(const core::PodRequest& pod, const core::NodeView& node,
                              const Snapshot& snapshot) const override;
  [[nodiscard]] std::vector<core::ContainerAllocation> SelectGpus(const core::PodRequest& pod,
                                                                  const core::NodeView& node,
                                                                  common::Rng& rng) const override;
};

}  // namespace gpusched::policy
