#include "gpusched/sched/inter_pod.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/sched/scheduling_queue.h"
#include "gpusched/testing/builders.h"

namespace gpusched::sched {
namespace {

using ::testing::HasSubstr;
using Labels = std::map<std::string, std::string>;

// Nodes a1, a2 (zone a), b1, b2 (zone b), c1 (zone c), bare (no zone); every node has its hostname label.
class InterPodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [name, zone] : std::vector<std::pair<std::string, std::string>>{
             {"a1", "a"}, {"a2", "a"}, {"b1", "b"}, {"b2", "b"}, {"c1", "c"}, {"bare", ""}}) {
      core::Node n = testing::Node(name).Gpus(1).Cpu(8000).Build();
      n.labels["kubernetes.io/hostname"] = name;
      if (!zone.empty()) {
        n.labels["zone"] = zone;
      }
      ASSERT_TRUE(state_.AddNode(std::move(n)).ok());
    }
  }

  // A pod placed on `node`.
  void Place(const std::string& uid, const std::string& node, Labels labels, std::string ns = "default",
             std::vector<core::PodAffinityTerm> anti = {}, bool deleting = false) {
    placed_.push_back(std::make_unique<PodOnNode>(PodOnNode{.uid = common::PodUid(uid),
                                                            .namespace_ = std::move(ns),
                                                            .labels = std::move(labels),
                                                            .node = common::NodeName(node),
                                                            .anti_affinity = std::move(anti),
                                                            .deleting = deleting}));
  }

  // The constraints of `pod` over the placed pods, as the scheduler prepares them.
  InterPodConstraints Prepare(const core::PodRequest& pod) {
    all_.clear();
    anti_.clear();
    for (const auto& p : placed_) {
      all_.push_back(p.get());
      if (!p->anti_affinity.empty()) {
        anti_.push_back(p.get());
      }
    }
    return InterPodConstraints::Prepare(
        pod,
        pod.HasInterPodConstraints() ? std::span<const PodOnNode* const>(all_) : std::span<const PodOnNode* const>(),
        anti_, state_);
  }
  // The nodes `c` lets its pod go to, in node order.
  std::vector<std::string> PassingWith(const InterPodConstraints& c) {
    std::vector<std::string> out;
    for (size_t slot = 0; slot < state_.SlotCount(); ++slot) {
      const core::Node& node = *state_.View(slot).node;
      if (c.Passes(node)) {
        out.push_back(node.name.str());
      }
    }
    return out;
  }
  // The placed pod `uid`.
  const PodOnNode& Placed(const std::string& uid) const {
    for (const auto& p : placed_) {
      if (p->uid.str() == uid) {
        return *p;
      }
    }
    ADD_FAILURE() << "no placed pod " << uid;
    return *placed_.front();
  }

  // The nodes `pod` may go to, in node order.
  std::vector<std::string> Passing(const core::PodRequest& pod) {
    std::vector<const PodOnNode*> all;
    std::vector<const PodOnNode*> anti;
    for (const auto& p : placed_) {
      all.push_back(p.get());
      if (!p->anti_affinity.empty()) {
        anti.push_back(p.get());
      }
    }
    // A pod without constraints of its own is handed only the pods with anti-affinity, as the scheduler does.
    const InterPodConstraints c = InterPodConstraints::Prepare(
        pod,
        pod.HasInterPodConstraints() ? std::span<const PodOnNode* const>(all) : std::span<const PodOnNode* const>(),
        anti, state_);
    std::vector<std::string> out;
    for (size_t slot = 0; slot < state_.SlotCount(); ++slot) {
      const core::Node& node = *state_.View(slot).node;
      const policy::Fit fit = c.Check(node);
      if (fit.fits()) {
        out.push_back(node.name.str());
      } else {
        reasons_[node.name.str()] = fit;
        blockers_[node.name.str()] = c.Blockers(node);
      }
      EXPECT_EQ(c.Blockers(node) == 0, fit.fits()) << node.name.str();
    }
    return out;
  }

  static core::PodRequest Pod(const std::string& name, Labels labels, std::string ns = "default") {
    core::PodRequest p = testing::Pod(name).Build();
    p.namespace_ = std::move(ns);
    p.labels = std::move(labels);
    return p;
  }
  static core::PodAffinityTerm Term(Labels match, std::string key, std::vector<std::string> namespaces = {}) {
    core::PodAffinityTerm t;
    t.selector.match_labels = std::move(match);
    t.topology_key = std::move(key);
    t.namespaces = std::move(namespaces);
    return t;
  }
  static core::TopologySpreadConstraint Spread(Labels match, std::string key = "zone", int32_t max_skew = 1) {
    core::TopologySpreadConstraint c;
    c.selector.match_labels = std::move(match);
    c.topology_key = std::move(key);
    c.max_skew = max_skew;
    return c;
  }

  using V = std::vector<std::string>;
  std::vector<const PodOnNode*> all_, anti_;
  core::ClusterState state_;
  std::vector<std::unique_ptr<PodOnNode>> placed_;
  std::map<std::string, policy::Fit> reasons_;
  std::map<std::string, uint32_t> blockers_;  // what can make a rejected node pass
};

