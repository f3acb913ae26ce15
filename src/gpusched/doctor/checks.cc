#include "gpusched/doctor/checks.h"

#include <algorithm>
#include <utility>

#include "gpusched/adapters/k8s/exec_credential.h"
#include "gpusched/doctor/certificate.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/base64.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/quantity.h"
#include "gpusched/kube/resources.h"

namespace gpusched::doctor {
namespace {

using nlohmann::json;

const std::string kGpuRes(kube::kResGpu);
const std::string kMpsRes(kube::kResKetiMps);
const std::string kNvidiaRes(kube::kResNvidiaGpu);
const std::string kInventory(kube::kAnnotationGpus);
constexpr int64_t kProbeGpuMemoryMib = 1024;
constexpr size_t kNamesShown = 5;

// The node labels the agent's DaemonSet selects GPU nodes by (deploy/base/agent/agent.yaml's nodeAffinity).
constexpr std::string_view kGpuNodeLabels[] = {"feature.node.kubernetes.io/pci-10de.present", "nvidia.com/gpu.present",
                                               "gpusched.io/gpu-node"};

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& At(const json& j, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object()) {
      return kNull;
    }
    auto it = cur->find(key);
    if (it == cur->end()) {
      return kNull;
    }
    cur = &*it;
  }
  return *cur;
}

std::string Names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kNamesShown; ++i) {
    out += (i == 0 ? "" : ", ") + names[i];
  }
  if (names.size() > kNamesShown) {
    out += " and " + std::to_string(names.size() - kNamesShown) + " more";
  }
  return out;
}

std::string Plural(size_t n, const std::string& word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }

// A fetch doctor could not make for a reason that says nothing about the setup (permissions, a timeout).
Finding CouldNotCheck(std::string_view check, const std::string& what, const common::Status& s) {
  if (s.code() == common::StatusCode::kPermissionDenied) {
    return Warn(std::string(check), "could not check " + what + ": " + s.message(),
                "run gpusched doctor as a user who may read it (cluster-admin, or add the verb to your role)");
  }
  return Warn(std::string(check), "could not check " + what + ": " + s.message(),
              "run gpusched doctor again; if it persists, check the API server's health (kubectl get --raw "
              "'/readyz?verbose')");
}

int64_t Quantity(const json& resources, const std::string& name) {
  const std::string v = Str(resources, name.c_str());
  if (v.empty()) {
    return 0;
  }
  auto q = kube::ParseQuantity(v);
  return q.ok() ? *q : 0;
}

std::string Reapply(std::string_view mode, const std::string& file) {
  return "kubectl apply -k deploy/" + std::string(mode) + " (it is in " + file + ")";
}

}  // namespace

std::string FormatAge(Clock::duration d) {
  int64_t s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
  if (s < 0) {
    s = 0;
  }
  if (s < 60) {
    return std::to_string(s) + "s";
  }
  if (s < 3600) {
    return std::to_string(s / 60) + "m" + (s % 60 ? std::to_string(s % 60) + "s" : "");
  }
  if (s < 86400) {
    return std::to_string(s / 3600) + "h" + (s % 3600 / 60 ? std::to_string(s % 3600 / 60) + "m" : "");
  }
  return std::to_string(s / 86400) + "d" + (s % 86400 / 3600 ? std::to_string(s % 86400 / 3600) + "h" : "");
}

Finding CheckApiServer(std::string_view url, const Fetched& version) {
  const std::string check(kCheckApiServer);
  const std::string where(url);
  if (version.ok()) {
    const std::string v = Str(*version, "gitVersion");
    return Ok(check, "reachable at " + where + ", Kubernetes " + (v.empty() ? "(version not reported)" : v));
  }
  const common::Status& s = version.status();
  std::string cause = s.message();
  if (cause.rfind("GET /version: ", 0) == 0) {
    cause = cause.substr(14);
  }
  const bool transport =
      (s.code() == common::StatusCode::kUnavailable || s.code() == common::StatusCode::kDeadlineExceeded) &&
      cause.rfind("HTTP ", 0) != 0;
  if (transport) {
    return Fail(check, "cannot reach the API server at " + where + ": " + cause,
                "check the server URL of the kubeconfig (--kubeconfig, --context), that kube-apiserver runs, and "
                "that this machine can reach it");
  }
  if (s.code() == common::StatusCode::kUnauthenticated || s.code() == common::StatusCode::kPermissionDenied) {
    return Fail(check, "the API server at " + where + " refused the credentials: " + cause,
                "renew the credentials of the kubeconfig's user (--kubeconfig, --context)");
  }
  return Fail(check, "the API server at " + where + " answered GET /version with an error: " + cause,
              "check kube-apiserver's health (kubectl get --raw '/readyz?verbose') and its log");
}

