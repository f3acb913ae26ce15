#include "gpusched/kube/constraints.h"

#include <nlohmann/json.hpp>

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

common::Result<std::vector<core::NodeSelectorRequirement>> Requirements(const json& term, const char* key,
                                                                        const std::string& where) {
  std::vector<core::NodeSelectorRequirement> out;
  auto it = term.find(key);
  if (it == term.end() || it->is_null()) {
    return out;
  }
  if (!it->is_array()) {
    return Bad(where + "." + key + " is not a list");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const json& r = (*it)[i];
    const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
    if (!r.is_object()) {
      return Bad(at + " is not an object");
    }
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
    if (auto v = r.find("values"); v != r.end() && !v->is_null()) {
      if (!v->is_array()) {
        return Bad(at + ".values is not a list");
      }
      for (const json& s : *v) {
        if (!s.is_string()) {
          return Bad(at + ".values holds a non-string");
        }
        req.values.push_back(s.get<std::string>());
      }
    }
    out.push_back(std::move(req));
  }
  return out;
}

}  // namespace

common::Result<std::vector<core::Taint>> DecodeTaints(const json& taints) {
  std::vector<core::Taint> out;
  if (taints.is_null()) {
    return out;
  }
  if (!taints.is_array()) {
    return Bad("spec.taints is not a list");
  }
  for (size_t i = 0; i < taints.size(); ++i) {
    const std::string at = "spec.taints[" + std::to_string(i) + "]";
    const json& t = taints[i];
    if (!t.is_object()) {
      return Bad(at + " is not an object");
    }
    core::Taint taint;
    GPUSCHED_ASSIGN_OR_RETURN(key, OptionalString(t, "key", at));
    GPUSCHED_ASSIGN_OR_RETURN(value, OptionalString(t, "value", at));
    GPUSCHED_ASSIGN_OR_RETURN(effect, OptionalString(t, "effect", at));
    if (key.empty()) {
      return Bad(at + " has no key");
    }
    GPUSCHED_ASSIGN_OR_RETURN(e, Effect(effect, at));
    taint.key = key;
    taint.value = value;
    taint.effect = e;
    out.push_back(std::move(taint));
  }
  return out;
}

common::Result<std::vector<core::Toleration>> DecodeTolerations(const json& tolerations) {
  std::vector<core::Toleration> out;
  if (tolerations.is_null()) {
    return out;
  }
  if (!tolerations.is_array()) {
    return Bad("spec.tolerations is not a list");
  }
  for (size_t i = 0; i < tolerations.size(); ++i) {
    const std::string at = "spec.tolerations[" + std::to_string(i) + "]";
    const json& t = tolerations[i];
    if (!t.is_object()) {
      return Bad(at + " is not an object");
    }
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
    out.push_back(std::move(tol));
  }
  return out;
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
  for (size_t i = 0; i < terms->size(); ++i) {
    const std::string at = base + ".nodeSelectorTerms[" + std::to_string(i) + "]";
    const json& t = (*terms)[i];
    if (!t.is_object()) {
      return Bad(at + " is not an object");
    }
    core::NodeSelectorTerm term;
    GPUSCHED_ASSIGN_OR_RETURN(exprs, Requirements(t, "matchExpressions", at));
    GPUSCHED_ASSIGN_OR_RETURN(fields, Requirements(t, "matchFields", at));
    term.match_expressions = std::move(exprs);
    term.match_fields = std::move(fields);
    out.push_back(std::move(term));
  }
  return out;
}

}  // namespace gpusched::kube
