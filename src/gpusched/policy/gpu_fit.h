#pragma once

// The GPU fit every policy shares (the FGD benchmark's Open-Gpu-Share filter, generalised to memory, models,
// exclusivity and several GPU containers), and the standard ways of choosing GPUs inside a node.
//
// A GPU can host one GPU of a container when it is healthy, its model is allowed, it is not held exclusively,
// and: for a whole GPU (exclusive) it is fully free (no holder) with the memory asked; for a share
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

// Whether the container asks for whole GPUs (exclusive) rather than shares of them. A share of all of a GPU's
// compute (1000 milli, not exclusive: KETI's keti.com/mpsgpu, gpusched.io/gpu-core 100 with a memory amount, HAMi's
// gpucores 100 with gpumem) is a share: it needs the compute free, takes only the memory it asks, and pods that ask
// for memory only may join it. The decoder (kube/resources.h) says which forms are exclusive.
[[nodiscard]] inline bool WantsWhole(const core::GpuRequest& c) { return c.exclusive; }
// Whether an allocated GPU is held whole.
[[nodiscard]] inline bool HoldsWhole(const core::GpuShare& g) { return g.exclusive || g.milli >= common::kGpuMilli; }

// Whether GPU i of the node can host one GPU of the container, given the GPU states (which may be a hypothetical
// copy of node.gpus).
[[nodiscard]] bool GpuCanHost(const core::GpuRequest& c, const core::NodeView& node,
                              std::span<const core::GpuState> gpus, size_t i);

// Fits, or why not: unresolvable when nothing on the node could make it fit (too few usable GPUs of the allowed
// models with the memory asked; for several GPU containers, not fitting together on the empty node, e.g. more GPU
// memory in all than the node has), unschedulable otherwise.
[[nodiscard]] Fit FitGpus(const core::PodRequest& pod, const core::NodeView& node);

// Picks one GPU among the candidate indices (all of which can host the container) for a shared container.
using ShareChooser = std::function<size_t(const core::GpuRequest&, const core::NodeView&,
                                          std::span<const core::GpuState>, std::span<const size_t> candidates)>;

// Allocates every container with `choose` deciding shared GPUs; whole GPUs take the best-connected fully free ones
// where the node's topology is known (topology.h: ChooseWholeGpus), else the lowest-index ones; a share that
// `choose` puts on a fully free GPU moves to the interchangeable fully free GPU (same model and memory) whose loss
// breaks the least NVLink connectivity, where the topology is known; multi-GPU shares take the `count` tightest fitting
// GPUs (ascending free milli, then index). Precondition: fits.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWith(const core::PodRequest& pod,
                                                                    const core::NodeView& node,
                                                                    const ShareChooser& choose);

// "best": the fitting GPU with the least free milli (lowest index on ties).
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusBest(const core::PodRequest& pod,
                                                                    const core::NodeView& node);
// "worst": the fitting GPU with the most free milli (lowest index on ties) — spreading inside the node.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusWorst(const core::PodRequest& pod,
                                                                     const core::NodeView& node);
// "ranked": for every container, the `count` fitting GPUs of lowest rank[i] (lowest index on ties), rank having
// one entry per GPU of the node (load-aware passes each GPU's measured load). Greedy per container; when an
// earlier container's pick leaves a later one without room, the whole pod falls back to SelectGpusBest, whose
// placement FitGpus proved. Precondition: fits.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusRanked(const core::PodRequest& pod,
                                                                      const core::NodeView& node,
                                                                      std::span<const double> rank);
// "random": a uniformly random fitting GPU.
[[nodiscard]] std::vector<core::ContainerAllocation> SelectGpusRandom(const core::PodRequest& pod,
                                                                      const core::NodeView& node, common::Rng& rng);

}  // namespace gpusched::policy
