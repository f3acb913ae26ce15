#include "gpusched/kube/constraints.h"

#include <climits>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "gpusched/kube/resources.h"

namespace gpusched::kube {
namespace {

using nlohmann::json;

common::Status Bad(const std::string& what) { return common::InvalidArgument(what); }

// The string at `key` of `j` ("" when absent or null); an error when it is there and not a string.
common::Result<std::string> OptionalString(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    return std::string();
  }
  if (!it->is_string()) {
    return Bad(where + "." + key + " is not a string");
  }
  return it->get<std::string>();
}

common::Result<core::TaintEffect> Effect(const std::string& text, const std::string& where) {
  if (text == "NoSchedule") return core::TaintEffect::kNoSchedule;
  if (text == "PreferNoSchedule") return core::TaintEffect::kPreferNoSchedule;
  if (text == "NoExecute") return core::TaintEffect::kNoExecute;
  return Bad(where + ".effect \"" + text + "\" is not NoSchedule, PreferNoSchedule or NoExecute");
}

// `list` (null: empty) as a list of objects, each decoded by `one(object, "<where>[i]")`.
template <typename T, typename Decode>
common::Result<std::vector<T>> ObjectList(const json& list, const std::string& where, Decode one) {
  std::vector<T> out;
  if (list.is_null()) {
    return out;
  }
  if (!list.is_array()) {
    return Bad(where + " is not a list");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) {
      return Bad(at + " is not an object");
    }
    GPUSCHED_ASSIGN_OR_RETURN(item, one(list[i], at));
    out.push_back(std::move(item));
  }
  return out;
}

