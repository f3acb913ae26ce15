#pragma once

// MpsEnforcer: keeps the MPS control daemon's limits (mps_control.h) in step with the node's pods, for the agent.
//
//   Admit(pod, entry, shares)  the device plugin's Allocate, before the container starts: reads the pod (a quorum
//                              read, for its securityContext), adds the container to the clients and applies. An
//                              error refuses the container: its limits could not be set.
//   every interval             applies for the pods the agent's pod cache lists (pods that left raise the limits
//                              again, servers that appeared get theirs, a restarted daemon gets everything again).
// A container admitted here stays among the clients until the pod cache lists its pod (the cache may lag the
// Allocate; dropping it earlier would raise the defaults back above its share before its first process started) or
// for admitted_rounds rounds at most (a pod deleted before the cache ever saw it).
//
// Threading: Start() makes the first round and starts the thread; every method is thread-safe.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/deviceplugin/mps_control.h"
#include "gpusched/common/status.h"
#include "gpusched/common/worker_thread.h"
#include "gpusched/core/allocation.h"
#include "gpusched/kube/objects.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::deviceplugin {

struct MpsEnforcerOptions {
  std::string node;
  MpsPlanOptions plan;  // its gpus come from OnSamples
  std::chrono::milliseconds interval{5000};
  std::function<std::vector<nlohmann::json>()> pods;  // the node's pods now (a cache)
  // One pod by name, for the uid of a container at Allocate: the cache first (the agent's), the API server only for
  // a pod the cache lacks, so an MPS container starts while the API server is down like any other.
  std::function<common::Result<nlohmann::json>(const std::string& ns, const std::string& name)> get_pod;
  int admitted_rounds = 120;
};

class MpsEnforcer {
 public:
  // `runner` must outlive the enforcer.
  MpsEnforcer(MpsControlRunner& runner, MpsEnforcerOptions options);
  ~MpsEnforcer();  // Stop()
  MpsEnforcer(const MpsEnforcer&) = delete;
  MpsEnforcer& operator=(const MpsEnforcer&) = delete;

  [[nodiscard]] common::Status Start();  // bad options are errors; a failed first round is not (status())
  void Stop();

  [[nodiscard]] common::Status Admit(const kube::PodMeta& pod, const std::string& entry,
                                     std::span<const core::GpuShare> shares);
  void OnSamples(std::span<const ports::GpuSample> samples);  // the node's GPUs
  void RoundNow();

  [[nodiscard]] common::Status status() const;  // the last round's
  // gpusched_agent_mps_limits_ok (gauge), _commands_total, _failures_total, _daemon_restarts_total (counters).
  [[nodiscard]] std::string RenderMetrics() const;
  [[nodiscard]] const MpsController& controller() const { return controller_; }

 private:
  struct Admitted {
    MpsClient client;
    int rounds = 0;
  };
  [[nodiscard]] std::vector<MpsClient> Clients(const MpsClient* extra);

  MpsEnforcerOptions options_;
  MpsController controller_;
  mutable std::mutex mu_;
  std::map<std::string, Admitted> admitted_;  // pod key + "\n" + entry
  common::Status status_ = common::Unavailable("MPS limits not applied yet");
  common::WorkerThread worker_;
};

}  // namespace gpusched::adapters::deviceplugin
