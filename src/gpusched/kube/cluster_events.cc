#include "gpusched/kube/cluster_events.h"

#include <nlohmann/json.hpp>

#include "gpusched/kube/annotations.h"
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

}  // namespace gpusched::kube
