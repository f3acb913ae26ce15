#include "gpusched/adapters/deviceplugin/share_within.h"

#include <set>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/gpu_queue.h"

namespace gpusched::adapters::deviceplugin {

common::Status CheckShareWithin(ShareWithin mode, const kube::PodMeta& pod, std::span<const core::GpuShare> shares,
                                std::span<const PodView> node_pods, std::span<const KubeletPod> kubelet,
                                const HandoffLedger& ledger) {
  if (mode == ShareWithin::kAny) {
    return common::Status::Ok();
  }
  std::set<std::string> shared;
  for (const auto& g : shares) {
    if (!g.exclusive && !g.uuid.empty()) {
      shared.insert(g.uuid.str());
    }
  }
  if (shared.empty()) {
    return common::Status::Ok();
  }
  auto group = [mode](const kube::PodMeta& m) {
    return mode == ShareWithin::kNamespace ? m.namespace_ : kube::QueueLabel(m.labels);
  };
  const std::string mine = group(pod);
  auto holds = [&](const PodView& p) {
    for (const auto& e : ledger.entries()) {
      if (e.uid == p.meta.uid) {
        return true;
      }
    }
    for (const KubeletPod& kp : kubelet) {
      if (kp.Key() != p.meta.Key()) {
        continue;
      }
      for (const auto& c : kp.containers) {
        for (const auto& [resource, ids] : c.devices) {
          if (!ids.empty()) {
            return true;
          }
        }
      }
    }
    return false;
  };
  for (const PodView& other : node_pods) {
    if (other.meta.uid == pod.uid || other.meta.Terminal() || group(other.meta) == mine || !holds(other)) {
      continue;
    }
    const std::string* text = other.meta.Annotation(kube::kAnnotationAllocation);
    if (text == nullptr) {
      continue;
    }
    auto allocation = kube::DecodeAllocation(*text, other.meta.uid);
    if (!allocation.ok() || allocation->node.str() != pod.node_name) {
      continue;
    }
    for (const auto& c : allocation->containers) {
      for (const auto& g : c.gpus) {
        if (!g.exclusive && shared.contains(g.uuid.str())) {
          const std::string what = mode == ShareWithin::kNamespace ? "namespace" : "queue";
          auto name = [](const std::string& s) { return s.empty() ? std::string("(none)") : "\"" + s + "\""; };
          return common::FailedPrecondition("shareWithin " + what + ": pod " + pod.Key() + " (" + what + " " +
                                            name(mine) + ") would share GPU " + g.uuid.str() + " with pod " +
                                            other.meta.Key() + " (" + what + " " + name(group(other.meta)) +
                                            "); GPUs are shared only within one " + what + " on this node");
        }
      }
    }
  }
  return common::Status::Ok();
}

}  // namespace gpusched::adapters::deviceplugin
