#pragma once

// Scheduler: `gpusched scheduler`'s scheduling, the watches' JSON in and Prometheus text out. Each watch event's
// object is decoded once (kube::DecodeWatchedPod, kube::DecodeNode and the other kube decoders) and handed to the
// scheduling core, sched::SchedulerCore (sched/scheduler_core.h), which holds the queue, the cycle, gangs,
// preemption and reclaim, GPU queues and the binds; its header says what one attempt does. This class adds the
// decoding, the status objects of the GpuQueues and the scheduler's /metrics.
//
// Thread-safety: as sched::SchedulerCore (OnNode and OnPod from the informer threads, ScheduleOne from one
// scheduling thread, binds on the workers; Metrics and stats from anywhere).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/clock.h"
#include "gpusched/common/status.h"
#include "gpusched/kube/cluster_events.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/preemptor.h"
#include "gpusched/sched/cluster_cache.h"
#include "gpusched/sched/scheduler_core.h"

namespace gpusched::scheduler {

using core::EventType;
using ports::PodEvent;
using sched::ClusterCache;
using sched::EventSink;
using sched::SchedulerStats;

// sched::SchedulerCoreOptions, and how pods' requests are read (resources).
struct SchedulerOptions {
  std::vector<std::string> scheduler_names = {"gpusched"};
  std::string policy = "binpack";
  std::vector<std::pair<std::string, double>> weights;
  kube::ResourceConfig resources;
  sched::QueueOptions queue;
  size_t bind_workers = 16;
  int64_t bind_in_flight_ms = 300000;
  int64_t assumed_ttl_ms = 30000;
  uint64_t seed = 0;
  const common::Clock* clock = nullptr;
  std::function<bool()> may_bind;
  ports::Preemptor* preemptor = nullptr;
  sched::SnapshotSources snapshots;
  policy::LoadAwareOptions load_aware;
  policy::InterferenceAwareOptions interference_aware;
};

class Scheduler {
 public:
  static common::Result<std::unique_ptr<Scheduler>> Create(ClusterCache& cache, ports::Binder& binder, EventSink events,
                                                           SchedulerOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The watches, in event order per resource (the informers' handlers); see sched::SchedulerCore for each. An
  // object that cannot be read is logged (a PodDisruptionBudget, PodGroup or GpuQueue keeps its last readable
  // version).
  void OnNode(EventType type, const nlohmann::json& node);
  void OnPod(EventType type, const nlohmann::json& pod);
  void OnDisruptionBudget(EventType type, const nlohmann::json& pdb);
  void OnNamespace(EventType type, const nlohmann::json& ns);
  void OnGpuQueue(EventType type, const nlohmann::json& queue);
  void OnPodGroup(EventType type, const nlohmann::json& group);

  bool ScheduleOne() { return core_->ScheduleOne(); }
  size_t ExpireAssumed() { return core_->ExpireAssumed(); }
  void Start() { core_->Start(); }
  void Stop() { core_->Stop(); }
  void Wake() { core_->Wake(); }
  [[nodiscard]] bool StillPending(const std::string& uid) const { return core_->StillPending(uid); }

  [[nodiscard]] SchedulerStats stats() const { return core_->stats(); }
  [[nodiscard]] sched::SchedulingQueue::Counts queue_counts() const { return core_->queue_counts(); }
  [[nodiscard]] const SchedulerOptions& options() const { return options_; }
  [[nodiscard]] std::vector<sched::QueueStatus> QueueStatuses() const { return core_->QueueStatuses(); }
  [[nodiscard]] std::map<std::string, std::string> QueueErrors() const { return core_->QueueErrors(); }
  // The status of every GpuQueue object seen (by name), as its status subresource holds it: allocated, guaranteed,
  // limit and fairShare ({gpus, gpuMilli, gpuMemoryMiB}; unlimited amounts left out), runningPods, pendingPods,
  // reclaimedPods, and a Valid condition (False with the reason when the queue is left out).
  [[nodiscard]] std::map<std::string, nlohmann::json> QueueStatusObjects() const;
  // Prometheus text: gpusched_scheduler_pending_pods{queue}, _oldest_pending_seconds, _schedule_attempts_total{result},
  // _binds_total{result}, _expired_assumptions_total, _attempt_duration_seconds, _e2e_scheduling_duration_seconds
  // (first seen pending to bound), and the node gauges of the cluster.
  [[nodiscard]] std::string Metrics() const;

  [[nodiscard]] sched::SchedulerCore& core() { return *core_; }

 private:
  struct Telemetry;
  Scheduler(SchedulerOptions options, std::shared_ptr<Telemetry> telemetry);

  const SchedulerOptions options_;
  kube::WatchedPodOptions decode_;
  std::shared_ptr<Telemetry> telemetry_;  // shared with the core's observers
  std::unique_ptr<sched::SchedulerCore> core_;
};

}  // namespace gpusched::scheduler
