#include "gpusched/kube/constraints.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

namespace gpusched::kube {
namespace {

using nlohmann::json;

TEST(ConstraintsTest, PodConstraintsDecodeAsTheApiWritesThem) {
  const json pod = json::parse(R"({
    "metadata": {"name": "p", "namespace": "ml", "uid": "u1"},
    "spec": {
      "nodeName": "gpu-3",
      "nodeSelector": {"zone": "a"},
      "tolerations": [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "team", "value": "ml"},
        {"operator": "Exists"}
      ],
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": ["4"]}],
         "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad-node"]}]}
      ]}}},
      "containers": [{"name": "c"}]
    }})");
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->node_name, "gpu-3");
  EXPECT_EQ(r->node_selector, (std::map<std::string, std::string>{{"zone", "a"}}));
  ASSERT_EQ(r->tolerations.size(), 3U);
  EXPECT_EQ(r->tolerations[0].op, core::Toleration::Operator::kExists);
  EXPECT_EQ(r->tolerations[0].effect, core::TaintEffect::kNoSchedule);
  EXPECT_EQ(r->tolerations[1].op, core::Toleration::Operator::kEqual);  // the default operator
  EXPECT_EQ(r->tolerations[1].value, "ml");
  EXPECT_FALSE(r->tolerations[1].effect.has_value());
  EXPECT_EQ(r->tolerations[2].key, "");
  ASSERT_EQ(r->required_node_affinity.size(), 1U);
  EXPECT_EQ(r->required_node_affinity[0].match_expressions[0].op, core::NodeSelectorRequirement::Operator::kGt);
  EXPECT_EQ(r->required_node_affinity[0].match_fields[0].values, std::vector<std::string>{"bad-node"});
}

TEST(ConstraintsTest, NodeLabelsTaintsAndCordon) {
  const json node = json::parse(R"({
    "metadata": {"name": "n1", "labels": {"zone": "a"}},
    "spec": {"unschedulable": true, "taints": [{"key": "team", "value": "a", "effect": "NoExecute"}]},
    "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}, "capacity": {"nvidia.com/gpu": "1"}}})");
  auto n = DecodeNode(node);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->labels.at("zone"), "a");
  EXPECT_TRUE(n->unschedulable);
  ASSERT_EQ(n->taints.size(), 1U);
  EXPECT_EQ(n->taints[0], (core::Taint{.key = "team", .value = "a", .effect = core::TaintEffect::kNoExecute}));
  EXPECT_EQ(n->max_pods, 0) << "no allocatable pods: not limited";
  json limited = node;
  limited["status"]["allocatable"]["pods"] = "110";
  EXPECT_EQ(DecodeNode(limited)->max_pods, 110);
  limited["status"]["allocatable"]["pods"] = "-1";
  EXPECT_FALSE(DecodeNode(limited).ok());
}

TEST(ConstraintsTest, FieldsTheSchedulerDoesNotEvaluateAreNamed) {
  const json plain = json::parse(R"({"spec": {"containers": [{"name": "c", "resources": {"limits": {
      "cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1", "gpusched.io/gpu-memory": "100"}}}],
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}},
      "tolerations": [{"operator": "Exists"}]}})");
  UnevaluatedFields none = FindUnevaluatedFields(plain);
  EXPECT_TRUE(none.hard.empty());
  EXPECT_TRUE(none.soft.empty());

  const json pod = json::parse(R"({"spec": {
      "affinity": {
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"},
            {"topologyKey": "zone", "namespaceSelector": {"matchLabels": {"team": "a"}}}]},
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}},
      "topologySpreadConstraints": [{"maxSkew": 1}, {"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}],
      "initContainers": [{"name": "i", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}],
      "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}],
                      "resources": {"limits": {"rdma/hca": "1", "hugepages-2Mi": "2Mi"}}}]}})");
  UnevaluatedFields f = FindUnevaluatedFields(pod);
  // Host ports, other resources, required pod (anti-)affinity (namespaces chosen by their labels included) and
  // DoNotSchedule spread are evaluated: not named.
  EXPECT_TRUE(f.hard.empty());
  EXPECT_EQ(f.soft,
            (std::vector<std::string>{"spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                                      "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                                      "spec.topologySpreadConstraints (whenUnsatisfiable: ScheduleAnyway)"}));
  EXPECT_TRUE(FindUnevaluatedFields(json()).hard.empty());
  EXPECT_TRUE(FindUnevaluatedFields(json::parse(R"({"spec": {"containers": 3, "affinity": []}})")).hard.empty());

  // A pod with ResourceClaims is refused by name rather than bound without its claims allocated.
  const json dra = json::parse(R"({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
      "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}]}})");
  EXPECT_EQ(FindUnevaluatedFields(dra).hard,
            std::vector<std::string>{"spec.resourceClaims (Dynamic Resource Allocation)"});
  EXPECT_TRUE(FindUnevaluatedFields(json::parse(R"({"spec": {"resourceClaims": []}})")).hard.empty());
}

