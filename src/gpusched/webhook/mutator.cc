#include "gpusched/webhook/mutator.h"

#include <algorithm>
#include <iterator>

#include "gpusched/kube/resources.h"

namespace gpusched::webhook {
namespace {

using nlohmann::json;

// The countable device resources gpusched's agent serves: with one of them the kubelet already calls a plugin.
constexpr std::string_view kDefaultScheduler = "default-scheduler";

const json* Member(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool HasAny(const json* list, auto&& names) {
  return list != nullptr &&
         std::any_of(std::begin(names), std::end(names), [&](const auto& n) { return list->contains(n); });
}

// Rule 1 of mutator.h for one container at JSON Pointer `path`.
void AddDeviceCount(const json& container, const std::string& path, const WebhookConfig& config, json& patch,
                    std::vector<std::string>& warnings) {
  const json* resources = Member(container, "resources");
  if (resources == nullptr || !resources->is_object()) {
    return;
  }
  const json* limits = Member(*resources, "limits");
  const json* requests = Member(*resources, "requests");
  if ((limits != nullptr && !limits->is_object()) || (requests != nullptr && !requests->is_object())) {
    return;
  }
  if (HasAny(limits, kube::kCountableGpuResources) || HasAny(requests, kube::kCountableGpuResources)) {
    return;
  }
  auto request = kube::DecodeContainerGpuRequest(container, config.resources);
  if (!request.ok() || !request->has_value()) {
    return;
  }
  const std::string count = std::to_string((*request)->count);
  const std::string name(kube::kResGpu);
  if (limits != nullptr) {
    patch.push_back({{"op", "add"}, {"path", path + "/resources/limits/" + EscapeJsonPointer(name)}, {"value", count}});
  } else {
    patch.push_back({{"op", "add"}, {"path", path + "/resources/limits"}, {"value", {{name, count}}}});
  }
  if (HasAny(requests, kube::AllGpuResourceNames())) {
    patch.push_back(
        {{"op", "add"}, {"path", path + "/resources/requests/" + EscapeJsonPointer(name)}, {"value", count}});
  }
  const json* container_name = Member(container, "name");
  warnings.push_back(
      "gpusched: container " +
      (container_name != nullptr && container_name->is_string() ? container_name->get<std::string>().substr(0, 64)
                                                                : std::string("(unnamed)")) +
      ": added " + name + ": " + count + " so that the kubelet hands it its GPUs through gpusched's device plugin");
}

// Rule 3 of mutator.h: the GPUs of a pod that asks for them only through Genius's labels (`count` of them) become
// a device count on its first container.
void AddGeniusDeviceCount(const json& spec, int32_t count, json& patch, std::vector<std::string>& warnings) {
  const json* containers = Member(spec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty() || !(*containers)[0].is_object()) {
    return;
  }
  const json& container = (*containers)[0];
  const json* resources = Member(container, "resources");
  const json* limits = resources != nullptr ? Member(*resources, "limits") : nullptr;
  if ((resources != nullptr && !resources->is_object()) || (limits != nullptr && !limits->is_object())) {
    return;
  }
  const std::string name(kube::kResGpu);
  const std::string value = std::to_string(count);
  if (limits != nullptr) {
    patch.push_back(
        {{"op", "add"}, {"path", "/spec/containers/0/resources/limits/" + EscapeJsonPointer(name)}, {"value", value}});
  } else if (resources != nullptr) {
    patch.push_back({{"op", "add"}, {"path", "/spec/containers/0/resources/limits"}, {"value", {{name, value}}}});
  } else {
    patch.push_back(
        {{"op", "add"}, {"path", "/spec/containers/0/resources"}, {"value", {{"limits", {{name, value}}}}}});
  }
  const json* container_name = Member(container, "name");
  warnings.push_back("gpusched: container " +
                     (container_name != nullptr && container_name->is_string()
                          ? container_name->get<std::string>().substr(0, 64)
                          : std::string("(unnamed)")) +
                     ": added " + name + ": " + value +
                     " (the GPUs its genius/ labels ask for) so that the kubelet hands it its GPUs through gpusched's "
                     "device plugin");
}

// The number of GPUs a pod asks for through Genius's labels alone (no GPU resource), or 0. Decoded only for a pod
// that carries them: the webhook may be called for every pod.
int32_t GeniusGpuCount(const json& pod, const WebhookConfig& config) {
  if (!config.HasGeniusGpuLabels(pod)) {
    return 0;
  }
  auto request = kube::DecodePodRequest(pod, config.resources);
  return request.ok() && request->containers.size() == 1 ? request->containers[0].count : 0;
}

}  // namespace

std::string EscapeJsonPointer(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 2);
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

AdmissionResponse Mutate(const AdmissionRequest& request, const WebhookConfig& config) {
  if (!request.Is("pods") || request.operation != Operation::kCreate || !request.object.is_object()) {
    return AdmissionResponse::Allow();
  }
  const bool resources = kube::RequestsGpuResource(request.object, config.resources);
  const int32_t genius = resources ? 0 : GeniusGpuCount(request.object, config);
  if (!resources && genius == 0) {
    return AdmissionResponse::Allow();
  }
  const json* spec = Member(request.object, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return AdmissionResponse::Allow();
  }
  json patch = json::array();
  std::vector<std::string> warnings;
  if (config.resources.Enabled(kube::kResGpu) && genius > 0) {
    AddGeniusDeviceCount(*spec, genius, patch, warnings);
  } else if (config.resources.Enabled(kube::kResGpu)) {
    for (const char* list : {"initContainers", "containers"}) {
      const json* containers = Member(*spec, list);
      if (containers == nullptr || !containers->is_array()) {
        continue;
      }
      for (size_t i = 0; i < containers->size(); ++i) {
        AddDeviceCount((*containers)[i], "/spec/" + std::string(list) + "/" + std::to_string(i), config, patch,
                       warnings);
      }
    }
  }
  if (auto it = config.scheduler_names.find(request.namespace_name); it != config.scheduler_names.end()) {
    const json* current = Member(*spec, "schedulerName");
    const bool unset =
        current == nullptr || (current->is_string() && (current->get_ref<const std::string&>().empty() ||
                                                        current->get_ref<const std::string&>() == kDefaultScheduler));
    if (unset) {
      patch.push_back(
          {{"op", current == nullptr ? "add" : "replace"}, {"path", "/spec/schedulerName"}, {"value", it->second}});
      warnings.push_back("gpusched: spec.schedulerName set to " + it->second + " for GPU pods of namespace " +
                         request.namespace_name);
    }
  }
  if (patch.empty()) {
    return AdmissionResponse::Allow();
  }
  AdmissionResponse response = AdmissionResponse::Allow();
  response.patch = std::move(patch);
  response.warnings = std::move(warnings);
  return response;
}

}  // namespace gpusched::webhook
