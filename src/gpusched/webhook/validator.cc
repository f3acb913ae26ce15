#include "gpusched/webhook/validator.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/core/gpu_queue.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"
#include "gpusched/webhook/queue_membership.h"

namespace gpusched::webhook {
namespace {

using nlohmann::json;

constexpr size_t kMaxModelNames = 64;
constexpr size_t kMaxModelNameBytes = 128;
// Names and values from the request are cut to this in messages: a denial must stay readable.
constexpr size_t kMaxQuotedBytes = 200;

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s.substr(0, kMaxQuotedBytes)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + (s.size() > kMaxQuotedBytes ? "...\"" : "\"");
}

const json* Member(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

const json* Annotation(const json& object, std::string_view key) {
  const json* metadata = Member(object, "metadata");
  const json* annotations = metadata != nullptr ? Member(*metadata, "annotations") : nullptr;
  return annotations != nullptr ? Member(*annotations, key) : nullptr;
}

AdmissionResponse Forbidden(std::string_view verb, const UserInfo& user) {
  AdmissionResponse r = AdmissionResponse::Deny(
      403, "Forbidden",
      "user " + Quote(user.username) + " may not " + std::string(verb) + " the annotation " +
          std::string(kube::kAnnotationAllocation) +
          ": only gpusched's scheduler writes it (the webhook's allowedUsers), because the device plugin hands out "
          "GPUs by it");
  r.event_message = "a request to " + std::string(verb) + " its annotation " +
                    std::string(kube::kAnnotationAllocation) +
                    " was denied: only gpusched's scheduler writes it (the webhook's log names the user)";
  return r;
}

// Rule 1 of validator.h; nullopt when the request does not write the annotation or its user may.
std::optional<AdmissionResponse> CheckAllocationWrite(const AdmissionRequest& request, const WebhookConfig& config) {
  if (!request.resource.group.empty()) {
    return std::nullopt;
  }
  const json* now = Annotation(request.object, kube::kAnnotationAllocation);
  std::string_view verb;
  if (request.operation == Operation::kCreate) {
    if (now != nullptr && (request.Is("pods") || request.Is("pods", "binding") || request.Is("bindings"))) {
      verb = request.Is("pods") ? "set" : "bind with";
    }
  } else if (request.operation == Operation::kUpdate && request.resource.resource == "pods") {
    const json* before = Annotation(request.old_object, kube::kAnnotationAllocation);
    if (before == nullptr && now != nullptr) {
      verb = "set";
    } else if (before != nullptr && now == nullptr) {
      verb = "remove";
    } else if (before != nullptr && *before != *now) {
      verb = "change";
    }
  }
  if (verb.empty() || config.MayWriteAllocation(request.user)) {
    return std::nullopt;
  }
  return Forbidden(verb, request.user);
}

// The pod as DecodePodRequest needs it: on CREATE the name may still be unset (generateName) and the namespace
// comes from the request.
json Named(const AdmissionRequest& request) {
  json pod = request.object;
  json& metadata = pod["metadata"];
  if (!metadata.is_object()) {
    metadata = json::object();
  }
  const json* name = Member(metadata, "name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    const json* generate = Member(metadata, "generateName");
    metadata["name"] = !request.name.empty()                          ? request.name
                       : generate != nullptr && generate->is_string() ? generate->get<std::string>() + "(generated)"
                                                                      : std::string("(unnamed)");
  }
  if (!request.namespace_name.empty()) {
    metadata["namespace"] = request.namespace_name;
  }
  return pod;
}

// Rule 2 of validator.h.
std::optional<AdmissionResponse> CheckGpuRequest(const AdmissionRequest& request, const WebhookConfig& config) {
  if (!request.Is("pods") || request.operation != Operation::kCreate || !request.object.is_object() ||
      (!kube::RequestsGpuResource(request.object, config.resources) && !config.HasGeniusGpuLabels(request.object))) {
    return std::nullopt;
  }
  const json pod = Named(request);
  const json& metadata = pod.at("metadata");
  const json* ns = Member(metadata, "namespace");
  const std::string who = "pod " + (ns != nullptr && ns->is_string() ? ns->get<std::string>() : "default") + "/" +
                          metadata.at("name").get<std::string>() + ": ";
  if (const json* models = Annotation(pod, kube::kAnnotationGpuModel); models != nullptr) {
    if (!models->is_string()) {
      return AdmissionResponse::Deny(422, "Invalid",
                                     who + "annotation " + std::string(kube::kAnnotationGpuModel) + " is not a string");
    }
    if (auto s = CheckGpuModels(models->get_ref<const std::string&>()); !s.ok()) {
      return AdmissionResponse::Deny(422, "Invalid", who + s.message());
    }
  }
  if (auto decoded = kube::DecodePodRequest(pod, config.resources); !decoded.ok()) {
    return AdmissionResponse::Deny(422, "Invalid",
                                   "GPU request that can never be scheduled: " + decoded.status().message());
  }
  return std::nullopt;
}

// Rule 3: a GpuQueue whose declaration breaks a rule that holds for each queue alone (see validator.h).
std::optional<AdmissionResponse> CheckGpuQueue(const AdmissionRequest& request) {
  if (request.resource.group != "gpusched.io" || request.resource.resource != "gpuqueues" ||
      !request.sub_resource.empty() ||
      (request.operation != Operation::kCreate && request.operation != Operation::kUpdate) ||
      !request.object.is_object()) {
    return std::nullopt;
  }
  auto spec = kube::DecodeGpuQueue(request.object);
  if (!spec.ok()) {
    return AdmissionResponse::Deny(422, "Invalid", spec.status().message());
  }
  core::QueueSpec alone = *spec;
  alone.parent.clear();  // whether the parent exists and covers its children is for the set of queues
  if (auto rejected = core::ValidateQueues({alone}); !rejected.empty()) {
    return AdmissionResponse::Deny(422, "Invalid",
                                   "GpuQueue " + rejected.begin()->first + ": " + rejected.begin()->second);
  }
  return std::nullopt;
}

// The pod's namespace: the request's (a CREATE's object may leave it out), else the object's.
std::string PodNamespace(const AdmissionRequest& request) {
  if (!request.namespace_name.empty()) {
    return request.namespace_name;
  }
  const json* metadata = Member(request.object, "metadata");
  const json* ns = metadata != nullptr ? Member(*metadata, "namespace") : nullptr;
  return ns != nullptr && ns->is_string() ? ns->get<std::string>() : std::string("default");
}

std::string PodName(const AdmissionRequest& request) {
  if (!request.name.empty()) {
    return request.name;
  }
  const json* metadata = Member(request.object, "metadata");
  const json* name = metadata != nullptr ? Member(*metadata, "name") : nullptr;
  if (name != nullptr && name->is_string() && !name->get_ref<const std::string&>().empty()) {
    return name->get<std::string>();
  }
  const json* generate = metadata != nullptr ? Member(*metadata, "generateName") : nullptr;
  return generate != nullptr && generate->is_string() ? generate->get<std::string>() + "(generated)"
                                                      : std::string("(unnamed)");
}

// Whether `name` is one of the variables by which the device plugin hands GPUs to a container.
bool HandoffVariable(std::string_view name) {
  return name == "NVIDIA_VISIBLE_DEVICES" || name == "NVIDIA_DRIVER_CAPABILITIES" || name.starts_with("CUDA_MPS_");
}

// The first container of `containers` (a list; anything else holds none), skipping those named in `skip`, with an
// entry of its list `list` (env, volumeMounts) whose string `key` (name, mountPath) `matches`: the container's name
// and that string.
std::optional<std::pair<std::string, std::string>> FirstContainerEntry(const json* containers, std::string_view list,
                                                                       std::string_view key,
                                                                       bool (*matches)(std::string_view),
                                                                       const std::vector<std::string>& skip) {
  if (containers == nullptr || !containers->is_array()) {
    return std::nullopt;
  }
  for (const json& c : *containers) {
    const json* name = Member(c, "name");
    const std::string container = name != nullptr && name->is_string() ? name->get<std::string>() : "";
    if (std::find(skip.begin(), skip.end(), container) != skip.end()) {
      continue;
    }
    const json* entries = Member(c, list);
    if (entries == nullptr || !entries->is_array()) {
      continue;
    }
    for (const json& e : *entries) {
      const json* value = Member(e, key);
      if (value != nullptr && value->is_string() && matches(value->get_ref<const std::string&>())) {
        return std::make_pair(container, value->get<std::string>());
      }
    }
  }
  return std::nullopt;
}

// Whether a container mount at `path` lands in the directory from which the NVIDIA runtime takes a container's GPUs
// under the volume-mounts strategy (/var/run/nvidia-container-devices; /var/run is /run on every distribution): an
// emptyDir mounted at .../all would hand the container every GPU of the node, as the variable did.
bool DeviceListMount(std::string_view path) {
  std::string p = std::filesystem::path(path).lexically_normal().generic_string();
  while (p.size() > 1 && p.back() == '/') {
    p.pop_back();
  }
  for (std::string_view dir : {"/var/run/nvidia-container-devices", "/run/nvidia-container-devices"}) {
    if (p == dir || (p.starts_with(dir) && p[dir.size()] == '/')) {
      return true;
    }
  }
  return false;
}

// The first container that sets a handoff variable in env / mounts a volume into the device-list directory.
std::optional<std::pair<std::string, std::string>> SetsHandoffVariable(const json* containers,
                                                                       const std::vector<std::string>& skip = {}) {
  return FirstContainerEntry(containers, "env", "name", HandoffVariable, skip);
}
std::optional<std::pair<std::string, std::string>> MountsDeviceList(const json* containers,
                                                                    const std::vector<std::string>& skip = {}) {
  return FirstContainerEntry(containers, "volumeMounts", "mountPath", DeviceListMount, skip);
}

std::vector<std::string> ContainerNames(const json* containers) {
  std::vector<std::string> out;
  if (containers != nullptr && containers->is_array()) {
    for (const json& c : *containers) {
      if (const json* name = Member(c, "name"); name != nullptr && name->is_string()) {
        out.push_back(name->get<std::string>());
      }
    }
  }
  return out;
}

// The ephemeral containers of a pods/ephemeralcontainers request's object: a Pod (Kubernetes >= 1.22) or the older
// EphemeralContainers object, which holds them at the top level.
const json* EphemeralContainers(const json& object) {
  if (const json* top = Member(object, "ephemeralContainers"); top != nullptr) {
    return top;
  }
  const json* spec = Member(object, "spec");
  return spec != nullptr ? Member(*spec, "ephemeralContainers") : nullptr;
}

// Rule 4 of validator.h: containers that set the GPU handoff variables themselves.
std::optional<AdmissionResponse> CheckHandoffEnv(const AdmissionRequest& request) {
  if (!request.resource.group.empty() || request.resource.resource != "pods" || !request.object.is_object()) {
    return std::nullopt;
  }
  std::optional<std::pair<std::string, std::string>> found;
  std::optional<std::pair<std::string, std::string>> mount;
  std::string kind;
  if (request.operation == Operation::kCreate && request.sub_resource.empty()) {
    const json* spec = Member(request.object, "spec");
    for (const auto& [field, what] :
         {std::pair{"containers", "container"}, std::pair{"initContainers", "init container"},
          std::pair{"ephemeralContainers", "ephemeral container"}}) {
      if (spec != nullptr &&
          ((found = SetsHandoffVariable(Member(*spec, field))) || (mount = MountsDeviceList(Member(*spec, field))))) {
        kind = what;
        break;
      }
    }
  } else if (request.operation == Operation::kUpdate && request.sub_resource == "ephemeralcontainers") {
    // Only the containers this request adds: ephemeral containers cannot change or go once added.
    const std::vector<std::string> old = ContainerNames(EphemeralContainers(request.old_object));
    found = SetsHandoffVariable(EphemeralContainers(request.object), old);
    if (!found) {
      mount = MountsDeviceList(EphemeralContainers(request.object), old);
    }
    kind = "ephemeral container";
  }
  if (mount) {
    AdmissionResponse r = AdmissionResponse::Deny(
        403, "Forbidden",
        "pod " + PodNamespace(request) + "/" + PodName(request) + ": " + kind + " " + Quote(mount->first) +
            " mounts a volume at " + Quote(mount->second) +
            ": the NVIDIA runtime hands a container the GPUs named under /var/run/nvidia-container-devices, which "
            "only gpusched's device plugin mounts");
    r.event_message =
        "an ephemeral container that mounts a volume under /var/run/nvidia-container-devices was denied: only "
        "gpusched's device plugin hands GPUs over there";
    return r;
  }
  if (!found) {
    return std::nullopt;
  }
  AdmissionResponse r = AdmissionResponse::Deny(
      403, "Forbidden",
      "pod " + PodNamespace(request) + "/" + PodName(request) + ": " + kind + " " + Quote(found->first) + " sets " +
          found->second +
          " in env: only gpusched's device plugin sets NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES and "
          "CUDA_MPS_* (the container runtime hands a container the GPUs they name, whatever it was given)");
  // The Event names the variable only as the API server's validation would have let it through (a C identifier),
  // so that even a review that passed the live-pod check carries no free text into it.
  const std::string& var = found->second;
  const bool identifier =
      var.size() <= 64 && std::all_of(var.begin(), var.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
      });
  r.event_message = "an ephemeral container that sets " + (identifier ? var : std::string("a CUDA_MPS_* variable")) +
                    " was denied: only gpusched's device plugin sets the GPU handoff variables";
  return r;
}

// Rule 5 of validator.h: the queue a pod's label names must admit its namespace.
std::optional<AdmissionResponse> CheckQueueLabel(const AdmissionRequest& request, const QueueView* queues) {
  if (queues == nullptr || !request.Is("pods") ||
      (request.operation != Operation::kCreate && request.operation != Operation::kUpdate)) {
    return std::nullopt;
  }
  auto label = [](const json& object) -> const json* {
    const json* metadata = Member(object, "metadata");
    const json* labels = metadata != nullptr ? Member(*metadata, "labels") : nullptr;
    return labels != nullptr ? Member(*labels, kube::kQueueLabel) : nullptr;
  };
  const json* now = label(request.object);
  if (now == nullptr || !now->is_string()) {
    return std::nullopt;
  }
  if (request.operation == Operation::kUpdate) {
    const json* before = label(request.old_object);
    if (before != nullptr && *before == *now) {
      return std::nullopt;  // unchanged: judged when it was set
    }
  }
  const std::string refusal = queues->JoinRefusal(now->get<std::string>(), PodNamespace(request));
  if (refusal.empty()) {
    return std::nullopt;
  }
  AdmissionResponse r = AdmissionResponse::Deny(403, "Forbidden",
                                                "pod " + PodNamespace(request) + "/" + PodName(request) + ": label " +
                                                    std::string(kube::kQueueLabel) + ": " + refusal);
  r.event_message = "a change of its label " + std::string(kube::kQueueLabel) + " was denied: " + refusal;
  return r;
}

bool ModelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '(' || c == ')' || c == '/';
}

}  // namespace

