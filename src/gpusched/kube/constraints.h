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

// `selector`: a metav1.LabelSelector (or null: empty). `where` names it in errors. Gt and Lt are refused.
common::Result<core::LabelSelector> DecodeLabelSelector(const nlohmann::json& selector, const std::string& where);
// `spec`: the pod's spec; its required pod affinity terms (`anti` false) or anti-affinity terms (true), `labels` the
// pod's own (matchLabelKeys and mismatchLabelKeys add `key in (its value)` and `key notin (its value)` to the
// selector). A term without topologyKey is InvalidArgument. namespaceSelector: {} selects every namespace, one
// with requirements the namespaces whose labels it matches (the scheduler watches namespaces).
common::Result<std::vector<core::PodAffinityTerm>> DecodeRequiredPodAffinity(
    const nlohmann::json& spec, bool anti, const std::map<std::string, std::string>& labels);
// `spec`: the pod's spec; its topology spread constraints with whenUnsatisfiable DoNotSchedule (the default;
// ScheduleAnyway ones only score, and are left out). maxSkew must be at least 1, topologyKey set, minDomains at
// least 1 when given; matchLabelKeys are folded into the selector with the pod's `labels`.
common::Result<std::vector<core::TopologySpreadConstraint>> DecodeTopologySpread(
    const nlohmann::json& spec, const std::map<std::string, std::string>& labels);

// A policy/v1 or policy/v1beta1 PodDisruptionBudget: namespace, name, spec.selector and from its status what the
// disruption controller allows (0 until the controller has written it: such a budget allows no eviction).
common::Result<core::DisruptionBudget> DecodeDisruptionBudget(const nlohmann::json& pdb);

// Scheduling fields of a pod that gpusched's scheduler does not evaluate, as paths naming them. A pod is never
// placed as if they were absent without saying so:
//   hard  the scheduler refuses to place the pod (it could break the constraint): none today; the list stays so
//         that a field added to Kubernetes that must not be ignored can be refused by name
//   soft  the pod is placed, with a warning naming them: preferred pod and node affinity, ScheduleAnyway spread
//         constraints
// (Evaluated: host ports and requests of ephemeral-storage, hugepages and extended resources, FitNodeResources;
// required pod affinity and anti-affinity and DoNotSchedule spread constraints, sched/inter_pod.h.)
struct UnevaluatedFields {
  std::vector<std::string> hard, soft;
};
[[nodiscard]] UnevaluatedFields FindUnevaluatedFields(const nlohmann::json& pod);

}  // namespace gpusched::kube
