#include "gpusched/kube/cluster_events.h"

#include <nlohmann/json.hpp>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/constraints.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

namespace gpusched::kube {

common::Result<core::PodUpdate> DecodePodUpdate(const nlohmann::json& pod, std::string_view app_label,
                                                bool with_requests) {
  GPUSCHED_ASSIGN_OR_RETURN(meta, DecodePodMeta(pod));
  return DecodePodUpdate(pod, meta, app_label, with_requests);
}

common::Result<core::PodUpdate> DecodePodUpdate(const nlohmann::json& pod, const PodMeta& meta,
                                                std::string_view app_label, bool with_requests) {
  if (meta.uid.empty()) {
    return common::InvalidArgument("pod " + meta.Key() + " has no metadata.uid");
  }
  core::PodUpdate u{.uid = meta.uid, .key = meta.Key(), .node_name = meta.node_name, .terminal = meta.Terminal()};
  const std::string* annotation = meta.Annotation(kAnnotationAllocation);
  u.annotated = annotation != nullptr;
  if (u.node_name.empty() || u.terminal) {
    return u;
  }
  if (const auto* spec = pod.contains("spec") ? &pod["spec"] : nullptr;
      spec != nullptr && spec->is_object() && spec->contains("priority") && (*spec)["priority"].is_number_integer()) {
    u.priority = (*spec)["priority"].get<int32_t>();
  }
  u.namespace_ = meta.namespace_;
  u.queue = QueueLabel(meta.labels);
  if (annotation != nullptr) {
    u.app = DecodePodApp(pod, app_label);
    if (auto a = DecodeAllocation(*annotation, u.uid); a.ok()) {
      u.allocation = std::move(a).value();
    } else {
      u.allocation_error = a.status().message();
    }
  }
  if (with_requests) {
    if (auto r = DecodePodResources(pod); r.ok()) {
      u.requests = core::Allocation{.pod = u.uid,
                                    .node = common::NodeName(u.node_name),
                                    .cpu = r->cpu,
                                    .memory = r->memory,
                                    .scalars = std::move(r->scalars),
                                    .host_ports = std::move(r->host_ports)};
    } else {
      u.requests_error = r.status().message();
    }
  }
  return u;
}

common::Result<common::NodeName> DecodeNodeName(const nlohmann::json& node) {
  const auto* md = node.is_object() && node.contains("metadata") ? &node["metadata"] : nullptr;
  if (md == nullptr || !md->is_object() || !md->contains("name") || !(*md)["name"].is_string() ||
      (*md)["name"].get_ref<const std::string&>().empty()) {
    return common::InvalidArgument("a node without metadata.name");
  }
  return common::NodeName((*md)["name"].get<std::string>());
}

size_t PodFingerprint(const nlohmann::json& pod) {
  size_t h = 0;
  auto mix = [&h](const nlohmann::json* j) {
    const size_t v = j == nullptr ? 0 : std::hash<std::string>{}(j->dump());
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  const nlohmann::json* md = pod.contains("metadata") ? &pod["metadata"] : nullptr;
  mix(pod.contains("spec") ? &pod["spec"] : nullptr);
  mix(md != nullptr && md->is_object() && md->contains("labels") ? &(*md)["labels"] : nullptr);
  mix(md != nullptr && md->is_object() && md->contains("annotations") ? &(*md)["annotations"] : nullptr);
  return h;
}

core::WatchedPod DecodeWatchedPod(const nlohmann::json& pod, const WatchedPodOptions& options) {
  core::WatchedPod out;
  auto meta = DecodePodMeta(pod);
  if (!meta.ok() || meta->uid.empty()) {
    out.update = common::InvalidArgument("a pod without metadata.uid");
    return out;
  }
  out.update = DecodePodUpdate(pod, *meta, options.app_label, options.with_requests);
  out.uid = meta->uid;
  out.namespace_ = meta->namespace_;
  out.name = meta->name;
  out.node_name = meta->node_name;
  out.scheduler_name = meta->scheduler_name;
  out.deleting = meta->deleting;
  out.terminal = meta->Terminal();
  if (auto t = ParseMicroTime(meta->creation_timestamp); t.ok()) {
    out.created_ms = *t;
  }
  out.labels = std::move(meta->labels);
  if (out.terminal) {
    return out;
  }
  if (!out.node_name.empty()) {
    auto priority = DecodePodPriority(pod, options.resources.genius_labels);
    out.priority = priority.ok() ? *priority : 0;
    if (auto group = DecodePodGroup(pod); group.ok() && !group->name.empty()) {
      out.pod_group = group->name;
      out.min_available = group->min_available;
      out.coscheduling = group->coscheduling;
    }
    if (const auto& spec = pod.find("spec"); spec != pod.end() && spec->is_object() && spec->contains("affinity")) {
      auto anti = DecodeRequiredPodAffinity(*spec, /*anti=*/true, out.labels);
      if (anti.ok()) {
        out.anti_affinity = std::move(anti).value();
      } else {
        out.anti_affinity_error = anti.status().message();
      }
    }
    return out;
  }
  const std::string& scheduler = out.scheduler_name.empty() ? std::string("default-scheduler") : out.scheduler_name;
  if (out.deleting || !options.ours || !options.ours(scheduler)) {
    return out;
  }
  out.pending = true;
  out.request = DecodePodRequest(pod, options.resources);
  if (out.request.ok()) {
    auto group = DecodePodGroup(pod);
    out.coscheduling = group.ok() && group->coscheduling;
  }
  UnevaluatedFields unevaluated = FindUnevaluatedFields(pod);
  out.unevaluated_hard = std::move(unevaluated.hard);
  out.unevaluated_soft = std::move(unevaluated.soft);
  out.fingerprint = PodFingerprint(pod);
  return out;
}

}  // namespace gpusched::kube
