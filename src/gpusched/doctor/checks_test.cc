#include "gpusched/doctor/checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpusched/doctor/certificate_test_util.h"

namespace gpusched::doctor {
namespace {

using nlohmann::json;
using std::chrono::hours;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const Clock::time_point kNow = Clock::from_time_t(1'750'000'000);  // 2025-06-15T15:06:40Z

std::string Line(const Finding& f) { return FormatLine(f); }

TEST(CheckApiServerTest, VersionOrTheCauseWithTheUrl) {
  EXPECT_EQ(Line(CheckApiServer("https://k:6443", json{{"gitVersion", "v1.20.2"}})),
            "ok    api-server: reachable at https://k:6443, Kubernetes v1.20.2");
  EXPECT_EQ(
      Line(CheckApiServer("https://127.0.0.1:9", common::Unavailable("GET /version: Couldn't connect to server"))),
      "FAIL  api-server: cannot reach the API server at https://127.0.0.1:9: Couldn't connect to server; fix: "
      "check the server URL of the kubeconfig (--kubeconfig, --context), that kube-apiserver runs, and that "
      "this machine can reach it");
  EXPECT_THAT(Line(CheckApiServer("https://k", common::DeadlineExceeded("GET /version: Timeout was reached"))),
              StartsWith("FAIL  api-server: cannot reach the API server at https://k: Timeout was reached;"));
  EXPECT_THAT(Line(CheckApiServer("https://k", common::Unauthenticated("GET /version: HTTP 401 Unauthorized"))),
              StartsWith("FAIL  api-server: the API server at https://k refused the credentials: HTTP 401"));
  EXPECT_THAT(
      Line(CheckApiServer("https://k", common::Unavailable("GET /version: HTTP 503 Service Unavailable"))),
      StartsWith("FAIL  api-server: the API server at https://k answered GET /version with an error: HTTP 503"));
}

const ObjectRef kCrd{.kind = "CustomResourceDefinition",
                     .name = "gpuqueues.gpusched.io",
                     .file = "deploy/base/scheduler/gpuqueue-crd.yaml"};

json Crd(const std::string& established) {
  return {{"spec", {{"versions", json::array({{{"name", "v1alpha1"}, {"served", true}}})}}},
          {"status",
           {{"conditions", json::array({{{"type", "NamesAccepted"}, {"status", "True"}},
                                        {{"type", "Established"},
                                         {"status", established},
                                         {"reason", "Installing"},
                                         {"message", "the initial names have not been accepted"}}})}}}};
}

TEST(CheckCrdTest, Findings) {
  EXPECT_EQ(Line(CheckCrd(kCrd, Crd("True"), "scheduler")),
            "ok    crd: gpuqueues.gpusched.io present and Established (served: v1alpha1)");
  EXPECT_EQ(Line(CheckCrd(kCrd, common::NotFound("GET ...: HTTP 404"), "scheduler")),
            "FAIL  crd: gpuqueues.gpusched.io not found; fix: install it: kubectl apply -k deploy/scheduler (it is in "
            "deploy/base/scheduler/gpuqueue-crd.yaml)");
  EXPECT_EQ(Line(CheckCrd(kCrd, Crd("False"), "scheduler")),
            "FAIL  crd: gpuqueues.gpusched.io present but not Established: Installing: the initial names have not "
            "been accepted; fix: kubectl describe crd gpuqueues.gpusched.io says why (a NamesAccepted=False condition "
            "names a conflict); then reapply deploy/base/scheduler/gpuqueue-crd.yaml");
  const Finding denied = CheckCrd(kCrd, common::PermissionDenied("GET ...: HTTP 403 Forbidden: nope"), "scheduler");
  EXPECT_EQ(denied.severity, Severity::kWarn);
  EXPECT_THAT(Line(denied), StartsWith("warn  crd: could not check gpuqueues.gpusched.io: GET ...: HTTP 403"));
}

const ObjectRef kMutating{
    .kind = "MutatingWebhookConfiguration", .name = "gpusched-webhook", .file = "deploy/base/webhook/webhook.yaml"};

json WebhookConfig(const std::vector<std::string>& bundles) {
  json hooks = json::array();
  int i = 0;
  for (const auto& b : bundles) {
    json client = {{"url", "https://127.0.0.1:1/mutate"}};
    if (!b.empty()) {
      client["caBundle"] = b;
    }
    hooks.push_back(
        {{"name", "w" + std::to_string(i++) + ".gpusched.io"}, {"failurePolicy", "Fail"}, {"clientConfig", client}});
  }
  return {{"webhooks", hooks}};
}

std::string Bundle(Clock::time_point nb, Clock::time_point na) {
  return testutil::Base64(testutil::SelfSignedPem("gpusched-ca", nb, na));
}

TEST(CheckWebhookConfigurationTest, PresentWithAValidCaBundle) {
  const auto f = CheckWebhookConfiguration(kMutating, WebhookConfig({Bundle(kNow - hours(1), kNow + hours(24 * 365))}),
                                           kNow, "scheduler");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(Line(f[0]),
            "ok    webhook-config: MutatingWebhookConfiguration gpusched-webhook present with 1 webhook: "
            "w0.gpusched.io (failurePolicy Fail)");
  // 1,750,000,000 s + 365 days = 1,781,536,000 s = 2026-06-15T15:06:40Z
  EXPECT_EQ(Line(f[1]),
            "ok    webhook-ca: MutatingWebhookConfiguration gpusched-webhook: caBundle set in 1 webhook (1 distinct "
            "bundle, 1 certificate), valid until 2026-06-15T15:06:40Z");
}

TEST(CheckWebhookConfigurationTest, MissingExpiredNotYetValidAndSoon) {
  const std::string valid = Bundle(kNow - hours(1), kNow + hours(24 * 365));
  struct Case {
    const char* name;
    Fetched object;
    Severity config, ca;
    std::string want;  // in the last line
  } cases[] = {
      {"no caBundle in the second webhook", WebhookConfig({valid, ""}), Severity::kOk, Severity::kFail,
       "FAIL  webhook-ca: MutatingWebhookConfiguration gpusched-webhook: no caBundle in webhook w1.gpusched.io; fix: "
       "by default the webhook patches caBundle itself once it runs"},
      // expired 2 days ago
      {"expired", WebhookConfig({Bundle(kNow - hours(24 * 400), kNow - hours(48))}), Severity::kOk, Severity::kFail,
       "has certificate CN=gpusched-ca that expired 2025-06-13T15:06:40Z (2d ago); fix: renew the webhook's CA"},
      {"not yet valid", WebhookConfig({Bundle(kNow + hours(2), kNow + hours(48))}), Severity::kOk, Severity::kFail,
       "that is not valid before 2025-06-15T17:06:40Z"},
      {"expires in 10 days", WebhookConfig({Bundle(kNow - hours(1), kNow + hours(240))}), Severity::kOk,
       Severity::kWarn,
       "the caBundle of w0.gpusched.io has certificate CN=gpusched-ca that expires 2025-06-25T15:06:40Z, in 10d; fix: "
       "renew"},
      {"not base64", WebhookConfig({"%%%"}), Severity::kOk, Severity::kFail,
       "the caBundle of w0.gpusched.io is not base64"},
      {"not a certificate", WebhookConfig({testutil::Base64("hello")}), Severity::kOk, Severity::kFail,
       "holds no usable certificate: no PEM certificate in it"},
  };
  for (const Case& c : cases) {
    const auto f = CheckWebhookConfiguration(kMutating, c.object, kNow, "scheduler");
    ASSERT_EQ(f.size(), 2u) << c.name;
    EXPECT_EQ(f[0].severity, c.config) << c.name;
    EXPECT_EQ(f[1].severity, c.ca) << c.name;
    EXPECT_EQ(f[1].check, "webhook-ca") << c.name;
    EXPECT_THAT(Line(f[1]), HasSubstr(c.want)) << c.name;
  }
}

TEST(CheckWebhookConfigurationTest, OneBundleInSeveralWebhooksIsNamedOnce) {
  const std::string expired = Bundle(kNow - hours(24 * 400), kNow - hours(48));
  const auto f = CheckWebhookConfiguration(kMutating, WebhookConfig({expired, expired}), kNow, "scheduler");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_THAT(Line(f[1]), StartsWith("FAIL  webhook-ca: MutatingWebhookConfiguration gpusched-webhook: the caBundle "
                                     "of w0.gpusched.io, w1.gpusched.io has certificate CN=gpusched-ca that expired "
                                     "2025-06-13T15:06:40Z (2d ago); fix: "));
}

TEST(CheckWebhookConfigurationTest, SharedValidBundleIsCountedOnce) {
  const std::string valid = Bundle(kNow - hours(1), kNow + hours(24 * 365));
  const auto f = CheckWebhookConfiguration(kMutating, WebhookConfig({valid, valid, valid}), kNow, "scheduler");
  ASSERT_EQ(f.size(), 2u);
  EXPECT_THAT(Line(f[1]), HasSubstr("caBundle set in 3 webhooks (1 distinct bundle, 1 certificate), valid until"));
}

TEST(CheckWebhookConfigurationTest, NotFound) {
  const auto f = CheckWebhookConfiguration(kMutating, common::NotFound("404"), kNow, "extender");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(
      Line(f[0]),
      "FAIL  webhook-config: MutatingWebhookConfiguration gpusched-webhook not found: the API server calls no "
      "gpusched webhook for it; fix: kubectl apply -k deploy/extender (it is in deploy/base/webhook/webhook.yaml), "
      "then give it the webhook's CA as caBundle (docs/webhook.md)");
}

TEST(CheckDryRunTest, Findings) {
  json completed = DryRunPod("team-a");
  EXPECT_EQ(completed["metadata"]["namespace"], "team-a");
  EXPECT_EQ(completed["spec"]["containers"][0]["resources"]["limits"]["gpusched.io/gpu-memory"], "1024");
  EXPECT_EQ(Line(CheckDryRun("team-a", completed)),
            "FAIL  webhook-dry-run: a dry-run GPU pod in namespace team-a was admitted without gpusched.io/gpu: the "
            "mutating webhook was not called, or failed under failurePolicy Ignore; fix: check that the webhook runs "
            "(kubectl -n kube-system get pods,endpoints -l app.kubernetes.io/name=gpusched-webhook) and that its "
            "namespaceSelector selects team-a; with failurePolicy Ignore the API server hides the error (its log has "
            "it)");
  completed["spec"]["containers"][0]["resources"]["limits"]["gpusched.io/gpu"] = "1";
  EXPECT_EQ(Line(CheckDryRun("team-a", completed)),
            "ok    webhook-dry-run: a dry-run GPU pod in namespace team-a passed admission, and the mutating webhook "
            "added gpusched.io/gpu");

  const std::string refused =
      "POST /api/v1/namespaces/default/pods: HTTP 500 Internal Server Error: Internal error occurred: failed calling "
      "webhook \"complete.gpu.gpusched.io\": Post \"https://127.0.0.1:1/mutate\": dial tcp 127.0.0.1:1: connect: "
      "connection refused";
  EXPECT_EQ(Line(CheckDryRun("default", common::Internal(refused))),
            "FAIL  webhook-dry-run: the API server could not call the webhook for a dry-run GPU pod in namespace "
            "default: " +
                refused +
                "; fix: check that the webhook runs and its Service has endpoints (kubectl -n "
                "kube-system get pods,endpoints -l app.kubernetes.io/name=gpusched-webhook) and its log");
  EXPECT_THAT(Line(CheckDryRun("default", common::Internal("failed calling webhook \"x\": x509: certificate signed by "
                                                           "unknown authority"))),
              HasSubstr("fix: caBundle does not match the webhook's serving certificate"));
  EXPECT_THAT(Line(CheckDryRun("default", common::PermissionDenied("admission webhook \"requests.gpu.gpusched.io\" "
                                                                   "denied the request: no"))),
              StartsWith("FAIL  webhook-dry-run: a webhook refused a dry-run GPU pod (1024 MiB of GPU memory)"));
  const Finding rbac =
      CheckDryRun("default", common::PermissionDenied("pods is forbidden: User \"bob\" cannot create"));
  EXPECT_EQ(rbac.severity, Severity::kWarn);
  EXPECT_THAT(rbac.fix, HasSubstr("give --namespace one where you may"));
  EXPECT_EQ(CheckDryRun("nope", common::NotFound("namespaces \"nope\" not found")).severity, Severity::kWarn);
}

json Node(const std::string& name, bool inventory, json allocatable, json labels = json::object()) {
  json annotations = json::object();
  if (inventory) {
    annotations["gpusched.io/gpus"] =
        R"([{"uuid":"GPU-)" + name + R"(-0","index":0,"model":"A100","memory_mib":81920}])";
  }
  return {{"metadata", {{"name", name}, {"labels", labels}, {"annotations", annotations}}},
          {"status", {{"allocatable", allocatable}}}};
}

const json kAgentRes = {{"cpu", "32"}, {"gpusched.io/gpu", "10"}, {"keti.com/mpsgpu", "10"}};

TEST(CheckNodesTest, EveryGpuNodeWithInventoryAndDevicePlugin) {
  const json nodes = {{"items", json::array({Node("g1", true, kAgentRes), Node("g2", true, kAgentRes),
                                             Node("cpu1", false, {{"cpu", "8"}})})}};
  const auto f = CheckNodes(nodes);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(Line(f[0]), "ok    node-inventory: 2 of 2 GPU nodes carry gpusched.io/gpus (2 GPUs); 1 node without GPUs");
  EXPECT_EQ(Line(f[1]),
            "ok    device-plugin: 2 nodes advertise gpusched.io/gpu and keti.com/mpsgpu (20 gpusched.io/gpu devices)");
}

TEST(CheckNodesTest, GpuNodesWithoutInventoryAndWithoutResources) {
  json broken = Node("g3", true, kAgentRes);
  broken["metadata"]["annotations"]["gpusched.io/gpus"] = "[{]";
  const json nodes = {
      {"items", json::array({Node("g1", true, {{"keti.com/mpsgpu", "10"}}),
                             Node("g2", false, {{"nvidia.com/gpu", "8"}}),  // a GPU node by its allocatable
                             Node("g4", false, json::object(), {{"gpusched.io/gpu-node", "true"}}),  // by its label
                             broken, Node("cpu1", false, {{"cpu", "8"}})})}};
  const auto f = CheckNodes(nodes);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].severity, Severity::kFail);
  EXPECT_THAT(Line(f[0]), StartsWith("FAIL  node-inventory: 1 of 4 GPU nodes carry gpusched.io/gpus; without: g2, g4; "
                                     "not decodable: g3 ("));
  EXPECT_THAT(f[0].fix, HasSubstr("the agent writes it"));
  EXPECT_THAT(Line(f[1]),
              StartsWith("FAIL  device-plugin: g1 advertises no gpusched.io/gpu in status.allocatable; fix: "
                         "the agent's device plugin registers them with the kubelet"));
}

TEST(CheckNodesTest, NoGpuNodesOrNoAccess) {
  const auto none = CheckNodes(json{{"items", json::array({Node("cpu1", false, {{"cpu", "8"}})})}});
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(Line(none[0]).substr(0, 80),
            "warn  node-inventory: no node carries gpusched.io/gpus and none looks like a GPU");
  EXPECT_EQ(none[1].severity, Severity::kWarn);
  const auto denied = CheckNodes(common::PermissionDenied("nodes is forbidden"));
  ASSERT_EQ(denied.size(), 1u);
  EXPECT_THAT(Line(denied[0]),
              StartsWith("warn  node-inventory: could not check the nodes: nodes is forbidden; fix: "));
}

const AgentRef kAgent{.namespace_ = "kube-system",
                      .label_selector = "app.kubernetes.io/name=gpusched-agent",
                      .readiness_path = "/readyz",
                      .port = 9400,
                      .file = "deploy/base/agent/agent.yaml"};

json AgentPod(const std::string& name, const std::string& node, const std::string& phase = "Running") {
  return {{"metadata", {{"name", name}}}, {"spec", {{"nodeName", node}}}, {"status", {{"phase", phase}}}};
}

const json kAllowed = {{"status", {{"allowed", true}}}};

TEST(CheckAgentReadinessTest, Findings) {
  using Readyz = std::map<std::string, common::Result<adapters::k8s::RawResponse>>;
  const json pods = {{"items", json::array({AgentPod("a1", "g1"), AgentPod("a2", "g2")})}};
  Readyz ok{{"a1", adapters::k8s::RawResponse{200, "ok\n"}}, {"a2", adapters::k8s::RawResponse{200, "ok\n"}}};
  EXPECT_EQ(
      Line(CheckAgentReadiness(kAgent, kAllowed, pods, ok)),
      "ok    agent-readiness: 2 of 2 agents ready (/readyz ok: GPUs sampled, device plugin registered, MPS daemon "
      "answering where used)");

  Readyz mps = ok;
  mps.insert_or_assign("a2", adapters::k8s::RawResponse{503, "MPS control daemon not answering: no pipe\n"});
  EXPECT_THAT(Line(CheckAgentReadiness(kAgent, kAllowed, pods, mps)),
              StartsWith("FAIL  agent-readiness: 1 of 2 agents report the MPS daemon: a2 on g2: HTTP 503 MPS control "
                         "daemon not answering: no pipe; fix: the MPS control daemon runs in its own DaemonSet"));

  Readyz plugin = ok;
  plugin.insert_or_assign("a1", adapters::k8s::RawResponse{503, "device plugin not registered with the kubelet: x"});
  EXPECT_THAT(Line(CheckAgentReadiness(kAgent, kAllowed, pods, plugin)),
              StartsWith("FAIL  agent-readiness: 1 of 2 agents not ready: a1 on g1: HTTP 503 device plugin not"));

  const json pending = {{"items", json::array({AgentPod("a1", "g1"), AgentPod("a3", "g3", "Pending")})}};
  EXPECT_THAT(Line(CheckAgentReadiness(kAgent, kAllowed, pending, ok)),
              HasSubstr("1 of 2 agents not ready: a3 on g3 is Pending"));

  Readyz proxy = ok;
  proxy.insert_or_assign(
      "a2", adapters::k8s::RawResponse{503, R"({"kind":"Status","message":"error trying to reach service: refused"})"});
  const Finding unreachable = CheckAgentReadiness(kAgent, kAllowed, pods, proxy);
  EXPECT_EQ(unreachable.severity, Severity::kWarn);
  EXPECT_THAT(unreachable.finding, HasSubstr("a2 on g2: error trying to reach service: refused"));

  const Finding denied = CheckAgentReadiness(kAgent, json{{"status", {{"allowed", false}}}}, json::object(), {});
  EXPECT_EQ(Line(denied),
            "warn  agent-readiness: not checked: you may not get pods/proxy in kube-system, so the agents' /readyz "
            "(MPS daemon state) cannot be read through the API server; fix: run gpusched doctor as a user who may get "
            "pods/proxy in kube-system, or curl http://<node>:9400/readyz on each node");
  EXPECT_EQ(CheckAgentReadiness(kAgent, kAllowed, json{{"items", json::array()}}, {}).severity, Severity::kWarn);
}

const LeaseRef kLease{.namespace_ = "kube-system",
                      .name = "gpusched-scheduler",
                      .duration_seconds = 15,
                      .file = "deploy/base/scheduler/scheduler.yaml"};

json Lease(const std::string& holder, const std::string& renew) {
  return {{"spec", {{"holderIdentity", holder}, {"leaseDurationSeconds", 15}, {"renewTime", renew}}}};
}

TEST(CheckLeaseTest, Findings) {
  // kNow = 2025-06-15T15:06:40Z
  EXPECT_EQ(Line(CheckLease(kLease, Lease("s-1", "2025-06-15T15:06:37.000000Z"), kNow)),
            "ok    leader-lease: Lease kube-system/gpusched-scheduler held by s-1, renewed 3s ago (duration 15s)");
  EXPECT_THAT(Line(CheckLease(kLease, Lease("s-1", "2025-06-15T15:04:40.000000Z"), kNow)),
              StartsWith("FAIL  leader-lease: Lease kube-system/gpusched-scheduler held by s-1 was last renewed 2m "
                         "ago, past its 15s duration: the leader stopped renewing and no replica took over; fix: check "
                         "the gpusched-scheduler pods in kube-system"));
  EXPECT_THAT(Line(CheckLease(kLease, Lease("", "2025-06-15T15:06:37Z"), kNow)), HasSubstr("is held by nobody"));
  EXPECT_THAT(Line(CheckLease(kLease, common::NotFound("404"), kNow)),
              StartsWith("FAIL  leader-lease: Lease kube-system/gpusched-scheduler not found"));
  EXPECT_THAT(Line(CheckLease(kLease, Lease("s-1", "yesterday"), kNow)), HasSubstr("renewTime that does not parse"));
}

ServiceAccountGrants Sa() {
  return {
      .namespace_ = "kube-system",
      .name = "gpusched-scheduler",
      .file = "deploy/base/scheduler/scheduler.yaml",
      .grants = {
          {.verb = "create", .resource = "pods", .subresource = "eviction", .role = "ClusterRole gpusched-scheduler"},
          {.verb = "get",
           .group = "coordination.k8s.io",
           .resource = "leases",
           .name = "gpusched-scheduler",
           .namespace_ = "kube-system",
           .role = "Role kube-system/gpusched-scheduler-leader"}}};
}

TEST(CheckRbacTest, SubjectAccessReviewNamesUserGroupsAndAttributes) {
  const json r = SubjectAccessReviewFor(Sa(), Sa().grants[1]);
  EXPECT_EQ(r["kind"], "SubjectAccessReview");
  EXPECT_EQ(r["spec"]["user"], "system:serviceaccount:kube-system:gpusched-scheduler");
  EXPECT_EQ(r["spec"]["groups"][1], "system:serviceaccounts:kube-system");
  EXPECT_EQ(r["spec"]["resourceAttributes"], (json{{"verb", "get"},
                                                   {"group", "coordination.k8s.io"},
                                                   {"resource", "leases"},
                                                   {"name", "gpusched-scheduler"},
                                                   {"namespace", "kube-system"}}));
  EXPECT_EQ(SubjectAccessReviewFor(Sa(), Sa().grants[0])["spec"]["resourceAttributes"]["subresource"], "eviction");
}

TEST(CheckRbacTest, Findings) {
  const json yes = {{"status", {{"allowed", true}}}};
  const json no = {{"status", {{"allowed", false}}}};
  EXPECT_EQ(Line(CheckRbac(Sa(), {yes, yes}, "scheduler")),
            "ok    rbac: system:serviceaccount:kube-system:gpusched-scheduler: all 2 grants of "
            "deploy/base/scheduler/scheduler.yaml allowed");
  EXPECT_EQ(Line(CheckRbac(Sa(), {no, yes}, "scheduler")),
            "FAIL  rbac: system:serviceaccount:kube-system:gpusched-scheduler: 1 of 2 grants refused: create "
            "pods/eviction; fix: reapply its roles and bindings (ClusterRole gpusched-scheduler): kubectl apply -k "
            "deploy/scheduler (they are in deploy/base/scheduler/scheduler.yaml)");
  const Finding denied = CheckRbac(Sa(), {common::PermissionDenied("subjectaccessreviews is forbidden")}, "scheduler");
  EXPECT_EQ(denied.severity, Severity::kWarn);
  EXPECT_THAT(denied.finding, HasSubstr("a SubjectAccessReview (create pods/eviction) failed"));
}

TEST(FormatAgeTest, Units) {
  EXPECT_EQ(FormatAge(seconds(-3)), "0s");
  EXPECT_EQ(FormatAge(seconds(59)), "59s");
  EXPECT_EQ(FormatAge(seconds(250)), "4m10s");
  EXPECT_EQ(FormatAge(seconds(7500)), "2h5m");
  EXPECT_EQ(FormatAge(hours(76)), "3d4h");
}

}  // namespace
}  // namespace gpusched::doctor
