#include "gpusched/doctor/doctor.h"

#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/doctor/checks.h"

namespace gpusched::doctor {
namespace {

using adapters::k8s::ApiClient;
using adapters::k8s::UrlEncode;
using nlohmann::json;

std::string WebhookPath(const ObjectRef& config) {
  const std::string plural = config.kind == "MutatingWebhookConfiguration" ? "mutatingwebhookconfigurations"
                                                                           : "validatingwebhookconfigurations";
  return "/apis/admissionregistration.k8s.io/v1/" + plural + "/" + UrlEncode(config.name);
}

Fetched ListAsJson(ApiClient& client, const std::string& path, const std::string& label_selector = "") {
  auto list = client.List(path, "", label_selector);
  if (!list.ok()) {
    return list.status();
  }
  json items = json::array();
  for (json& item : list->items) {
    items.push_back(std::move(item));
  }
  return json{{"items", std::move(items)}};
}

// The port of the pod's readiness probe, as its own spec says (a port number, or the name of a container port);
// else the DaemonSet's of deploy/.
int ReadinessPort(const json& pod, const AgentRef& agent) {
  for (const json& c : pod.value(json::json_pointer("/spec/containers"), json::array())) {
    const json port = c.value(json::json_pointer("/readinessProbe/httpGet/port"), json());
    if (port.is_number_integer()) {
      return port.get<int>();
    }
    if (!port.is_string()) {
      continue;
    }
    for (const json& p : c.value("ports", json::array())) {
      if (p.value("name", "") == port.get<std::string>() && p.value("containerPort", json()).is_number_integer()) {
        return p["containerPort"].get<int>();
      }
    }
  }
  return agent.port;
}

Finding Agents(ApiClient& client, const AgentRef& agent) {
  const json review = {
      {"apiVersion", "authorization.k8s.io/v1"},
      {"kind", "SelfSubjectAccessReview"},
      {"spec",
       {{"resourceAttributes",
         {{"namespace", agent.namespace_}, {"verb", "get"}, {"resource", "pods"}, {"subresource", "proxy"}}}}}};
  Fetched may = client.Request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review.dump());
  std::map<std::string, common::Result<adapters::k8s::RawResponse>> readyz;
  Fetched pods = json::object();
  if (may.ok() && may->is_object() && may->value(json::json_pointer("/status/allowed"), false)) {
    pods = ListAsJson(client, "/api/v1/namespaces/" + UrlEncode(agent.namespace_) + "/pods", agent.label_selector);
    if (pods.ok()) {
      for (const json& p : pods->value("items", json::array())) {
        const std::string name = p.value(json::json_pointer("/metadata/name"), "");
        if (p.value(json::json_pointer("/status/phase"), "") != "Running" ||
            p.value(json::json_pointer("/status/podIP"), "").empty()) {
          continue;
        }
        readyz.emplace(
            name, client.GetRaw("/api/v1/namespaces/" + UrlEncode(agent.namespace_) + "/pods/" + UrlEncode(name) + ":" +
                                std::to_string(ReadinessPort(p, agent)) + "/proxy" + agent.readiness_path));
      }
    }
  }
  return CheckAgentReadiness(agent, may, pods, readyz);
}

}  // namespace

Report RunDoctor(ApiClient& client, const ExpectedSetup& setup, const DoctorOptions& options) {
  Report report{.mode = setup.mode};
  Finding api = CheckApiServer(client.config().server, client.Get("/version"));
  const bool reachable = api.severity != Severity::kFail;
  report.Add(std::move(api));
  if (!reachable) {
    return report;
  }
  for (const ObjectRef& crd : setup.crds) {
    report.Add(CheckCrd(
        crd, client.Get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + UrlEncode(crd.name)), setup.mode));
  }
  for (const ObjectRef& config : setup.webhook_configurations) {
    Fetched object = client.Get(WebhookPath(config));
    report.Add(CheckWebhookConfiguration(config, object, Clock::now(), setup.mode));
  }
  if (!setup.webhook_configurations.empty()) {
    report.Add(
        CheckDryRun(options.namespace_,
                    client.Request("POST", "/api/v1/namespaces/" + UrlEncode(options.namespace_) + "/pods?dryRun=All",
                                   DryRunPod(options.namespace_).dump())));
  }
  if (setup.agent) {
    report.Add(CheckNodes(ListAsJson(client, "/api/v1/nodes")));
    report.Add(Agents(client, *setup.agent));
  }
  if (setup.lease) {
    Fetched lease = client.GetLease(setup.lease->namespace_, setup.lease->name);
    report.Add(CheckLease(*setup.lease, lease, Clock::now()));
  }
  for (const ServiceAccountGrants& sa : setup.service_accounts) {
    std::vector<Fetched> reviews;
    for (const Grant& g : sa.grants) {
      reviews.push_back(client.Request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                       SubjectAccessReviewFor(sa, g).dump()));
      if (!reviews.back().ok()) {
        break;  // the same refusal for every review: one says it
      }
    }
    report.Add(CheckRbac(sa, reviews, setup.mode));
  }
  return report;
}

}  // namespace gpusched::doctor
