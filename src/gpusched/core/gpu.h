#pragma once

// One physical GPU of a node, as the scheduler knows it (from the agent's inventory annotation, the GPU feature
// discovery labels, or a trace).

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"

namespace gpusched::core {

struct Gpu {
  int32_t index = 0;
  common::GpuUuid uuid;
  std::string model;  // e.g. "A100-80GB", "V100M32", "T4"
  // Total device memory. 0 means unknown: memory requests then cannot be placed on it.
  common::MiB memory{0};
  int32_t numa_node = -1;             // -1 = unknown
  std::vector<int32_t> nvlink_peers;  // indices of GPUs with a direct NVLink
  bool healthy = true;
  // How many pods may share this GPU: the device ids the node's device plugin advertises for it (the kubelet admits
  // no more containers than that). 0: no limit known (a trace, or an inventory without it).
  int32_t max_sharers = 0;

  bool operator==(const Gpu&) const = default;
};

}  // namespace gpusched::core
