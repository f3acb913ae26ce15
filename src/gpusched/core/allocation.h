#pragma once

// Which GPUs a pod got and how much of each. This is what the pod's gpusched.io/allocation annotation records
// and what ClusterState accounts.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/share_within.h"

namespace gpusched::core {

struct GpuShare {
  int32_t index = 0;
  common::GpuUuid uuid;  // may be empty in the simulator; checked against the node when set
  common::MilliGpu milli{0};
  common::MiB memory{0};
  bool exclusive = false;
  int32_t numa_node = -1;  // the GPU's NUMA node when the node's inventory knows it (-1: unknown)
};

struct ContainerAllocation {
  std::string container;
  std::vector<GpuShare> gpus;
};

struct Allocation {
  common::PodUid pod;
  common::NodeName node;
  common::MilliCpu cpu{0};  // the pod's CPU request, charged to the node
  common::MiB memory{0};    // the pod's memory request, charged to the node
  std::vector<ContainerAllocation> containers;
  // The pod's requests of other resources (ephemeral-storage, hugepages-*, extended) and its host ports, charged
  // to the node where the front end checks them (the standalone scheduler); empty otherwise.
  std::map<std::string, int64_t> scalars;
  std::vector<HostPort> host_ports;
  uint64_t id = 0;  // monotonic allocation id (set by the binder)
  // The pod's share group (share_within.h): the GPUs it shares take it; 0 = it shares with anyone.
  ShareGroup share_group = 0;

  [[nodiscard]] int32_t GpuCount() const;
  [[nodiscard]] common::MilliGpu TotalMilli() const;
  // The pod's GPU "shape tag" used by GPU clustering: -1 no GPU, 0 one shared GPU, k >= 1 k whole GPUs.
  [[nodiscard]] int32_t ShapeTag() const;
};

}  // namespace gpusched::core
