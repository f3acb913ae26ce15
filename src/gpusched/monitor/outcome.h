#pragma once

// Where a watched object stands, read from the object the API server returns.
//
//   Pod:        Pending (unscheduled: the reason is the PodScheduled condition's message, as kube-scheduler and
//               gpusched's scheduler write it; scheduled but not started: "ContainerCreating" or the waiting
//               container's reason), Running, Succeeded, Failed (the status reason/message, else the first
//               terminated container's reason and exit code).
//   batch/v1 Job: its Complete / Failed conditions (status True) end it; otherwise Running once it has an active
//               pod, else Pending.
//   apps/v1 Deployment: Running once every wanted replica is available (readyReplicas >= spec.replicas, default 1),
//               else Pending; it never ends by itself (the monitor ends it after --duration).
// A deleted object (nullopt) is Failed with "deleted while it ran".

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gpusched/monitor/manifest.h"

namespace gpusched::monitor {

enum class Phase { kPending, kRunning, kSucceeded, kFailed };

[[nodiscard]] const char* PhaseName(Phase phase);
[[nodiscard]] inline bool Ended(Phase p) { return p == Phase::kSucceeded || p == Phase::kFailed; }

struct ObjectState {
  Phase phase = Phase::kPending;
  bool scheduled = false;  // a Pod with spec.nodeName; a Job or Deployment whose pods are all scheduled (see Combine)
  std::string reason;      // why it waits or why it failed; empty otherwise
};

[[nodiscard]] ObjectState PodState(const nlohmann::json& pod);
[[nodiscard]] ObjectState JobState(const nlohmann::json& job);
[[nodiscard]] ObjectState DeploymentState(const nlohmann::json& deployment);
[[nodiscard]] ObjectState StateOf(WaitKind kind, const std::optional<nlohmann::json>& object);

// The workload's state from those of the objects it waits on: Failed as soon as one failed (its reason);
// Succeeded when all succeeded; Running when none is Pending; Pending otherwise (the first waiting reason).
[[nodiscard]] ObjectState Combine(const std::vector<ObjectState>& states);

}  // namespace gpusched::monitor