Finding CheckCrd(const ObjectRef& crd, const Fetched& object, std::string_view mode) {
  const std::string check(kCheckCrd);
  if (!object.ok()) {
    if (object.status().code() == common::StatusCode::kNotFound) {
      return Fail(check, crd.name + " not found", "install it: " + Reapply(mode, crd.file));
    }
    return CouldNotCheck(check, crd.name, object.status());
  }
  std::string versions;
  for (const json& v : At(*object, {"spec", "versions"})) {
    if (v.is_object() && v.value("served", false)) {
      versions += (versions.empty() ? "" : ", ") + Str(v, "name");
    }
  }
  for (const json& c : At(*object, {"status", "conditions"})) {
    if (Str(c, "type") != "Established") {
      continue;
    }
    if (Str(c, "status") == "True") {
      return Ok(check, crd.name + " present and Established (served: " + (versions.empty() ? "none" : versions) + ")");
    }
    return Fail(check,
                crd.name + " present but not Established: " + Str(c, "reason") +
                    (Str(c, "message").empty() ? "" : ": " + Str(c, "message")),
                "kubectl describe crd " + crd.name +
                    " says why (a NamesAccepted=False condition names a conflict); "
                    "then reapply " +
                    crd.file);
  }
  return Fail(check, crd.name + " present but not Established (no Established condition yet)",
              "wait a few seconds and run doctor again; if it stays, kubectl describe crd " + crd.name + " says why");
}

