#pragma once

// The JSON that gpusched writes into annotations (ARCHITECTURE.md section 3).
//
// gpusched.io/allocation on a bound pod:
//   {"node":"gpu-node-1","id":17,"containers":[{"name":"trainer","gpus":[
//     {"index":0,"uuid":"GPU-...","milli":300,"memory_mib":20000,"exclusive":false,"numa":0}]}]}
//   (numa: the GPU's NUMA node, written when the node's inventory knows it; optional when read)
// gpusched.io/gpus on a node (the agent's inventory):
//   [{"uuid":"GPU-...","index":0,"model":"A100-SXM4-80GB","memory_mib":81920,"numa":0,"nvlink_peers":[1,2,3],
//     "healthy":true}]   (numa, nvlink_peers and healthy are optional)
// Decoders accept exactly this shape and name what is wrong; they never crash on any input (fuzzed).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu.h"

namespace gpusched::kube {

std::string EncodeAllocation(const core::Allocation& allocation);
// The pod's uid is not in the annotation (the pod carries it); CPU and memory are not charged (kube-scheduler
// accounts them), so they stay 0.
common::Result<core::Allocation> DecodeAllocation(std::string_view text, const common::PodUid& pod);

std::string EncodeGpuInventory(const std::vector<core::Gpu>& gpus);
// A GPU's links in the inventory: "links": {"<peer index>": "<name>"}, the names of nvidia-smi topo -m: "NV<n>"
// (n NVLinks), "NVS<n>" (NVSwitch, n links), "PIX", "PXB", "PHB", "NODE", "SYS". Decoding leaves out a name it
// does not know; a key that is not another GPU's index is an error.
[[nodiscard]] std::string LinkName(const core::GpuLink& link);
[[nodiscard]] std::optional<core::GpuLink> ParseLinkName(int32_t peer, std::string_view name);
// GPUs sorted by index; the indices must be 0..n-1 without gaps or repeats.
common::Result<std::vector<core::Gpu>> DecodeGpuInventory(std::string_view text);

}  // namespace gpusched::kube
