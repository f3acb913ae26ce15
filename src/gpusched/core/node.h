#pragma once

// A node's fixed description: capacity and GPUs. What is allocated on it lives in ClusterState / NodeView.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu.h"

namespace gpusched::core {

struct Node {
  common::NodeName name;
  common::MilliCpu cpu{0};  // allocatable CPU
  common::MiB memory{0};    // allocatable memory
  int32_t max_pods = 0;     // allocatable pods; 0 = not limited (the simulator's nodes)
  std::vector<Gpu> gpus;    // gpus[i].index == i
  // Allocatable amounts of other resources, in the API's base units (bytes for ephemeral-storage and hugepages-*,
  // counts for extended resources), GPU resource names excepted (the GPUs are `gpus`).
  std::map<std::string, int64_t> scalar_resources;
  // What the node's pods must match or tolerate (sched/node_predicates.h).
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  bool unschedulable = false;  // spec.unschedulable (cordoned)

  // Whether `other` differs from this node only in labels, taints or unschedulable (not in capacity).
  [[nodiscard]] bool SameCapacity(const Node& other) const {
    return cpu == other.cpu && memory == other.memory && max_pods == other.max_pods && gpus == other.gpus &&
           scalar_resources == other.scalar_resources;
  }
};

}  // namespace gpusched::core
