#include "gpusched/doctor/expected_setup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace gpusched::doctor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const ServiceAccountGrants* Sa(const ExpectedSetup& s, const std::string& name) {
  for (const auto& sa : s.service_accounts) {
    if (sa.name == name) {
      return &sa;
    }
  }
  return nullptr;
}

std::vector<std::string> Described(const ServiceAccountGrants& sa) {
  std::vector<std::string> out;
  for (const auto& g : sa.grants) {
    out.push_back(g.Describe());
  }
  return out;
}

std::vector<std::string> Names(const std::vector<ObjectRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) {
    out.push_back(r.kind + " " + r.name);
  }
  return out;
}

TEST(ExpectedSetupTest, SchedulerModeIsWhatDeploySchedulerInstalls) {
  auto s = ExpectedSetupOf("scheduler");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(Names(s->crds), ElementsAre("CustomResourceDefinition gpuqueues.gpusched.io"));
  EXPECT_EQ(s->crds[0].file, "deploy/base/scheduler/gpuqueue-crd.yaml");
  EXPECT_THAT(Names(s->webhook_configurations), ElementsAre("MutatingWebhookConfiguration gpusched-webhook",
                                                            "ValidatingWebhookConfiguration gpusched-webhook"));
  ASSERT_TRUE(s->lease.has_value());
  EXPECT_EQ(s->lease->namespace_, "kube-system");
  EXPECT_EQ(s->lease->name, "gpusched-scheduler");
  EXPECT_EQ(s->lease->duration_seconds, 15);
  ASSERT_TRUE(s->agent.has_value());
  EXPECT_EQ(s->agent->namespace_, "kube-system");
  EXPECT_EQ(s->agent->label_selector, "app.kubernetes.io/name=gpusched-agent");
  EXPECT_EQ(s->agent->readiness_path, "/readyz");
  EXPECT_EQ(s->agent->port, 9400);
  ASSERT_NE(Sa(*s, "gpusched-scheduler"), nullptr);
  ASSERT_NE(Sa(*s, "gpusched-webhook"), nullptr);
  ASSERT_NE(Sa(*s, "gpusched-agent"), nullptr);
  EXPECT_EQ(Sa(*s, "gpusched-extender"), nullptr);
  const auto scheduler = Described(*Sa(*s, "gpusched-scheduler"));
  // A ClusterRoleBinding's grant holds everywhere; the leader Role's in kube-system, on its one Lease.
  for (const char* want :
       {"create pods/eviction", "patch pods/status", "list poddisruptionbudgets.policy",
        "patch gpuqueues.gpusched.io/status", "get leases.coordination.k8s.io gpusched-scheduler in kube-system",
        "create leases.coordination.k8s.io in kube-system"}) {
    EXPECT_NE(std::find(scheduler.begin(), scheduler.end(), want), scheduler.end()) << want;
  }
  EXPECT_EQ(Sa(*s, "gpusched-scheduler")->Username(), "system:serviceaccount:kube-system:gpusched-scheduler");
  // The webhook's own certificate: create Secrets in its namespace, get and update its CA Secret alone, get and patch
  // its two configurations alone.
  EXPECT_THAT(Described(*Sa(*s, "gpusched-webhook")),
              ElementsAre("create events", "create secrets in kube-system", "get pods",
                          "get secrets gpusched-webhook-ca in kube-system",
                          "get mutatingwebhookconfigurations.admissionregistration.k8s.io gpusched-webhook",
                          "get validatingwebhookconfigurations.admissionregistration.k8s.io gpusched-webhook",
                          "list gpuqueues.gpusched.io", "patch events",
                          "patch mutatingwebhookconfigurations.admissionregistration.k8s.io gpusched-webhook",
                          "patch validatingwebhookconfigurations.admissionregistration.k8s.io gpusched-webhook",
                          "update secrets gpusched-webhook-ca in kube-system"));
}

