#pragma once

// PodSource: how the device plugin reads pods. adapters/deviceplugin may not include adapters/k8s, so the agent
// wires this to the API client (see README.md for the two calls).
//
// Contract: both calls read the API server when they are called. PodsOnNode must return every pod bound to this
// node before the call began; an informer cache does not qualify, because the kubelet may see a binding before the
// agent's informer does, and the pod it admits would then be missing (race 2 of k8s-gpu-protocols.md §2.4). A
// list with resourceVersion unset is a quorum read and qualifies. Implementations must be thread-safe.

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"

namespace gpusched::adapters::deviceplugin {

class PodSource {
 public:
  virtual ~PodSource() = default;
  // GET /api/v1/pods?fieldSelector=spec.nodeName=<node>: the Pod objects.
  [[nodiscard]] virtual common::Result<std::vector<nlohmann::json>> PodsOnNode() = 0;
  // GET /api/v1/namespaces/<ns>/pods/<name>; NotFound when the pod does not exist.
  [[nodiscard]] virtual common::Result<nlohmann::json> GetPod(const std::string& ns, const std::string& name) = 0;
};

}  // namespace gpusched::adapters::deviceplugin
