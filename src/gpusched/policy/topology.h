#pragma once

// Topology-aware choice of GPUs inside a node: which GPUs a multi-GPU container gets, and which one a single whole
// GPU takes, so that a later 2-, 4- or 8-GPU pod still finds NVLink.
//
// Pair score (after NVIDIA's go-gpuallocator, from its documented scoring; higher is better):
//   NVLink or NVSwitch with n links: 100 n (n unknown: 100); one PCIe switch [PIX] 50; several switches [PXB] 40;
//   one host bridge [PHB] 30; host bridges of one NUMA node [NODE] 20; across sockets [SYS] 10; unknown 0.
//   A node whose inventory has only nvlink_peers (an older agent) scores such a pair 100, others 0.
// Set score: the sum of the pair scores of the set.
//
// ChooseWholeGpus(count) among the fully free candidate GPUs: the set of `count` with the highest set score; among
// equal sets, the one that leaves behind the largest fully NVLink-connected group of free GPUs (a clique of the
// NVLink graph), then the one whose leftovers score highest together (for count 1: the GPU whose loss breaks the
// least connectivity), then the lowest indices. Sets are enumerated exactly up to kMaxExactSets; beyond that, a
// greedy build (from the lowest-index candidate, adding the GPU that adds the most) stands in. A node without any
// topology (no links and no nvlink_peers) gets the lowest-index candidates, as before topology was known.
//
// Pure functions of the node's description; no allocation beyond small vectors.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"

namespace gpusched::policy {

inline constexpr size_t kMaxExactSets = 20000;

[[nodiscard]] bool HasTopology(const core::Node& node);
// The score of the pair (a, b) of GPU indices of the node.
[[nodiscard]] int64_t PairScore(const core::Node& node, size_t a, size_t b);
// Whether a and b are joined by NVLink (directly or through NVSwitch).
[[nodiscard]] bool NvlinkJoined(const core::Node& node, size_t a, size_t b);
[[nodiscard]] int64_t SetScore(const core::Node& node, std::span<const size_t> set);
// Whether every pair of the set is NVLink-joined (a single GPU is).
[[nodiscard]] bool FullyNvlinked(const core::Node& node, std::span<const size_t> set);
// The size of the largest subset of `gpus` whose every pair is NVLink-joined.
[[nodiscard]] size_t LargestNvlinkGroup(const core::Node& node, std::span<const size_t> gpus);

// `count` of the candidates (GPU indices, ascending, each fully free), chosen as above. With `need` kNone, the
// lowest indices; with kRequired, only a fully NVLink-joined set (exact search; precondition: one exists, which
// NvlinkFit checks). Precondition: count <= candidates.size().
[[nodiscard]] std::vector<size_t> ChooseWholeGpus(const core::Node& node, std::span<const size_t> candidates,
                                                  size_t count,
                                                  core::TopologyNeed need = core::TopologyNeed::kPreferred);

}  // namespace gpusched::policy
