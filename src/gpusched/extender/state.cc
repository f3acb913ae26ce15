#include "gpusched/extender/state.h"

#include <nlohmann/json.hpp>

#include "gpusched/kube/cluster_events.h"
#include "gpusched/kube/objects.h"

namespace gpusched::extender {
namespace {

MirrorOptions Named(MirrorOptions options) {
  if (options.component == MirrorOptions{}.component) {
    options.component = "extender";
  }
  return options;
}

}  // namespace

ClusterMirror::ClusterMirror(MirrorOptions options) : sched::ClusterCache(Named(std::move(options))) {}

void ClusterMirror::OnNode(EventType type, const nlohmann::json& node) {
  if (type != EventType::kDeleted) {
    ApplyNode(kube::DecodeNode(node));
    return;
  }
  auto name = kube::DecodeNodeName(node);
  if (!name.ok()) {
    ApplyNode(name.status());  // counted and logged as a node that cannot be read
    return;
  }
  ApplyNodeDeleted(*name);
}

void ClusterMirror::OnPod(EventType type, const nlohmann::json& pod) {
  ApplyPod(type, kube::DecodePodUpdate(pod, options().app_label, options().charge_every_pod));
}

}  // namespace gpusched::extender
