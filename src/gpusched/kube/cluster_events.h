#pragma once

// A pod watch event's object as the cluster cache reads it (core/cluster_events.h): identity, node, phase, and for a
// bound pod its priority, application class, gpusched.io/allocation annotation and (when asked) its requests.

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

namespace gpusched::kube {

// InvalidArgument when the pod's metadata cannot be read or it has no uid. `app_label`: the label naming the
// application class where the annotation gpusched.io/app is absent (empty: the annotation only). `with_requests`:
// also read the requests (CPU, memory, other resources, host ports) of a bound pod.
[[nodiscard]] common::Result<core::PodUpdate> DecodePodUpdate(const nlohmann::json& pod, std::string_view app_label,
                                                              bool with_requests);
// The same for a caller that has decoded the pod's metadata already (`meta`, DecodePodMeta of `pod`).
[[nodiscard]] common::Result<core::PodUpdate> DecodePodUpdate(const nlohmann::json& pod, const PodMeta& meta,
                                                              std::string_view app_label, bool with_requests);

// metadata.name of a node (all a deleted node's event needs); InvalidArgument without one.
[[nodiscard]] common::Result<common::NodeName> DecodeNodeName(const nlohmann::json& node);

// What the scheduling core reads of a pod watch event's object (core::WatchedPod), decoded once. A pod without
// readable metadata or uid: `update` is the error and `uid` is empty. A bound pod's anti-affinity that cannot be
// read is anti_affinity_error; its priority label that is not an integer reads as 0.
struct WatchedPodOptions {
  ResourceConfig resources;    // how a waiting pod's request is read
  std::string app_label;       // as in DecodePodUpdate
  bool with_requests = false;  // as in DecodePodUpdate
  // Whether a pod naming this spec.schedulerName ("" reads as default-scheduler) waits for this scheduler; null:
  // none does.
  std::function<bool(const std::string&)> ours;
};
[[nodiscard]] core::WatchedPod DecodeWatchedPod(const nlohmann::json& pod, const WatchedPodOptions& options);

// The fingerprint of what requeues a waiting pod when it changes: its spec, labels and annotations.
[[nodiscard]] size_t PodFingerprint(const nlohmann::json& pod);

}  // namespace gpusched::kube
