#pragma once

// The GPU fit every policy shares (the FGD benchmark's Open-Gpu-Share filter, generalised to memory, models,
// exclusivity and several GPU containers), and the standard ways of choosing GPUs inside a node.
//
// A GPU can host one GPU of a container when it is healthy, its model is allowed, it is not held exclusively,
// and: for a whole GPU (milli 1000 or exclusive) it is fully free (no holder) with the memory asked; for a share
// it has at least the milli and memory asked free. Containers are placed one after another; a later container
// sees what the earlier ones took.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node_view.h"
#include "gpusched/policy/placement_policy.h"

namespace gpusched::policy {

// Whether GPU i of the node can host one GPU of the container, given the GPU states (which may be a hypothetical
// copy of node.gpus).
[[nodiscard]] bool GpuCanHost(const core::GpuRequest& c, const core::NodeView& node,
                              std::span<const core::GpuState> gpus, size_t i);

[[nodiscard]] Fit FitGpus(const core::PodRequest& pod, const core::NodeView& node);

// Picks one GPU among the candidate indices (all of which can host the container) for a shared container.
using ShareChooser = std::function<size_t(const core::GpuRequest&, const core::NodeView&,
                                          std::span<const core::GpuState>, std::span<const size_t> candidates)>;

// Allocates every container with `choose` deciding shared GPUs; whole GPUs take the lowest-index fully free ones;
// multi-GPU shares take the `count` tightest fitting GPUs (ascending free milli, then index). Precondition: fits.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWith(const core::PodRequest& pod,
                                                                    const core::NodeView& node,
                                                                    const ShareChooser& choose);

// "best": the fitting GPU with the least free milli (lowest index on ties).
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusBest(const core::PodRequest& pod,
                                                                    const core::NodeView& node);
// "worst": the fitting GPU with the most free milli (lowest index on ties) — spreading inside the node.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWorst(const core::PodRequest& pod,
                                                                     const core::NodeView& node);
// "random": a uniformly random fitting GPU.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusRandom(const core::PodRequest& pod,
                                                                      const core::NodeView& node, common::Rng& rng);

}  // namespace gpusched::policy
