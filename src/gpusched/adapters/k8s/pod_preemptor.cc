#include "gpusched/adapters/k8s/pod_preemptor.h"

#include <nlohmann/json.hpp>

namespace gpusched::adapters::k8s {

using nlohmann::json;

common::Result<std::string> PolicyApiVersion(ApiClient& client) {
  auto r = client.Request("GET", "/apis/policy/v1");
  if (r.ok()) {
    return std::string("policy/v1");
  }
  if (r.status().code() == common::StatusCode::kNotFound) {
    return std::string("policy/v1beta1");
  }
  return r.status();
}

common::Status PodPreemptor::Evict(const std::string& ns, const std::string& name, const common::PodUid& uid) {
  json delete_options = {{"preconditions", {{"uid", uid.str()}}}};
  if (grace_.has_value()) {
    delete_options["gracePeriodSeconds"] = *grace_;
  }
  const json eviction = {{"apiVersion", api_version_},
                         {"kind", "Eviction"},
                         {"metadata", {{"name", name}, {"namespace", ns}}},
                         {"deleteOptions", delete_options}};
  auto r = client_.Request("POST", "/api/v1/namespaces/" + ns + "/pods/" + name + "/eviction", eviction.dump());
  if (!r.ok() && r.status().code() != common::StatusCode::kNotFound) {
    return r.status();
  }
  return common::Status::Ok();
}

common::Status PodPreemptor::Nominate(const std::string& ns, const std::string& name, const std::string& node) {
  const json patch = {{"status", {{"nominatedNodeName", node.empty() ? json(nullptr) : json(node)}}}};
  auto r = client_.Request("PATCH", "/api/v1/namespaces/" + ns + "/pods/" + name + "/status", patch.dump(),
                           "application/merge-patch+json");
  return r.ok() ? common::Status::Ok() : r.status();
}

}  // namespace gpusched::adapters::k8s
