#pragma once

// What a live cluster's GPUs hold (`gpusched status`, `kubectl gpusched status`): per node and per GPU, the model,
// health, GPU compute and memory allocated against capacity and the pods holding each GPU, and the cluster's totals
// with FGD's fragmentation measure (of the free GPU compute, the share the typical pod cannot use where it is;
// policy/target_workload.h, against the live scheduler's default typical pods). Built as the scheduler's cache
// builds its state from the API server's nodes and pods (sim/whatif.h's WhatIfCluster); read-only.

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/sim/whatif.h"

namespace gpusched::sim {

struct GpuStatus {
  int32_t index = 0;
  std::string uuid;
  std::string model;
  bool healthy = true;
  int64_t milli_used = 0;  // of 1000
  int64_t memory_mib = 0, memory_used_mib = 0;
  std::vector<std::string> pods;  // namespace/name of the pods holding it
};

struct NodeStatus {
  std::string name;
  bool unschedulable = false;
  int64_t cpu_milli = 0, cpu_used_milli = 0;
  int64_t pods = 0;  // pods charged to the node (GPU or not)
  std::vector<GpuStatus> gpus;
  double frag_milli = 0;  // FGD's F_n
  int64_t idle_milli = 0;
};

struct ClusterStatus {
  std::vector<NodeStatus> nodes;
  int64_t gpus = 0, healthy_gpus = 0;
  int64_t capacity_milli = 0, allocated_milli = 0;
  int64_t free_milli = 0;  // of healthy GPUs
  double frag_milli = 0;
};

// `only` names the nodes to report (empty: every node with GPUs). Unknown names are listed in `missing`.
[[nodiscard]] ClusterStatus BuildStatus(const WhatIfCluster& cluster, const std::vector<std::string>& only,
                                        std::vector<std::string>* missing = nullptr);

}  // namespace gpusched::sim