common::Status CheckGpuModels(std::string_view value) {
  const std::string where = "annotation " + std::string(kube::kAnnotationGpuModel) + " " + Quote(value) + ": ";
  size_t names = 0;
  size_t start = 0;
  while (true) {
    const size_t bar = value.find('|', start);
    std::string_view part = value.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    while (!part.empty() && part.front() == ' ') {
      part.remove_prefix(1);
    }
    while (!part.empty() && part.back() == ' ') {
      part.remove_suffix(1);
    }
    if (part.empty()) {
      return common::InvalidArgument(where + (value.find_first_not_of(" |") == std::string_view::npos
                                                  ? "names no GPU model"
                                                  : "has an empty model name (two '|' in a row, or one at an end)"));
    }
    if (part.size() > kMaxModelNameBytes) {
      return common::InvalidArgument(where + "a model name is longer than " + std::to_string(kMaxModelNameBytes) +
                                     " characters");
    }
    for (char c : part) {
      if (c == ',' || c == ';') {
        return common::InvalidArgument(where + "separate models with '|', not '" + std::string(1, c) + "'");
      }
      if (!ModelChar(c)) {
        return common::InvalidArgument(where + "model name " + Quote(part) + " has a character other than letters, " +
                                       "digits, space and . _ - + ( ) /");
      }
    }
    if (++names > kMaxModelNames) {
      return common::InvalidArgument(where + "names more than " + std::to_string(kMaxModelNames) + " models");
    }
    if (bar == std::string_view::npos) {
      return common::Status::Ok();
    }
    start = bar + 1;
  }
}

AdmissionResponse Validate(const AdmissionRequest& request, const WebhookConfig& config, const QueueView* queues) {
  if (auto denied = CheckAllocationWrite(request, config)) {
    return *std::move(denied);
  }
  if (auto denied = CheckHandoffEnv(request)) {
    return *std::move(denied);
  }
  if (auto denied = CheckQueueLabel(request, queues)) {
    return *std::move(denied);
  }
  if (auto denied = CheckGpuRequest(request, config)) {
    return *std::move(denied);
  }
  if (auto denied = CheckGpuQueue(request)) {
    return *std::move(denied);
  }
  return AdmissionResponse::Allow();
}

}  // namespace gpusched::webhook
