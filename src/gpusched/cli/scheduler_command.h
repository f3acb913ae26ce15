#pragma once

// `gpusched scheduler`: the standalone GPU scheduler (scheduler/scheduler.h) wired to the API server. Wiring only.
//
//   informers       nodes and pods (only the fields scheduling reads are kept), feeding the Scheduler
//   binder          one POST of each pod's Binding, with the allocation in its annotations
//   events          FailedScheduling / Scheduled Events and the PodScheduled condition, off the scheduling path
//   leader election a coordination.k8s.io Lease (15 s / 10 s / 2 s by default, as kube-scheduler): only the leader
//                   schedules; standbys keep their caches warm; a leader that cannot renew stops binding before
//                   its lease can expire, and a new leader waits one retry period before its first bind
//   HTTP            GET /healthz (200 while the process runs), /readyz (200 when the caches are synced, the
//                   watches are live and this replica leads; 503 with the reason otherwise, standbys included),
//                   /metrics — through the hardened server layer, read-only
// SIGINT or SIGTERM: scheduling stops, binds in flight finish, the lease is released, the process exits 0.

#include <string>
#include "gpusched/cli/live_inputs.h"
#include "gpusched/cli/logging.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct SchedulerFlags {
  std::string config;      // YAML (scheduler/config.h); optional
  std::string kubeconfig;  // overrides the config's
  std::string listen;      // host:port, overrides the config's
  std::string policy;      // overrides the config's
  // The slowdown model file (`gpusched-lab interference train`); given, it turns the config's interference.enabled on.
  std::string interference_model;
  bool verbose = false;
  LogFlags log;
  std::string context;  // kubeconfig context (--context); empty: current-context
};

void AddSchedulerCommand(CLI::App& app, SchedulerFlags& flags, int& exit_code);

// Runs until SIGINT or SIGTERM; returns the process exit code. With interference enabled (config or
// --interference-model), `load_model` reads the model at start-up; a missing loader or file fails the start.
int RunScheduler(const SchedulerFlags& flags, const SlowdownModelLoader& load_model = {});

}  // namespace gpusched::cli
