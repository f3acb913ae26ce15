#include "gpusched/sched/node_predicates.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace gpusched::sched {
namespace {

using Op = core::NodeSelectorRequirement::Operator;

std::optional<int64_t> Integer(const std::string& text) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || text.empty()) {
    return std::nullopt;
  }
  return v;
}

// One requirement against a value that may be absent (a label the node lacks).
bool Matches(const core::NodeSelectorRequirement& r, const std::optional<std::string>& value) {
  const auto in = [&] {
    return value.has_value() && std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  };
  switch (r.op) {
    case Op::kIn:
      return in();
    case Op::kNotIn:
      return !in();
    case Op::kExists:
      return value.has_value();
    case Op::kDoesNotExist:
      return !value.has_value();
    case Op::kGt:
    case Op::kLt: {
      if (!value.has_value() || r.values.size() != 1) {
        return false;
      }
      const auto have = Integer(*value);
      const auto want = Integer(r.values[0]);
      if (!have || !want) {
        return false;
      }
      return r.op == Op::kGt ? *have > *want : *have < *want;
    }
  }
  return false;
}

bool TermMatches(const core::NodeSelectorTerm& term, const core::Node& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) {
    return false;
  }
  for (const auto& r : term.match_expressions) {
    auto it = node.labels.find(r.key);
    if (!Matches(r, it == node.labels.end() ? std::nullopt : std::optional<std::string>(it->second))) {
      return false;
    }
  }
  for (const auto& r : term.match_fields) {
    // metadata.name is the only field selector Kubernetes supports here; another key matches nothing.
    if (r.key != "metadata.name" || !Matches(r, node.name.str())) {
      return false;
    }
  }
  return true;
}

bool ToleratedByPod(const core::PodRequest& pod, const core::Taint& taint) {
  return std::any_of(pod.tolerations.begin(), pod.tolerations.end(),
                     [&](const core::Toleration& t) { return Tolerates(t, taint); });
}

}  // namespace

bool Tolerates(const core::Toleration& toleration, const core::Taint& taint) {
  if (toleration.effect.has_value() && *toleration.effect != taint.effect) {
    return false;
  }
  if (toleration.key.empty()) {
    return toleration.op == core::Toleration::Operator::kExists;
  }
  if (toleration.key != taint.key) {
    return false;
  }
  return toleration.op == core::Toleration::Operator::kExists || toleration.value == taint.value;
}

std::string CheckNodeName(const core::PodRequest& pod, const core::Node& node) {
  if (pod.node_name.empty() || pod.node_name == node.name.str()) {
    return "";
  }
  return "node(s) didn't match the requested node name";
}

std::string CheckUnschedulable(const core::PodRequest& pod, const core::Node& node) {
  if (!node.unschedulable) {
    return "";
  }
  const core::Taint cordon{.key = "node.kubernetes.io/unschedulable", .effect = core::TaintEffect::kNoSchedule};
  return ToleratedByPod(pod, cordon) ? "" : "node(s) were unschedulable";
}

std::string CheckNodeAffinity(const core::PodRequest& pod, const core::Node& node) {
  for (const auto& [key, value] : pod.node_selector) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) {
      return "node(s) didn't match Pod's node affinity/selector";
    }
  }
  if (!pod.required_node_affinity.empty() &&
      std::none_of(pod.required_node_affinity.begin(), pod.required_node_affinity.end(),
                   [&](const core::NodeSelectorTerm& t) { return TermMatches(t, node); })) {
    return "node(s) didn't match Pod's node affinity/selector";
  }
  return "";
}

std::string CheckTaints(const core::PodRequest& pod, const core::Node& node) {
  for (const core::Taint& taint : node.taints) {
    if (taint.effect == core::TaintEffect::kPreferNoSchedule || ToleratedByPod(pod, taint)) {
      continue;
    }
    return "node(s) had untolerated taint {" + taint.key + ": " + taint.value + "}";
  }
  return "";
}

std::string CheckNodeConstraints(const core::PodRequest& pod, const core::Node& node) {
  for (auto check : {&CheckNodeName, &CheckUnschedulable, &CheckNodeAffinity, &CheckTaints}) {
    if (std::string why = check(pod, node); !why.empty()) {
      return why;
    }
  }
  return "";
}

int TaintPenalty(const core::PodRequest& pod, const core::Node& node) {
  return static_cast<int>(std::count_if(node.taints.begin(), node.taints.end(), [&](const core::Taint& t) {
    return t.effect == core::TaintEffect::kPreferNoSchedule && !ToleratedByPod(pod, t);
  }));
}

}  // namespace gpusched::sched
