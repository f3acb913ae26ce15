#pragma once

// The informers' watch event types as the cluster mirror's (both daemons that keep a mirror use this one mapping).

#include "gpusched/adapters/extender/state.h"
#include "gpusched/adapters/k8s/informer.h"

namespace gpusched::cli {

inline adapters::extender::EventType ToEvent(adapters::k8s::WatchEvent::Type t) {
  switch (t) {
    case adapters::k8s::WatchEvent::Type::kAdded:
      return adapters::extender::EventType::kAdded;
    case adapters::k8s::WatchEvent::Type::kModified:
      return adapters::extender::EventType::kModified;
    case adapters::k8s::WatchEvent::Type::kDeleted:
      return adapters::extender::EventType::kDeleted;
  }
  return adapters::extender::EventType::kModified;
}

}  // namespace gpusched::cli
