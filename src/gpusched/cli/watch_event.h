#pragma once

// The informers' watch event types as the cluster cache's (both daemons that keep one use this one mapping).

#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/core/cluster_events.h"

namespace gpusched::cli {

inline core::EventType ToEvent(adapters::k8s::WatchEvent::Type t) {
  switch (t) {
    case adapters::k8s::WatchEvent::Type::kAdded:
      return core::EventType::kAdded;
    case adapters::k8s::WatchEvent::Type::kModified:
      return core::EventType::kModified;
    case adapters::k8s::WatchEvent::Type::kDeleted:
      return core::EventType::kDeleted;
  }
  return core::EventType::kModified;
}

}  // namespace gpusched::cli