std::vector<Finding> CheckWebhookConfiguration(const ObjectRef& config, const Fetched& object, Clock::time_point now,
                                               std::string_view mode) {
  const std::string what = config.kind + " " + config.name;
  if (!object.ok()) {
    if (object.status().code() == common::StatusCode::kNotFound) {
      return {Fail(std::string(kCheckWebhookConfig),
                   what + " not found: the API server calls no gpusched webhook for it",
                   Reapply(mode, config.file) + ", then give it the webhook's CA as caBundle (docs/webhook.md)")};
    }
    return {CouldNotCheck(kCheckWebhookConfig, what, object.status())};
  }
  const json& hooks = At(*object, {"webhooks"});
  if (!hooks.is_array() || hooks.empty()) {
    return {Fail(std::string(kCheckWebhookConfig), what + " has no webhooks", Reapply(mode, config.file))};
  }
  std::string listed;
  std::vector<std::string> no_ca;
  // What was found, each with the webhooks it was found in: the configurations' webhooks usually share one bundle.
  std::vector<std::pair<std::string, std::vector<std::string>>> problems, soon;
  auto note = [](std::vector<std::pair<std::string, std::vector<std::string>>>& list, std::string text,
                 const std::string& hook) {
    for (auto& [t, hook_names] : list) {
      if (t == text) {
        hook_names.push_back(hook);
        return;
      }
    }
    list.push_back({std::move(text), {hook}});
  };
  size_t certs = 0;  // in the distinct bundles
  std::vector<std::string> bundles;
  std::optional<Clock::time_point> earliest;
  for (const json& h : hooks) {
    const std::string name = Str(h, "name");
    const std::string policy = Str(h, "failurePolicy");
    listed += (listed.empty() ? "" : ", ") + name + " (failurePolicy " + (policy.empty() ? "Fail" : policy) + ")";
    const std::string bundle = Str(At(h, {"clientConfig"}), "caBundle");
    if (bundle.empty()) {
      no_ca.push_back(name);
      continue;
    }
    auto pem = kube::DecodeBase64(bundle);
    if (!pem.ok()) {
      note(problems, "is not base64: " + pem.status().message(), name);
      continue;
    }
    auto parsed = ParsePemCertificates(*pem);
    if (!parsed.ok()) {
      note(problems, "holds no usable certificate: " + parsed.status().message(), name);
      continue;
    }
    const bool seen = std::find(bundles.begin(), bundles.end(), bundle) != bundles.end();
    if (!seen) {
      bundles.push_back(bundle);
      certs += parsed->size();
    }
    for (const CertificateInfo& c : *parsed) {
      if (c.not_after <= now) {
        note(problems,
             "has certificate " + c.subject + " that expired " + FormatUtc(c.not_after) + " (" +
                 FormatAge(now - c.not_after) + " ago)",
             name);
      } else if (c.not_before > now) {
        note(problems,
             "has certificate " + c.subject + " that is not valid before " + FormatUtc(c.not_before) +
                 " (check the clocks here and on the control plane)",
             name);
      } else {
        if (c.not_after - now < kCertificateWarnBefore) {
          note(soon,
               "has certificate " + c.subject + " that expires " + FormatUtc(c.not_after) + ", in " +
                   FormatAge(c.not_after - now),
               name);
        }
        earliest = earliest ? std::min(*earliest, c.not_after) : c.not_after;
      }
    }
  }
  auto joined = [](const std::vector<std::pair<std::string, std::vector<std::string>>>& list) {
    std::string text;
    for (const auto& [found, hook_names] : list) {
      text += (text.empty() ? "" : ", and ") + ("the caBundle of " + Names(hook_names) + " " + found);
    }
    return text;
  };
  std::vector<Finding> out{
      Ok(std::string(kCheckWebhookConfig), what + " present with " + Plural(hooks.size(), "webhook") + ": " + listed)};
  const std::string renew =
      "renew the webhook's CA and serving certificate and put the CA in caBundle: by default the webhook does it "
      "itself (check its log and the Secret gpusched-webhook-ca in kube-system); with cert-manager, let it renew "
      "them (docs/webhook.md)";
  if (!no_ca.empty()) {
    out.push_back(Fail(std::string(kCheckWebhookCa), what + ": no caBundle in webhook " + Names(no_ca),
                       "by default the webhook patches caBundle itself once it runs (check that it runs and its log: "
                       "kubectl -n kube-system logs deploy/gpusched-webhook); with cert-manager, its CA injector "
                       "(annotation cert-manager.io/inject-ca-from) does (docs/webhook.md)"));
  } else if (!problems.empty()) {
    out.push_back(Fail(std::string(kCheckWebhookCa), what + ": " + joined(problems), renew));
  } else if (!soon.empty()) {
    out.push_back(Warn(std::string(kCheckWebhookCa), what + ": " + joined(soon), renew + " before then"));
  } else {
    out.push_back(Ok(std::string(kCheckWebhookCa), what + ": caBundle set in " + Plural(hooks.size(), "webhook") +
                                                       " (" + Plural(bundles.size(), "distinct bundle") + ", " +
                                                       Plural(certs, "certificate") + "), valid until " +
                                                       FormatUtc(earliest.value_or(now))));
  }
  return out;
}

json DryRunPod(std::string_view ns) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"generateName", "gpusched-doctor-probe-"},  // never clashes with a pod of that name
        {"namespace", std::string(ns)},
        {"labels", {{"app.kubernetes.io/name", "gpusched-doctor"}}}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"automountServiceAccountToken", false},  // never runs: it needs no token
        {"containers",
         json::array({{{"name", "probe"},
                       {"image", "gpusched-doctor-probe"},
                       {"resources",
                        {{"limits", {{std::string(kube::kResGpuMemory), std::to_string(kProbeGpuMemoryMib)}}}}}}})}}}};
}

