#pragma once

// Device ids that gpusched's device plugin advertises to the kubelet, one scheme for every resource:
//
//   nvidia.com/gpu (one device per GPU):                "<key>"             e.g. "GPU-8f3c...-e1d2"
//   gpusched.io/gpu, keti.com/mpsgpu (replicas per GPU): "<key>::<replica>"  e.g. "GPU-8f3c...-e1d2::7"
//
// <key> is the GPU's UUID (NVML's "GPU-" + 36 characters = 40) when the whole id fits the kubelet's limit of 63
// characters and the UUID holds no "::"; otherwise "gpu<index>" (a MIG-style or otherwise long UUID). With a
// 40-character UUID a replica suffix of up to 21 characters fits, so real GPUs always get their UUID. The "::"
// separator is the one NVIDIA's device plugin uses for its replicas (k8s-gpu-protocols.md §4.2).
//
// The ids carry no meaning for the handoff: Allocate hands a container the GPUs of its pod's allocation, whichever
// ids the kubelet chose (docs/device-plugin.md). GetPreferredAllocation steers the kubelet to ids of those same
// GPUs so that the kubelet's per-device bookkeeping matches what the containers really use.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::deviceplugin {

inline constexpr size_t kMaxDeviceIdLength = 63;
inline constexpr std::string_view kReplicaSeparator = "::";
inline constexpr int kMaxReplicas = 1000;

// The GPU part of its device ids, for a resource with `replicas` devices per GPU (1 = no replica suffix).
[[nodiscard]] std::string GpuKey(const ports::GpuSample& gpu, int replicas);

// Every device id of one GPU: {key} for replicas == 1, else key::0 .. key::replicas-1.
[[nodiscard]] std::vector<std::string> DeviceIdsFor(const ports::GpuSample& gpu, int replicas);

// The GPU key of a device id: the text before the last "::", or the whole id when it has none.
[[nodiscard]] std::string_view GpuKeyOf(std::string_view device_id);

}  // namespace gpusched::adapters::deviceplugin
