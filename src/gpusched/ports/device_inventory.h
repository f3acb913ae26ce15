#pragma once

// DeviceInventory: the GPUs of this node and their live state, from NVML on a GPU machine or from the fake backend
// elsewhere. The agent samples it at an interval for /metrics, the node's inventory annotation, the device plugin's
// health, and InfluxDB.

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/common/units.h"
#include "gpusched/core/gpu.h"

namespace gpusched::ports {

struct GpuProcess {
  uint32_t pid = 0;
  common::MiB used_memory{0};
};

// One GPU at one moment. Values a backend cannot read are left at their "unknown" defaults (-1 or empty) and the
// agent leaves the matching metric out.
struct GpuSample {
  int32_t index = 0;
  common::GpuUuid uuid;
  std::string name;        // NVML's product name, e.g. "NVIDIA A100-SXM4-80GB"
  std::string model;       // gpusched's model name, e.g. "A100-SXM4-80GB" (name without the "NVIDIA " prefix)
  std::string pci_bus_id;  // "00000000:07:00.0"
  int32_t numa_node = -1;
  common::MiB memory_total{0};
  common::MiB memory_used{-1};
  common::MiB memory_free{-1};
  double gpu_utilization = -1;     // percent, 0..100
  double memory_utilization = -1;  // percent of time the memory was read or written (DCGM_FI_DEV_MEM_COPY_UTIL)
  double temperature_c = -1;
  double power_w = -1;
  int64_t sm_clock_mhz = -1;
  int64_t memory_clock_mhz = -1;
  std::vector<int32_t> nvlink_peers;  // indices of GPUs with a direct NVLink
  std::vector<core::GpuLink> links;   // to every other GPU whose link is known (NVLink with its link count, or PCIe)
  std::vector<GpuProcess> processes;  // running compute processes
  bool healthy = true;                // false after a critical XID event (or when the backend says so)
  int64_t last_xid = 0;               // the last XID error seen, 0 = none (DCGM_FI_DEV_XID_ERRORS)
};

// How two GPUs are connected (nvmlDeviceGetTopologyCommonAncestor), for topology-aware placement.
enum class GpuLink { kUnknown, kSameBoard, kSingleSwitch, kMultipleSwitches, kHostBridge, kNumaNode, kSystem, kNvLink };

class DeviceInventory {
 public:
  virtual ~DeviceInventory() = default;
  // Every GPU of the node, in index order. An error means nothing could be read at all (the driver is gone).
  [[nodiscard]] virtual common::Result<std::vector<GpuSample>> Sample() = 0;
  // One line for logs and /healthz: "NVML 12.550.54.15, driver 550.54.15, 8 GPUs" or "fake 4xA100-80GB".
  [[nodiscard]] virtual std::string Describe() const = 0;
};

}  // namespace gpusched::ports
