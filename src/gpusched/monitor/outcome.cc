#include "gpusched/monitor/outcome.h"

namespace gpusched::monitor {
namespace {

using nlohmann::json;

// The condition of `type` in status.conditions, or nullptr.
const json* Condition(const json& object, const std::string& type) {
  const json* conds = nullptr;
  if (object.contains("status") && object["status"].is_object() && object["status"].contains("conditions")) {
    conds = &object["status"]["conditions"];
  }
  if (conds == nullptr || !conds->is_array()) {
    return nullptr;
  }
  for (const json& c : *conds) {
    if (c.is_object() && c.value("type", "") == type) {
      return &c;
    }
  }
  return nullptr;
}

bool IsTrue(const json* condition) { return condition != nullptr && condition->value("status", "") == "True"; }

std::string ConditionText(const json& c) {
  std::string reason = c.value("reason", "");
  const std::string message = c.value("message", "");
  if (!message.empty()) {
    reason += (reason.empty() ? "" : ": ") + message;
  }
  return reason;
}

// The first container status (init containers first) that waits or ended, as "<container>: <reason>".
std::string ContainerReason(const json& status, const char* field) {
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    if (!status.contains(list) || !status[list].is_array()) {
      continue;
    }
    for (const json& cs : status[list]) {
      const json state = cs.value("state", json::object());
      if (!state.is_object() || !state.contains(field) || !state[field].is_object()) {
        continue;
      }
      const json& s = state[field];
      if (std::string(field) == "terminated" && s.value("exitCode", 0) == 0) {
        continue;
      }
      std::string text = cs.value("name", "") + ": " + s.value("reason", std::string(field));
      if (s.contains("exitCode")) {
        text += " (exit code " + std::to_string(s.value("exitCode", 0)) + ")";
      }
      const std::string message = s.value("message", "");
      if (!message.empty()) {
        text += ": " + message;
      }
      return text;
    }
  }
  return "";
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kPending:
      return "Pending";
    case Phase::kRunning:
      return "Running";
    case Phase::kSucceeded:
      return "Succeeded";
    case Phase::kFailed:
      return "Failed";
  }
  return "?";
}

ObjectState PodState(const json& pod) {
  ObjectState out;
  const json spec = pod.value("spec", json::object());
  const json status = pod.value("status", json::object());
  out.scheduled = spec.is_object() && !spec.value("nodeName", "").empty();
  const std::string phase = status.is_object() ? status.value("phase", "") : "";
  if (phase == "Succeeded") {
    out.phase = Phase::kSucceeded;
    return out;
  }
  if (phase == "Failed") {
    out.phase = Phase::kFailed;
    std::string why = status.value("reason", "");
    const std::string message = status.value("message", "");
    if (!message.empty()) {
      why += (why.empty() ? "" : ": ") + message;
    }
    out.reason = why.empty() ? ContainerReason(status, "terminated") : why;
    if (out.reason.empty()) {
      out.reason = "the pod failed";
    }
    return out;
  }
  if (phase == "Running") {
    out.phase = Phase::kRunning;
    return out;
  }
  out.phase = Phase::kPending;
  if (!out.scheduled) {
    const json* sched = Condition(pod, "PodScheduled");
    out.reason = (sched != nullptr && !IsTrue(sched)) ? ConditionText(*sched) : "waiting to be scheduled";
    if (out.reason.empty()) {
      out.reason = "waiting to be scheduled";
    }
  } else {
    const std::string waiting = status.is_object() ? ContainerReason(status, "waiting") : "";
    out.reason = waiting.empty() ? "scheduled to " + spec.value("nodeName", "") + ", starting" : waiting;
  }
  return out;
}

ObjectState JobState(const json& job) {
  ObjectState out;
  if (const json* c = Condition(job, "Failed"); IsTrue(c)) {
    out.phase = Phase::kFailed;
    out.reason = ConditionText(*c);
    if (out.reason.empty()) {
      out.reason = "the job failed";
    }
    return out;
  }
  if (IsTrue(Condition(job, "Complete"))) {
    out.phase = Phase::kSucceeded;
    return out;
  }
  const json status = job.value("status", json::object());
  const int64_t active = status.is_object() ? status.value("active", int64_t{0}) : 0;
  out.phase = active > 0 ? Phase::kRunning : Phase::kPending;
  if (active == 0) {
    out.reason = "no active pod yet";
  }
  return out;
}

ObjectState DeploymentState(const json& deployment) {
  ObjectState out;
  const json spec = deployment.value("spec", json::object());
  const json status = deployment.value("status", json::object());
  const int64_t want = spec.is_object() && spec.contains("replicas") && spec["replicas"].is_number_integer()
                           ? spec["replicas"].get<int64_t>()
                           : 1;
  const int64_t ready = status.is_object() ? status.value("availableReplicas", int64_t{0}) : 0;
  if (ready >= want) {
    out.phase = Phase::kRunning;
    return out;
  }
  out.phase = Phase::kPending;
  out.reason = std::to_string(ready) + " of " + std::to_string(want) + " replicas available";
  return out;
}

ObjectState StateOf(WaitKind kind, const std::optional<json>& object) {
  if (!object) {
    return {.phase = Phase::kFailed, .scheduled = false, .reason = "deleted while it ran"};
  }
  switch (kind) {
    case WaitKind::kPod:
      return PodState(*object);
    case WaitKind::kJob:
      return JobState(*object);
    case WaitKind::kDeployment:
      return DeploymentState(*object);
    case WaitKind::kNone:
      break;
  }
  return {.phase = Phase::kSucceeded, .scheduled = true, .reason = ""};
}

ObjectState Combine(const std::vector<ObjectState>& states) {
  ObjectState out{.phase = Phase::kSucceeded, .scheduled = true, .reason = ""};
  bool any_pending = false;
  bool all_succeeded = true;
  for (const ObjectState& s : states) {
    if (s.phase == Phase::kFailed) {
      return s;
    }
    out.scheduled = out.scheduled && s.scheduled;
    if (s.phase == Phase::kPending && !any_pending) {
      any_pending = true;
      out.reason = s.reason;
    }
    all_succeeded = all_succeeded && s.phase == Phase::kSucceeded;
  }
  out.phase = all_succeeded ? Phase::kSucceeded : (any_pending ? Phase::kPending : Phase::kRunning);
  if (out.phase != Phase::kPending) {
    out.reason.clear();
  }
  return out;
}

}  // namespace gpusched::monitor
