#pragma once

// ProductionScheduler: the scheduling core of `gpusched scheduler` (sched::SchedulerCore) over in-memory ports and
// simulated time, for the simulator's modes that replay pods arriving and leaving (--tenants, --replay time).
//
// The simulation says what happens in the cluster (Add: a pod is created; Remove: a pod ends; SetTime) and runs
// the scheduler's attempts (RunAttempts); what the scheduler does comes back as the watch would show it: a Binding
// always lands and the pod shows bound at once (on_bound), an eviction always succeeds and the pod is gone at once
// (on_evicted, with the queue of the pod that preempted). Nothing here decides placement, order, gangs, quota or
// reclaim: that is the core's.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/common/clock.h"
#include "gpusched/common/status.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/preemptor.h"
#include "gpusched/sched/cluster_cache.h"
#include "gpusched/sched/scheduler_core.h"

namespace gpusched::sim {

class ProductionScheduler {
 public:
  // `options`: the core's (its clock is set here; scheduler names default to "gpusched"). `queues`: GPU queues,
  // each serving the namespace of its name (pods of namespace q are queue q's). `preemption`: the scheduler may
  // preempt and reclaim (evicting through the in-memory Preemptor); else it never evicts.
  static common::Result<std::unique_ptr<ProductionScheduler>> Create(const std::vector<core::Node>& nodes,
                                                                     const std::vector<core::QueueSpec>& queues,
                                                                     sched::SchedulerCoreOptions options,
                                                                     bool preemption);
  ~ProductionScheduler();
  ProductionScheduler(const ProductionScheduler&) = delete;
  ProductionScheduler& operator=(const ProductionScheduler&) = delete;

  void SetTime(int64_t seconds);
  // A pod is created: `pod` with its uid, namespace, name, labels, priority and gang set.
  void Add(const core::PodRequest& pod);
  // A bound pod ends (completed; or gone after an eviction, which on_evicted reports and this applies).
  void Remove(const common::PodUid& uid);

  using OnBound = std::function<void(const common::PodUid&, const core::Allocation&)>;
  using OnEvicted = std::function<void(const common::PodUid& victim, const std::string& by_queue)>;
  // The scheduler's attempts until no pod is ready; every Binding and eviction reported as it lands (an evicted
  // pod is removed before on_evicted).
  void RunAttempts(const OnBound& on_bound, const OnEvicted& on_evicted);
  // When a backoff ends (seconds, rounded up), if a pod waits for one.
  [[nodiscard]] std::optional<int64_t> NextWakeSeconds() const;

  [[nodiscard]] sched::SchedulerCore& core() { return *core_; }
  [[nodiscard]] const sched::ClusterCache& cache() const { return cache_; }

 private:
  class Clock final : public common::Clock {
   public:
    [[nodiscard]] int64_t NowMs() const override { return now_ms; }
    int64_t now_ms = 0;
  };
  class Binder final : public ports::Binder {
   public:
    common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) override;
    std::vector<std::pair<common::PodUid, core::Allocation>> bound;
  };
  class Preemptor final : public ports::Preemptor {
   public:
    common::Status Evict(const std::string& ns, const std::string& name, const common::PodUid& uid) override;
    common::Status Nominate(const std::string& ns, const std::string& name, const std::string& node) override;
    std::vector<std::pair<common::PodUid, std::string>> evicted;  // victim, the preemptor's namespace
    std::string by;
  };
  struct Known {
    core::PodRequest pod;
    int64_t created_ms = 0;
    std::optional<core::Allocation> bound;
  };

  ProductionScheduler();
  [[nodiscard]] static core::WatchedPod Watched(const Known& k);

  Clock clock_;
  Binder binder_;
  Preemptor preemptor_;
  sched::ClusterCache cache_;
  std::unique_ptr<sched::SchedulerCore> core_;
  std::unordered_map<std::string, Known> pods_;  // by uid: created and not yet removed
};

}  // namespace gpusched::sim
