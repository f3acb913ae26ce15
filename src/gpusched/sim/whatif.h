#pragma once

// What-if on a live cluster (`gpusched-lab simulate --from-cluster`): would these pods fit, where, and under which
// policy would more of them fit. The cluster is what the scheduler's cache would build from the API server's nodes
// and pods (sched::ClusterCache, every bound pod charged, allocations from their gpusched.io/allocation
// annotations); nothing is written anywhere. For each policy the pods are placed one after another, in the order
// given, on a fresh copy, through the standalone scheduler's cycle (node predicates: taints, selectors, affinity;
// CPU, memory and pod count; the policy's GPU fit), each seeing the ones placed before it. fgd scores against the
// live scheduler's default target workload (policy::DefaultTargetWorkload).

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"
#include "gpusched/sched/cluster_cache.h"

namespace gpusched::sim {

struct WhatIfPod {
  std::string name;    // e.g. train-0 (a Deployment's replicas are numbered)
  std::string source;  // file:line of the object it came from
  core::PodRequest request;
};

struct WhatIfCluster {
  std::vector<core::Node> nodes;
  std::vector<core::PodUpdate> pods;  // every pod the API server listed, decoded with its requests
};

struct WhatIfPlacement {
  std::string pod;
  std::optional<core::Allocation> allocation;  // where it went
  std::string reason;                          // why not, when it fits nowhere (the scheduler's summary)
};

struct WhatIfOutcome {
  std::string policy;
  std::vector<WhatIfPlacement> placements;  // one per pod, in order
  int64_t placed = 0;
};

// The cluster as the cache builds it: nodes, GPUs, GPU compute held, pods charged.
struct WhatIfSummary {
  int64_t nodes = 0, gpus = 0, pods_charged = 0;
  int64_t allocated_milli = 0, capacity_milli = 0;
};

[[nodiscard]] WhatIfSummary SummarizeCluster(const WhatIfCluster& cluster);

// A fresh cache fed with the cluster's nodes and pods, as the scheduler's watches would feed it (every bound pod
// charged). `skip`: a pod left out (`why` judges a pod as if it held nothing yet).
[[nodiscard]] std::unique_ptr<sched::ClusterCache> BuildCache(const WhatIfCluster& cluster,
                                                              const common::PodUid* skip = nullptr);

// InvalidArgument for an unknown policy (or a bad mix) or no pods; every policy is run.
[[nodiscard]] common::Result<std::vector<WhatIfOutcome>> WhatIf(const WhatIfCluster& cluster,
                                                                const std::vector<WhatIfPod>& pods,
                                                                const std::vector<std::string>& policies,
                                                                uint64_t seed);

// A table of policies (pods placed of the total), then the placements of the best policy (the first of those that
// place the most), then why the pods it could not place did not fit.
void PrintWhatIf(std::ostream& out, const WhatIfSummary& summary, const std::vector<WhatIfPod>& pods,
                 const std::vector<WhatIfOutcome>& outcomes);

}  // namespace gpusched::sim