TEST(ConstraintsTest, PodAffinityAndSpreadDecode) {
  const json pod = json::parse(R"({"metadata": {"name": "p", "namespace": "ml", "labels": {"app": "web", "rev": "7"}},
    "spec": {"containers": [],
      "affinity": {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
          {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "cache"}}, "namespaces": ["ml", "shared"]},
          {"topologyKey": "zone", "namespaceSelector": {}, "labelSelector": {}, "matchLabelKeys": ["rev", "none"]}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
          {"topologyKey": "kubernetes.io/hostname", "mismatchLabelKeys": ["app"]}]}},
      "topologySpreadConstraints": [
        {"maxSkew": 2, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}, "minDomains": 3,
         "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["rev"]},
        {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}]}})");
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->namespace_, "ml");
  EXPECT_EQ(r->labels, (std::map<std::string, std::string>{{"app", "web"}, {"rev", "7"}}));
  ASSERT_EQ(r->pod_affinity.size(), 2U);
  EXPECT_EQ(r->pod_affinity[0].namespaces, (std::vector<std::string>{"ml", "shared"}));
  EXPECT_FALSE(r->pod_affinity[0].all_namespaces);
  EXPECT_TRUE(r->pod_affinity[0].Matches("ml", "shared", {{"app", "cache"}}));
  EXPECT_FALSE(r->pod_affinity[0].Matches("ml", "other", {{"app", "cache"}}));
  // namespaceSelector {}: every namespace; matchLabelKeys: rev=7 joins the (empty) selector; "none" is not a label.
  EXPECT_TRUE(r->pod_affinity[1].all_namespaces);
  EXPECT_TRUE(r->pod_affinity[1].Matches("ml", "any", {{"rev", "7"}}));
  EXPECT_FALSE(r->pod_affinity[1].Matches("ml", "any", {{"rev", "8"}}));
  // A namespaceSelector with requirements: the namespaces listed, and those whose labels it matches (not the
  // pod's own unless listed or matched); unknown labels match nothing.
  const json selecting = json::parse(R"({"metadata": {"name": "q", "namespace": "ml"}, "spec": {"containers": [],
      "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}, "namespaces": ["listed"],
         "namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}},
        {"topologyKey": "zone", "labelSelector": {}, "namespaceSelector": {"matchLabels": {}}}]}}}})");
  auto q = DecodePodRequest(selecting, ResourceConfig{});
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_EQ(q->pod_anti_affinity.size(), 2U);
  const core::PodAffinityTerm& by_label = q->pod_anti_affinity[0];
  EXPECT_TRUE(by_label.has_namespace_selector);
  EXPECT_FALSE(by_label.all_namespaces);
  const std::map<std::string, std::string> team_a = {{"team", "a"}}, team_c = {{"team", "c"}};
  EXPECT_TRUE(by_label.Matches("ml", "x", {{"app", "db"}}, &team_a));
  EXPECT_FALSE(by_label.Matches("ml", "x", {{"app", "db"}}, &team_c));
  EXPECT_FALSE(by_label.Matches("ml", "x", {{"app", "db"}}, nullptr));
  EXPECT_FALSE(by_label.Matches("ml", "ml", {{"app", "db"}}, &team_c)) << "its own namespace only when selected";
  EXPECT_TRUE(by_label.Matches("ml", "listed", {{"app", "db"}}, nullptr));
  EXPECT_FALSE(by_label.Matches("ml", "x", {{"app", "web"}}, &team_a));
  // {"matchLabels": {}} selects every namespace, as {} does.
  EXPECT_TRUE(q->pod_anti_affinity[1].all_namespaces);
  EXPECT_FALSE(q->pod_anti_affinity[1].has_namespace_selector);
  // A selector that cannot be read is an error naming it.
  json bad = selecting;
  bad["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaceSelector"]
     ["matchExpressions"][0]["operator"] = "Gt";
  auto refused = DecodePodRequest(bad, ResourceConfig{});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("namespaceSelector"), std::string::npos) << refused.status().message();

  // No labelSelector: matches no pod; mismatchLabelKeys: app notin (web).
  ASSERT_EQ(r->pod_anti_affinity.size(), 1U);
  EXPECT_TRUE(r->pod_anti_affinity[0].selects_nothing);
  EXPECT_FALSE(r->pod_anti_affinity[0].Matches("ml", "ml", {{"app", "db"}}));
  // ScheduleAnyway is left out.
  ASSERT_EQ(r->spread.size(), 2U);
  const core::TopologySpreadConstraint& zone = r->spread[0];
  EXPECT_EQ(zone.max_skew, 2);
  EXPECT_EQ(zone.topology_key, "zone");
  EXPECT_EQ(zone.min_domains, 3);
  EXPECT_FALSE(zone.honor_node_affinity);
  EXPECT_TRUE(zone.honor_node_taints);
  EXPECT_TRUE(zone.selector.Matches({{"app", "web"}, {"rev", "7"}}));
  EXPECT_FALSE(zone.selector.Matches({{"app", "web"}, {"rev", "6"}}));
  EXPECT_TRUE(r->spread[1].selects_nothing);
  EXPECT_TRUE(r->spread[1].honor_node_affinity);
  EXPECT_FALSE(r->spread[1].honor_node_taints);
  EXPECT_TRUE(r->HasInterPodConstraints());
  EXPECT_FALSE(DecodePodRequest(json::parse(R"({"metadata": {"name": "q"}, "spec": {}})"), ResourceConfig{})
                   ->HasInterPodConstraints());
}