Finding CheckDryRun(std::string_view ns, const Fetched& created) {
  const std::string check(kCheckWebhookDryRun);
  const std::string where = "namespace " + std::string(ns);
  const std::string pods = "kubectl -n kube-system get pods,endpoints -l app.kubernetes.io/name=gpusched-webhook";
  if (!created.ok()) {
    const common::Status& s = created.status();
    const std::string& m = s.message();
    if (m.find("failed calling webhook") != std::string::npos) {
      return Fail(check, "the API server could not call the webhook for a dry-run GPU pod in " + where + ": " + m,
                  m.find("x509") != std::string::npos
                      ? "caBundle does not match the webhook's serving certificate: restart the webhook, which "
                        "re-issues its certificate and patches caBundle (or, with cert-manager, renew them "
                        "together: docs/webhook.md)"
                      : "check that the webhook runs and its Service has endpoints (" + pods + ") and its log");
    }
    if (m.find("admission webhook") != std::string::npos && m.find("denied") != std::string::npos) {
      return Fail(check,
                  "a webhook refused a dry-run GPU pod (" + std::to_string(kProbeGpuMemoryMib) +
                      " MiB of GPU memory) in " + where + ": " + m,
                  "such a pod should be admitted: check the webhook's configuration and log (docs/webhook.md)");
    }
    if (s.code() == common::StatusCode::kPermissionDenied) {
      return Warn(check, "could not check: " + m,
                  "run gpusched doctor as a user who may create pods in " + std::string(ns) +
                      ", or give --namespace one where you may (a dry run stores nothing)");
    }
    if (s.code() == common::StatusCode::kNotFound) {
      return Warn(check, "could not check: " + where + " not found",
                  "give --namespace an existing namespace where GPU pods run");
    }
    return Fail(check, "the API server refused a dry-run GPU pod in " + where + ": " + m,
                "check the API server's log and the webhook's (" + pods + ")");
  }
  bool completed = false;
  for (const json& c : At(*created, {"spec", "containers"})) {
    for (const char* field : {"limits", "requests"}) {
      if (!Str(At(c, {"resources", field}), kGpuRes.c_str()).empty()) {
        completed = true;
      }
    }
  }
  if (!completed) {
    return Fail(check,
                "a dry-run GPU pod in " + where + " was admitted without " + kGpuRes +
                    ": the mutating webhook was not called, or failed under failurePolicy Ignore",
                "check that the webhook runs (" + pods + ") and that its namespaceSelector selects " + std::string(ns) +
                    "; with failurePolicy Ignore the API server hides the error (its log has it)");
  }
  return Ok(check, "a dry-run GPU pod in " + where + " passed admission, and the mutating webhook added " + kGpuRes);
}

