#pragma once

// ClusterMirror: the extender's cluster cache (sched::ClusterCache, which holds the accounting) fed straight from
// the API server's watches: each node and pod JSON object is decoded by kube/ (DecodeNode, DecodePodUpdate) and
// applied. The extender charges the GPUs of pods that carry gpusched.io/allocation only; kube-scheduler accounts
// CPU and memory.

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/sched/cluster_cache.h"

namespace gpusched::extender {

using core::EventType;
using MirrorOptions = sched::CacheOptions;
using MirrorStats = sched::CacheStats;

class ClusterMirror : public sched::ClusterCache {
 public:
  ClusterMirror() : ClusterMirror(MirrorOptions{}) {}
  explicit ClusterMirror(std::string app_label) : ClusterMirror(MirrorOptions{.app_label = std::move(app_label)}) {}
  explicit ClusterMirror(MirrorOptions options);

  void OnNode(EventType type, const nlohmann::json& node);
  void OnPod(EventType type, const nlohmann::json& pod);
};

}  // namespace gpusched::extender
