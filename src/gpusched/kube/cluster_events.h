#pragma once

// A pod watch event's object as the cluster cache reads it (core/cluster_events.h): identity, node, phase, and for a
// bound pod its priority, application class, gpusched.io/allocation annotation and (when asked) its requests.

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/kube/objects.h"

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

}  // namespace gpusched::kube
