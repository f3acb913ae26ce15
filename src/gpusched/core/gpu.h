#pragma once

// One physical GPU of a node, as the scheduler knows it (from the agent's inventory annotation, the GPU feature
// discovery labels, or a trace).

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"

namespace gpusched::core {

// How two GPUs of a node reach each other, worst first (nvidia-smi topo -m's names in brackets). The agent reads it
// from NVML (nvmlDeviceGetTopologyCommonAncestor, NVLink remote PCI info); the simulator from a template per model.
enum class LinkKind : int8_t {
  kUnknown = 0,
  kCrossSocket,      // [SYS] PCIe and the interconnect between CPU sockets (NUMA nodes)
  kSameNuma,         // [NODE] PCIe and the interconnect between host bridges of one NUMA node
  kHostBridge,       // [PHB] PCIe through one host bridge (the CPU)
  kPcieMultiSwitch,  // [PXB] several PCIe switches, no host bridge
  kPcieSwitch,       // [PIX] one PCIe switch
  kNvlink,           // [NV#] direct NVLink, `nvlinks` links bonded
  kNvSwitch,         // NVLink through NVSwitch (every GPU of the board at full bandwidth)
};

// The link from one GPU to another GPU of the same node.
struct GpuLink {
  int32_t peer = 0;  // the other GPU's index
  LinkKind kind = LinkKind::kUnknown;
  int32_t nvlinks = 0;  // NVLink links between the two (kNvlink, kNvSwitch); 0 otherwise

  bool operator==(const GpuLink&) const = default;
};

struct Gpu {
  int32_t index = 0;
  common::GpuUuid uuid;
  std::string model;  // e.g. "A100-80GB", "V100M32", "T4"
  // Total device memory. 0 means unknown: memory requests then cannot be placed on it.
  common::MiB memory{0};
  int32_t numa_node = -1;             // -1 = unknown
  std::vector<int32_t> nvlink_peers;  // indices of GPUs with a direct NVLink
  // Every other GPU of the node with the link to it, when the topology is known (empty: unknown; nvlink_peers is
  // then all that is known). policy/topology.h scores them.
  std::vector<GpuLink> links;
  bool healthy = true;
  // How many pods may share this GPU: the device ids the node's device plugin advertises for it (the kubelet admits
  // no more containers than that). 0: no limit known (a trace, or an inventory without it).
  int32_t max_sharers = 0;

  bool operator==(const Gpu&) const = default;
};

}  // namespace gpusched::core
