#include "gpusched/sched/inter_pod.h"

#include <algorithm>
#include <limits>

#include "gpusched/sched/node_predicates.h"
#include "gpusched/sched/scheduling_queue.h"

namespace gpusched::sched {
namespace {

const std::string* LabelOf(const core::Node& node, const std::string& key) {
  auto it = node.labels.find(key);
  return it == node.labels.end() ? nullptr : &it->second;
}

// A placed pod's node, looked up once and only when a term matches the pod.
class NodeOf {
 public:
  NodeOf(const PodOnNode& pod, const core::ClusterState& state) : pod_(pod), state_(state) {}
  const core::Node* Get() {
    if (!looked_up_) {
      const core::NodeView* v = state_.Find(pod_.node);
      node_ = v == nullptr ? nullptr : v->node.get();
      looked_up_ = true;
    }
    return node_;
  }

 private:
  const PodOnNode& pod_;
  const core::ClusterState& state_;
  const core::Node* node_ = nullptr;
  bool looked_up_ = false;
};

}  // namespace

void InterPodConstraints::CountDomain(Domains& d, const core::Node* node, const std::string& key, int delta) {
  const std::string* value = node != nullptr ? LabelOf(*node, key) : nullptr;
  if (value == nullptr) {
    return;
  }
  auto& values = d[key];
  const int32_t n = (values[*value] += delta);
  if (n <= 0) {
    values.erase(*value);
    if (values.empty()) {
      d.erase(key);
    }
  }
}

bool InterPodConstraints::TermMatches(const core::PodAffinityTerm& t, const std::string& owner_ns,
                                      const std::string& pod_ns,
                                      const std::map<std::string, std::string>& labels) const {
  const std::map<std::string, std::string>* ns_labels = nullptr;
  if (t.has_namespace_selector && namespaces_ != nullptr) {
    auto it = namespaces_->find(pod_ns);
    ns_labels = it == namespaces_->end() ? nullptr : &it->second;
  }
  return t.Matches(owner_ns, pod_ns, labels, ns_labels);
}

void InterPodConstraints::Spread::UpdateMin() {
  if (counts.empty() || static_cast<int64_t>(counts.size()) < constraint->min_domains) {
    min_match = 0;
  } else {
    min_match = domains_by_count.begin()->first;
  }
}

bool InterPodConstraints::SpreadEligible(const core::Node& node, size_t constraint) const {
  const core::PodRequest& pod = *pod_;
  if (!std::all_of(pod.spread.begin(), pod.spread.end(),
                   [&](const auto& k) { return LabelOf(node, k.topology_key) != nullptr; })) {
    return false;
  }
  const core::TopologySpreadConstraint& k = pod.spread[constraint];
  return (!k.honor_node_affinity || CheckNodeAffinity(pod, node).empty()) &&
         (!k.honor_node_taints || CheckTaints(pod, node).empty());
}

void InterPodConstraints::Update(const PodOnNode& p, int delta, const core::ClusterState& state) {
  const core::PodRequest& pod = *pod_;
  if (!active_ || p.uid == pod.uid) {
    return;
  }
  NodeOf node_of(p, state);
  for (const core::PodAffinityTerm& t : p.anti_affinity) {
    if (TermMatches(t, p.namespace_, pod.namespace_, pod.labels)) {
      CountDomain(existing_anti_, node_of.Get(), t.topology_key, delta);
    }
  }
  if (!pod.pod_affinity.empty() && std::all_of(pod.pod_affinity.begin(), pod.pod_affinity.end(), [&](const auto& t) {
        return TermMatches(t, pod.namespace_, p.namespace_, p.labels);
      })) {
    for (const core::PodAffinityTerm& t : pod.pod_affinity) {
      CountDomain(affinity_, node_of.Get(), t.topology_key, delta);
    }
    affinity_first_ = affinity_.empty() && self_affinity_;
  }
  for (const core::PodAffinityTerm& t : pod.pod_anti_affinity) {
    if (TermMatches(t, pod.namespace_, p.namespace_, p.labels)) {
      CountDomain(anti_, node_of.Get(), t.topology_key, delta);
    }
  }
  if (spread_.empty() || p.deleting || p.namespace_ != pod.namespace_ || node_of.Get() == nullptr) {
    return;
  }
  const core::Node& node = *node_of.Get();
  for (size_t i = 0; i < spread_.size(); ++i) {
    Spread& s = spread_[i];
    const core::TopologySpreadConstraint& k = *s.constraint;
    if (k.selects_nothing || !k.selector.Matches(p.labels) || !SpreadEligible(node, i)) {
      continue;
    }
    auto it = s.counts.find(*LabelOf(node, k.topology_key));
    if (it == s.counts.end()) {
      continue;
    }
    if (auto h = s.domains_by_count.find(it->second); h != s.domains_by_count.end() && --h->second == 0) {
      s.domains_by_count.erase(h);
    }
    it->second = std::max(0, it->second + delta);
    s.domains_by_count[it->second] += 1;
    s.UpdateMin();
  }
}

int32_t InterPodConstraints::CountIn(const Domains& d, const std::string& key, const std::string& value) {
  auto k = d.find(key);
  if (k == d.end()) {
    return 0;
  }
  auto v = k->second.find(value);
  return v == k->second.end() ? 0 : v->second;
}

InterPodConstraints InterPodConstraints::Prepare(const core::PodRequest& pod, std::span<const PodOnNode* const> pods,
                                                 std::span<const PodOnNode* const> with_anti_affinity,
                                                 const core::ClusterState& state,
                                                 std::shared_ptr<const NamespaceLabels> namespaces) {
  InterPodConstraints c;
  c.pod_ = &pod;
  c.namespaces_ = std::move(namespaces);
  // Placed pods whose anti-affinity keeps this one away.
  for (const PodOnNode* p : with_anti_affinity) {
    if (p->uid == pod.uid) {
      continue;
    }
    NodeOf node_of(*p, state);
    for (const core::PodAffinityTerm& t : p->anti_affinity) {
      if (c.TermMatches(t, p->namespace_, pod.namespace_, pod.labels)) {
        CountDomain(c.existing_anti_, node_of.Get(), t.topology_key);
      }
    }
  }
  // The pod's own affinity and anti-affinity terms against every placed pod.
  if (!pod.pod_affinity.empty() || !pod.pod_anti_affinity.empty()) {
    for (const PodOnNode* p : pods) {
      if (p->uid == pod.uid) {
        continue;
      }
      NodeOf node_of(*p, state);
      const bool all = !pod.pod_affinity.empty() &&
                       std::all_of(pod.pod_affinity.begin(), pod.pod_affinity.end(), [&](const auto& t) {
                         return c.TermMatches(t, pod.namespace_, p->namespace_, p->labels);
                       });
      if (all) {
        for (const core::PodAffinityTerm& t : pod.pod_affinity) {
          CountDomain(c.affinity_, node_of.Get(), t.topology_key);
        }
      }
      for (const core::PodAffinityTerm& t : pod.pod_anti_affinity) {
        if (c.TermMatches(t, pod.namespace_, p->namespace_, p->labels)) {
          CountDomain(c.anti_, node_of.Get(), t.topology_key);
        }
      }
    }
    c.self_affinity_ = std::all_of(pod.pod_affinity.begin(), pod.pod_affinity.end(), [&](const auto& t) {
      return c.TermMatches(t, pod.namespace_, pod.namespace_, pod.labels);
    });
    c.affinity_first_ = c.affinity_.empty() && c.self_affinity_;
  }
  // Spread: the domains of the eligible nodes, then the matching pods in each.
  if (!pod.spread.empty()) {
    const size_t n = pod.spread.size();
    c.spread_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const core::TopologySpreadConstraint& k = pod.spread[i];
      c.spread_[i].constraint = &k;
      c.spread_[i].self_match = !k.selects_nothing && k.selector.Matches(pod.labels) ? 1 : 0;
    }
    std::vector<char> eligible(state.SlotCount() * n, 0);
    for (size_t slot = 0; slot < state.SlotCount(); ++slot) {
      if (!state.IsLive(slot)) {
        continue;
      }
      const core::Node& node = *state.View(slot).node;
      if (!std::all_of(pod.spread.begin(), pod.spread.end(),
                       [&](const auto& k) { return LabelOf(node, k.topology_key) != nullptr; })) {
        continue;
      }
      int affinity_ok = -1;  // -1: not evaluated yet
      int taints_ok = -1;
      for (size_t i = 0; i < n; ++i) {
        const core::TopologySpreadConstraint& k = pod.spread[i];
        if (k.honor_node_affinity) {
          affinity_ok = affinity_ok >= 0 ? affinity_ok : (CheckNodeAffinity(pod, node).empty() ? 1 : 0);
          if (affinity_ok == 0) {
            continue;
          }
        }
        if (k.honor_node_taints) {
          taints_ok = taints_ok >= 0 ? taints_ok : (CheckTaints(pod, node).empty() ? 1 : 0);
          if (taints_ok == 0) {
            continue;
          }
        }
        eligible[slot * n + i] = 1;
        c.spread_[i].counts.try_emplace(*LabelOf(node, k.topology_key), 0);
      }
    }
    for (const PodOnNode* p : pods) {
      if (p->uid == pod.uid || p->deleting || p->namespace_ != pod.namespace_) {
        continue;
      }
      auto slot = state.SlotOf(p->node);
      if (!slot.has_value() || !state.IsLive(*slot)) {
        continue;
      }
      const core::Node& node = *state.View(*slot).node;
      for (size_t i = 0; i < n; ++i) {
        const core::TopologySpreadConstraint& k = pod.spread[i];
        if (eligible[*slot * n + i] != 0 && !k.selects_nothing && k.selector.Matches(p->labels)) {
          c.spread_[i].counts[*LabelOf(node, k.topology_key)] += 1;
        }
      }
    }
    for (Spread& s : c.spread_) {
      for (const auto& [value, count] : s.counts) {
        s.domains_by_count[count] += 1;
      }
      s.UpdateMin();
    }
  }
  c.active_ =
      !c.existing_anti_.empty() || !pod.pod_affinity.empty() || !pod.pod_anti_affinity.empty() || !pod.spread.empty();
  return c;
}

