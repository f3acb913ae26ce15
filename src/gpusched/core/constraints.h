#pragma once

// What a pod may demand of a node beyond resources, and what a node imposes, as Kubernetes defines them (the
// scheduler's node predicates, sched/node_predicates.h, evaluate them): node labels against a pod's nodeSelector and
// required node affinity; node taints against a pod's tolerations. And what a pod demands of the pods around it
// (sched/inter_pod.h evaluates them): required inter-pod affinity and anti-affinity, topology spread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpusched::core {

enum class TaintEffect { kNoSchedule, kPreferNoSchedule, kNoExecute };

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
  bool operator==(const Taint&) const = default;
};

struct Toleration {
  std::string key;  // "" with kExists: every key
  enum class Operator { kEqual, kExists } op = Operator::kEqual;
  std::string value;
  std::optional<TaintEffect> effect;  // none: every effect
  bool operator==(const Toleration&) const = default;
};

// One requirement of a node selector term: on a label (match_expressions) or a field (match_fields; Kubernetes
// supports only metadata.name there).
struct NodeSelectorRequirement {
  std::string key;
  enum class Operator { kIn, kNotIn, kExists, kDoesNotExist, kGt, kLt } op = Operator::kIn;
  std::vector<std::string> values;
  bool operator==(const NodeSelectorRequirement&) const = default;
};

// Requirements ANDed; a term with none matches no node.
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions;
  std::vector<NodeSelectorRequirement> match_fields;
  bool operator==(const NodeSelectorTerm&) const = default;
};

// A host port a container binds on its node (spec.containers[].ports[].hostPort). Two conflict when protocol and
// port are equal and their addresses overlap ("" or 0.0.0.0 overlaps every address), as kube-scheduler's NodePorts.
struct HostPort {
  std::string protocol = "TCP";
  std::string ip;  // hostIP; "" = every address
  int32_t port = 0;
  [[nodiscard]] bool ConflictsWith(const HostPort& other) const {
    const bool any = ip.empty() || ip == "0.0.0.0" || other.ip.empty() || other.ip == "0.0.0.0";
    return port == other.port && protocol == other.protocol && (any || ip == other.ip);
  }
  bool operator==(const HostPort&) const = default;
};

// A label selector of an object other than a node (a PodDisruptionBudget's spec.selector): matchLabels and
// matchExpressions (In, NotIn, Exists, DoesNotExist), ANDed.
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<NodeSelectorRequirement> match_expressions;

  [[nodiscard]] bool Empty() const { return match_labels.empty() && match_expressions.empty(); }
  // Every requirement holds for these labels (true for an empty selector: callers decide what empty means).
  [[nodiscard]] bool Matches(const std::map<std::string, std::string>& labels) const;
  bool operator==(const LabelSelector&) const = default;
};

// One term of a pod's required inter-pod affinity or anti-affinity (spec.affinity.podAffinity / podAntiAffinity
// .requiredDuringSchedulingIgnoredDuringExecution[]): the pods it is about (selector, in `namespaces`) and the
// topology domain they share with the pod (nodes with the same value of the label topology_key).
struct PodAffinityTerm {
  LabelSelector selector;
  bool selects_nothing = false;  // labelSelector absent or null: the term matches no pod
  // The namespaces of the pods it is about, as kube-scheduler reads them: those listed, plus those whose labels
  // namespace_selector matches; with neither, the namespace of the pod that has the term; namespaceSelector {}:
  // every namespace.
  std::vector<std::string> namespaces;
  bool all_namespaces = false;          // namespaceSelector {}
  bool has_namespace_selector = false;  // a namespaceSelector with requirements
  LabelSelector namespace_selector;
  std::string topology_key;

  // Whether the term of a pod in `owner_namespace` is about a pod in `pod_namespace` with `labels`.
  // `pod_namespace_labels`: the labels of `pod_namespace` (nullptr: unknown, so a namespace selector matches it not).
  [[nodiscard]] bool Matches(const std::string& owner_namespace, const std::string& pod_namespace,
                             const std::map<std::string, std::string>& labels,
                             const std::map<std::string, std::string>* pod_namespace_labels = nullptr) const;
  bool operator==(const PodAffinityTerm&) const = default;
};

// A topology spread constraint with whenUnsatisfiable DoNotSchedule (spec.topologySpreadConstraints[]): among the
// eligible nodes' domains (values of topology_key), the pods of the pod's namespace that `selector` matches may
// differ by at most max_skew between the domain the pod goes to (counting the pod itself when it matches) and the
// least populated one.
struct TopologySpreadConstraint {
  int32_t max_skew = 1;
  std::string topology_key;
  LabelSelector selector;           // matchLabelKeys already folded in (the pod's own values of those keys)
  bool selects_nothing = false;     // labelSelector absent: no pod counts
  int32_t min_domains = 0;          // below this many eligible domains the least populated counts as 0; 0 = unset
  bool honor_node_affinity = true;  // nodeAffinityPolicy: Honor (default) or Ignore
  bool honor_node_taints = false;   // nodeTaintsPolicy: Ignore (default) or Honor
  bool operator==(const TopologySpreadConstraint&) const = default;
};

// A PodDisruptionBudget as preemption reads it.
struct DisruptionBudget {
  std::string namespace_, name;
  LabelSelector selector;
  int32_t disruptions_allowed = 0;          // status.disruptionsAllowed
  std::vector<std::string> disrupted_pods;  // status.disruptedPods: names whose eviction is already counted

  // Whether evicting this pod counts against the budget: same namespace, a selector that is not empty and matches
  // (kube-scheduler's preemption reads an empty selector as matching nothing), and not already disrupted.
  [[nodiscard]] bool Counts(const std::string& pod_namespace, const std::string& pod_name,
                            const std::map<std::string, std::string>& labels) const;
  bool operator==(const DisruptionBudget&) const = default;
};

}  // namespace gpusched::core
