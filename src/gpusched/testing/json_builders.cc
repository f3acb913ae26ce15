#include "gpusched/testing/json_builders.h"

#include <utility>

namespace gpusched::testing {

using nlohmann::json;

PodJson::PodJson(const std::string& name)
    : pod_({{"metadata", {{"name", name}, {"namespace", "default"}, {"uid", "uid-" + name}}},
            {"spec", {{"containers", json::array({{{"name", "main"}}})}}}}) {}

PodJson& PodJson::Namespace(const std::string& ns) {
  pod_["metadata"]["namespace"] = ns;
  return *this;
}

PodJson& PodJson::Uid(const std::string& uid) {
  pod_["metadata"]["uid"] = uid;
  return *this;
}

PodJson& PodJson::NoUid() {
  pod_["metadata"].erase("uid");
  return *this;
}

PodJson& PodJson::Created(const std::string& timestamp) {
  pod_["metadata"]["creationTimestamp"] = timestamp;
  return *this;
}

PodJson& PodJson::Deleted(const std::string& timestamp) {
  pod_["metadata"]["deletionTimestamp"] = timestamp;
  return *this;
}

PodJson& PodJson::Label(const std::string& key, const std::string& value) {
  pod_["metadata"]["labels"][key] = value;
  return *this;
}

PodJson& PodJson::Annotation(const std::string& key, const std::string& value) {
  pod_["metadata"]["annotations"][key] = value;
  return *this;
}

PodJson& PodJson::SchedulerName(const std::string& name) {
  pod_["spec"]["schedulerName"] = name;
  return *this;
}

PodJson& PodJson::Priority(int32_t priority) {
  pod_["spec"]["priority"] = priority;
  return *this;
}

PodJson& PodJson::NodeName(const std::string& node) {
  pod_["spec"]["nodeName"] = node;
  return *this;
}

PodJson& PodJson::PodSecurityContext(const json& context) {
  pod_["spec"]["securityContext"] = context;
  return *this;
}

PodJson& PodJson::Phase(const std::string& phase) {
  pod_["status"]["phase"] = phase;
  return *this;
}

json& PodJson::Main() {
  json& containers = pod_["spec"]["containers"];
  if (containers.is_null()) {
    containers = json::array();
  }
  for (json& c : containers) {
    if (c.value("name", "") == "main") {
      return c;
    }
  }
  containers.push_back({{"name", "main"}});
  return containers.back();
}

PodJson& PodJson::Limits(const json& limits) {
  Main()["resources"]["limits"] = limits;
  return *this;
}

PodJson& PodJson::Requests(const json& requests) {
  Main()["resources"]["requests"] = requests;
  return *this;
}

PodJson& PodJson::SecurityContext(const json& context) {
  Main()["securityContext"] = context;
  return *this;
}

namespace {

json ContainerWith(const std::string& name, const json& limits) {
  json c = {{"name", name}};
  if (!limits.is_null()) {
    c["resources"] = {{"limits", limits}};
  }
  return c;
}

}  // namespace

PodJson& PodJson::Container(const std::string& name, const json& limits) {
  pod_["spec"]["containers"].push_back(ContainerWith(name, limits));
  return *this;
}

PodJson& PodJson::InitContainer(const std::string& name, const json& limits) {
  pod_["spec"]["initContainers"].push_back(ContainerWith(name, limits));
  return *this;
}

PodJson& PodJson::Containers(json containers) {
  pod_["spec"]["containers"] = std::move(containers);
  return *this;
}

PodJson& PodJson::InitContainers(json containers) {
  pod_["spec"]["initContainers"] = std::move(containers);
  return *this;
}

PodJson& PodJson::NoContainers() {
  pod_["spec"].erase("containers");
  return *this;
}

GpuNodeJson::GpuNodeJson(const std::string& name)
    : name_(name),
      node_({{"metadata", {{"name", name}}}, {"status", {{"allocatable", {{"cpu", "32"}, {"memory", "128Gi"}}}}}}) {}

GpuNodeJson& GpuNodeJson::Gpus(int32_t n, const std::string& model, int64_t memory_mib) {
  for (int32_t i = 0; i < n; ++i) {
    Gpu("GPU-" + name_ + "-" + std::to_string(gpus_.size()), model, memory_mib);
  }
  return *this;
}

GpuNodeJson& GpuNodeJson::Gpu(const std::string& uuid, const std::string& model, int64_t memory_mib) {
  const auto index = static_cast<int64_t>(gpus_.size());
  gpus_.push_back({{"uuid", uuid}, {"index", index}, {"model", model}, {"memory_mib", memory_mib}});
  return *this;
}

GpuNodeJson& GpuNodeJson::Label(const std::string& key, const std::string& value) {
  node_["metadata"]["labels"][key] = value;
  return *this;
}

GpuNodeJson& GpuNodeJson::Labels(json labels) {
  node_["metadata"]["labels"] = std::move(labels);
  return *this;
}

GpuNodeJson& GpuNodeJson::EmptySpec() {
  if (!node_.contains("spec")) {
    node_["spec"] = json::object();
  }
  return *this;
}

GpuNodeJson& GpuNodeJson::Taints(json taints) {
  node_["spec"]["taints"] = std::move(taints);
  return *this;
}

GpuNodeJson& GpuNodeJson::Cpu(const std::string& quantity) {
  node_["status"]["allocatable"]["cpu"] = quantity;
  return *this;
}

GpuNodeJson& GpuNodeJson::Memory(const std::string& quantity) {
  node_["status"]["allocatable"]["memory"] = quantity;
  return *this;
}

GpuNodeJson& GpuNodeJson::Pods(const std::string& count) {
  node_["status"]["allocatable"]["pods"] = count;
  return *this;
}

json GpuNodeJson::Build() const {
  json node = node_;
  node["metadata"]["annotations"]["gpusched.io/gpus"] = gpus_.dump();
  return node;
}

json ShareLimits(int64_t core, int64_t memory_mib) {
  return {{"gpusched.io/gpu", "1"},
          {"gpusched.io/gpu-core", std::to_string(core)},
          {"gpusched.io/gpu-memory", std::to_string(memory_mib)}};
}

}  // namespace gpusched::testing
