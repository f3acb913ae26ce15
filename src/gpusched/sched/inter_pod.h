#pragma once

// Constraints between pods, with kube-scheduler's semantics (its InterPodAffinity and PodTopologySpread filters),
// for the standalone scheduler's filter phase:
//   pod affinity   for each required affinity term the node must have the term's topologyKey, and its domain must
//                  hold a pod that matches every term of the incoming pod (terms are ANDed); the first pod of a
//                  group that has affinity to itself may go anywhere with the keys when no pod in the cluster
//                  matches its terms and it matches them itself: "node(s) didn't match pod affinity rules"
//   pod anti-affinity  no pod matching one of the incoming pod's required anti-affinity terms in the node's domain
//                  of that term (a node without the key passes): "node(s) didn't match pod anti-affinity rules"
//   existing anti-affinity  a pod already placed whose required anti-affinity term matches the incoming pod keeps
//                  it out of that pod's topology domain (every node with the same value of the term's
//                  topologyKey): "node(s) didn't satisfy existing pods anti-affinity rules"
//   topology spread (DoNotSchedule)  the node must have every constraint's topologyKey ("... (missing required
//                  label)"); for each constraint, counting the non-terminating pods of the pod's namespace that its
//                  selector matches in each domain of the eligible nodes (nodes with every constraint's key that
//                  pass the pod's nodeSelector and required node affinity, and its tolerations when the
//                  constraint honours taints), the node's domain count + 1 (if the pod matches the selector itself)
//                  − the least populated domain's count (0 when there are fewer domains than minDomains) must not
//                  exceed maxSkew: "node(s) didn't match pod topology spread constraints"
// A term's namespaces: those it lists plus those whose labels its namespaceSelector matches, every one with
// namespaceSelector {}, else (neither) the namespace of the pod that has the term. Pods counted: every pod placed on a
// node, bound or assumed by this scheduler (so two replicas scheduled one after the other see each other before their
// binds land), the incoming pod itself excluded.
//
// Cost: Prepare (the PreFilter) reads every placed pod only for a pod that has affinity, anti-affinity or spread
// constraints of its own; any other pod reads only the placed pods that have anti-affinity terms. Check (the
// Filter) is a few hash lookups per node. Preemption (the scheduler's post-filter) removes and restores candidate
// victims with Update, as kube-scheduler's AddPod/RemovePod pre-filter extensions do, so that evicting a pod can
// satisfy anti-affinity, existing pods' anti-affinity and spread constraints; each Update costs a few hash lookups
// and, with spread constraints, a logarithmic step in the per-count histogram that keeps the least populated domain.

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/policy/placement_policy.h"

namespace gpusched::sched {

// A pod placed on a node, as inter-pod constraints read it.
struct PodOnNode {
  common::PodUid uid;
  std::string namespace_;
  std::map<std::string, std::string> labels;
  common::NodeName node;
  std::vector<core::PodAffinityTerm> anti_affinity;  // its own required anti-affinity terms
  bool deleting = false;                             // terminating: spread constraints do not count it
};

// The labels of every namespace, by name (the scheduler's namespace watch). Read only for terms with a
// namespaceSelector; a namespace not in it has no labels a selector could match.
using NamespaceLabels = std::unordered_map<std::string, std::map<std::string, std::string>>;

class InterPodConstraints {
 public:
  // Nothing to check.
  InterPodConstraints() = default;

  // Counts what `pod`'s checks need; the result refers to `pod`, which must outlive it. `pods`: every pod placed on a
  // node (read only when the pod has constraints of its own); `with_anti_affinity`: those of them with required
  // anti-affinity terms. A pod on a node `state` does not know is not counted. `namespaces`: the labels of the
  // namespaces, for terms with a namespaceSelector (kept, so that Update reads the same; nullptr: none known).
  static InterPodConstraints Prepare(const core::PodRequest& pod, std::span<const PodOnNode* const> pods,
                                     std::span<const PodOnNode* const> with_anti_affinity,
                                     const core::ClusterState& state,
                                     std::shared_ptr<const NamespaceLabels> namespaces = nullptr);