TEST(ExpectedSetupTest, TheLeaderRoleGrantsTheLeaseTheConfigNames) {
  auto s = ExpectedSetupOf("scheduler");
  ASSERT_TRUE(s.ok()) << s.status();
  bool update = false;
  for (const Grant& g : Sa(*s, "gpusched-scheduler")->grants) {
    update = update || (g.verb == "update" && g.resource == "leases" && g.name == s->lease->name &&
                        g.namespace_ == s->lease->namespace_);
  }
  EXPECT_TRUE(update);
}

TEST(ExpectedSetupTest, ExtenderModeHasNoCrdAndNoSchedulerLease) {
  auto s = ExpectedSetupOf("extender");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->crds.empty());
  EXPECT_FALSE(s->lease.has_value());
  EXPECT_EQ(s->webhook_configurations.size(), 2u);
  ASSERT_NE(Sa(*s, "gpusched-extender"), nullptr);
  EXPECT_EQ(Sa(*s, "gpusched-scheduler"), nullptr);
  EXPECT_THAT(Described(*Sa(*s, "gpusched-extender")), ::testing::Contains("create pods/binding"));
}

TEST(ExpectedSetupTest, AgentModeIsTheAgentAlone) {
  auto s = ExpectedSetupOf("agent");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->crds.empty());
  EXPECT_TRUE(s->webhook_configurations.empty());
  EXPECT_FALSE(s->lease.has_value());
  ASSERT_TRUE(s->agent.has_value());
  ASSERT_EQ(s->service_accounts.size(), 1u);
  EXPECT_THAT(Described(s->service_accounts[0]), ElementsAre("create events", "get nodes", "get pods", "list pods",
                                                             "patch events", "patch nodes", "watch pods"));
}

TEST(ExpectedSetupTest, UnknownModeAndBrokenTreesAreNamed) {
  auto unknown = ExpectedSetupOf("extendr");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown mode 'extendr' (known: scheduler, extender, agent)"));

  const DeployFile missing[] = {{"deploy/agent/kustomization.yaml", "resources:\n- ../base/agent\n- extra.yaml\n"},
                                {"deploy/base/agent/kustomization.yaml", "resources:\n- agent.yaml\n"},
                                {"deploy/base/agent/agent.yaml", "kind: ServiceAccount\nmetadata: {name: a}\n"}};
  auto s = ExpectedSetupOf("agent", missing);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("deploy/agent/kustomization.yaml: resource extra.yaml"));

  const DeployFile bad_yaml[] = {{"deploy/agent/kustomization.yaml", "resources: [../base/agent\n"}};
  s = ExpectedSetupOf("agent", bad_yaml);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("deploy/agent/kustomization.yaml"));
}

TEST(ExpectedSetupTest, RoleBindingsHoldInTheirNamespaceAndUnknownRolesAreSkipped) {
  const DeployFile files[] = {{"deploy/agent/kustomization.yaml", "resources: [rbac.yaml]\n"},
                              {"deploy/agent/rbac.yaml", R"(kind: ServiceAccount
metadata: {name: sa, namespace: ns1}
---
kind: ClusterRole
metadata: {name: reader}
rules:
- {apiGroups: ["", apps], resources: [pods, deployments/scale], verbs: [get]}
---
kind: RoleBinding
metadata: {name: b, namespace: ns2}
roleRef: {kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns1}]
---
kind: ClusterRoleBinding
metadata: {name: c}
roleRef: {kind: ClusterRole, name: system:kube-scheduler}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns1}]
)"}};
  auto s = ExpectedSetupOf("agent", files);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->service_accounts.size(), 1u);
  EXPECT_THAT(Described(s->service_accounts[0]),
              ElementsAre("get deployments/scale in ns2", "get pods in ns2", "get deployments.apps/scale in ns2",
                          "get pods.apps in ns2"));
}

}  // namespace
}  // namespace gpusched::doctor
