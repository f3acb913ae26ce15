#pragma once

// Why a pod does not fit the live cluster (`gpusched why POD`, `kubectl gpusched why POD`), worked out from the
// cluster as the scheduler's cache builds it (sim/whatif.h's WhatIfCluster), read-only:
//   - the node classes (GPU count and model), each with how many nodes, the most common reason its nodes refuse
//     the pod (the scheduler's Filter: node predicates, CPU, memory, pod slots, the GPU fit), and its best node's
//     numbers for the pod's GPUs (the most compute, whole GPUs or memory free on one GPU);
//   - whether it fits somewhere now (the scheduler has not retried it since the cluster changed);
//   - what would make it fit: the fewest and least important pods of lower priority whose eviction frees a node for
//     it (the scheduler's own preemption search: sched/preemption.h), or that none would.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/core/gpu_request.h"
#include "gpusched/sim/whatif.h"

namespace gpusched::sim {

struct NodeClassWhy {
  std::string name;  // "4x A100-SXM4-80GB", "no GPUs"
  int64_t nodes = 0;
  int64_t fit = 0;     // of them, nodes where the pod fits now
  std::string reason;  // the most common refusal among the others (empty when all fit)
  std::string best;    // the best node's numbers for the pod's GPUs ("node-a: 3 whole GPUs free, GPU 1 has ...")
};

struct WhyReport {
  std::string need;  // "5 whole GPUs, 1 CPU, 128 MiB memory"
  std::vector<NodeClassWhy> classes;
  std::string fits_on;               // a node where it fits now; empty when none
  std::string preempt_node;          // where evictions would make it fit; empty when none would
  std::vector<std::string> victims;  // namespace/name (priority), most important first
};

[[nodiscard]] WhyReport ExplainPod(const WhatIfCluster& cluster, const core::PodRequest& pod);
[[nodiscard]] std::string FormatWhy(const WhyReport& report);

}  // namespace gpusched::sim