  // The counts as if `p` (a pod placed on a node, one that Prepare counted) were gone (delta -1) or back (+1).
  // Removing and then restoring the same pods leaves the object as it was.
  void Update(const PodOnNode& p, int delta, const core::ClusterState& state);

  // Whether Check can reject a node.
  [[nodiscard]] bool Active() const { return active_; }
  // Check without its reason (no string is built: the cycle's loop over every node).
  [[nodiscard]] bool Passes(const core::Node& node) const { return Evaluate(node).rule == Rule::kNone; }
  // Fits, or the first failed rule's reason (kube-scheduler's order: spread, affinity, anti-affinity, existing
  // pods' anti-affinity): Unresolvable where only a change of labels can help (affinity; a missing topology
  // label), else Unschedulable.
  [[nodiscard]] policy::Fit Check(const core::Node& node) const;
  // What can make a node that Check rejects pass (sched::Blocker bits): a pod leaving (anti-affinity, spread), a
  // pod placed (affinity, spread), the node's labels changing (all); 0 when Check passes.
  [[nodiscard]] uint32_t Blockers(const core::Node& node) const;

 private:
  using Domains = std::unordered_map<std::string, std::unordered_map<std::string, int32_t>>;  // key -> value -> n
  struct Spread {
    const core::TopologySpreadConstraint* constraint = nullptr;
    std::unordered_map<std::string, int32_t> counts;  // per domain of the eligible nodes
    std::map<int32_t, int32_t> domains_by_count;      // count -> domains with it (the least is the minimum)
    int32_t min_match = 0;
    int32_t self_match = 0;
    void UpdateMin();
  };
  // The rule a node fails first, and what the reason names (pointers into the node's labels and this object).
  enum class Rule { kNone, kSpreadLabel, kSpreadSkew, kAffinityLabel, kAffinity, kAntiAffinity, kExistingAntiAffinity };
  struct Failure {
    Rule rule = Rule::kNone;
    const std::string* key = nullptr;
    const std::string* value = nullptr;
    int64_t skew = 0;
    int32_t max_skew = 0;
  };
  static int32_t CountIn(const Domains& d, const std::string& key, const std::string& value);
  // `delta` more pods in the domain of `key` on `node` (none when the node is unknown or lacks the label); a domain
  // whose count falls to 0 is removed.
  static void CountDomain(Domains& d, const core::Node* node, const std::string& key, int delta = 1);
  // Whether a spread constraint counts pods on `node` (kube-scheduler's eligible nodes: every constraint's key,
  // and the pod's node affinity and tolerations where the constraint honours them).
  [[nodiscard]] bool SpreadEligible(const core::Node& node, size_t constraint) const;
  [[nodiscard]] Failure Evaluate(const core::Node& node) const;
  // Whether `t` of a pod in `owner_ns` is about a pod in `pod_ns` with `labels` (namespace labels looked up only for
  // a term with a namespaceSelector).
  [[nodiscard]] bool TermMatches(const core::PodAffinityTerm& t, const std::string& owner_ns, const std::string& pod_ns,
                                 const std::map<std::string, std::string>& labels) const;

  bool active_ = false;
  const core::PodRequest* pod_ = nullptr;
  std::shared_ptr<const NamespaceLabels> namespaces_;
  Domains existing_anti_;        // domains an existing pod's anti-affinity keeps the pod out of
  Domains affinity_;             // domains with pods matching all the pod's affinity terms
  Domains anti_;                 // domains with pods matching one of its anti-affinity terms
  bool affinity_first_ = false;  // no pod matches its affinity terms, and it matches them itself
  bool self_affinity_ = false;   // it matches its own affinity terms
  std::vector<Spread> spread_;
};

}  // namespace gpusched::sched
