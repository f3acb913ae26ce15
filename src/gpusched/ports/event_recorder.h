#pragma once

// EventRecorder: tells users about a decision on one of their objects, as a core/v1 Event (in production; a test
// keeps them). Record never blocks the caller on the API server and never fails: a recorder drops, aggregates and
// rate-limits as kube-scheduler's event broadcaster does, and counts what it did.

#include <string>

namespace gpusched::ports {

struct PodEvent {
  std::string namespace_, name, uid;
  std::string type;    // Normal | Warning
  std::string reason;  // CamelCase, e.g. Scheduled, FailedScheduling, GPUsAssigned
  std::string message;
  // The pod fits nowhere: the recorder also sets its PodScheduled=False condition (reason Unschedulable) to the
  // message. Only the scheduler sets it.
  bool unschedulable_condition = false;
};

class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual void Record(PodEvent event) = 0;
};

}  // namespace gpusched::ports