std::vector<Finding> CheckNodes(const Fetched& nodes) {
  if (!nodes.ok()) {
    return {CouldNotCheck(kCheckNodeInventory, "the nodes", nodes.status())};
  }
  std::vector<std::string> with, without, bad, no_gpu_res, no_mps_res;
  size_t others = 0, gpus = 0;
  int64_t devices = 0;
  for (const json& n : At(*nodes, {"items"})) {
    const std::string name = Str(At(n, {"metadata"}), "name");
    const json& annotations = At(n, {"metadata", "annotations"});
    const json& labels = At(n, {"metadata", "labels"});
    const json& allocatable = At(n, {"status", "allocatable"});
    const std::string inventory = Str(annotations, kInventory.c_str());
    const bool has_inventory = annotations.is_object() && annotations.contains(kInventory);
    bool gpu_node = has_inventory || Quantity(allocatable, kNvidiaRes) > 0;
    for (std::string_view l : kGpuNodeLabels) {
      gpu_node = gpu_node || Str(labels, std::string(l).c_str()) == "true";
    }
    if (!gpu_node) {
      ++others;
      continue;
    }
    if (!has_inventory) {
      without.push_back(name);
      continue;
    }
    auto decoded = kube::DecodeGpuInventory(inventory);
    if (!decoded.ok()) {
      bad.push_back(name + " (" + decoded.status().message() + ")");
      continue;
    }
    with.push_back(name);
    gpus += decoded->size();
    const int64_t gpu_devices = Quantity(allocatable, kGpuRes);
    devices += gpu_devices;
    if (gpu_devices <= 0) {
      no_gpu_res.push_back(name);
    }
    if (Quantity(allocatable, kMpsRes) <= 0) {
      no_mps_res.push_back(name);
    }
  }
  std::vector<Finding> out;
  const std::string check(kCheckNodeInventory);
  const size_t gpu_nodes = with.size() + without.size() + bad.size();
  const std::string agent_fix =
      "the agent writes it: check the gpusched-agent pods on those nodes and their logs (kubectl -n kube-system get "
      "pods -l app.kubernetes.io/name=gpusched-agent -o wide)";
  if (gpu_nodes == 0) {
    out.push_back(Warn(
        check, "no node carries " + kInventory + " and none looks like a GPU node (of " + Plural(others, "node") + ")",
        "label the GPU nodes (Node Feature Discovery, GPU Feature Discovery, or gpusched.io/gpu-node=true) "
        "so that the agent's DaemonSet runs there"));
  } else if (!without.empty() || !bad.empty()) {
    std::string finding = std::to_string(with.size()) + " of " + Plural(gpu_nodes, "GPU node") + " carry " + kInventory;
    if (!without.empty()) {
      finding += "; without: " + Names(without);
    }
    if (!bad.empty()) {
      finding += "; not decodable: " + Names(bad);
    }
    out.push_back(Fail(check, finding, agent_fix));
  } else {
    out.push_back(Ok(check, std::to_string(with.size()) + " of " + Plural(gpu_nodes, "GPU node") + " carry " +
                                kInventory + " (" + Plural(gpus, "GPU") + "); " + Plural(others, "node") +
                                " without GPUs"));
  }
  const std::string dp(kCheckDevicePlugin);
  if (with.empty()) {
    out.push_back(Warn(dp, "not checked: no node carries the agent's inventory",
                       "fix " + check + " first; the agent registers its device plugin on the nodes it runs on"));
  } else if (!no_gpu_res.empty() || !no_mps_res.empty()) {
    std::string finding;
    if (!no_gpu_res.empty()) {
      finding = Names(no_gpu_res) + (no_gpu_res.size() == 1 ? " advertises" : " advertise") + " no " + kGpuRes +
                " in status.allocatable";
    }
    if (!no_mps_res.empty()) {
      finding += (finding.empty() ? "" : ", and ") + Names(no_mps_res) + " no " + kMpsRes;
    }
    out.push_back(Fail(dp, finding,
                       "the agent's device plugin registers them with the kubelet: read the agent's /readyz and log on "
                       "those nodes, and check that it mounts the kubelet's device-plugin directory "
                       "(/var/lib/kubelet/device-plugins)"));
  } else {
    out.push_back(Ok(dp, Plural(with.size(), "node") + (with.size() == 1 ? " advertises " : " advertise ") + kGpuRes +
                             " and " + kMpsRes + " (" + std::to_string(devices) + " " + kGpuRes + " devices)"));
  }
  return out;
}

