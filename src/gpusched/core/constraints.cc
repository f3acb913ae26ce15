#include "gpusched/core/constraints.h"

#include <algorithm>

namespace gpusched::core {

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& [k, v] : match_labels) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) {
      return false;
    }
  }
  for (const NodeSelectorRequirement& r : match_expressions) {
    auto it = labels.find(r.key);
    const bool has = it != labels.end();
    const bool listed = has && std::find(r.values.begin(), r.values.end(), it->second) != r.values.end();
    bool holds = false;
    switch (r.op) {
      case NodeSelectorRequirement::Operator::kIn:
        holds = listed;
        break;
      case NodeSelectorRequirement::Operator::kNotIn:
        holds = !listed;
        break;
      case NodeSelectorRequirement::Operator::kExists:
        holds = has;
        break;
      case NodeSelectorRequirement::Operator::kDoesNotExist:
        holds = !has;
        break;
      default:
        holds = false;  // Gt and Lt are not label selector operators
    }
    if (!holds) {
      return false;
    }
  }
  return true;
}

bool PodAffinityTerm::Matches(const std::string& owner_namespace, const std::string& pod_namespace,
                              const std::map<std::string, std::string>& labels,
                              const std::map<std::string, std::string>* pod_namespace_labels) const {
  if (selects_nothing) {
    return false;
  }
  if (!all_namespaces) {
    bool in = false;
    if (namespaces.empty() && !has_namespace_selector) {
      in = pod_namespace == owner_namespace;
    } else {
      in = std::find(namespaces.begin(), namespaces.end(), pod_namespace) != namespaces.end() ||
           (has_namespace_selector && pod_namespace_labels != nullptr &&
            namespace_selector.Matches(*pod_namespace_labels));
    }
    if (!in) {
      return false;
    }
  }
  return selector.Matches(labels);
}

bool DisruptionBudget::Counts(const std::string& pod_namespace, const std::string& pod_name,
                              const std::map<std::string, std::string>& labels) const {
  if (pod_namespace != namespace_ || selector.Empty() || !selector.Matches(labels)) {
    return false;
  }
  return std::find(disrupted_pods.begin(), disrupted_pods.end(), pod_name) == disrupted_pods.end();
}

}  // namespace gpusched::core
