#pragma once

// The live cluster, read-only, as the simulator's what-if cluster (sim/whatif.h): what `status`, `top`, `why` and
// `gpusched-lab simulate --from-cluster` read. Also the pods of manifest objects (-f files).

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"
#include "gpusched/sim/whatif.h"

namespace gpusched::cli {

struct ManifestPods {
  std::vector<sim::WhatIfPod> pods;
  std::vector<std::string> ignored;
};
// The pods a set of Kubernetes objects would make, in order: a Pod itself; a Deployment, ReplicaSet or StatefulSet
// spec.replicas (default 1) copies of its template, named <name>-0, -1, ...; a Job spec.parallelism (default 1).
// Other kinds make no pods now and are listed in `ignored` ("file:line Kind name"). `source` of each object is
// file:line. Errors (a request that cannot be read, replicas that are not a count) name the object.
[[nodiscard]] common::Result<ManifestPods> PodsFromObjects(
    const std::vector<std::pair<std::string, nlohmann::json>>& objects);

// The live cluster's nodes and pods, decoded as the scheduler's watches decode them; read-only (two lists). An object
// that cannot be decoded is left out, with a line on `warnings`. With `pod_objects`, the listed pods are also handed
// back as the API server sent them (every one, decodable or not), so that a caller needs no second list.
[[nodiscard]] common::Result<sim::WhatIfCluster> ReadLiveCluster(const std::string& kubeconfig,
                                                                 const std::string& context, std::ostream& warnings,
                                                                 std::vector<nlohmann::json>* pod_objects = nullptr);

}  // namespace gpusched::cli