TEST(ConstraintsTest, MalformedConstraintsAreErrorsNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"tolerations": [{"key": "k", "operator": "Maybe"}]})", "spec.tolerations[0].operator \"Maybe\""},
      {R"({"tolerations": [{"value": "v"}]})", "operator Equal needs a key"},
      {R"({"tolerations": [{"key": "k", "effect": "Sometimes"}]})", "spec.tolerations[0].effect \"Sometimes\""},
      {R"({"tolerations": {"key": "k"}})", "spec.tolerations is not a list"},
      {R"({"nodeSelector": {"zone": 1}})", "spec.nodeSelector.zone is not a string"},
      {R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}})",
       "nodeSelectorTerms must be a non-empty list"},
      {R"({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
          {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}})",
       "nodeSelectorTerms[0].matchExpressions[0].operator \"Near\""},
      {R"({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}}})",
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey is empty"},
      {R"({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
          {"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}]}}})",
       "labelSelector.matchExpressions: operator Gt/Lt is for node selectors only"},
      {R"({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone"}]})",
       "spec.topologySpreadConstraints[0].maxSkew must be an integer of at least 1"},
      {R"({"topologySpreadConstraints": [{"maxSkew": 1}]})", "spec.topologySpreadConstraints[0].topologyKey is empty"},
      {R"({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "Maybe"}]})",
       "whenUnsatisfiable \"Maybe\" is not DoNotSchedule or ScheduleAnyway"},
      {R"({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z", "minDomains": 0}]})",
       "minDomains must be an integer of at least 1"},
      {R"({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z", "nodeTaintsPolicy": "Always"}]})",
       "nodeTaintsPolicy \"Always\" is not Honor or Ignore"},
  };
  for (const auto& [spec, want] : cases) {
    json pod = {{"metadata", {{"name", "p"}}}, {"spec", json::parse(spec)}};
    auto r = DecodePodRequest(pod, ResourceConfig{});
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("pod default/p"), std::string::npos) << r.status().message();
  }
  const json bad_taint = {{"metadata", {{"name", "n"}}},
                          {"spec", {{"taints", json::array({{{"key", "k"}, {"effect", "Never"}}})}}}};
  auto n = DecodeNode(bad_taint);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("node n: spec.taints[0].effect \"Never\""), std::string::npos)
      << n.status().message();
}

