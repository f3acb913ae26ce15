#pragma once

// PodSource: how the device plugin reads pods. adapters/deviceplugin may not include adapters/k8s, so the agent
// wires this to its informer of the node's pods (agent/node_pods.h; see README.md).
//
// Contract. PodsOnNode returns the pods bound to this node as the source last saw them, and may lag the API server:
// a pod bound a moment ago may be missing, a pod's state may be a moment old. It must not make up pods, and it must
// return a pod it has returned (or that GetPod has read) until it sees that pod deleted or no longer bound here.
// GetPod reads the API server. The plugin completes PodsOnNode from the kubelet's PodResources list: a pod the
// kubelet lists that PodsOnNode lacks is read with GetPod, so the pod under admission and every pod holding devices
// are never missing (why that is enough: docs/device-plugin.md, "Reads"). Implementations must be thread-safe.

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"

namespace gpusched::adapters::deviceplugin {

class PodSource {
 public:
  virtual ~PodSource() = default;
  // The Pod objects bound to this node (fieldSelector spec.nodeName=<node>), as last seen.
  [[nodiscard]] virtual common::Result<std::vector<nlohmann::json>> PodsOnNode() = 0;
  // The pods bound to this node as the API server has them now: a quorum LIST (fieldSelector spec.nodeName=<node>,
  // no resourceVersion). Allocate calls it at most once, and only when PodsOnNode's view does not decide the call as
  // a current one would: the pod it would choose is not one the kubelet lists (a kubelet that lists the pod under
  // admission late, or a pod re-created under its name), or no pod or several pods fit. A source that never lags
  // may return PodsOnNode().
  [[nodiscard]] virtual common::Result<std::vector<nlohmann::json>> FreshPodsOnNode() { return PodsOnNode(); }
  // GET /api/v1/namespaces/<ns>/pods/<name>; NotFound when the pod does not exist. Called once per pod the kubelet
  // lists and PodsOnNode lacks, at each Allocate-side call.
  [[nodiscard]] virtual common::Result<nlohmann::json> GetPod(const std::string& ns, const std::string& name) = 0;
};

}  // namespace gpusched::adapters::deviceplugin
