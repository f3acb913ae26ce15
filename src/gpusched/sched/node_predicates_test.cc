#include "gpusched/sched/node_predicates.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::sched {
namespace {

using core::NodeSelectorRequirement;
using core::NodeSelectorTerm;
using core::Taint;
using core::TaintEffect;
using core::Toleration;
using Op = NodeSelectorRequirement::Operator;
using TolOp = Toleration::Operator;

core::Node NodeWith(std::map<std::string, std::string> labels, std::vector<Taint> taints = {},
                    bool unschedulable = false) {
  core::Node n;
  n.name = common::NodeName("gpu-1");
  n.labels = std::move(labels);
  n.taints = std::move(taints);
  n.unschedulable = unschedulable;
  return n;
}

NodeSelectorTerm Term(std::vector<NodeSelectorRequirement> exprs, std::vector<NodeSelectorRequirement> fields = {}) {
  return NodeSelectorTerm{.match_expressions = std::move(exprs), .match_fields = std::move(fields)};
}

// Required node affinity, one requirement per row, against a node labelled zone=a, gpus=8 (and no "spot" label).
TEST(NodePredicatesTest, NodeAffinityOperators) {
  const core::Node node = NodeWith({{"zone", "a"}, {"gpus", "8"}, {"bad", "eight"}});
  struct Case {
    NodeSelectorRequirement r;
    bool fits;
  };
  const Case cases[] = {
      {{"zone", Op::kIn, {"a", "b"}}, true},   {{"zone", Op::kIn, {"b"}}, false},
      {{"spot", Op::kIn, {"true"}}, false},  // no label: In fails
      {{"zone", Op::kNotIn, {"b"}}, true},     {{"zone", Op::kNotIn, {"a"}}, false},
      {{"spot", Op::kNotIn, {"true"}}, true},  // no label: NotIn matches
      {{"zone", Op::kExists, {}}, true},       {{"spot", Op::kExists, {}}, false},
      {{"spot", Op::kDoesNotExist, {}}, true}, {{"zone", Op::kDoesNotExist, {}}, false},
      {{"gpus", Op::kGt, {"4"}}, true},        {{"gpus", Op::kGt, {"8"}}, false},
      {{"gpus", Op::kLt, {"9"}}, true},        {{"gpus", Op::kLt, {"-1"}}, false},
      {{"bad", Op::kGt, {"1"}}, false},   // a label that is no integer
      {{"gpus", Op::kGt, {"x"}}, false},  // a value that is no integer
      {{"spot", Op::kLt, {"1"}}, false},  // no label
  };
  for (const Case& c : cases) {
    core::PodRequest pod;
    pod.required_node_affinity = {Term({c.r})};
    EXPECT_EQ(CheckNodeAffinity(pod, node).empty(), c.fits)
        << c.r.key << " op " << static_cast<int>(c.r.op) << " " << (c.r.values.empty() ? "" : c.r.values[0]);
  }
}

TEST(NodePredicatesTest, TermsAreOredRequirementsAndedSelectorAndedWithAffinity) {
  const core::Node node = NodeWith({{"zone", "a"}, {"disk", "ssd"}});
  core::PodRequest pod;
  pod.required_node_affinity = {Term({{"zone", Op::kIn, {"b"}}}), Term({{"disk", Op::kIn, {"ssd"}}})};
  EXPECT_EQ(CheckNodeAffinity(pod, node), "");  // the second term matches
  pod.required_node_affinity = {Term({{"zone", Op::kIn, {"a"}}, {"disk", Op::kIn, {"hdd"}}})};
  EXPECT_NE(CheckNodeAffinity(pod, node), "");  // one requirement of the only term fails
  pod.required_node_affinity = {Term({})};
  EXPECT_NE(CheckNodeAffinity(pod, node), "") << "an empty term matches no node";
  pod.required_node_affinity = {Term({}, {{"metadata.name", Op::kIn, {"gpu-1"}}})};
  EXPECT_EQ(CheckNodeAffinity(pod, node), "");
  pod.required_node_affinity = {Term({}, {{"metadata.name", Op::kNotIn, {"gpu-1"}}})};
  EXPECT_NE(CheckNodeAffinity(pod, node), "");
  pod.required_node_affinity = {Term({}, {{"metadata.uid", Op::kExists, {}}})};
  EXPECT_NE(CheckNodeAffinity(pod, node), "") << "only metadata.name is a supported field";
  // nodeSelector AND affinity.
  pod.required_node_affinity = {Term({{"zone", Op::kIn, {"a"}}})};
  pod.node_selector = {{"disk", "ssd"}};
  EXPECT_EQ(CheckNodeAffinity(pod, node), "");
  pod.node_selector = {{"disk", "hdd"}};
  EXPECT_EQ(CheckNodeAffinity(pod, node), "node(s) didn't match Pod's node affinity/selector");
  pod.node_selector = {{"gpu", ""}};  // an empty value still needs the label
  EXPECT_NE(CheckNodeAffinity(pod, node), "");
}

TEST(NodePredicatesTest, Tolerations) {
  const Taint gpu{.key = "nvidia.com/gpu", .value = "present", .effect = TaintEffect::kNoSchedule};
  struct Case {
    Toleration t;
    bool tolerates;
  };
  const Case cases[] = {
      {{.key = "nvidia.com/gpu", .op = TolOp::kEqual, .value = "present"}, true},
      {{.key = "nvidia.com/gpu", .op = TolOp::kEqual, .value = "absent"}, false},
      {{.key = "nvidia.com/gpu", .op = TolOp::kExists}, true},
      {{.key = "other", .op = TolOp::kExists}, false},
      {{.key = "", .op = TolOp::kExists}, true},  // tolerates everything
      {{.key = "nvidia.com/gpu", .op = TolOp::kExists, .effect = TaintEffect::kNoSchedule}, true},
      {{.key = "nvidia.com/gpu", .op = TolOp::kExists, .effect = TaintEffect::kNoExecute}, false},
      {{.key = "", .op = TolOp::kExists, .effect = TaintEffect::kNoExecute}, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Tolerates(c.t, gpu), c.tolerates) << c.t.key << " " << c.t.value;
  }
}

TEST(NodePredicatesTest, TaintsCordonAndNodeName) {
  const Taint no_schedule{.key = "team", .value = "a", .effect = TaintEffect::kNoSchedule};
  const Taint no_execute{.key = "maintenance", .value = "", .effect = TaintEffect::kNoExecute};
  const Taint prefer{.key = "spot", .value = "true", .effect = TaintEffect::kPreferNoSchedule};
  core::PodRequest pod;
  EXPECT_EQ(CheckTaints(pod, NodeWith({}, {prefer})), "") << "PreferNoSchedule only scores";
  EXPECT_EQ(TaintPenalty(pod, NodeWith({}, {prefer, no_schedule})), 1);
  EXPECT_EQ(CheckTaints(pod, NodeWith({}, {prefer, no_schedule})), "node(s) had untolerated taint {team: a}");
  EXPECT_NE(CheckTaints(pod, NodeWith({}, {no_execute})), "");
  pod.tolerations = {{.key = "team", .op = TolOp::kEqual, .value = "a"}};
  EXPECT_EQ(CheckTaints(pod, NodeWith({}, {no_schedule})), "");
  EXPECT_NE(CheckTaints(pod, NodeWith({}, {no_schedule, no_execute})), "");
  pod.tolerations.push_back({.key = "spot", .op = TolOp::kExists});
  EXPECT_EQ(TaintPenalty(pod, NodeWith({}, {prefer})), 0);

  // Cordoned: only a pod tolerating node.kubernetes.io/unschedulable:NoSchedule.
  const core::Node cordoned = NodeWith({}, {}, true);
  EXPECT_EQ(CheckUnschedulable(pod, cordoned), "node(s) were unschedulable");
  pod.tolerations.push_back(
      {.key = "node.kubernetes.io/unschedulable", .op = TolOp::kExists, .effect = TaintEffect::kNoSchedule});
  EXPECT_EQ(CheckUnschedulable(pod, cordoned), "");

  pod.node_name = "gpu-2";
  EXPECT_EQ(CheckNodeName(pod, cordoned), "node(s) didn't match the requested node name");
  EXPECT_EQ(CheckNodeConstraints(pod, cordoned), "node(s) didn't match the requested node name");
  pod.node_name = "gpu-1";
  EXPECT_EQ(CheckNodeConstraints(pod, cordoned), "");
}

}  // namespace
}  // namespace gpusched::sched