InterPodConstraints::Failure InterPodConstraints::Evaluate(const core::Node& node) const {
  if (!active_) {
    return {};
  }
  for (const Spread& s : spread_) {
    const std::string& key = s.constraint->topology_key;
    const std::string* value = LabelOf(node, key);
    if (value == nullptr) {
      return {.rule = Rule::kSpreadLabel, .key = &key};
    }
    auto it = s.counts.find(*value);
    const int64_t skew = (it == s.counts.end() ? 0 : it->second) + s.self_match - s.min_match;
    if (skew > s.constraint->max_skew) {
      return {.rule = Rule::kSpreadSkew, .key = &key, .value = value, .skew = skew, .max_skew = s.constraint->max_skew};
    }
  }
  const core::PodRequest& pod = *pod_;
  if (!pod.pod_affinity.empty()) {
    bool found = true;
    for (const core::PodAffinityTerm& t : pod.pod_affinity) {
      const std::string* value = LabelOf(node, t.topology_key);
      if (value == nullptr) {
        return {.rule = Rule::kAffinityLabel, .key = &t.topology_key};
      }
      found = found && CountIn(affinity_, t.topology_key, *value) > 0;
    }
    if (!found && !affinity_first_) {
      return {.rule = Rule::kAffinity};
    }
  }
  for (const core::PodAffinityTerm& t : pod.pod_anti_affinity) {
    if (const std::string* value = LabelOf(node, t.topology_key);
        value != nullptr && CountIn(anti_, t.topology_key, *value) > 0) {
      return {.rule = Rule::kAntiAffinity, .key = &t.topology_key, .value = value};
    }
  }
  for (const auto& [key, values] : existing_anti_) {
    if (const std::string* value = LabelOf(node, key); value != nullptr && values.contains(*value)) {
      return {.rule = Rule::kExistingAntiAffinity, .key = &key, .value = value};
    }
  }
  return {};
}

