#pragma once

// What the cluster cache (sched/cluster_cache.h) learns from the API server's watches, already decoded
// (kube/cluster_events.h reads it from Kubernetes objects): the kind of a watch event, and the facts of a pod that
// its accounting needs. Nodes arrive as core::Node.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::core {

enum class EventType { kAdded, kModified, kDeleted };

struct PodUpdate {
  common::PodUid uid;
  std::string key;        // namespace/name, for log lines
  std::string node_name;  // spec.nodeName; empty while unscheduled
  bool terminal = false;  // Succeeded or Failed: what it held is free again
  // The rest is read only for a pod that is bound and not terminal.
  std::optional<int32_t> priority;  // spec.priority, when an integer
  std::string app;                  // application class (gpusched.io/app, else the configured label)
  // Its namespace and the queue its label gpusched.io/queue names ("" without): its share group (share_within.h).
  std::string namespace_;
  std::string queue;
  // The gpusched.io/allocation annotation: absent, read (allocation), or unreadable (allocation_error says why).
  bool annotated = false;
  std::optional<Allocation> allocation;
  std::string allocation_error;
  // With requests read (the cache charges every pod): CPU, memory, other resources and host ports in an allocation
  // without GPUs; requests_error when they cannot be read (then charged as zero).
  std::optional<Allocation> requests;
  std::string requests_error;
};

// A pod watch event's object decoded once (kube::DecodeWatchedPod) into everything the scheduling core reads of
// it: what the cluster cache charges (update), its identity and life cycle, and by what it is:
//   bound (node_name set, not terminal): its priority, gang and required anti-affinity, as a placed pod counts;
//   waiting for this scheduler (unbound, not deleting, one of its scheduler names): its request, the scheduling
//   fields not evaluated, and the fingerprint of what requeues it (spec, labels, annotations; not its status).
// The simulator builds the same from its trace pods, without JSON.
struct WatchedPod {
  // What the cluster cache reads; an error for a pod whose metadata cannot be read or that has no uid.
  common::Result<PodUpdate> update = common::InvalidArgument("not decoded");
  common::PodUid uid;  // empty: not identified (nothing else is read)
  std::string namespace_, name, node_name, scheduler_name;
  bool deleting = false;  // metadata.deletionTimestamp is set
  bool terminal = false;  // Succeeded or Failed
  std::map<std::string, std::string> labels;
  int64_t created_ms = 0;  // metadata.creationTimestamp (wall ms); 0 when absent or unreadable
  // Bound:
  int32_t priority = 0;  // as pending pods are ordered (0 where a priority label is not an integer)
  std::string pod_group;
  int32_t min_available = 0;
  bool coscheduling = false;  // the group is named by the coscheduling label: its PodGroup's minMember applies
  std::vector<PodAffinityTerm> anti_affinity;
  std::string anti_affinity_error;  // why its anti-affinity cannot be counted; empty when it can
  // Waiting for this scheduler (`pending`):
  bool pending = false;
  common::Result<PodRequest> request = common::InvalidArgument("not decoded");
  std::vector<std::string> unevaluated_hard, unevaluated_soft;
  size_t fingerprint = 0;

  [[nodiscard]] std::string Key() const { return namespace_ + "/" + name; }
};

}  // namespace gpusched::core
