#pragma once

// The node's GPUs as the DRA devices of driver gpu.gpusched.io (docs/dra.md, "ResourceSlices and DeviceClasses").
// Pure; the agent builds it from its inventory at every sample and the publisher writes it as ResourceSlices.
//
// One pool per node, named after the node; one device per GPU, named gpu-<index>, with
//   attributes (in the driver's domain): uuid (string), index (int), model (string, gpusched's model name),
//     productName (string, NVML's name, when known), numaNode (int, when known), linkGroup (int: the smallest
//     index of the GPUs joined to this one by NVLink or NVSwitch, directly or through others; a GPU without NVLink
//     is its own group), driverVersion and cudaVersion (version, when known, normalised below), healthy (bool);
//   capacity memory (bytes; left out when the inventory does not know the memory) and compute (percent of the
//     GPU, 100);
//   sharing (the default): allowMultipleAllocations true with request policies that MPS can enforce:
//     memory: default the whole memory (a claim that names no capacity gets the whole GPU), validRange min 256Mi,
//       step 1Mi (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT takes whole MiB: "<n>M"), max the whole memory; a GPU of at
//       most 256Mi gets the default alone;
//     compute: default 100, validRange min 1, max 100, step 1 (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, percent);
//   whole GPUs only (an option): allowMultipleAllocations left out and no request policies (the API forbids them
//     on devices that are not shareable);
//   taints: an unhealthy GPU (a critical XID, or NVML said the GPU is lost) carries gpu.gpusched.io/unhealthy with
//     effect NoSchedule and value "xid-<n>" when an XID is known. Not NoExecute: the agent's health is sticky until
//     it restarts and cannot tell a dead GPU from a recoverable fault, and NoExecute makes the eviction controller
//     delete every pod on the GPU; an operator who wants that applies a DeviceTaintRule.
//
// Versions: DRA version attributes must be semver 2.0.0, which forbids leading zeros and wants three numbers.
// NormaliseVersion drops leading zeros ("535.104.05" -> "535.104.5"), pads to three numbers ("12.4" ->
// "12.4.0"), and keeps any fourth and later numbers as build metadata ("1.2.3.4" -> "1.2.3+4"); anything else
// (letters, empty parts, a number above 2^31) is not a version and the attribute is left out.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "gpusched/common/ids.h"
#include "gpusched/core/dra.h"
#include "gpusched/core/gpu.h"

namespace gpusched::kube {

inline constexpr std::string_view kGpuDriverName = "gpu.gpusched.io";
inline constexpr std::string_view kUnhealthyTaintKey = "gpu.gpusched.io/unhealthy";

// One GPU of the inventory, with what the DRA attributes add to core::Gpu.
struct PoolGpu {
  core::Gpu gpu;
  std::string product_name;  // NVML's name, e.g. "NVIDIA A100-SXM4-80GB"; empty: unknown
  int64_t last_xid = 0;      // the last XID seen, 0: none
};

struct GpuPoolOptions {
  bool whole_gpus_only = false;  // no sharing: allowMultipleAllocations off, no request policies
  std::string driver_version;    // the NVIDIA driver as NVML reports it ("535.104.05"); empty: unknown
  std::string cuda_version;      // the CUDA driver API version ("12.2"); empty: unknown
};

// "gpu-<index>": the device name of the GPU with that index (the kubelet plugin maps it back).
[[nodiscard]] std::string GpuDeviceName(int32_t index);

[[nodiscard]] std::optional<std::string> NormaliseVersion(std::string_view version);

// The pool of `node` (generation 0: the publisher sets it). GPUs in index order.
[[nodiscard]] core::dra::DevicePool GpuDevicePool(const common::NodeName& node, std::span<const PoolGpu> gpus,
                                                  const GpuPoolOptions& options);

}  // namespace gpusched::kube
