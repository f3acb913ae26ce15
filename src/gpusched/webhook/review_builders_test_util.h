#pragma once

// Builders for the webhook's tests: pods as the API server sends them (limits copied into requests by defaulting)
// and admission requests, so a table row reads
//   {.name = "...", .request = Create(Pod().Limits({{"aliyun.com/gpu-mem", "8"}})), ...}
// Test-only (linked into webhook_test and the fuzz target's seeds generator only).

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/webhook/admission_review.h"

namespace gpusched::webhook::test {

using nlohmann::json;

inline constexpr const char* kAlice = "alice";

class PodJson {
 public:
  explicit PodJson(std::string name = "trainer") {
    pod_ = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", std::move(name)}, {"namespace", "team-a"}}},
            {"spec",
             {{"schedulerName", "default-scheduler"},
              {"containers", json::array({{{"name", "main"}, {"image", "cuda"}, {"resources", json::object()}}})}}}};
  }
  // Limits of container i, and requests equal to them (what the API server's defaulting does before admission).
  PodJson& Limits(const json& limits, size_t i = 0) {
    Container(i)["resources"] = {{"limits", limits}, {"requests", limits}};
    return *this;
  }
  // Limits only, no requests map.
  PodJson& LimitsOnly(const json& limits, size_t i = 0) {
    Container(i)["resources"] = {{"limits", limits}};
    return *this;
  }
  PodJson& Init(const json& limits) {
    pod_["spec"]["initContainers"].push_back({{"name", "init" + std::to_string(pod_["spec"]["initContainers"].size())},
                                              {"resources", {{"limits", limits}, {"requests", limits}}}});
    return *this;
  }
  PodJson& Annotation(const std::string& key, const std::string& value) {
    pod_["metadata"]["annotations"][key] = value;
    return *this;
  }
  PodJson& Label(const std::string& key, const std::string& value) {
    pod_["metadata"]["labels"][key] = value;
    return *this;
  }
  PodJson& SchedulerName(const json& name) {
    if (name.is_null()) {
      pod_["spec"].erase("schedulerName");
    } else {
      pod_["spec"]["schedulerName"] = name;
    }
    return *this;
  }
  PodJson& GenerateName(const std::string& prefix) {
    pod_["metadata"].erase("name");
    pod_["metadata"]["generateName"] = prefix;
    return *this;
  }
  [[nodiscard]] json Build() const { return pod_; }
  operator json() const { return pod_; }  // NOLINT(google-explicit-constructor): rows read better

 private:
  json& Container(size_t i) {
    json& cs = pod_["spec"]["containers"];
    while (cs.size() <= i) {
      cs.push_back({{"name", "c" + std::to_string(cs.size())}, {"image", "cuda"}});
    }
    return cs[i];
  }
  json pod_;
};

inline json Binding(const std::string& pod, const json& annotations = json::object()) {
  json b = {{"apiVersion", "v1"},
            {"kind", "Binding"},
            {"metadata", {{"name", pod}, {"namespace", "team-a"}}},
            {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "gpu-node-1"}}}};
  if (!annotations.empty()) {
    b["metadata"]["annotations"] = annotations;
  }
  return b;
}

inline AdmissionRequest Request(Operation op, std::string resource, std::string sub, const json& object,
                                const json& old_object = nullptr, std::string user = kAlice) {
  AdmissionRequest r;
  r.api_version = std::string(kAdmissionV1);
  r.uid = "uid-1";
  r.operation = op;
  r.resource = {.group = "", .version = "v1", .resource = std::move(resource)};
  r.sub_resource = std::move(sub);
  r.kind = {.group = "", .version = "v1", .kind = object.is_object() ? object.value("kind", "Pod") : "Pod"};
  r.user = {.username = std::move(user), .groups = {"system:authenticated"}};
  r.namespace_name = "team-a";
  if (object.is_object() && object.contains("metadata") && object["metadata"].contains("name")) {
    r.name = object["metadata"]["name"].get<std::string>();
  }
  r.object = object;
  r.old_object = old_object;
  return r;
}

inline AdmissionRequest Create(const json& pod, std::string user = kAlice) {
  return Request(Operation::kCreate, "pods", "", pod, nullptr, std::move(user));
}

inline AdmissionRequest Update(const json& old_pod, const json& pod, std::string user = kAlice, std::string sub = "") {
  return Request(Operation::kUpdate, "pods", std::move(sub), pod, old_pod, std::move(user));
}

}  // namespace gpusched::webhook::test