// Other resources and host ports, as kube-scheduler's NodeResourcesFit and NodePorts read them.
TEST(ConstraintsTest, OtherResourcesAndHostPortsDecode) {
  const json pod = json::parse(R"({"metadata": {"name": "p", "namespace": "ml", "uid": "u"}, "spec": {
      "initContainers": [{"name": "i", "resources": {"requests": {"ephemeral-storage": "3Gi", "rdma/hca": "1"}}}],
      "containers": [
        {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}],
         "resources": {"limits": {"rdma/hca": "2", "hugepages-2Mi": "4Mi", "nvidia.com/gpu": "1"},
                       "requests": {"ephemeral-storage": "1Gi"}}},
        {"name": "b", "ports": [{"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
         "resources": {"requests": {"ephemeral-storage": "1Gi", "rdma/hca": "1"}}}]}})");
  auto r = DecodePodRequest(pod, ResourceConfig{});
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Sums over containers, the largest init container where it is larger; GPU names are not scalars.
  EXPECT_EQ(r->scalars,
            (std::map<std::string, int64_t>{
                {"ephemeral-storage", int64_t{3} << 30}, {"hugepages-2Mi", int64_t{4} << 20}, {"rdma/hca", 3}}));
  ASSERT_EQ(r->host_ports.size(), 2U);
  EXPECT_EQ(r->host_ports[0], (core::HostPort{.protocol = "TCP", .ip = "", .port = 8080}));
  EXPECT_EQ(r->host_ports[1], (core::HostPort{.protocol = "UDP", .ip = "10.0.0.1", .port = 53}));
  EXPECT_TRUE(core::HostPort{.port = 53}.ConflictsWith(core::HostPort{.ip = "10.0.0.2", .port = 53}));
  EXPECT_FALSE(r->host_ports[1].ConflictsWith(core::HostPort{.protocol = "UDP", .ip = "10.0.0.2", .port = 53}));
  EXPECT_FALSE(r->host_ports[1].ConflictsWith(core::HostPort{.protocol = "TCP", .port = 53}));

  json bad = pod;
  bad["spec"]["containers"][0]["resources"]["limits"]["rdma/hca"] = "two";
  EXPECT_NE(DecodePodRequest(bad, ResourceConfig{}).status().message().find("rdma/hca"), std::string::npos);
  bad = pod;
  bad["spec"]["containers"][0]["ports"][0]["hostPort"] = 70000;
  EXPECT_NE(DecodePodRequest(bad, ResourceConfig{}).status().message().find("hostPort"), std::string::npos);

  const json node = json::parse(R"({"metadata": {"name": "n"}, "status": {"allocatable": {
      "cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "8", "ephemeral-storage": "100Gi",
      "rdma/hca": "4"}}})");
  auto n = DecodeNode(node);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->scalar_resources,
            (std::map<std::string, int64_t>{{"ephemeral-storage", int64_t{100} << 30}, {"rdma/hca", 4}}));
}

TEST(ConstraintsTest, DisruptionBudgetsDecodeAndCountTheirPods) {
  const json pdb = json::parse(R"({
    "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
    "metadata": {"name": "db", "namespace": "ml"},
    "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"},
             "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["test"]}]}},
    "status": {"disruptionsAllowed": 1, "disruptedPods": {"db-0": "2026-11-25T10:00:00Z"}}
  })");
  auto b = DecodeDisruptionBudget(pdb);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->namespace_, "ml");
  EXPECT_EQ(b->name, "db");
  EXPECT_EQ(b->disruptions_allowed, 1);
  EXPECT_EQ(b->disrupted_pods, std::vector<std::string>{"db-0"});
  EXPECT_TRUE(b->Counts("ml", "db-1", {{"app", "db"}}));
  EXPECT_TRUE(b->Counts("ml", "db-1", {{"app", "db"}, {"tier", "prod"}}));
  EXPECT_FALSE(b->Counts("ml", "db-1", {{"app", "db"}, {"tier", "test"}})) << "NotIn";
  EXPECT_FALSE(b->Counts("ml", "db-0", {{"app", "db"}})) << "already disrupted: not counted again";
  EXPECT_FALSE(b->Counts("other", "db-1", {{"app", "db"}})) << "another namespace";
  EXPECT_FALSE(b->Counts("ml", "web", {{"app", "web"}}));

  // An empty selector covers nothing; a budget the disruption controller has not processed allows nothing.
  auto empty = DecodeDisruptionBudget(json::parse(R"({"metadata": {"name": "e", "namespace": "ml"},
                                                       "spec": {"selector": {}}})"));
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->Counts("ml", "db-1", {{"app", "db"}}));
  EXPECT_EQ(empty->disruptions_allowed, 0);
  // policy/v1beta1 before 1.15 named it podDisruptionsAllowed.
  auto old = DecodeDisruptionBudget(json::parse(R"({"metadata": {"name": "o", "namespace": "ml"},
                                                     "status": {"podDisruptionsAllowed": 3}})"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->disruptions_allowed, 3);

  const std::pair<const char*, const char*> bad[] = {
      {R"({"metadata": {"name": "x", "namespace": "ml"}, "spec": {"selector": {"matchLabels": {"a": 1}}}})",
       "spec.selector.matchLabels.a is not a string"},
      {R"({"metadata": {"name": "x", "namespace": "ml"}, "spec": {"selector": {"matchExpressions":
           [{"key": "a", "operator": "Gt", "values": ["1"]}]}}})",
       "Gt/Lt"},
      {R"({"metadata": {"name": "x", "namespace": "ml"}, "spec": {"selector": {"matchExpressions":
           [{"key": "a", "operator": "Near"}]}}})",
       "operator \"Near\""},
      {R"({"metadata": {"name": "x", "namespace": "ml"}, "status": {"disruptionsAllowed": "one"}})",
       "status.disruptionsAllowed is not an integer"},
      {R"([])", "not an object"},
  };
  for (const auto& [text, want] : bad) {
    auto r = DecodeDisruptionBudget(json::parse(text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace gpusched::kube