Finding CheckAgentReadiness(const AgentRef& agent, const Fetched& may_proxy, const Fetched& pods,
                            const std::map<std::string, common::Result<adapters::k8s::RawResponse>>& readyz) {
  const std::string check(kCheckAgentReadiness);
  const std::string direct =
      "curl http://<node>:" + std::to_string(agent.port) + agent.readiness_path + " on each node";
  if (!may_proxy.ok()) {
    return Warn(
        check,
        "could not check the agents' " + agent.readiness_path + " (MPS daemon state): " + may_proxy.status().message(),
        "run gpusched doctor as a user who may create selfsubjectaccessreviews and get pods/proxy in " +
            agent.namespace_ + ", or " + direct);
  }
  if (!At(*may_proxy, {"status", "allowed"}).is_boolean() || !At(*may_proxy, {"status", "allowed"}).get<bool>()) {
    return Warn(check,
                "not checked: you may not get pods/proxy in " + agent.namespace_ + ", so the agents' " +
                    agent.readiness_path + " (MPS daemon state) cannot be read through the API server",
                "run gpusched doctor as a user who may get pods/proxy in " + agent.namespace_ + ", or " + direct);
  }
  if (!pods.ok()) {
    return CouldNotCheck(check, "the agent pods", pods.status());
  }
  const json& items = At(*pods, {"items"});
  if (!items.is_array() || items.empty()) {
    return Warn(check, "no agent pods (" + agent.label_selector + ") in " + agent.namespace_,
                "install the agent (its DaemonSet is in " + agent.file +
                    ") and label the GPU nodes so that it runs there (docs/device-plugin.md)");
  }
  std::vector<std::string> mps, not_ready, unreachable;
  size_t ready = 0;
  for (const json& p : items) {
    const std::string name = Str(At(p, {"metadata"}), "name");
    const std::string node = Str(At(p, {"spec"}), "nodeName");
    const std::string who = name + (node.empty() ? "" : " on " + node);
    const std::string phase = Str(At(p, {"status"}), "phase");
    auto r = readyz.find(name);
    if (phase != "Running" || r == readyz.end()) {
      not_ready.push_back(who + " is " + (phase.empty() ? "not running" : phase));
      continue;
    }
    if (!r->second.ok()) {
      unreachable.push_back(who + ": " + r->second.status().message());
      continue;
    }
    const adapters::k8s::RawResponse& resp = *r->second;
    std::string body = resp.body;
    while (!body.empty() && (body.back() == '\n' || body.back() == ' ')) {
      body.pop_back();
    }
    if (resp.status == 200) {
      ++ready;
      continue;
    }
    // The API server's own error (it could not reach the pod) is a metav1.Status; the agent answers text.
    const json status = json::parse(body, nullptr, false);
    if (status.is_object() && Str(status, "kind") == "Status") {
      unreachable.push_back(who + ": " + Str(status, "message"));
      continue;
    }
    (body.find("MPS") != std::string::npos ? mps : not_ready)
        .push_back(who + ": HTTP " + std::to_string(resp.status) + " " + body);
  }
  const std::string total = std::to_string(items.size());
  if (!mps.empty()) {
    return Fail(check, std::to_string(mps.size()) + " of " + total + " agents report the MPS daemon: " + Names(mps),
                "the MPS control daemon runs in its own DaemonSet (deploy/base/mps): check its pod on those nodes "
                "and its log (kubectl -n kube-system get pods -o wide | grep mps); the agent's log says more");
  }
  if (!not_ready.empty()) {
    return Fail(check, std::to_string(not_ready.size()) + " of " + total + " agents not ready: " + Names(not_ready),
                "read the agent's log on those nodes (kubectl -n " + agent.namespace_ + " logs <pod>)");
  }
  if (!unreachable.empty()) {
    return Warn(check,
                "could not read " + agent.readiness_path + " of " + std::to_string(unreachable.size()) + " of " +
                    total + " agents through the API server: " + Names(unreachable),
                "the API server must reach the pods' IPs (port " + std::to_string(agent.port) + "); or " + direct);
  }
  return Ok(check, std::to_string(ready) + " of " + total + " agents ready (" + agent.readiness_path +
                       " ok: GPUs sampled, device plugin registered, MPS daemon answering where used)");
}

