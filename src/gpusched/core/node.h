#pragma once

// A node's fixed description: capacity and GPUs. What is allocated on it lives in ClusterState / NodeView.

#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"
#include "gpusched/core/gpu.h"

namespace gpusched::core {

struct Node {
  common::NodeName name;
  common::MilliCpu cpu{0};  // allocatable CPU
  common::MiB memory{0};    // allocatable memory
  std::vector<Gpu> gpus;    // gpus[i].index == i
};

}  // namespace gpusched::core