TEST_F(InterPodTest, NoConstraintsPassEverywhere) {
  Place("w1", "a1", {{"app", "web"}});
  EXPECT_EQ(Passing(Pod("p", {{"app", "web"}})), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
}

TEST_F(InterPodTest, AntiAffinityKeepsThePodOutOfTheDomainOfMatchingPods) {
  Place("w1", "a1", {{"app", "web"}});
  Place("d1", "b1", {{"app", "db"}});
  core::PodRequest host = Pod("p", {{"app", "web"}});
  host.pod_anti_affinity = {Term({{"app", "web"}}, "kubernetes.io/hostname")};
  EXPECT_EQ(Passing(host), (V{"a2", "b1", "b2", "c1", "bare"}));
  EXPECT_EQ(reasons_.at("a1").code, policy::Fit::Code::kUnschedulable);
  EXPECT_THAT(reasons_.at("a1").reason, HasSubstr("node(s) didn't match pod anti-affinity rules"));
  EXPECT_EQ(blockers_.at("a1"), kBlockedByPods | kBlockedByNodeSpec) << "a pod leaving; not a pod placed";

  core::PodRequest zone = Pod("p", {{"app", "web"}});
  zone.pod_anti_affinity = {Term({{"app", "web"}}, "zone")};
  // The whole zone a is out; a node without the key passes.
  EXPECT_EQ(Passing(zone), (V{"b1", "b2", "c1", "bare"}));
}

TEST_F(InterPodTest, AntiAffinityOfPlacedPodsKeepsMatchingPodsAway) {
  Place("d1", "a1", {{"app", "db"}}, "default", {Term({{"app", "db"}}, "zone")});
  // A db pod may not join zone a; a web pod may, and so may a db pod of another namespace.
  EXPECT_EQ(Passing(Pod("db", {{"app", "db"}})), (V{"b1", "b2", "c1", "bare"}));
  EXPECT_THAT(reasons_.at("a2").reason, HasSubstr("node(s) didn't satisfy existing pods anti-affinity rules"));
  EXPECT_EQ(Passing(Pod("web", {{"app", "web"}})), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
  EXPECT_EQ(Passing(Pod("db2", {{"app", "db"}}, "other")), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
  // The pod itself (its own earlier placement) does not count.
  EXPECT_EQ(Passing(Pod("d1", {{"app", "db"}})), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
}

TEST_F(InterPodTest, AffinityNeedsAMatchingPodInTheDomain) {
  Place("c", "b1", {{"app", "cache"}});
  core::PodRequest pod = Pod("p", {{"app", "web"}});
  pod.pod_affinity = {Term({{"app", "cache"}}, "zone")};
  EXPECT_EQ(Passing(pod), (V{"b1", "b2"}));
  EXPECT_EQ(reasons_.at("a1").code, policy::Fit::Code::kUnresolvable);
  EXPECT_THAT(reasons_.at("a1").reason, HasSubstr("node(s) didn't match pod affinity rules"));
  EXPECT_THAT(reasons_.at("bare").reason, HasSubstr("no label zone"));
  EXPECT_EQ(blockers_.at("a1"), kBlockedByPodAdded | kBlockedByNodeSpec) << "a pod placed";
  EXPECT_EQ(blockers_.at("bare"), kBlockedByNodeSpec) << "only a label";
  // A pod of another namespace is not seen unless the term names that namespace.
  core::PodRequest other = Pod("p", {{"app", "web"}}, "team-b");
  other.pod_affinity = {Term({{"app", "cache"}}, "zone")};
  EXPECT_EQ(Passing(other), V{});
  other.pod_affinity = {Term({{"app", "cache"}}, "zone", {"default"})};
  EXPECT_EQ(Passing(other), (V{"b1", "b2"}));
  other.pod_affinity[0].namespaces.clear();
  other.pod_affinity[0].all_namespaces = true;
  EXPECT_EQ(Passing(other), (V{"b1", "b2"}));
}

TEST_F(InterPodTest, AffinityTermsAreAndedOverOnePod) {
  Place("x", "a1", {{"app", "cache"}});
  Place("y", "b1", {{"app", "cache"}, {"tier", "hot"}});
  core::PodRequest pod = Pod("p", {});
  pod.pod_affinity = {Term({{"app", "cache"}}, "zone"), Term({{"tier", "hot"}}, "kubernetes.io/hostname")};
  // Only y matches both terms: its zone b and its host b1 must both hold; so b1 only.
  EXPECT_EQ(Passing(pod), V{"b1"});
}

TEST_F(InterPodTest, TheFirstPodOfASelfAffineGroupMayGoAnywhereWithTheKey) {
  core::PodRequest first = Pod("p", {{"app", "group"}});
  first.pod_affinity = {Term({{"app", "group"}}, "zone")};
  EXPECT_EQ(Passing(first), (V{"a1", "a2", "b1", "b2", "c1"}));
  // Not if it does not match its own terms.
  core::PodRequest stranger = Pod("q", {{"app", "other"}});
  stranger.pod_affinity = {Term({{"app", "group"}}, "zone")};
  EXPECT_EQ(Passing(stranger), V{});
  // Once one member is placed, the others follow it.
  Place("g1", "c1", {{"app", "group"}});
  EXPECT_EQ(Passing(first), V{"c1"});
}

TEST_F(InterPodTest, ATermWithoutSelectorMatchesNoPod) {
  Place("w1", "a1", {{"app", "web"}});
  core::PodRequest pod = Pod("p", {{"app", "web"}});
  pod.pod_anti_affinity = {Term({}, "kubernetes.io/hostname")};
  pod.pod_anti_affinity[0].selects_nothing = true;
  EXPECT_EQ(Passing(pod).size(), 6U);
  pod.pod_anti_affinity[0].selects_nothing = false;  // {}: every pod
  EXPECT_EQ(Passing(pod), (V{"a2", "b1", "b2", "c1", "bare"}));
}

TEST_F(InterPodTest, SpreadLimitsTheSkewBetweenDomains) {
  // zone a: 2 pods, zone b: 1, zone c: 0; a terminating pod, a pod of another namespace and one of another app
  // are not counted.
  Place("1", "a1", {{"app", "web"}});
  Place("2", "a2", {{"app", "web"}});
  Place("3", "b1", {{"app", "web"}});
  Place("4", "b2", {{"app", "web"}}, "default", {}, /*deleting=*/true);
  Place("5", "c1", {{"app", "web"}}, "other");
  Place("6", "c1", {{"app", "db"}});
  core::PodRequest pod = Pod("p", {{"app", "web"}});
  pod.spread = {Spread({{"app", "web"}})};
  // c: 0 + 1 - 0 = 1 fits; b: 2 > 1; a: 3 > 1. The node without the key can never fit.
  EXPECT_EQ(Passing(pod), V{"c1"});
  EXPECT_THAT(reasons_.at("b1").reason, HasSubstr("node(s) didn't match pod topology spread constraints, zone=b"));
  EXPECT_EQ(reasons_.at("bare").code, policy::Fit::Code::kUnresolvable);
  EXPECT_THAT(reasons_.at("bare").reason, HasSubstr("(missing required label)"));
  EXPECT_EQ(blockers_.at("b1"), kBlockedByPods | kBlockedByPodAdded | kBlockedByNodeSpec);
  pod.spread[0].max_skew = 2;
  EXPECT_EQ(Passing(pod), (V{"b1", "b2", "c1"}));
  // A pod the selector does not match does not count itself: b is 1 - 0 = 1.
  core::PodRequest other = Pod("q", {{"app", "batch"}});
  other.spread = {Spread({{"app", "web"}})};
  EXPECT_EQ(Passing(other), (V{"b1", "b2", "c1"}));
}

TEST_F(InterPodTest, SpreadCountsOnlyEligibleDomains) {
  Place("1", "a1", {{"app", "web"}});
  Place("2", "b1", {{"app", "web"}});
  Place("3", "b2", {{"app", "web"}});
  core::PodRequest pod = Pod("p", {{"app", "web"}});
  pod.spread = {Spread({{"app", "web"}})};
  EXPECT_EQ(Passing(pod), V{"c1"});  // c is empty: a (1+1-0) and b exceed
  // Zone c excluded by the pod's required node affinity: the least populated eligible domain is a (1), so a fits
  // (1 + 1 - 1). c1 passes this check with its count of 0; the node affinity filter keeps the pod out of it.
  pod.required_node_affinity = {core::NodeSelectorTerm{
      .match_expressions = {
          {.key = "zone", .op = core::NodeSelectorRequirement::Operator::kIn, .values = {"a", "b"}}}}};
  EXPECT_EQ(Passing(pod), (V{"a1", "a2", "c1"}));
  // nodeAffinityPolicy: Ignore counts zone c again (the affinity filter itself still keeps the pod out of it).
  pod.spread[0].honor_node_affinity = false;
  EXPECT_EQ(Passing(pod), V{"c1"});
  // minDomains above the number of eligible domains (2): the minimum counts as 0, and a no longer fits.
  pod.spread[0].honor_node_affinity = true;
  pod.spread[0].min_domains = 3;
  EXPECT_EQ(Passing(pod), V{"c1"});
  pod.spread[0].min_domains = 2;
  EXPECT_EQ(Passing(pod), (V{"a1", "a2", "c1"}));
  // nodeTaintsPolicy: Honor leaves out a tainted node the pod does not tolerate.
  core::PodRequest tainted = Pod("t", {{"app", "web"}});
  tainted.spread = {Spread({{"app", "web"}})};
  tainted.spread[0].honor_node_taints = true;
  core::Node c1 = *state_.Find(common::NodeName("c1"))->node;
  c1.taints = {core::Taint{.key = "dedicated", .value = "x", .effect = core::TaintEffect::kNoSchedule}};
  ASSERT_TRUE(state_.RemoveNode(common::NodeName("c1")).ok());
  ASSERT_TRUE(state_.AddNode(c1).ok());
  EXPECT_EQ(Passing(tainted), (V{"a1", "a2", "c1"}));
  tainted.spread[0].honor_node_taints = false;
  EXPECT_EQ(Passing(tainted), V{"c1"});
}

}  // namespace
}  // namespace gpusched::sched

namespace gpusched::sched {
namespace {

// Preemption takes candidate victims off and puts them back (Update): the checks follow, and restoring leaves the
// object as it was.
TEST_F(InterPodTest, UpdateFollowsPodsTakenOffAndPutBack) {
  // Anti-affinity: w1 on a1 keeps the pod out of zone a; with w1 off, zone a is open.
  Place("w1", "a1", {{"app", "web"}});
  core::PodRequest anti = Pod("p", {{"app", "api"}});
  anti.pod_anti_affinity = {Term({{"app", "web"}}, "zone")};
  InterPodConstraints c = Prepare(anti);
  EXPECT_EQ(PassingWith(c), (V{"b1", "b2", "c1", "bare"}));
  c.Update(Placed("w1"), -1, state_);
  EXPECT_EQ(PassingWith(c), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
  c.Update(Placed("w1"), +1, state_);
  EXPECT_EQ(PassingWith(c), (V{"b1", "b2", "c1", "bare"}));

  // Existing anti-affinity: d1 (zone b) keeps db pods out of zone b, until it is off.
  Place("d1", "b1", {{"app", "loner"}}, "default", {Term({{"app", "db"}}, "zone")});
  core::PodRequest db = Pod("db", {{"app", "db"}});
  InterPodConstraints e = Prepare(db);
  EXPECT_EQ(PassingWith(e), (V{"a1", "a2", "c1", "bare"}));
  e.Update(Placed("d1"), -1, state_);
  EXPECT_EQ(PassingWith(e), (V{"a1", "a2", "b1", "b2", "c1", "bare"}));
  e.Update(Placed("d1"), +1, state_);
  EXPECT_EQ(PassingWith(e), (V{"a1", "a2", "c1", "bare"}));
}

TEST_F(InterPodTest, UpdateMovesTheLeastPopulatedDomainOfASpread) {
  // zone a: 2, zone b: 1, zone c: 1; max skew 1: only b and c fit (1 + 1 - 1 = 1).
  Place("1", "a1", {{"app", "web"}});
  Place("2", "a2", {{"app", "web"}});
  Place("3", "b1", {{"app", "web"}});
  Place("4", "c1", {{"app", "web"}});
  core::PodRequest pod = Pod("p", {{"app", "web"}});
  pod.spread = {Spread({{"app", "web"}})};
  InterPodConstraints c = Prepare(pod);
  EXPECT_EQ(PassingWith(c), (V{"b1", "b2", "c1"}));
  // Without the pod of zone c the minimum is 0: only c fits.
  c.Update(Placed("4"), -1, state_);
  EXPECT_EQ(PassingWith(c), V{"c1"});
  // Without both pods of zone a as well, a has 0 too: a and c fit.
  c.Update(Placed("1"), -1, state_);
  c.Update(Placed("2"), -1, state_);
  EXPECT_EQ(PassingWith(c), (V{"a1", "a2", "c1"}));
  // Everything back: as prepared.
  c.Update(Placed("1"), +1, state_);
  c.Update(Placed("2"), +1, state_);
  c.Update(Placed("4"), +1, state_);
  EXPECT_EQ(PassingWith(c), (V{"b1", "b2", "c1"}));
  // A pod of another app is not counted either way.
  Place("5", "b2", {{"app", "db"}});
  c.Update(Placed("5"), -1, state_);
  EXPECT_EQ(PassingWith(c), (V{"b1", "b2", "c1"}));
}

}  // namespace
}  // namespace gpusched::sched