policy::Fit InterPodConstraints::Check(const core::Node& node) const {
  const Failure f = Evaluate(node);
  switch (f.rule) {
    case Rule::kNone:
      return policy::Fit::Fits();
    case Rule::kSpreadLabel:
      return policy::Fit::Unresolvable(
          "node(s) didn't match pod topology spread constraints (missing required label), no label " + *f.key);
    case Rule::kSpreadSkew:
      return policy::Fit::Unschedulable("node(s) didn't match pod topology spread constraints, " + *f.key + "=" +
                                        *f.value + " would have skew " + std::to_string(f.skew) + " (max " +
                                        std::to_string(f.max_skew) + ")");
    case Rule::kAffinityLabel:
      return policy::Fit::Unresolvable("node(s) didn't match pod affinity rules, no label " + *f.key);
    case Rule::kAffinity:
      return policy::Fit::Unresolvable("node(s) didn't match pod affinity rules");
    case Rule::kAntiAffinity:
      return policy::Fit::Unschedulable("node(s) didn't match pod anti-affinity rules, " + *f.key + "=" + *f.value);
    case Rule::kExistingAntiAffinity:
      return policy::Fit::Unschedulable("node(s) didn't satisfy existing pods anti-affinity rules, " + *f.key + "=" +
                                        *f.value);
  }
  return policy::Fit::Fits();
}

uint32_t InterPodConstraints::Blockers(const core::Node& node) const {
  switch (Evaluate(node).rule) {
    case Rule::kNone:
      return 0;
    case Rule::kSpreadLabel:
    case Rule::kAffinityLabel:
      return kBlockedByNodeSpec;
    case Rule::kSpreadSkew:
      return kBlockedByPods | kBlockedByPodAdded | kBlockedByNodeSpec;
    case Rule::kAffinity:
      return kBlockedByPodAdded | kBlockedByNodeSpec;
    case Rule::kAntiAffinity:
    case Rule::kExistingAntiAffinity:
      return kBlockedByPods | kBlockedByNodeSpec;
  }
  return 0;
}

}  // namespace gpusched::sched