const json& Member(const json& j, const char* key) {
  static const json kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// The list of strings at `key` of `j` (empty when absent or null); errors name "<at>.<key>".
common::Result<std::vector<std::string>> StringList(const json& j, const char* key, const std::string& at) {
  std::vector<std::string> out;
  const json& list = Member(j, key);
  if (list.is_null()) {
    return out;
  }
  if (!list.is_array()) {
    return Bad(at + "." + key + " is not a list");
  }
  for (const json& v : list) {
    if (!v.is_string()) {
      return Bad(at + "." + key + " holds a non-string");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

common::Result<core::NodeSelectorRequirement> Requirement(const json& r, const std::string& at) {
  core::NodeSelectorRequirement req;
  GPUSCHED_ASSIGN_OR_RETURN(k, OptionalString(r, "key", at));
  GPUSCHED_ASSIGN_OR_RETURN(op, OptionalString(r, "operator", at));
  req.key = k;
  using Op = core::NodeSelectorRequirement::Operator;
  if (op == "In") {
    req.op = Op::kIn;
  } else if (op == "NotIn") {
    req.op = Op::kNotIn;
  } else if (op == "Exists") {
    req.op = Op::kExists;
  } else if (op == "DoesNotExist") {
    req.op = Op::kDoesNotExist;
  } else if (op == "Gt") {
    req.op = Op::kGt;
  } else if (op == "Lt") {
    req.op = Op::kLt;
  } else {
    return Bad(at + ".operator \"" + op + "\" is not In, NotIn, Exists, DoesNotExist, Gt or Lt");
  }
  GPUSCHED_ASSIGN_OR_RETURN(values, StringList(r, "values", at));
  req.values = std::move(values);
  return req;
}

common::Result<core::NodeSelectorTerm> Term(const json& t, const std::string& at) {
  core::NodeSelectorTerm term;
  GPUSCHED_ASSIGN_OR_RETURN(exprs, ObjectList<core::NodeSelectorRequirement>(Member(t, "matchExpressions"),
                                                                             at + ".matchExpressions", Requirement));
  GPUSCHED_ASSIGN_OR_RETURN(
      fields, ObjectList<core::NodeSelectorRequirement>(Member(t, "matchFields"), at + ".matchFields", Requirement));
  term.match_expressions = std::move(exprs);
  term.match_fields = std::move(fields);
  return term;
}

common::Result<core::Taint> TaintOf(const json& t, const std::string& at) {
  GPUSCHED_ASSIGN_OR_RETURN(key, OptionalString(t, "key", at));
  GPUSCHED_ASSIGN_OR_RETURN(value, OptionalString(t, "value", at));
  GPUSCHED_ASSIGN_OR_RETURN(effect, OptionalString(t, "effect", at));
  if (key.empty()) {
    return Bad(at + " has no key");
  }
  GPUSCHED_ASSIGN_OR_RETURN(e, Effect(effect, at));
  return core::Taint{.key = key, .value = value, .effect = e};
}

common::Result<core::Toleration> TolerationOf(const json& t, const std::string& at) {
  core::Toleration tol;
  GPUSCHED_ASSIGN_OR_RETURN(key, OptionalString(t, "key", at));
  GPUSCHED_ASSIGN_OR_RETURN(op, OptionalString(t, "operator", at));
  GPUSCHED_ASSIGN_OR_RETURN(value, OptionalString(t, "value", at));
  GPUSCHED_ASSIGN_OR_RETURN(effect, OptionalString(t, "effect", at));
  tol.key = key;
  tol.value = value;
  if (op.empty() || op == "Equal") {
    tol.op = core::Toleration::Operator::kEqual;
    if (key.empty()) {
      return Bad(at + ": operator Equal needs a key (only Exists may leave it empty)");
    }
  } else if (op == "Exists") {
    tol.op = core::Toleration::Operator::kExists;
  } else {
    return Bad(at + ".operator \"" + op + "\" is not Equal or Exists");
  }
  if (!effect.empty()) {
    GPUSCHED_ASSIGN_OR_RETURN(e, Effect(effect, at));
    tol.effect = e;
  }
  return tol;
}

}  // namespace

common::Result<std::vector<core::Taint>> DecodeTaints(const json& taints) {
  return ObjectList<core::Taint>(taints, "spec.taints", TaintOf);
}

common::Result<std::vector<core::Toleration>> DecodeTolerations(const json& tolerations) {
  return ObjectList<core::Toleration>(tolerations, "spec.tolerations", TolerationOf);
}

common::Result<std::map<std::string, std::string>> DecodeNodeSelector(const json& selector) {
  std::map<std::string, std::string> out;
  if (selector.is_null()) {
    return out;
  }
  if (!selector.is_object()) {
    return Bad("spec.nodeSelector is not a map");
  }
  for (const auto& [k, v] : selector.items()) {
    if (!v.is_string()) {
      return Bad("spec.nodeSelector." + k + " is not a string");
    }
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

common::Result<std::vector<core::NodeSelectorTerm>> DecodeRequiredNodeAffinity(const json& spec) {
  std::vector<core::NodeSelectorTerm> out;
  const std::string base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
  const json* node = &spec;
  for (const char* key : {"affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"}) {
    if (!node->is_object()) {
      return Bad(base + ": a level above it is not an object");
    }
    auto it = node->find(key);
    if (it == node->end() || it->is_null()) {
      return out;
    }
    node = &*it;
  }
  if (!node->is_object()) {
    return Bad(base + " is not an object");
  }
  auto terms = node->find("nodeSelectorTerms");
  if (terms == node->end() || terms->is_null() || !terms->is_array() || terms->empty()) {
    // The API requires at least one term; a selector without terms would match no node.
    return Bad(base + ".nodeSelectorTerms must be a non-empty list");
  }
  return ObjectList<core::NodeSelectorTerm>(*terms, base + ".nodeSelectorTerms", Term);
}

common::Result<core::LabelSelector> DecodeLabelSelector(const json& selector, const std::string& where) {
  core::LabelSelector out;
  if (selector.is_null()) {
    return out;
  }
  if (!selector.is_object()) {
    return Bad(where + " is not an object");
  }
  const json& labels = Member(selector, "matchLabels");
  if (!labels.is_null()) {
    if (!labels.is_object()) {
      return Bad(where + ".matchLabels is not a map");
    }
    for (const auto& [k, v] : labels.items()) {
      if (!v.is_string()) {
        return Bad(where + ".matchLabels." + k + " is not a string");
      }
      out.match_labels.emplace(k, v.get<std::string>());
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(exprs, ObjectList<core::NodeSelectorRequirement>(Member(selector, "matchExpressions"),
                                                                             where + ".matchExpressions", Requirement));
  for (const auto& r : exprs) {
    using Op = core::NodeSelectorRequirement::Operator;
    if (r.op == Op::kGt || r.op == Op::kLt) {
      return Bad(where + ".matchExpressions: operator Gt/Lt is for node selectors only");
    }
  }
  out.match_expressions = std::move(exprs);
  return out;
}

namespace {

// matchLabelKeys / mismatchLabelKeys of `j` (null: none): for each key the pod has, `key in (value)` or
// `key notin (value)` joins the selector.
common::Status FoldLabelKeys(const json& j, const char* field, core::NodeSelectorRequirement::Operator op,
                             const std::map<std::string, std::string>& labels, const std::string& at,
                             core::LabelSelector& selector) {
  GPUSCHED_ASSIGN_OR_RETURN(keys, StringList(j, field, at));
  for (const std::string& k : keys) {
    auto it = labels.find(k);
    if (it != labels.end()) {
      selector.match_expressions.push_back({.key = it->first, .op = op, .values = {it->second}});
    }
  }
  return common::Status::Ok();
}

}  // namespace

common::Result<std::vector<core::PodAffinityTerm>> DecodeRequiredPodAffinity(
    const json& spec, bool anti, const std::map<std::string, std::string>& labels) {
  std::vector<core::PodAffinityTerm> out;
  const char* kind = anti ? "podAntiAffinity" : "podAffinity";
  const json& affinity = Member(spec, "affinity");
  if (affinity.is_null()) {
    return out;
  }
  if (!affinity.is_object()) {
    return Bad("spec.affinity is not an object");
  }
  const json& a = Member(affinity, kind);
  if (a.is_null()) {
    return out;
  }
  if (!a.is_object()) {
    return Bad(std::string("spec.affinity.") + kind + " is not an object");
  }
  const std::string where = std::string("spec.affinity.") + kind + ".requiredDuringSchedulingIgnoredDuringExecution";
  return ObjectList<core::PodAffinityTerm>(
      Member(a, "requiredDuringSchedulingIgnoredDuringExecution"), where,
      [&](const json& t, const std::string& at) -> common::Result<core::PodAffinityTerm> {
        core::PodAffinityTerm term;
        GPUSCHED_ASSIGN_OR_RETURN(key, OptionalString(t, "topologyKey", at));
        if (key.empty()) {
          return Bad(at + ".topologyKey is empty");
        }
        term.topology_key = key;
        const json& selector = Member(t, "labelSelector");
        term.selects_nothing = selector.is_null();
        GPUSCHED_ASSIGN_OR_RETURN(sel, DecodeLabelSelector(selector, at + ".labelSelector"));
        term.selector = std::move(sel);
        using Op = core::NodeSelectorRequirement::Operator;
        GPUSCHED_RETURN_IF_ERROR(FoldLabelKeys(t, "matchLabelKeys", Op::kIn, labels, at, term.selector));
        GPUSCHED_RETURN_IF_ERROR(FoldLabelKeys(t, "mismatchLabelKeys", Op::kNotIn, labels, at, term.selector));
        GPUSCHED_ASSIGN_OR_RETURN(namespaces, StringList(t, "namespaces", at));
        term.namespaces = std::move(namespaces);
        const json& ns_selector = Member(t, "namespaceSelector");
        if (!ns_selector.is_null() && !ns_selector.is_object()) {
          return Bad(at + ".namespaceSelector is not an object");
        }
        // {} selects every namespace; one with requirements the namespaces whose labels it matches.
        term.all_namespaces = ns_selector.is_object() && ns_selector.empty();
        if (ns_selector.is_object() && !ns_selector.empty()) {
          GPUSCHED_ASSIGN_OR_RETURN(ns_sel, DecodeLabelSelector(ns_selector, at + ".namespaceSelector"));
          term.all_namespaces = ns_sel.Empty();  // {"matchLabels": {}} is {} too
          term.has_namespace_selector = !ns_sel.Empty();
          term.namespace_selector = std::move(ns_sel);
        }
        return term;
      });
}

common::Result<std::vector<core::TopologySpreadConstraint>> DecodeTopologySpread(
    const json& spec, const std::map<std::string, std::string>& labels) {
  std::vector<core::TopologySpreadConstraint> out;
  GPUSCHED_ASSIGN_OR_RETURN(
      all,
      ObjectList<std::optional<core::TopologySpreadConstraint>>(
          Member(spec, "topologySpreadConstraints"), "spec.topologySpreadConstraints",
          [&](const json& c, const std::string& at) -> common::Result<std::optional<core::TopologySpreadConstraint>> {
            GPUSCHED_ASSIGN_OR_RETURN(when, OptionalString(c, "whenUnsatisfiable", at));
            if (when == "ScheduleAnyway") {
              return std::optional<core::TopologySpreadConstraint>();
            }
            if (!when.empty() && when != "DoNotSchedule") {
              return Bad(at + ".whenUnsatisfiable \"" + when + "\" is not DoNotSchedule or ScheduleAnyway");
            }
            core::TopologySpreadConstraint k;
            const json& skew = Member(c, "maxSkew");
            if (!skew.is_number_integer() || skew.get<int64_t>() < 1 || skew.get<int64_t>() > INT32_MAX) {
              return Bad(at + ".maxSkew must be an integer of at least 1");
            }
            k.max_skew = skew.get<int32_t>();
            GPUSCHED_ASSIGN_OR_RETURN(key, OptionalString(c, "topologyKey", at));
            if (key.empty()) {
              return Bad(at + ".topologyKey is empty");
            }
            k.topology_key = key;
            const json& selector = Member(c, "labelSelector");
            k.selects_nothing = selector.is_null();
            GPUSCHED_ASSIGN_OR_RETURN(sel, DecodeLabelSelector(selector, at + ".labelSelector"));
            k.selector = std::move(sel);
            GPUSCHED_RETURN_IF_ERROR(FoldLabelKeys(c, "matchLabelKeys", core::NodeSelectorRequirement::Operator::kIn,
                                                   labels, at, k.selector));
            const json& min_domains = Member(c, "minDomains");
            if (!min_domains.is_null()) {
              if (!min_domains.is_number_integer() || min_domains.get<int64_t>() < 1 ||
                  min_domains.get<int64_t>() > INT32_MAX) {
                return Bad(at + ".minDomains must be an integer of at least 1");
              }
              k.min_domains = min_domains.get<int32_t>();
            }
            GPUSCHED_ASSIGN_OR_RETURN(affinity_policy, OptionalString(c, "nodeAffinityPolicy", at));
            if (affinity_policy == "Ignore") {
              k.honor_node_affinity = false;
            } else if (!affinity_policy.empty() && affinity_policy != "Honor") {
              return Bad(at + ".nodeAffinityPolicy \"" + affinity_policy + "\" is not Honor or Ignore");
            }
            GPUSCHED_ASSIGN_OR_RETURN(taints_policy, OptionalString(c, "nodeTaintsPolicy", at));
            if (taints_policy == "Honor") {
              k.honor_node_taints = true;
            } else if (!taints_policy.empty() && taints_policy != "Ignore") {
              return Bad(at + ".nodeTaintsPolicy \"" + taints_policy + "\" is not Honor or Ignore");
            }
            return std::optional<core::TopologySpreadConstraint>(std::move(k));
          }));
  for (auto& c : all) {
    if (c.has_value()) {
      out.push_back(std::move(*c));
    }
  }
  return out;
}

common::Result<core::DisruptionBudget> DecodeDisruptionBudget(const json& pdb) {
  core::DisruptionBudget out;
  if (!pdb.is_object()) {
    return Bad("PodDisruptionBudget is not an object");
  }
  const json& metadata = Member(pdb, "metadata");
  if (!metadata.is_object()) {
    return Bad("PodDisruptionBudget has no metadata");
  }
  GPUSCHED_ASSIGN_OR_RETURN(ns, OptionalString(metadata, "namespace", "metadata"));
  GPUSCHED_ASSIGN_OR_RETURN(name, OptionalString(metadata, "name", "metadata"));
  out.namespace_ = ns;
  out.name = name;
  const std::string who = "PodDisruptionBudget " + ns + "/" + name + ": ";
  const json& spec = Member(pdb, "spec");
  if (!spec.is_null() && !spec.is_object()) {
    return Bad(who + "spec is not an object");
  }
  if (spec.is_object()) {
    auto selector = DecodeLabelSelector(Member(spec, "selector"), "spec.selector");
    if (!selector.ok()) {
      return Bad(who + selector.status().message());
    }
    out.selector = std::move(selector).value();
  }
  const json& status = Member(pdb, "status");
  if (status.is_object()) {
    // policy/v1 and later v1beta1 call it disruptionsAllowed; v1beta1 before 1.15 podDisruptionsAllowed.
    const json* allowed = &Member(status, "disruptionsAllowed");
    if (allowed->is_null()) {
      allowed = &Member(status, "podDisruptionsAllowed");
    }
    if (!allowed->is_null()) {
      if (!allowed->is_number_integer()) {
        return Bad(who + "status.disruptionsAllowed is not an integer");
      }
      out.disruptions_allowed = allowed->get<int32_t>();
    }
    const json& disrupted = Member(status, "disruptedPods");
    if (disrupted.is_object()) {
      for (const auto& [pod, when] : disrupted.items()) {
        out.disrupted_pods.push_back(pod);
      }
    }
  }
  return out;
}

UnevaluatedFields FindUnevaluatedFields(const json& pod) {
  UnevaluatedFields out;
  const json& spec = Member(pod, "spec");
  if (!spec.is_object()) {
    return out;
  }
  const json& affinity = Member(spec, "affinity");
  if (affinity.is_object()) {
    for (const char* kind : {"podAffinity", "podAntiAffinity"}) {
      const json& a = Member(affinity, kind);
      if (!a.is_object()) {
        continue;
      }
      const json& preferred = Member(a, "preferredDuringSchedulingIgnoredDuringExecution");
      if (preferred.is_array() && !preferred.empty()) {
        out.soft.push_back(std::string("spec.affinity.") + kind + ".preferredDuringSchedulingIgnoredDuringExecution");
      }
    }
    const json& node = Member(affinity, "nodeAffinity");
    if (node.is_object()) {
      const json& preferred = Member(node, "preferredDuringSchedulingIgnoredDuringExecution");
      if (preferred.is_array() && !preferred.empty()) {
        out.soft.push_back("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution");
      }
    }
  }
  // DRA claims: the pod needs its claims allocated and reserved before it is bound, which this scheduler does not do
  // yet (sched/dra_allocator.h is not wired into its cycle). Binding it anyway would leave it unable to start.
  const json& claims = Member(spec, "resourceClaims");
  if (claims.is_array() && !claims.empty()) {
    out.hard.push_back("spec.resourceClaims (Dynamic Resource Allocation)");
  }
  const json& spread = Member(spec, "topologySpreadConstraints");
  if (spread.is_array()) {
    for (const json& c : spread) {
      const json& when = c.is_object() ? Member(c, "whenUnsatisfiable") : json();
      if (when.is_string() && when.get<std::string>() == "ScheduleAnyway") {
        out.soft.push_back("spec.topologySpreadConstraints (whenUnsatisfiable: ScheduleAnyway)");
        break;
      }
    }
  }
  return out;
}

}  // namespace gpusched::kube
