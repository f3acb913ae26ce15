#pragma once

// The agent's CDI spec (Container Device Interface, cdiVersion 0.5.0) for the cdi-annotations and cdi-cri
// device-list strategies (container_env.h): one JSON file, <spec_dir>/<vendor>-<class>.json
// (/var/run/cdi/gpusched.io-gpu.json), that a CDI-enabled runtime (containerd 1.7+, CRI-O) reads to resolve the
// names Allocate returns ("gpusched.io/gpu=<uuid>"):
//
//   {"cdiVersion": "0.5.0", "kind": "gpusched.io/gpu",
//    "devices": [{"name": "<uuid>", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia<minor>"}]}}, ...],
//    "containerEdits": {"deviceNodes": [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools (those present)],
//                       "mounts": [each of driver_files, read-only at its own path]}}
//
// One device per GPU of the inventory, named by its UUID. The minor number of /dev/nvidia<minor> is the driver's
// ("Device Minor:" in /proc/driver/nvidia/gpus/<pci bus id>/information), never the NVML index: the two differ
// on some machines. A GPU whose minor cannot be read is left out (and named in the error), so Allocate refuses it
// rather than hand over a device node that may be another GPU's.
//
// The file is written atomically (a temporary file in the same directory, then rename) and only when its content
// changes; RemoveCdiSpec deletes it (a node switched back to another strategy). It is not removed when the agent
// stops: running containers that restart still need their devices resolved.

#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::deviceplugin {

struct CdiSpecOptions {
  std::string kind = "gpusched.io/gpu";
  std::string spec_dir = "/var/run/cdi";
  std::string dev_dir = "/dev";                            // where the device nodes are (host and container)
  std::string proc_gpus_dir = "/proc/driver/nvidia/gpus";  // the driver's per-GPU information
  std::vector<std::string> control_nodes = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"};  // under dev_dir
  // Host files mounted read-only at the same path in every container that gets a device (the driver's user-space
  // libraries, e.g. libcuda.so.1, libnvidia-ml.so.1); FindDriverFiles lists them.
  std::vector<std::string> driver_files;
};

// The driver's minor number of the GPU at `pci_bus_id` (NVML's "00000000:07:00.0"; the driver's directory is
// "0000:07:00.0"). NotFound naming the file when it is absent or has no "Device Minor:" line.
[[nodiscard]] common::Result<int> GpuMinor(std::string_view proc_gpus_dir, std::string_view pci_bus_id);

// The first of each of `sonames` found in `lib_dirs` (in order), resolved through symlinks to a regular file.
[[nodiscard]] std::vector<std::string> FindDriverFiles(std::span<const std::string> lib_dirs,
                                                       std::span<const std::string> sonames);

struct CdiSpec {
  nlohmann::json spec;             // the document
  std::set<common::GpuUuid> gpus;  // the GPUs it has a device for
  std::string problems;            // GPUs left out and why; "" when none
};

[[nodiscard]] CdiSpec BuildCdiSpec(const CdiSpecOptions& options, std::span<const ports::GpuSample> gpus);

// The pieces BuildCdiSpec is made of, for other specs of the same GPUs (the DRA plugin's per-claim specs,
// dra_plugin.h): one GPU's device node ({"path": "<dev_dir>/nvidia<minor>"}, an error naming the GPU and the file
// when its minor cannot be read), and the edits every container with a GPU gets (the control nodes that exist, the
// driver files; an empty object when there are none).
[[nodiscard]] common::Result<nlohmann::json> GpuDeviceNode(const CdiSpecOptions& options, const ports::GpuSample& gpu);
[[nodiscard]] nlohmann::json CommonContainerEdits(const CdiSpecOptions& options);

// <spec_dir>/<kind with '/' as '-'>.json
[[nodiscard]] std::string CdiSpecPath(const CdiSpecOptions& options);

// Writes `spec` unless the file already holds exactly it. Errors name the path.
[[nodiscard]] common::Status WriteCdiSpec(const CdiSpecOptions& options, const nlohmann::json& spec);
// Removes the file; OK when it does not exist.
[[nodiscard]] common::Status RemoveCdiSpec(const CdiSpecOptions& options);

// The same for a spec at any path (its directory is created when missing): written atomically and only when the
// content differs; removal is OK when the file does not exist.
[[nodiscard]] common::Status WriteCdiSpecFile(const std::string& path, const nlohmann::json& spec);
[[nodiscard]] common::Status RemoveCdiSpecFile(const std::string& path);

}  // namespace gpusched::adapters::deviceplugin
