#pragma once

// Node predicates with kube-scheduler's semantics, for the standalone scheduler's filter phase (the extender leaves
// them to kube-scheduler, which has run them before it calls the extender):
//   NodeName       spec.nodeName, when set, must be the node
//   Unschedulable  a cordoned node (spec.unschedulable) takes only pods tolerating node.kubernetes.io/unschedulable
//                  with effect NoSchedule
//   NodeAffinity   every nodeSelector pair must be a label of the node, and when required node affinity is given,
//                  at least one of its terms must match: a term matches when all its matchExpressions (labels) and
//                  matchFields (metadata.name) do; In/NotIn/Exists/DoesNotExist as label selectors (NotIn and
//                  DoesNotExist match a node without the label); Gt/Lt compare the label as an integer with the
//                  one value given (a label or value that is not an integer does not match); a term with no
//                  requirement matches no node
//   TaintToleration  every taint with effect NoSchedule or NoExecute must be tolerated (PreferNoSchedule only
//                  lowers the score: TaintPenalty); a toleration tolerates a taint when its effect is empty or the
//                  same, and its key is empty with operator Exists (every taint) or the same, and with Equal the
//                  values are equal
// Each returns "" when the node passes, else the reason, phrased as kube-scheduler's (its messages group well in
// a FailedScheduling summary).

#include <string>

#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"

namespace gpusched::sched {

[[nodiscard]] std::string CheckNodeName(const core::PodRequest& pod, const core::Node& node);
[[nodiscard]] std::string CheckUnschedulable(const core::PodRequest& pod, const core::Node& node);
[[nodiscard]] std::string CheckNodeAffinity(const core::PodRequest& pod, const core::Node& node);
[[nodiscard]] std::string CheckTaints(const core::PodRequest& pod, const core::Node& node);

// All of the above, in kube-scheduler's order; the first failure's reason, or "".
[[nodiscard]] std::string CheckNodeConstraints(const core::PodRequest& pod, const core::Node& node);

// Whether a toleration tolerates a taint (exposed for tests and the scorer).
[[nodiscard]] bool Tolerates(const core::Toleration& toleration, const core::Taint& taint);
// PreferNoSchedule taints of the node the pod does not tolerate (kube-scheduler's TaintToleration score counts
// them: fewer is better).
[[nodiscard]] int TaintPenalty(const core::PodRequest& pod, const core::Node& node);

}  // namespace gpusched::sched