Finding CheckLease(const LeaseRef& lease, const Fetched& object, Clock::time_point now) {
  const std::string check(kCheckLeaderLease);
  const std::string what = "Lease " + lease.namespace_ + "/" + lease.name;
  const std::string fix = "check the gpusched-scheduler pods in " + lease.namespace_ + " and their log (kubectl -n " +
                          lease.namespace_ +
                          " logs deploy/gpusched-scheduler); a replica takes the lease when it "
                          "runs out, unless none runs or its Role (" +
                          lease.file + ") is missing";
  if (!object.ok()) {
    if (object.status().code() == common::StatusCode::kNotFound) {
      return Fail(check, what + " not found: no gpusched scheduler replica has led", fix);
    }
    return CouldNotCheck(check, what, object.status());
  }
  const json& spec = At(*object, {"spec"});
  const std::string holder = Str(spec, "holderIdentity");
  const std::string renew = Str(spec, "renewTime");
  const json& d = At(spec, {"leaseDurationSeconds"});
  const int64_t duration = d.is_number_integer() ? d.get<int64_t>() : lease.duration_seconds;
  if (holder.empty()) {
    return Fail(check, what + " is held by nobody (released): no replica is scheduling", fix);
  }
  if (renew.empty()) {
    return Fail(check, what + " held by " + holder + " has no renewTime", fix);
  }
  auto renewed = adapters::k8s::ParseRfc3339(renew);
  if (!renewed.ok()) {
    return Fail(check, what + " has a renewTime that does not parse: " + renewed.status().message(), fix);
  }
  const auto age = now - *renewed;
  if (age > std::chrono::seconds(duration)) {
    return Fail(check,
                what + " held by " + holder + " was last renewed " + FormatAge(age) + " ago, past its " +
                    std::to_string(duration) + "s duration: the leader stopped renewing and no replica took over",
                fix);
  }
  return Ok(check, what + " held by " + holder + ", renewed " + FormatAge(age) + " ago (duration " +
                       std::to_string(duration) + "s)");
}

json SubjectAccessReviewFor(const ServiceAccountGrants& sa, const Grant& grant) {
  json attributes = {{"verb", grant.verb}, {"group", grant.group}, {"resource", grant.resource}};
  if (!grant.subresource.empty()) {
    attributes["subresource"] = grant.subresource;
  }
  if (!grant.name.empty()) {
    attributes["name"] = grant.name;
  }
  if (!grant.namespace_.empty()) {
    attributes["namespace"] = grant.namespace_;
  }
  return {{"apiVersion", "authorization.k8s.io/v1"},
          {"kind", "SubjectAccessReview"},
          {"spec",
           {{"user", sa.Username()},
            {"groups", json::array({"system:serviceaccounts", "system:serviceaccounts:" + sa.namespace_,
                                    "system:authenticated"})},
            {"resourceAttributes", std::move(attributes)}}}};
}

Finding CheckRbac(const ServiceAccountGrants& sa, const std::vector<Fetched>& reviews, std::string_view mode) {
  const std::string check(kCheckRbac);
  const std::string user = sa.Username();
  if (sa.grants.empty()) {
    return Ok(check, user + ": no role of " + sa.file + " binds it, nothing to check");
  }
  std::vector<std::string> refused;
  std::vector<std::string> roles;
  for (size_t i = 0; i < sa.grants.size(); ++i) {
    const Grant& g = sa.grants[i];
    if (i >= reviews.size() || !reviews[i].ok()) {
      const std::string why = i >= reviews.size() ? "no answer" : reviews[i].status().message();
      return Warn(check, "could not check " + user + ": a SubjectAccessReview (" + g.Describe() + ") failed: " + why,
                  "run gpusched doctor as a user who may create subjectaccessreviews (authorization.k8s.io)");
    }
    const json& allowed = At(*reviews[i], {"status", "allowed"});
    if (!allowed.is_boolean() || !allowed.get<bool>()) {
      refused.push_back(g.Describe());
      if (std::find(roles.begin(), roles.end(), g.role) == roles.end()) {
        roles.push_back(g.role);
      }
    }
  }
  if (!refused.empty()) {
    std::string list, role_list;
    for (const auto& r : refused) {
      list += (list.empty() ? "" : ", ") + r;
    }
    for (const auto& r : roles) {
      role_list += (role_list.empty() ? "" : ", ") + r;
    }
    return Fail(
        check,
        user + ": " + std::to_string(refused.size()) + " of " + Plural(sa.grants.size(), "grant") + " refused: " + list,
        "reapply its roles and bindings (" + role_list + "): kubectl apply -k deploy/" + std::string(mode) +
            " (they are in " + sa.file + ")");
  }
  return Ok(check, user + ": all " + Plural(sa.grants.size(), "grant") + " of " + sa.file + " allowed");
}

}  // namespace gpusched::doctor
