#pragma once

// Placement constraints of Kubernetes objects into core (core/constraints.h): a node's spec.taints, a pod's
// spec.tolerations, spec.nodeSelector and spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.
// Absent or null fields are empty; a malformed one (an unknown operator or effect, a value of the wrong type) is
// InvalidArgument naming the field, since a constraint read wrongly would place a pod where it must not run.

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/constraints.h"

namespace gpusched::kube {

// `taints`: the value of spec.taints (or null).
common::Result<std::vector<core::Taint>> DecodeTaints(const nlohmann::json& taints);
// `tolerations`: the value of spec.tolerations (or null).
common::Result<std::vector<core::Toleration>> DecodeTolerations(const nlohmann::json& tolerations);
// `selector`: the value of spec.nodeSelector (or null).
common::Result<std::map<std::string, std::string>> DecodeNodeSelector(const nlohmann::json& selector);
// `spec`: the pod's spec; its required node affinity terms (empty when none).
common::Result<std::vector<core::NodeSelectorTerm>> DecodeRequiredNodeAffinity(const nlohmann::json& spec);

}  // namespace gpusched::kube
