#include "gpusched/cli/live_cluster.h"

#include <iostream>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/kube/cluster_events.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

namespace gpusched::cli {
namespace {

namespace k8s = adapters::k8s;
using nlohmann::json;

// spec.<field> as a count (absent: 1).
common::Result<int64_t> Count(const json& object, const char* field, const std::string& where) {
  const json* spec = object.contains("spec") ? &object["spec"] : nullptr;
  if (spec == nullptr || !spec->is_object() || !spec->contains(field) || (*spec)[field].is_null()) {
    return 1;
  }
  const json& v = (*spec)[field];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000) {
    return common::InvalidArgument(where + ": spec." + field + " is not a count of 0 to 10000");
  }
  return v.get<int64_t>();
}

}  // namespace

common::Result<ManifestPods> PodsFromObjects(const std::vector<std::pair<std::string, json>>& objects) {
  ManifestPods out;
  const kube::ResourceConfig config;
  for (const auto& [where, object] : objects) {
    const std::string kind = object.value("kind", "");
    const json metadata = object.value("metadata", json::object());
    const std::string name = metadata.value("name", metadata.value("generateName", "pod"));
    const std::string ns = metadata.value("namespace", "default");
    auto add = [&](const json& pod, const std::string& pod_name) -> common::Status {
      auto request = kube::DecodePodRequest(pod, config);
      if (!request.ok()) {
        return common::InvalidArgument(where + " (" + kind + " " + name + "): " + request.status().message());
      }
      out.pods.push_back(sim::WhatIfPod{.name = pod_name, .source = where, .request = std::move(request.value())});
      return common::Status::Ok();
    };
    if (kind == "Pod") {
      json pod = object;
      pod["metadata"]["namespace"] = ns;
      pod["metadata"]["name"] = name;
      GPUSCHED_RETURN_IF_ERROR(add(pod, name));
      continue;
    }
    const char* count_field = nullptr;
    if (kind == "Deployment" || kind == "ReplicaSet" || kind == "StatefulSet") {
      count_field = "replicas";
    } else if (kind == "Job") {
      count_field = "parallelism";
    }
    if (count_field == nullptr) {
      out.ignored.push_back(where + " " + kind + " " + name);
      continue;
    }
    GPUSCHED_ASSIGN_OR_RETURN(n, Count(object, count_field, where));
    const json* tmpl = nullptr;
    if (object.contains("spec") && object["spec"].is_object() && object["spec"].contains("template")) {
      tmpl = &object["spec"]["template"];
    }
    if (tmpl == nullptr || !tmpl->is_object()) {
      return common::InvalidArgument(where + " (" + kind + " " + name + "): no spec.template");
    }
    for (int64_t i = 0; i < n; ++i) {
      const std::string pod_name = name + "-" + std::to_string(i);
      json pod = {{"apiVersion", "v1"},
                  {"kind", "Pod"},
                  {"metadata", tmpl->value("metadata", json::object())},
                  {"spec", tmpl->value("spec", json::object())}};
      pod["metadata"]["name"] = pod_name;
      pod["metadata"]["namespace"] = ns;
      GPUSCHED_RETURN_IF_ERROR(add(pod, pod_name));
    }
  }
  return out;
}

common::Result<sim::WhatIfCluster> ReadLiveCluster(const std::string& kubeconfig, const std::string& context,
                                                   std::ostream& warnings, std::vector<json>* pod_objects) {
  GPUSCHED_ASSIGN_OR_RETURN(config, k8s::ResolveClientConfig(kubeconfig, context));
  GPUSCHED_ASSIGN_OR_RETURN(api, k8s::ApiClient::Create(config));
  // Read-only: two lists, nothing else.
  auto nodes = api->List("/api/v1/nodes");
  if (!nodes.ok()) {
    return common::Status(nodes.status().code(), "listing nodes: " + nodes.status().message());
  }
  auto listed = api->List("/api/v1/pods");
  if (!listed.ok()) {
    return common::Status(listed.status().code(), "listing pods: " + listed.status().message());
  }
  sim::WhatIfCluster cluster;
  for (const json& n : nodes->items) {
    auto node = kube::DecodeNode(n);
    if (!node.ok()) {
      warnings << "a node is left out: " << node.status().message() << "\n";
      continue;
    }
    cluster.nodes.push_back(std::move(node.value()));
  }
  for (const json& p : listed->items) {
    auto pod = kube::DecodePodUpdate(p, "", /*with_requests=*/true);
    if (!pod.ok()) {
      warnings << "a pod is left out: " << pod.status().message() << "\n";
      continue;
    }
    cluster.pods.push_back(std::move(pod.value()));
  }
  if (pod_objects != nullptr) {
    *pod_objects = std::move(listed->items);
  }
  return cluster;
}

}  // namespace gpusched::cli
