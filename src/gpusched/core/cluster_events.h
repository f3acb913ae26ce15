#pragma once

// What the cluster cache (sched/cluster_cache.h) learns from the API server's watches, already decoded
// (kube/cluster_events.h reads it from Kubernetes objects): the kind of a watch event, and the facts of a pod that
// its accounting needs. Nodes arrive as core::Node.

#include <cstdint>
#include <optional>
#include <string>

#include "gpusched/common/ids.h"
#include "gpusched/core/allocation.h"

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

}  // namespace gpusched::core
