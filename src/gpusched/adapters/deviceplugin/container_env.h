#pragma once

// What Allocate returns for one container: the environment and mounts that give it exactly its GPUs
// (ARCHITECTURE.md §4 "Device handoff", k8s-gpu-protocols.md §4.1-4.2).
//
//   NVIDIA_VISIBLE_DEVICES             the GPUs' UUIDs, comma-separated, in host index order
//   GPUSCHED_NUMA_NODES                the NUMA nodes of those GPUs, distinct, ascending, comma-separated (for
//                                      `numactl --cpunodebind`/`--membind` in the container); left out when no GPU's
//                                      NUMA node is known
//   shared GPUs (a share that is not exclusive), for the MPS client:
//   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE  the share's compute in percent: milli/10, at least 1; the smallest over the
//                                      container's shares when they differ (one value applies to every device).
//                                      Left out when every shared GPU has milli 0 (a memory-only share, as
//                                      gpushare requests are: no compute is reserved, so none is capped).
//   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT   "<ordinal>=<MiB>M" per shared GPU with memory, comma-separated, e.g.
//                                      "0=20000M,1=20000M". The ordinal is the CUDA device ordinal inside the
//                                      container: the GPU's position in NVIDIA_VISIBLE_DEVICES, which is host index
//                                      order, and CUDA enumerates in that order because we also set
//   CUDA_DEVICE_ORDER=PCI_BUS_ID       (NVML's host indices follow PCI bus order).
//   CUDA_MPS_PIPE_DIRECTORY            the MPS pipe directory as the container sees it, plus a read-only mount of
//                                      the host's pipe directory there (the control daemon's DaemonSet writes it).
//                                      Read-only: the client connects to the control daemon's and its server's
//                                      sockets there (a read-only bind mount does not stop connecting to a socket or
//                                      opening a named pipe), but cannot create, remove or replace an entry, so it
//                                      cannot put its own socket in the daemon's place for the other tenants.
//   and, when MpsOptions::shm_host_dir is set, a read-write mount of it at /dev/shm: the control daemon's shared
//   memory, which MPS clients map (a pod without hostIPC has its own /dev/shm otherwise).
// These variables only lower what the control daemon allows; the limits themselves are set in the daemon
// (mps_control.h), so a process that unsets them gets no more than its share.
// Exclusive GPUs get no MPS limits; a container whose GPUs are all exclusive gets NVIDIA_VISIBLE_DEVICES only, and so
// does every container when MpsOptions::enabled is false.
//
// How the GPUs themselves are handed over is the device-list strategy (ApplyDeviceList, NVIDIA's
// --device-list-strategy names; docs/device-plugin.md, "Device-list strategies"):
//   envvar          NVIDIA_VISIBLE_DEVICES=<uuids> (what BuildContainerEnv sets). Any runtime that reads the variable
//                   from unprivileged containers also reads it from an image: a pod that requests no GPU and whose
//                   image sets NVIDIA_VISIBLE_DEVICES=all sees every GPU.
//   volume-mounts   NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices and one read-only mount of /dev/null at
//                   /var/run/nvidia-container-devices/<uuid> per GPU: NVIDIA's runtime with
//                   accept-nvidia-visible-devices-as-volume-mounts=true reads the GPUs from the mounts, which only the
//                   kubelet (a device plugin's answer) can make; the default.
//   cdi-annotations CDI devices <kind>=<uuid> in the annotation cdi.k8s.io/gpusched_<resource> (containerd 1.7+ and
//                   CRI-O resolve them against the agent's CDI spec, cdi_spec.h); NVIDIA_VISIBLE_DEVICES=void.
//   cdi-cri         the same devices in the response's cdi_devices field (kubelet 1.28+ passes them to the runtime
//                   over CRI); NVIDIA_VISIBLE_DEVICES=void.
// "void" overrides an image's own value in the GPU container, so NVIDIA's hook adds no GPU to the CDI ones.

#include <compare>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"

namespace gpusched::adapters::deviceplugin {

inline constexpr std::string_view kEnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES";
inline constexpr std::string_view kEnvNumaNodes = "GPUSCHED_NUMA_NODES";
inline constexpr std::string_view kEnvMpsThreadPercentage = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE";
inline constexpr std::string_view kEnvMpsMemLimit = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT";
inline constexpr std::string_view kEnvMpsPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY";
inline constexpr std::string_view kEnvCudaDeviceOrder = "CUDA_DEVICE_ORDER";

struct MpsOptions {
  // false: no MPS on this node (`gpusched agent --mps off`): shared GPUs get NVIDIA_VISIBLE_DEVICES only, no caps
  // (time slicing).
  bool enabled = true;
  std::string pipe_host_dir = "/tmp/nvidia-mps";       // where the host's MPS control daemon has its pipes
  std::string pipe_container_dir = "/tmp/nvidia-mps";  // where the container sees them
  bool pipe_read_only = true;  // false only for a driver whose clients must write there (none known)
  std::string shm_host_dir;    // the control daemon's /dev/shm on the host; "" = no mount (clients with hostIPC)
  std::string shm_container_dir = "/dev/shm";
};

struct MountSpec {
  std::string container_path;
  std::string host_path;
  bool read_only = false;
  auto operator<=>(const MountSpec&) const = default;
};

struct ContainerEnv {
  std::map<std::string, std::string> envs;
  std::vector<MountSpec> mounts;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names, "gpusched.io/gpu=GPU-..."
};

enum class DeviceListStrategy { kEnvvar, kVolumeMounts, kCdiAnnotations, kCdiCri };
inline constexpr std::string_view kVolumeMountsRoot = "/var/run/nvidia-container-devices";
inline constexpr std::string_view kDefaultCdiKind = "gpusched.io/gpu";

// "envvar", "volume-mounts", "cdi-annotations", "cdi-cri"; anything else is InvalidArgument naming the choices.
[[nodiscard]] common::Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view name);
[[nodiscard]] const char* DeviceListStrategyName(DeviceListStrategy strategy);
[[nodiscard]] inline bool UsesCdi(DeviceListStrategy s) {
  return s == DeviceListStrategy::kCdiAnnotations || s == DeviceListStrategy::kCdiCri;
}

struct DeviceListOptions {
  DeviceListStrategy strategy = DeviceListStrategy::kVolumeMounts;
  std::string cdi_kind = std::string(kDefaultCdiKind);  // vendor/class of the agent's CDI spec
};

// The CDI annotation key for `resource`: "cdi.k8s.io/gpusched_gpusched-io-gpu".
[[nodiscard]] std::string CdiAnnotationKey(std::string_view resource);

// Hands `gpus` (as BuildContainerEnv got them) over by `options.strategy`: rewrites NVIDIA_VISIBLE_DEVICES in
// `env` and adds the mounts, annotation or CDI devices (header comment). `resource` names the annotation.
void ApplyDeviceList(ContainerEnv& env, std::span<const core::GpuShare> gpus, std::string_view resource,
                     const DeviceListOptions& options);

// `gpus` must be non-empty and carry UUIDs (checked by the caller against the node's GPUs).
[[nodiscard]] ContainerEnv BuildContainerEnv(std::span<const core::GpuShare> gpus, const MpsOptions& options);

}  // namespace gpusched::adapters::deviceplugin
