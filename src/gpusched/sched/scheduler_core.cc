#include "gpusched/sched/scheduler_core.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <utility>

#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sched/allocation_text.h"
#include "gpusched/sched/node_predicates.h"
#include "gpusched/sched/preemption.h"

namespace gpusched::sched {

namespace {

void LogLine(common::LogLevel level, const std::string& message) {
  common::Log(level, "gpusched scheduler: " + message);
}
void LogLine(common::LogLevel level, const std::string& message, std::initializer_list<common::LogField> fields) {
  common::Log(level, "gpusched scheduler: " + message, fields);
}

// What a summary's rejections were blocked by: the queue wakes the pod only for events that can free that.
uint32_t BlockersOf(const sched::CycleResult& result, const core::PodRequest& pod, const core::ClusterState& state,
                    const sched::InterPodConstraints& inter_pod) {
  if (result.considered_nodes == 0) {
    return sched::kBlockedByNodeSpec;  // no node at all: a node added is what helps
  }
  if (result.rejections.empty()) {
    // Reasons not collected (the simulator): whatever a node can lack, and what inter-pod rules wait for.
    return sched::kBlockedByGpu | sched::kBlockedByResources | sched::kBlockedByNodeSpec |
           (inter_pod.Active() ? sched::kBlockedByPods | sched::kBlockedByPodAdded : 0U);
  }
  uint32_t blockers = 0;
  for (const auto& [name, fit] : result.rejections) {
    const core::NodeView* view = state.Find(name);
    if (view == nullptr) {
      continue;
    }
    if (!sched::CheckNodeConstraints(pod, *view->node).empty()) {
      blockers |= sched::kBlockedByNodeSpec;
    } else if (!sched::FitNodeResources(pod, *view).fits()) {
      blockers |= sched::kBlockedByResources;
    } else if (const uint32_t b = inter_pod.Blockers(*view->node); b != 0) {
      blockers |= b;  // a pod leaving or placed, or new labels on a node, as the failed rule says
    } else {
      blockers |= sched::kBlockedByGpu;
    }
  }
  return blockers == 0 ? sched::kBlockedByAnything : blockers;
}

std::string Join(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) {
    s += (s.empty() ? "" : ", ") + i;
  }
  return s;
}

common::PodUid ReservationUid(const std::string& uid) { return common::PodUid("nominated/" + uid); }
bool IsReservation(const common::PodUid& uid) { return uid.str().starts_with("nominated/"); }

// What a placed pod's leaving (or an assumption forgotten) may free: room on its node, an inter-pod conflict, and
// quota of its GPU queue.
constexpr uint32_t kFreedByRelease =
    sched::kBlockedByGpu | sched::kBlockedByResources | sched::kBlockedByPods | sched::kBlockedByQuota;
// Of that, what is room on the node it held.
constexpr uint32_t kFreedByRoom = sched::kBlockedByGpu | sched::kBlockedByResources;

// The GPUs of every live node, as GPU queues count them (whole GPUs, compute, memory).
core::GpuAmount GpuCapacity(const core::ClusterState& state) {
  core::GpuAmount total;
  for (size_t i = 0; i < state.SlotCount(); ++i) {
    if (!state.IsLive(i) || state.View(i).node == nullptr) {
      continue;
    }
    for (const core::Gpu& g : state.View(i).node->gpus) {
      total += core::GpuAmount{1, common::kGpuMilli.value(), g.memory.value()};
    }
  }
  return total;
}

// How a gang is known across the scheduler's indexes: its namespace and name.
std::string GroupKey(const std::string& namespace_, const std::string& group) { return namespace_ + "/" + group; }

std::vector<std::pair<const policy::PlacementPolicy*, double>> ScoreMix(
    const std::vector<std::unique_ptr<policy::PlacementPolicy>>& scorers,
    const std::vector<std::pair<std::string, double>>& weights) {
  std::vector<std::pair<const policy::PlacementPolicy*, double>> mix;
  for (size_t i = 0; i < scorers.size() && i < weights.size(); ++i) {
    mix.emplace_back(scorers[i].get(), weights[i].second);
  }
  return mix;
}

}  // namespace

common::Result<std::unique_ptr<SchedulerCore>> SchedulerCore::Create(ClusterCache& cache, ports::Binder& binder,
                                                                     EventSink events, SchedulerCoreOptions options) {
  if (options.scheduler_names.empty()) {
    return common::InvalidArgument("scheduler: no scheduler names (no pod would ever be scheduled)");
  }
  if (options.bind_workers == 0 || options.bind_in_flight_ms <= 0 || options.assumed_ttl_ms <= 0) {
    return common::InvalidArgument("scheduler: bind workers and the assumption times must be positive");
  }
  const policy::PolicyOptions policy_options{
      .target_workload = options.target_workload != nullptr ? options.target_workload : policy::DefaultTargetWorkload(),
      .gpus_by_model = options.gpus_by_model,
      .load_aware = options.load_aware,
      .interference_aware = options.interference_aware};
  // Every policy the profile runs must read nothing the scheduler is not given (it declares what it reads).
  const sched::SnapshotSources& given = options.snapshots;
  auto make = [&policy_options, &given](
                  const std::string& name,
                  const std::string& role) -> common::Result<std::unique_ptr<policy::PlacementPolicy>> {
    auto made = policy::MakePolicy(name, policy_options);
    if (!made.ok()) {
      return common::InvalidArgument("scheduler: " + role + ": " + made.status().message());
    }
    const policy::Inputs reads = (*made)->Reads();
    if (reads.gpu_metrics && !given.Provide(policy::Inputs{.gpu_metrics = true})) {
      return common::InvalidArgument("scheduler: " + role + " " + name +
                                     " reads live GPU metrics: configure a source (metrics.prometheus or "
                                     "metrics.influxdb)");
    }
    if (reads.interference_forecast && !given.Provide(policy::Inputs{.interference_forecast = true})) {
      return common::InvalidArgument("scheduler: " + role + " " + name +
                                     " reads an interference forecast: set interference.enabled and give the model "
                                     "(--interference-model FILE)");
    }
    return made;
  };
  GPUSCHED_ASSIGN_OR_RETURN(primary, make(options.policy, "policy"));
  std::vector<std::unique_ptr<policy::PlacementPolicy>> scorers;
  for (const auto& [name, weight] : options.weights) {
    if (!(weight > 0)) {
      return common::InvalidArgument("scheduler: weights: " + name + " has weight " + std::to_string(weight) +
                                     ", must be positive");
    }
    GPUSCHED_ASSIGN_OR_RETURN(scorer, make(name, "weights: policy"));
    scorers.push_back(std::move(scorer));
  }
  return std::unique_ptr<SchedulerCore>(
      new SchedulerCore(cache, binder, std::move(events), std::move(options), std::move(primary), std::move(scorers)));
}

SchedulerCore::SchedulerCore(ClusterCache& cache, ports::Binder& binder, EventSink events, SchedulerCoreOptions options,
                             std::unique_ptr<policy::PlacementPolicy> policy,
                             std::vector<std::unique_ptr<policy::PlacementPolicy>> scorers)
    : cache_(cache),
      binder_(binder),
      events_(std::move(events)),
      options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : common::SystemClock::Instance()),
      policy_(std::move(policy)),
      scorers_(std::move(scorers)),
      queue_(clock_, options_.queue),
      runner_(*policy_,
              sched::CycleOptions{.check_node_resources = true,
                                  .check_node_constraints = true,
                                  .collect_reasons = options_.collect_reasons,
                                  .tie_rank = options_.tie_rank,
                                  .stable_ties = options_.tie_rank.empty()},
              ScoreMix(scorers_, options_.weights)),
      snapshots_(options_.snapshots),
      rng_(options_.seed != 0 ? options_.seed
                              : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {
  queue_.SetQueueChooser([this](std::span<const std::string* const> queues) { return gpu_queues_.Lowest(queues); });
  std::vector<const policy::PlacementPolicy*> used = {policy_.get()};
  for (const auto& scorer : scorers_) {
    used.push_back(scorer.get());
  }
  wants_forecast_ = snapshots_.WantsForecast(used);
  // Room freed on a node can be matched against a pod by the node's filters alone unless a policy filters by what
  // a snapshot holds.
  hint_room_ = std::none_of(used.begin(), used.end(), [](const policy::PlacementPolicy* p) {
    const policy::Inputs reads = p->Reads();
    return reads.gpu_metrics || reads.interference_forecast;
  });
}

policy::Snapshot SchedulerCore::SnapshotFor(const core::PodRequest& request, const core::ClusterState& state,
                                            sched::SnapshotBuilder::Hold& hold) {
  std::vector<size_t> slots;
  if (wants_forecast_) {
    slots.reserve(state.NodeCount());
    for (size_t i = 0; i < state.SlotCount(); ++i) {
      if (state.IsLive(i)) {
        slots.push_back(i);
      }
    }
  }
  return snapshots_.Build(
      request.app, state, slots, [this](const common::PodUid& uid) { return cache_.AppOf(uid); }, wants_forecast_,
      hold);
}

SchedulerCore::~SchedulerCore() { Stop(); }

bool SchedulerCore::Serves(const std::string& scheduler_name) const {
  const std::string& name = scheduler_name.empty() ? std::string("default-scheduler") : scheduler_name;
  return std::find(options_.scheduler_names.begin(), options_.scheduler_names.end(), name) !=
         options_.scheduler_names.end();
}

void SchedulerCore::Log(common::LogLevel level, const std::string& message) const {
  if (level >= options_.min_log_level) {
    LogLine(level, message);
  }
}

void SchedulerCore::Log(common::LogLevel level, const std::string& message,
                        std::initializer_list<common::LogField> fields) const {
  if (level >= options_.min_log_level) {
    LogLine(level, message, fields);
  }
}

void SchedulerCore::Emit(PodEvent event) const {
  if (events_) {
    events_(std::move(event));
  }
}

void SchedulerCore::Wake() {
  {
    std::lock_guard lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_all();
}

void SchedulerCore::OnNodeDeleted(const common::Result<common::NodeName>& name) {
  if (name.ok()) {
    cache_.ApplyNodeDeleted(*name);
  } else {
    cache_.ApplyNode(name.status());  // counted and logged as a node that cannot be read
  }
  capacity_stale_ = true;  // less room: nothing that waits can fit now
}

void SchedulerCore::OnNode(common::Result<core::Node> node) {
  const common::NodeName name = node.ok() ? node->name : common::NodeName();
  std::shared_ptr<const core::Node> before;
  if (node.ok()) {
    auto lock = cache_.ReadLock();
    if (const core::NodeView* v = cache_.state().Find(name); v != nullptr) {
      before = v->node;
    }
  }
  cache_.ApplyNode(std::move(node));
  capacity_stale_ = true;
  std::shared_ptr<const core::Node> after;
  if (!name.empty()) {
    auto lock = cache_.ReadLock();
    if (const core::NodeView* v = cache_.state().Find(name); v != nullptr) {
      after = v->node;
    }
  }
  const bool changed =
      after != nullptr && (before == nullptr || !before->SameCapacity(*after) || before->labels != after->labels ||
                           before->taints != after->taints || before->unschedulable != after->unschedulable);
  if (changed && queue_.OnClusterEvent(sched::kBlockedByAnything) > 0) {
    Wake();
  }
}

void SchedulerCore::OnPod(EventType type, const core::WatchedPod& pod) {
  if (pod.uid.empty()) {
    cache_.ApplyPod(type, pod.update);  // counts it as rejected
    return;
  }
  const std::string uid = pod.uid.str();
  bool held = false;
  common::NodeName held_on;  // where what it held is
  {
    auto lock = cache_.ReadLock();
    if (const core::Allocation* a = cache_.state().FindAllocation(pod.uid); a != nullptr) {
      held = true;
      held_on = a->node;
    }
  }
  cache_.ApplyPod(type, pod.update);
  const bool gone = type == EventType::kDeleted || pod.terminal;
  core::GpuAmount holds;  // what a bound pod holds of its GPU queue
  if (!gone && !pod.node_name.empty()) {
    auto lock = cache_.ReadLock();
    if (const core::Allocation* a = cache_.state().FindAllocation(pod.uid); a != nullptr) {
      holds = core::DemandOf(*a);
    }
  }
  if (gone || !pod.pending) {
    bool was_pending = false;
    bool placed = false;        // a pod newly seen on a node, or with new labels
    bool leaving = false;       // a placed pod now terminating: spread constraints stop counting it
    std::string below_minimum;  // a gang that this pod's end leaves with fewer placed members than its minimum
    size_t below_minimum_of = 0;
    struct Member {
      std::string namespace_, name, uid;
    };
    std::vector<Member> left_running;
    std::string left_queue;  // the GPU queue a placed pod that is gone counted in
    {
      std::lock_guard lock(mu_);
      was_pending = pending_.erase(uid) > 0;
      if (gone) {
        if (auto r = running_.find(uid); r != running_.end()) {
          left_queue = r->second.queue;
        }
        if (auto r = running_.find(uid); r != running_.end() && !r->second.group.empty()) {
          const size_t before = PlacedInGroup(r->second.group);
          const size_t min = static_cast<size_t>(r->second.min_available);
          if (before == min && min > 1) {  // the group falls below its minimum now: say so, once
            below_minimum = r->second.group;
            for (const std::string& member : placed_by_group_[r->second.group]) {
              if (auto m = running_.find(member); member != uid && m != running_.end()) {
                left_running.push_back({m->second.namespace_, m->second.name, member});
              }
            }
            below_minimum_of = min;
          }
        }
        Unplace(uid);
      } else if (!pod.node_name.empty()) {
        // A bound pod: a possible victim of preemption, and what inter-pod constraints count.
        auto [it, inserted] = running_.try_emplace(uid);
        Running& r = it->second;
        placed = inserted || r.assumed || r.labels != pod.labels || r.node.str() != pod.node_name;
        r.uid = pod.uid;
        r.namespace_ = pod.namespace_;
        r.name = pod.name;
        r.labels = pod.labels;
        r.node = common::NodeName(pod.node_name);
        r.assumed = false;
        r.priority = pod.priority;  // the rule pending pods are ordered by
        leaving = !r.deleting && pod.deleting;
        r.deleting = pod.deleting;
        r.start_ms = pod.created_ms;
        if (!pod.pod_group.empty()) {
          r.group = GroupKey(pod.namespace_, pod.pod_group);
          r.min_available = pod.min_available;
          r.coscheduling = pod.coscheduling;
          if (auto pg = pod_group_min_.find(r.group); r.coscheduling && pg != pod_group_min_.end()) {
            r.min_available = pg->second;
          }
        } else {
          r.group.clear();
          r.min_available = 0;
          r.coscheduling = false;
        }
        r.queue = gpu_queues_.QueueOf(pod.namespace_, core::QueueLabel(pod.labels));
        r.demand = holds;
        if (holds.IsZero()) {
          gpu_queues_.Release(uid);
        } else {
          gpu_queues_.Charge(uid, r.queue, holds);
        }
        r.anti_affinity = pod.anti_affinity;
        if (!pod.anti_affinity_error.empty()) {
          Log(common::LogLevel::kWarn, "pod " + pod.Key() + " on " + pod.node_name +
                                           ": its anti-affinity is not counted: " + pod.anti_affinity_error);
        }
        Reindex(uid, r);
      }
    }
    if (was_pending) {
      queue_.Delete(uid);
      ReofferOrphanedRooms();  // the room it was woken for, if it was
      DropNomination(uid);
      if (pod.node_name.empty() || gone) {
        gpu_queues_.Release(uid);  // no longer pending (deleted, or someone else's now)
      }
    }
    if (!below_minimum.empty()) {
      const std::string message = "pod group " + below_minimum + " has " + std::to_string(left_running.size()) +
                                  " member(s) placed, fewer than its min-available " +
                                  std::to_string(below_minimum_of) + " (" + pod.Key() + " ended)";
      Log(common::LogLevel::kWarn, message);
      for (const Member& m : left_running) {
        Emit(PodEvent{.namespace_ = m.namespace_,
                      .name = m.name,
                      .uid = m.uid,
                      .type = "Warning",
                      .reason = "GangBelowMinimum",
                      .message = message});
      }
      std::lock_guard lock(mu_);
      ++stats_.gangs_below_minimum;
    }
    // Only now that the pod's entry says what it holds and where: a woken pod must not see it as it was.
    // What it held on its node wakes only the pods that fit there now (WakeForRoomOn); a pod slot for inter-pod
    // rules and its queue's quota wake every pod they blocked.
    uint32_t freed = 0;
    freed |= gone && held ? kFreedByRelease & ~kFreedByRoom : 0U;
    freed |= placed ? sched::kBlockedByPodAdded : 0U;
    placed_epoch_ += placed ? 1U : 0U;  // (what a pod that is gone held moves FreedGeneration)
    freed |= leaving ? sched::kBlockedByPods : 0U;
    size_t woken = freed != 0 ? queue_.OnClusterEvent(freed) : 0;
    woken += gone && held ? WakeForRoomOn(held_on) : 0;
    woken += gone && held && !left_queue.empty() ? WakeWithinGuarantee(left_queue) : 0;
    if (woken > 0) {
      Wake();
    }
    return;
  }
  // A pending pod of ours.
  {
    auto lock = cache_.ReadLock();
    if (cache_.state().FindAllocation(pod.uid) != nullptr && cache_.state().IsConfirmed(pod.uid)) {
      return;  // this scheduler bound it; the watch has not shown the binding yet
    }
  }
  const size_t fingerprint = pod.fingerprint;
  Pending entry{.namespace_ = pod.namespace_,
                .name = pod.name,
                .request = pod.request,
                .hard_fields = pod.unevaluated_hard,
                .soft_fields = pod.unevaluated_soft,
                .fingerprint = fingerprint,
                .first_seen_ms = clock_.NowMs(),
                .created_ms = pod.created_ms,
                .queue = gpu_queues_.QueueOf(pod.namespace_, core::QueueLabel(pod.labels))};
  if (entry.request.ok()) {
    entry.demand = core::DemandOf(*entry.request);
    entry.coscheduling = pod.coscheduling;
  }
  const sched::QueuedPod queued = Queued(uid, entry);
  bool gang_member = false;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(uid);
    if (it != pending_.end()) {
      if (it->second.fingerprint == fingerprint) {
        return;  // a status update (our own condition, say): nothing that scheduling reads changed
      }
      entry.first_seen_ms = it->second.first_seen_ms;
      it->second = std::move(entry);
    } else {
      it = pending_.emplace(uid, std::move(entry)).first;
    }
    Pending& p = it->second;
    if (p.coscheduling) {  // under the same lock as OnPodGroup: never a minimum older than the PodGroup seen
      if (auto pg = pod_group_min_.find(GroupKey(p.namespace_, p.request->pod_group)); pg != pod_group_min_.end()) {
        p.request->min_available = pg->second;
      }
    }
    gang_member = p.request.ok() && p.request->min_available > 1;
    if (!running_.contains(uid)) {
      gpu_queues_.SetPending(uid, it->second.queue, it->second.demand);
    }
  }
  queue_.AddOrUpdate(queued);
  if (gang_member) {
    (void)queue_.OnClusterEvent(sched::kBlockedByGang);  // its group may now have the members it waits for
  }
  Wake();
}

void SchedulerCore::OnPodGroup(EventType type, const std::string& namespace_, const std::string& name,
                               int32_t min_member) {
  const std::string key = GroupKey(namespace_, name);
  const int32_t min = type == EventType::kDeleted ? 1 : min_member;
  std::vector<sched::QueuedPod> changed;
  {
    std::lock_guard lock(mu_);
    if (type == EventType::kDeleted) {
      pod_group_min_.erase(key);
    } else {
      pod_group_min_[key] = min;
    }
    for (auto& [uid, p] : pending_) {
      if (!p.coscheduling || !p.request.ok() || p.namespace_ != namespace_ || p.request->pod_group != name ||
          p.request->min_available == min) {
        continue;
      }
      p.request->min_available = min;
      changed.push_back(Queued(uid, p));
    }
    for (auto& [uid, r] : running_) {
      if (r.coscheduling && r.group == key) {
        r.min_available = min;
      }
    }
  }
  for (const sched::QueuedPod& q : changed) {
    queue_.AddOrUpdate(q);
  }
  if (!changed.empty()) {
    (void)queue_.OnClusterEvent(sched::kBlockedByGang);
    Wake();
  }
}

void SchedulerCore::OnDisruptionBudget(EventType type, const common::Result<core::DisruptionBudget>& budget) {
  if (!budget.ok()) {
    Log(common::LogLevel::kWarn, budget.status().message() + " (its last readable version, if any, stays)");
    return;
  }
  const std::string key = budget->namespace_ + "/" + budget->name;
  std::lock_guard lock(mu_);
  if (type == EventType::kDeleted) {
    budgets_.erase(key);
  } else {
    budgets_.insert_or_assign(key, *budget);
  }
}

void SchedulerCore::OnNamespace(EventType type, const std::string& name, std::map<std::string, std::string> labels) {
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    const sched::NamespaceLabels* old = namespaces_.get();
    auto it = old != nullptr ? old->find(name) : sched::NamespaceLabels::const_iterator();
    const bool known = old != nullptr && it != old->end();
    if (type == EventType::kDeleted ? !known : known && it->second == labels) {
      return;
    }
    auto next =
        old != nullptr ? std::make_shared<sched::NamespaceLabels>(*old) : std::make_shared<sched::NamespaceLabels>();
    if (type == EventType::kDeleted) {
      next->erase(name);
    } else {
      (*next)[name] = std::move(labels);
    }
    namespaces_ = std::move(next);
    changed = true;
  }
  // A term's namespaces changed: what inter-pod constraints keep waiting may now fit (or was placed on old labels).
  if (changed && queue_.OnClusterEvent(sched::kBlockedByPods | sched::kBlockedByPodAdded) > 0) {
    Wake();
  }
}

sched::QueuedPod SchedulerCore::Queued(const std::string& uid, const Pending& pod) {
  return sched::QueuedPod{
      .uid = uid,
      .key = pod.namespace_ + "/" + pod.name,
      .priority = pod.request.ok() ? pod.request->priority : 0,
      .created_ms = pod.created_ms,
      .queue = pod.queue,
      .request = pod.request.ok() ? std::make_shared<const core::PodRequest>(*pod.request) : nullptr};
}

size_t SchedulerCore::WakeForRoomOn(const common::NodeName& node) {
  if (!hint_room_) {
    return queue_.OnClusterEvent(kFreedByRoom);
  }
  auto lock = cache_.ReadLock();  // lock order: the cache's, then the queue's (as RecordAssumed)
  const core::NodeView* view = cache_.state().Find(node);
  if (view == nullptr) {
    return 0;  // the node is gone: no room there
  }
  // The parked pods are offered the room in the order they would be tried; each that fits what is left is counted
  // into it, and the offer goes on to pods that fit the rest. A nominee waits for its victims to leave the room held
  // for it, which the view shows taken: it is woken whatever the room.
  core::NodeView room = *view;
  const uint64_t generation = view->generation;
  common::Rng guess_rng(generation);        // (the GPUs a woken pod is counted on: a guess that leaves rng_ alone)
  int64_t idle = room.IdleMilli().value();  // (a bound checked before the filters)
  using Offer = sched::SchedulingQueue::Offer;
  const size_t woken = queue_.WakeInOrder(
      kFreedByRoom, node.str(),
      [&](const sched::QueuedPod& p) {
        if (p.request == nullptr || nominations_.contains(p.uid)) {
          return Offer::kWake;
        }
        const core::PodRequest& r = *p.request;
        if (r.TotalGpuMilli().value() > idle || r.cpu > room.cpu_free || r.memory > room.memory_free ||
            (p.declined_node == node.str() && p.declined_generation == generation) || !runner_.Filter(r, room).fits()) {
          return Offer::kPass;
        }
        sched::AddToView(room, core::Allocation{.pod = r.uid,
                                                .node = node,
                                                .cpu = r.cpu,
                                                .memory = r.memory,
                                                .containers = policy_->SelectGpus(r, room, guess_rng),
                                                .scalars = r.scalars,
                                                .host_ports = r.host_ports,
                                                .share_group = r.GpuShareGroup()});
        idle = room.IdleMilli().value();
        return Offer::kWakeForRoom;
      },
      [this](const std::string& queue, const core::GpuAmount& more) { return gpu_queues_.RankIf(queue, more); });
  return woken;
}

size_t SchedulerCore::WakeWithinGuarantee(const std::string& queue) {
  using Offer = sched::SchedulingQueue::Offer;
  // Only as many as the guarantee has room for, in the order they would be tried.
  core::GpuAmount counted;
  return queue_.WakeInOrder(
      sched::kBlockedByGuarantee, {},
      [&](const sched::QueuedPod& p) {
        if (p.request == nullptr) {
          return Offer::kWake;
        }
        const core::GpuAmount demand = core::DemandOf(*p.request);
        if (!gpu_queues_.Admit(p.queue, counted + demand).within_guarantee) {
          return Offer::kPass;
        }
        counted += demand;
        return Offer::kWake;
      },
      nullptr, queue);
}

void SchedulerCore::ReofferRoom(const sched::QueuedPod& popped) {
  const common::NodeName node(popped.woken_for);
  bool landed = false;  // the pod took room on the node it was woken for
  uint64_t generation = 0;
  {
    auto lock = cache_.ReadLock();
    const core::Allocation* a = cache_.state().FindAllocation(common::PodUid(popped.uid));
    landed = a != nullptr && a->node == node;
    if (const core::NodeView* view = cache_.state().Find(node); view != nullptr) {
      generation = view->generation;
    }
  }
  const bool last = queue_.TicketsFor(popped.woken_for) == 0;  // the last pod woken for that room was tried
  if (landed && !last) {
    return;  // the room it was counted on is taken as counted; the others woken for it go on
  }
  if (!landed) {
    // (A pod placed elsewhere is no longer queued.) A gang's attempt tries every pending member: all of them pass
    // the room by, or the next member woken for it would try the same gang again.
    std::vector<std::string> declined = {popped.uid};
    if (const core::PodRequest* r = popped.request.get(); r != nullptr && r->min_available > 1) {
      std::lock_guard guard(mu_);
      for (const auto& [other, p] : pending_) {
        if (other != popped.uid && p.request.ok() && p.namespace_ == r->namespace_ &&
            p.request->pod_group == r->pod_group) {
          declined.push_back(other);
        }
      }
    }
    for (const std::string& uid : declined) {
      queue_.Decline(uid, popped.woken_for, generation);
    }
  }
  if (WakeForRoomOn(node) > 0) {
    Wake();
  }
}

void SchedulerCore::OnGpuQueue(EventType type, const std::string& name, const std::string& spec_text,
                               common::Result<core::QueueSpec> decoded) {
  std::vector<sched::QueuedPod> moved;
  {
    std::lock_guard lock(mu_);
    if (type != EventType::kDeleted) {
      auto [seen, fresh] = queue_specs_seen_.try_emplace(name, spec_text);
      if (!fresh && seen->second == spec_text) {
        return;  // its status changed (this scheduler writes it), not its spec
      }
      seen->second = spec_text;
    } else {
      queue_specs_seen_.erase(name);
    }
    if (type == EventType::kDeleted) {
      queue_objects_.erase(name);
    } else {
      queue_objects_.insert_or_assign(name, std::move(decoded));
    }
    std::vector<core::QueueSpec> specs;
    std::map<std::string, std::string> errors;
    for (const auto& [n, spec] : queue_objects_) {
      if (spec.ok()) {
        specs.push_back(*spec);
      } else {
        errors[n] = spec.status().message();
      }
    }
    for (auto& [n, why] : gpu_queues_.SetQueues(specs)) {
      errors[n] = why;
    }
    for (const auto& [n, why] : errors) {
      if (auto was = queue_errors_.find(n); was == queue_errors_.end() || was->second != why) {
        Log(common::LogLevel::kWarn, "GpuQueue " + n + " is left out (its pods go to the default queue): " + why);
      }
    }
    queue_errors_ = std::move(errors);
    moved = Remap();
  }
  for (const auto& p : moved) {
    queue_.AddOrUpdate(p);
  }
  (void)queue_.OnClusterEvent(sched::kBlockedByQuota);
  Wake();
}

std::string SchedulerCore::QueueJoinRefusal(const Pending& pod) const {
  const std::string label = pod.request.ok() ? core::QueueLabel(pod.request->labels) : std::string();
  return label.empty() || label == pod.queue ? std::string() : gpu_queues_.JoinRefusal(label, pod.namespace_);
}

std::vector<sched::QueuedPod> SchedulerCore::Remap() {
  std::vector<sched::QueuedPod> moved;
  for (auto& [uid, r] : running_) {
    r.queue = gpu_queues_.QueueOf(r.namespace_, core::QueueLabel(r.labels));
    Recount(uid, &r);
    if (!r.demand.IsZero()) {
      gpu_queues_.Charge(uid, r.queue, r.demand);
    }
  }
  for (auto& [uid, p] : pending_) {
    std::string queue = gpu_queues_.QueueOf(p.namespace_, p.request.ok() ? core::QueueLabel(p.request->labels) : "");
    if (queue == p.queue) {
      continue;
    }
    p.queue = std::move(queue);
    if (!running_.contains(uid)) {
      gpu_queues_.SetPending(uid, p.queue, p.demand);
    }
    moved.push_back(Queued(uid, p));
  }
  return moved;
}

std::vector<std::string> SchedulerCore::QueueObjectNames() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, spec] : queue_objects_) {
    names.push_back(name);
  }
  return names;
}

std::map<std::string, std::string> SchedulerCore::QueueErrors() const {
  std::lock_guard lock(mu_);
  return queue_errors_;
}

std::optional<SchedulerCore::Nomination> SchedulerCore::TakeNomination(const std::string& uid) {
  auto it = nominations_.find(uid);
  if (it == nominations_.end()) {
    return std::nullopt;
  }
  Nomination n = std::move(it->second);
  nominations_.erase(it);
  cache_.ReleaseHeld(n.reserved.pod);  // also where it waits for its node (deleted meanwhile) to come back
  {
    std::lock_guard lock(mu_);
    Unplace(n.reserved.pod.str());
  }
  return n;
}

bool SchedulerCore::HoldNomination(const std::string& uid, Nomination nomination, core::ClusterState& state) {
  if (auto s = state.Charge(nomination.reserved); !s.ok()) {
    Log(common::LogLevel::kWarn, "cannot hold room for pod uid " + uid + ": " + s.message());
    return false;
  }
  {
    std::lock_guard lock(mu_);
    const std::string key = nomination.reserved.pod.str();
    Running& r = running_[key];
    r = nomination.as_pod;
    Reindex(key, r);
  }
  nominations_.insert_or_assign(uid, std::move(nomination));
  return true;
}

void SchedulerCore::DropNomination(const std::string& uid, bool wake) {
  bool dropped = false;
  {
    auto lock = cache_.WriteLock();
    dropped = TakeNomination(uid).has_value();
  }
  if (dropped && wake && queue_.OnClusterEvent(kFreedByRelease) > 0) {
    Wake();
  }
}

bool SchedulerCore::AnyPossibleVictim(int32_t priority, const std::string& queue, bool reclaim) const {
  if (reclaim) {
    for (const sched::QueueStatus& st : gpu_queues_.All()) {
      if (st.name != queue && !st.allocated.FitsIn(st.guaranteed)) {
        return true;  // a queue borrowing beyond its guarantee
      }
    }
  }
  std::lock_guard lock(mu_);
  const auto q = priorities_by_queue_.find(queue);
  return q != priorities_by_queue_.end() && *q->second.begin() < priority;
}

SchedulerCore::VictimPool SchedulerCore::CollectVictims(const core::ClusterState& state,
                                                        const std::vector<const core::NodeView*>& views,
                                                        int32_t priority, const std::string& queue, bool reclaim,
                                                        int64_t need_milli, bool with_pods) {
  std::lock_guard lock(mu_);  // lock order: the cache's lock is held, then mu_
  sched::VictimRules rules{.priority = priority, .queue = queue, .need_milli = need_milli, .with_pods = with_pods};
  if (reclaim) {
    rules.may_reclaim = [&](const std::string& from, const core::GpuAmount& holds) {
      return gpu_queues_.MayReclaim(from, holds, {}, queue);
    };
    rules.over_share = [&](const std::string& from) { return gpu_queues_.Rank(from); };
  }
  rules.budgets.reserve(budgets_.size());
  for (const auto& [key, b] : budgets_) {
    rules.budgets.push_back(b);
  }
  return sched::CollectVictims(
      state, views,
      [&](const common::PodUid& pod) -> const Running* {
        if (IsReservation(pod)) {
          return nullptr;
        }
        auto r = running_.find(pod.str());
        return r == running_.end() ? nullptr : &r->second;
      },
      rules);
}

// Reclaimed victims together must leave each queue they come from borrowing up to the last of them.
bool SchedulerCore::ReclaimAllowed(const VictimPool& pool, size_t node, const sched::VictimSet& set,
                                   const std::string& queue, std::map<std::string, core::GpuAmount>& taken) const {
  const VictimPool::Node& c = pool.nodes[node];
  std::map<std::string, core::GpuAmount> more = taken;
  for (const common::PodUid& victim : set.victims) {
    for (size_t i = 0; i < c.potential.size(); ++i) {
      if (c.potential[i].allocation->pod != victim || c.reclaim[i].first.empty()) {
        continue;
      }
      const auto& [from_queue, holds] = c.reclaim[i];
      if (!gpu_queues_.MayReclaim(from_queue, holds, more[from_queue], queue)) {
        return false;
      }
      more[from_queue] += holds;
    }
  }
  taken = std::move(more);
  return true;
}

bool SchedulerCore::WholeGangs(sched::VictimSet& set, int32_t priority, const std::string& queue) {
  std::lock_guard lock(mu_);
  std::map<std::string, std::pair<size_t, size_t>> groups;  // group -> (its victims, its minimum)
  std::map<std::string, core::GpuAmount> taken;             // by other queue: what the victims hold of it
  for (const common::PodUid& victim : set.victims) {
    auto r = running_.find(victim.str());
    if (r == running_.end()) {
      continue;
    }
    if (r->second.queue != queue) {
      taken[r->second.queue] += r->second.demand;
    }
    if (!r->second.group.empty()) {
      auto& [count, min] = groups[r->second.group];
      ++count;
      min = static_cast<size_t>(std::max(1, r->second.min_available));
    }
  }
  std::vector<common::PodUid> more;
  for (const auto& [group, counts] : groups) {
    const auto [count, min] = counts;
    if (PlacedInGroup(group) >= count + min) {
      continue;  // it keeps its minimum
    }
    for (const std::string& member : placed_by_group_.at(group)) {
      const auto m = running_.find(member);
      if (m == running_.end() || m->second.deleting ||
          std::find(set.victims.begin(), set.victims.end(), m->second.uid) != set.victims.end()) {
        continue;
      }
      if (m->second.assumed) {
        return false;  // still being bound
      }
      if (m->second.queue == queue) {
        if (m->second.priority >= priority) {
          return false;  // preemption within the queue takes lower priorities only
        }
      } else {
        // A borrower's group goes down whole to give a guarantee back, if its queue may give back all of it.
        if (!gpu_queues_.MayReclaim(m->second.queue, m->second.demand, taken[m->second.queue], queue)) {
          return false;
        }
        taken[m->second.queue] += m->second.demand;
      }
      more.push_back(m->second.uid);
      set.priority_sum += static_cast<int64_t>(m->second.priority) - std::numeric_limits<int32_t>::min();
    }
  }
  set.victims.insert(set.victims.end(), more.begin(), more.end());
  return true;
}

std::optional<std::vector<SchedulerCore::Victim>> SchedulerCore::EvictionOrder(
    const std::vector<common::PodUid>& victims, const std::vector<core::DisruptionBudget>& budgets,
    const std::string& queue, std::vector<std::string>& reclaimed_from) {
  std::vector<Victim> covered, other;
  std::lock_guard lock(mu_);
  for (const common::PodUid& victim : victims) {
    auto found = running_.find(victim.str());
    if (found == running_.end()) {
      return std::nullopt;  // gone meanwhile (cannot be while the cache's lock is held; never evict blind)
    }
    const Running& r = found->second;
    const bool in_budget = std::any_of(budgets.begin(), budgets.end(), [&](const core::DisruptionBudget& b) {
      return b.Counts(r.namespace_, r.name, r.labels);
    });
    (in_budget ? covered : other).push_back(Victim{.uid = victim, .namespace_ = r.namespace_, .name = r.name});
    if (r.queue != queue) {
      reclaimed_from.push_back(r.queue);
    }
  }
  covered.insert(covered.end(), other.begin(), other.end());
  return covered;
}

SchedulerCore::Nomination SchedulerCore::RoomFor(const core::PodRequest& request, const core::Allocation& allocation) {
  Nomination n;
  n.as_pod.uid = ReservationUid(request.uid.str());
  n.as_pod.namespace_ = request.namespace_;
  n.as_pod.name = request.name;
  n.as_pod.labels = request.labels;
  n.as_pod.node = allocation.node;
  n.as_pod.anti_affinity = request.pod_anti_affinity;
  n.as_pod.priority = request.priority;
  n.as_pod.assumed = true;
  n.reserved = core::Allocation{.pod = ReservationUid(request.uid.str()),
                                .node = allocation.node,
                                .cpu = request.cpu,
                                .memory = request.memory,
                                .containers = allocation.containers,
                                .share_group = request.GpuShareGroup()};
  return n;
}

std::optional<SchedulerCore::Nomination> SchedulerCore::PlanPreemption(const core::PodRequest& request,
                                                                       const core::ClusterState& state,
                                                                       const sched::CycleResult& result,
                                                                       const sched::InterPodConstraints& inter_pod,
                                                                       const std::string& queue, bool reclaim) {
  if (!AnyPossibleVictim(request.priority, queue, reclaim)) {
    return std::nullopt;  // nobody of lower priority in its queue, and no borrower to reclaim from
  }
  std::vector<const core::NodeView*> views;
  auto consider = [&](const core::NodeView* view) {
    if (view != nullptr && view->node != nullptr && sched::CheckNodeConstraints(request, *view->node).empty()) {
      views.push_back(view);  // (evicting pods does not change labels, taints or cordons)
    }
  };
  for (const auto& [name, fit] : result.rejections) {
    if (fit.code != policy::Fit::Code::kUnresolvable) {  // else nothing on the node could make room
      consider(state.Find(name));
    }
  }
  if (result.rejections.empty()) {  // reasons not collected (the simulator): every live node
    for (size_t i = 0; i < state.SlotCount(); ++i) {
      if (state.IsLive(i)) {
        consider(&state.View(i));
      }
    }
  }
  // Inter-pod constraints follow the victims as they are taken off and put back (kube-scheduler's RemovePod and
  // AddPod): evicting a pod can end an anti-affinity conflict or a spread skew. One copy serves every node: after
  // each node its victims are put back.
  sched::InterPodConstraints constraints = inter_pod;
  const bool with_constraints = constraints.Active();
  auto fits = [&](const core::NodeView& v) {
    return runner_.Filter(request, v).fits() && (!with_constraints || constraints.Passes(*v.node));
  };
  // As kube-scheduler's DefaultPreemption: candidates are sought on the nodes in turn, from where the last search
  // stopped, until max(10 % of the nodes, 100) are found; the best of those is chosen.
  const size_t enough = std::max<size_t>(kMinCandidateNodes, views.size() * kMinCandidateNodesPercent / 100);
  const size_t start = views.empty() ? 0 : candidate_offset_ % views.size();
  std::rotate(views.begin(), views.begin() + static_cast<std::ptrdiff_t>(start), views.end());
  std::vector<sched::VictimSet> candidates;
  std::vector<const core::NodeView*> from;
  std::vector<core::DisruptionBudget> budgets;
  size_t searched = 0;
  for (size_t first = 0; first < views.size() && candidates.size() < enough; first += kPreemptionChunk) {
    const std::vector<const core::NodeView*> chunk(
        views.begin() + static_cast<std::ptrdiff_t>(first),
        views.begin() + static_cast<std::ptrdiff_t>(std::min(views.size(), first + kPreemptionChunk)));
    VictimPool pool = CollectVictims(state, chunk, request.priority, queue, reclaim, request.TotalGpuMilli().value(),
                                     with_constraints);
    budgets = pool.budgets;
    searched = first + chunk.size();
    for (size_t n = 0; n < pool.nodes.size() && candidates.size() < enough; ++n) {
      const VictimPool::Node& c = pool.nodes[n];
      sched::VictimChange follow;
      if (with_constraints) {
        follow = [&](const sched::PotentialVictim& v, int delta) {
          constraints.Update(c.pods[static_cast<size_t>(&v - c.potential.data())], delta, state);
        };
      }
      auto s = sched::SelectVictimsOnNode(*c.view, c.potential, pool.allowed, fits, follow);
      if (with_constraints) {
        for (size_t i = 0; i < c.potential.size(); ++i) {  // put back what is still off
          const bool off = !s.has_value() || std::find(s->victims.begin(), s->victims.end(),
                                                       c.potential[i].allocation->pod) != s->victims.end();
          if (off) {
            constraints.Update(c.pods[i], +1, state);
          }
        }
      }
      std::map<std::string, core::GpuAmount> taken;
      if (s.has_value() && !s->victims.empty() && ReclaimAllowed(pool, n, *s, queue, taken) &&
          WholeGangs(*s, request.priority, queue)) {
        candidates.push_back(std::move(*s));
        from.push_back(c.view);
      }
    }
  }
  candidate_offset_ = start + searched;
  if (candidates.empty()) {
    return std::nullopt;
  }
  const size_t best = sched::PickCandidate(candidates);
  const sched::VictimSet& chosen = candidates[best];
  // The room the pod will take: its GPUs chosen on the node as it will be once the victims are gone.
  core::NodeView after = *from[best];
  for (const common::PodUid& victim : chosen.victims) {
    if (const core::Allocation* a = state.FindAllocation(victim); a != nullptr && a->node == chosen.node) {
      sched::RemoveFromView(after, *a);  // (the rest of a gang that goes whole may be on other nodes)
    }
  }
  Nomination plan =
      RoomFor(request, core::Allocation{.node = chosen.node, .containers = policy_->SelectGpus(request, after, rng_)});
  auto victims = EvictionOrder(chosen.victims, budgets, queue, plan.reclaimed_from);
  if (!victims.has_value()) {
    return std::nullopt;
  }
  plan.victims = std::move(*victims);
  return plan;
}

namespace {

// Whether two pods pass the same nodes' filters with the same victims (the fields the node predicates, the
// resource fit and the GPU filter read, and the priority that decides who may be a victim). Pods with inter-pod
// constraints never do; `labels_matter` (placed pods have anti-affinity): their labels must be equal too.
bool SameFit(const core::PodRequest& a, const core::PodRequest& b, bool labels_matter) {
  if (a.HasInterPodConstraints() || b.HasInterPodConstraints() || (labels_matter && a.labels != b.labels)) {
    return false;
  }
  // (containers: the share group too; app: interference-aware filters by the application class.)
  return a.cpu == b.cpu && a.memory == b.memory && a.containers == b.containers && a.priority == b.priority &&
         a.app == b.app && a.node_name == b.node_name && a.node_selector == b.node_selector &&
         a.required_node_affinity == b.required_node_affinity && a.tolerations == b.tolerations &&
         a.scalars == b.scalars && a.host_ports == b.host_ports;
}

}  // namespace

std::optional<SchedulerCore::GangPreemption> SchedulerCore::PlanGangPreemption(
    const std::vector<std::pair<std::string, const Pending*>>& members, size_t need, const core::ClusterState& state,
    const std::string& queue, bool reclaim) {
  if (members.size() < need) {
    return std::nullopt;
  }
  int32_t priority = std::numeric_limits<int32_t>::max();
  for (const auto& [uid, p] : members) {
    priority = std::min(priority, p->request->priority);
  }
  if (!AnyPossibleVictim(priority, queue, reclaim)) {
    return std::nullopt;
  }
  std::vector<const core::NodeView*> views;
  for (size_t i = 0; i < state.SlotCount(); ++i) {
    if (state.IsLive(i) && state.View(i).node != nullptr) {
      views.push_back(&state.View(i));
    }
  }
  VictimPool pool = CollectVictims(state, views, priority, queue, reclaim, 0, false);
  // The plan so far: the nodes as it leaves them (victims off, rooms on), who is chosen already, what the budgets
  // still allow and what the reclaimed queues have given.
  std::vector<std::optional<core::NodeView>> after(pool.nodes.size());
  std::vector<std::vector<bool>> chosen(pool.nodes.size());
  std::unordered_map<std::string, std::pair<size_t, size_t>> where_is;  // victim uid -> (pool node, index)
  for (size_t n = 0; n < pool.nodes.size(); ++n) {
    chosen[n].assign(pool.nodes[n].potential.size(), false);
    for (size_t i = 0; i < pool.nodes[n].potential.size(); ++i) {
      where_is.emplace(pool.nodes[n].potential[i].allocation->pod.str(), std::make_pair(n, i));
    }
  }
  std::vector<int32_t> allowed = pool.allowed;
  std::map<std::string, core::GpuAmount> taken;
  GangPreemption plan;
  std::vector<common::PodUid> all_victims;
  std::set<size_t> victim_nodes;
  // Each node's best victims for the last member, kept for the next member when it fits the same way and the
  // choice changed nothing but its own node (no budget, no reclaim).
  std::vector<std::optional<sched::VictimSet>> cached(pool.nodes.size());
  const core::PodRequest* cached_for = nullptr;
  std::optional<size_t> changed;  // the node the last member took; nullopt: every node must be asked again
  for (const auto& [uid, p] : members) {
    if (plan.rooms.size() == need) {
      break;
    }
    const core::PodRequest& r = *p->request;
    // Placed pods' anti-affinity, as the cluster is (a victim with anti-affinity keeps repelling: conservative).
    const sched::InterPodConstraints inter_pod = PrepareInterPod(r, state);
    const bool with_constraints = inter_pod.Active();
    auto fits = [&](const core::NodeView& v) {
      return runner_.Filter(r, v).fits() && (!with_constraints || inter_pod.Passes(*v.node));
    };
    const bool reuse = cached_for != nullptr && SameFit(*cached_for, r, with_constraints) && changed.has_value();
    std::optional<size_t> best;  // the pool node of the best candidate
    for (size_t n = 0; n < pool.nodes.size(); ++n) {
      const VictimPool::Node& c = pool.nodes[n];
      if (!reuse || n == *changed) {
        cached[n].reset();
        const core::NodeView& view = after[n].has_value() ? *after[n] : *c.view;
        if (!sched::CheckNodeConstraints(r, *view.node).empty() || (!after[n].has_value() && !CouldFree(c, r))) {
          continue;
        }
        std::vector<sched::PotentialVictim> left;
        for (size_t i = 0; i < c.potential.size(); ++i) {
          if (!chosen[n][i]) {
            left.push_back(c.potential[i]);
          }
        }
        cached[n] = sched::SelectVictimsOnNode(view, left, allowed, fits);
        std::map<std::string, core::GpuAmount> more = taken;
        if (cached[n].has_value() &&
            (!ReclaimAllowed(pool, n, *cached[n], queue, more) || !WholeGangs(*cached[n], priority, queue))) {
          cached[n].reset();
        }
      }
      if (cached[n].has_value() && (!best.has_value() || sched::BetterCandidate(*cached[n], *cached[*best]))) {
        best = n;
      }
    }
    cached_for = &r;
    if (!best.has_value()) {
      return std::nullopt;  // this member fits nowhere even with every possible victim gone
    }
    const size_t n = *best;
    const sched::VictimSet set = *cached[n];
    const VictimPool::Node& c = pool.nodes[n];
    if (!after[n].has_value()) {
      after[n] = *c.view;
    }
    bool budgets_or_reclaim = false;
    for (const common::PodUid& victim : set.victims) {
      // On this node, or (the rest of a gang that goes whole) on another node of the pool.
      const auto where = where_is.find(victim.str());
      if (where == where_is.end()) {
        continue;  // cannot be: every victim is a possible one
      }
      const auto [vn, i] = where->second;
      if (chosen[vn][i]) {
        continue;
      }
      const VictimPool::Node& vc = pool.nodes[vn];
      if (!after[vn].has_value()) {
        after[vn] = *vc.view;
      }
      chosen[vn][i] = true;
      sched::RemoveFromView(*after[vn], *vc.potential[i].allocation);
      for (size_t b : vc.potential[i].pdbs) {
        --allowed[b];
      }
      budgets_or_reclaim =
          budgets_or_reclaim || vn != n || !vc.potential[i].pdbs.empty() || !vc.reclaim[i].first.empty();
      all_victims.push_back(victim);
      victim_nodes.insert(vn);
    }
    (void)ReclaimAllowed(pool, n, set, queue, taken);  // adds what this member's victims give
    Nomination room =
        RoomFor(r, core::Allocation{.node = set.node, .containers = policy_->SelectGpus(r, *after[n], rng_)});
    sched::AddToView(*after[n], room.reserved);
    room.victims.reserve(set.victims.size());
    for (const common::PodUid& victim : set.victims) {
      room.victims.push_back(Victim{.uid = victim});  // named below, once the eviction order is known
    }
    plan.rooms.emplace_back(uid, std::move(room));
    changed = budgets_or_reclaim ? std::nullopt : std::optional<size_t>(n);
  }
  if (plan.rooms.size() < need) {
    return std::nullopt;
  }
  auto victims = EvictionOrder(all_victims, pool.budgets, queue, plan.reclaimed_from);
  if (!victims.has_value()) {
    return std::nullopt;
  }
  plan.victims = std::move(*victims);
  for (auto& [member, room] : plan.rooms) {
    for (Victim& v : room.victims) {
      v = *std::find_if(plan.victims.begin(), plan.victims.end(), [&](const Victim& e) { return e.uid == v.uid; });
    }
  }
  plan.nodes = victim_nodes.size();
  return plan;
}

bool SchedulerCore::PreemptForGang(const std::string& uid, const Pending& pod, const GangPreemption& plan) {
  struct Nominee {
    std::string namespace_, name, node;
  };
  std::vector<Nominee> nominees;  // each member with a room
  {
    std::lock_guard lock(mu_);
    for (const auto& [member, room] : plan.rooms) {
      if (auto it = pending_.find(member); it != pending_.end()) {
        nominees.push_back({it->second.namespace_, it->second.name, room.reserved.node.str()});
      }
    }
  }
  for (const auto& [ns, name, node] : nominees) {
    if (auto s = options_.preemptor->Nominate(ns, name, node); !s.ok()) {
      Log(common::LogLevel::kWarn, "pod " + ns + "/" + name + ": nominatedNodeName " + node + ": " + s.message());
    }
  }
  const std::string group = "pod group " + GroupKey(pod.namespace_, pod.request->pod_group);
  if (auto failed = EvictAll(uid, pod, plan.victims, group, group + ": "); failed.has_value()) {
    Log(common::LogLevel::kWarn, group + ": preemption stopped: " + *failed);
    for (const auto& [member, room] : plan.rooms) {
      DropNomination(member, /*wake=*/false);
    }
    for (const auto& [ns, name, node] : nominees) {
      (void)options_.preemptor->Nominate(ns, name, "");
    }
    return false;
  }
  for (const std::string& from : plan.reclaimed_from) {
    gpu_queues_.CountReclaim(from);
  }
  Log(common::LogLevel::kInfo, group + " preempted " + std::to_string(plan.victims.size()) + " pod(s) on " +
                                   std::to_string(plan.nodes) + " node(s)");
  return true;
}

std::optional<std::string> SchedulerCore::EvictAll(const std::string& uid, const Pending& pod,
                                                   const std::vector<Victim>& victims, const std::string& by,
                                                   const std::string& where) {
  for (const Victim& v : victims) {
    const std::string key = v.namespace_ + "/" + v.name;
    if (common::Status evicted = options_.preemptor->Evict(v.namespace_, v.name, v.uid); !evicted.ok()) {
      Count(&SchedulerStats::preemption_failures);
      Emit(PodEvent{.namespace_ = pod.namespace_,
                    .name = pod.name,
                    .uid = uid,
                    .type = "Warning",
                    .reason = "FailedPreemption",
                    .message = where + "evicting " + key + " failed: " + evicted.message()});
      return "evicting " + key + ": " + evicted.message();
    }
    Count(&SchedulerStats::victims);
    Log(common::LogLevel::kInfo, "pod " + key + " evicted: preempted by " + by,
        {{"pod", key}, {"reason", "preempted"}, {"by", by}});
    Emit(PodEvent{.namespace_ = v.namespace_,
                  .name = v.name,
                  .uid = v.uid.str(),
                  .type = "Normal",
                  .reason = "Preempted",
                  .message = "Preempted by " + by});
  }
  Count(&SchedulerStats::preemptions);
  return std::nullopt;
}

bool SchedulerCore::Preempt(const std::string& uid, const Pending& pod, const Nomination& plan) {
  const std::string node = plan.reserved.node.str();
  const std::string preemptor = pod.namespace_ + "/" + pod.name;
  if (auto s = options_.preemptor->Nominate(pod.namespace_, pod.name, node); !s.ok()) {
    Log(common::LogLevel::kWarn, "pod " + preemptor + ": nominatedNodeName " + node + ": " + s.message());
  }
  if (auto failed = EvictAll(uid, pod, plan.victims, preemptor + " on node " + node, "preempting on " + node + ": ");
      failed.has_value()) {
    Log(common::LogLevel::kWarn, "pod " + preemptor + ": preemption on " + node + " stopped: " + *failed);
    DropNomination(uid, /*wake=*/false);  // no attempt ran since the room was held: nobody to wake
    (void)options_.preemptor->Nominate(pod.namespace_, pod.name, "");
    return false;
  }
  for (const std::string& from : plan.reclaimed_from) {
    gpu_queues_.CountReclaim(from);
  }
  Log(common::LogLevel::kInfo,
      "pod " + preemptor + " preempted " + std::to_string(plan.victims.size()) + " pod(s) on " + node,
      {{"pod", preemptor}, {"node", node}, {"reason", "preempted"}, {"victims", std::to_string(plan.victims.size())}});
  return true;
}

void SchedulerCore::Count(uint64_t SchedulerStats::*counter) {
  std::lock_guard lock(mu_);
  ++(stats_.*counter);
}

void SchedulerCore::Unschedulable(const std::string& uid, const Pending& pod, std::string message, uint32_t blockers,
                                  bool backoff) {
  if (backoff) {
    queue_.Requeue(uid, sched::SchedulingQueue::Outcome::kError);
  } else {
    queue_.Requeue(uid, sched::SchedulingQueue::Outcome::kUnschedulable, blockers);
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.unschedulable;
  }
  Emit(PodEvent{.namespace_ = pod.namespace_,
                .name = pod.name,
                .uid = uid,
                .type = "Warning",
                .reason = "FailedScheduling",
                .message = std::move(message),
                .unschedulable_condition = true});
}

bool SchedulerCore::ScheduleOne() {
  if (options_.may_bind && !options_.may_bind()) {
    return false;
  }
  auto popped = queue_.Pop();
  if (!popped.has_value()) {
    return false;
  }
  Attempt(*popped);
  if (!popped->woken_for.empty()) {
    ReofferRoom(*popped);  // what it was woken for and did not take goes to the next pod that fits it
  }
  ReofferOrphanedRooms();  // (gang members claimed out of turn)
  return true;
}

void SchedulerCore::ReofferOrphanedRooms() {
  size_t woken = 0;
  for (const std::string& node : queue_.TakeOrphanedRooms()) {
    woken += WakeForRoomOn(common::NodeName(node));
  }
  if (woken > 0) {
    Wake();
  }
}

void SchedulerCore::Attempt(const sched::QueuedPod& popped) {
  const auto started = std::chrono::steady_clock::now();
  const std::string& uid = popped.uid;
  Pending pod;
  bool charged = false;  // placed here already (a retried bind): its queue counts it
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(uid);
    if (it == pending_.end()) {
      queue_.Done(uid);  // gone meanwhile
      return;
    }
    pod = it->second;
    charged = running_.contains(uid);
  }
  if (!pod.request.ok()) {
    Unschedulable(uid, pod, "the pod's resource request is invalid: " + pod.request.status().message(), 0);
    return;
  }
  if (!pod.hard_fields.empty()) {
    Unschedulable(uid, pod,
                  "gpusched does not evaluate " + Join(pod.hard_fields) +
                      "; the pod is not placed rather than placed without it (use a scheduler that evaluates it, "
                      "or remove it)",
                  0);
    return;
  }
  const core::PodRequest& request = *pod.request;
  // The pod's GPU queue: over its limit, the pod waits for quota (a pod of the queue leaving, or new queues).
  bool within_guarantee = false;
  if (request.RequestsGpu() && !charged) {
    if (std::string refusal = QueueJoinRefusal(pod); !refusal.empty()) {
      Unschedulable(uid, pod, refusal, sched::kBlockedByQuota);
      return;
    }
    const auto admission = gpu_queues_.Admit(pod.queue, pod.demand);
    if (!admission.admitted) {
      Unschedulable(uid, pod, admission.reason, sched::kBlockedByQuota);
      return;
    }
    within_guarantee = admission.within_guarantee;
  }
  BindTask task{.request = request,
                .namespace_ = pod.namespace_,
                .name = pod.name,
                .first_seen_ms = pod.first_seen_ms,
                .soft_fields = pod.soft_fields};
  {
    auto lock = cache_.WriteLock();
    core::ClusterState& state = cache_.state();
    if (capacity_stale_.exchange(false)) {
      gpu_queues_.SetCapacity(GpuCapacity(state));
    }
    if (const ClusterCache::HeldForBind held = cache_.BindState(request.uid);
        held != ClusterCache::HeldForBind::kNothing) {
      if (held == ClusterCache::HeldForBind::kBound) {
        lock.unlock();
        queue_.Done(uid);  // bound; the watch will show it
        return;
      }
      if (held == ClusterCache::HeldForBind::kInFlight) {
        lock.unlock();
        queue_.Requeue(uid, sched::SchedulingQueue::Outcome::kError);  // its bind still runs
        return;
      }
      task.allocation = *state.FindAllocation(request.uid);  // the last bind's outcome is unknown: send it again
    } else {
      if (request.min_available > 1) {
        const std::string group = GroupKey(request.namespace_, request.pod_group);
        size_t placed = 0;
        {
          std::lock_guard guard(mu_);
          placed = PlacedInGroup(group);
        }
        if (placed < static_cast<size_t>(request.min_available)) {
          ScheduleGang(uid, pod, group, placed, lock, started);
          return;
        }
        // The group has its min-available placed: this member is placed like any pod.
      }
      sched::SnapshotBuilder::Hold hold;
      const policy::Snapshot snapshot = SnapshotFor(request, state, hold);
      // A pod that preempted before gets its held room back for this attempt: it may go anywhere.
      std::optional<Nomination> nominated = TakeNomination(uid);
      // Nothing freed and nobody placed since a pod that asks the same of the same queue found no node and no
      // victims: neither does this one (its cycle and its preemption plan would repeat those).
      const uint64_t epoch = state.FreedGeneration() + placed_epoch_.load();
      if (epoch != fit_nowhere_epoch_) {
        fit_nowhere_.clear();
        fit_nowhere_epoch_ = epoch;
      }
      const bool may_reuse = !nominated.has_value() && hint_room_ && !request.HasInterPodConstraints();
      if (may_reuse) {
        bool labels_matter = false;
        {
          std::lock_guard guard(mu_);
          labels_matter = !with_anti_affinity_.empty();
        }
        for (const FitNowhere& f : fit_nowhere_) {
          if (f.queue == pod.queue && f.reclaim == within_guarantee &&
              f.request.preempt_never == request.preempt_never && SameFit(f.request, request, labels_matter)) {
            lock.unlock();
            Unschedulable(uid, pod, f.summary, f.blockers);
            ObserveAttempt(started);
            return;
          }
        }
      }
      const sched::InterPodConstraints inter_pod = PrepareInterPod(request, state);
      auto result = runner_.Schedule(request, state, snapshot, rng_, cache_.NextAllocationId(), &inter_pod);
      if (!result.ok()) {
        if (nominated.has_value()) {
          (void)HoldNomination(uid, std::move(*nominated), state);
        }
        lock.unlock();
        Log(common::LogLevel::kError, "pod " + request.name + ": " + result.status().message());
        queue_.Requeue(uid, sched::SchedulingQueue::Outcome::kError);
        std::lock_guard stats_lock(mu_);
        ++stats_.errors;
        return;
      }
      if (!result->allocation.has_value()) {
        uint32_t blockers = BlockersOf(*result, request, state, inter_pod);
        std::string summary = result->Summary();
        std::optional<Nomination> plan;
        size_t leaving = 0;
        if (nominated.has_value()) {
          for (const auto& victim : nominated->victims) {
            leaving += state.FindAllocation(victim.uid) != nullptr ? 1U : 0U;
          }
        }
        if (leaving > 0) {
          // Its victims are still leaving: keep holding the room, preempt no one else.
          const std::string node = nominated->reserved.node.str();
          if (HoldNomination(uid, std::move(*nominated), state)) {
            summary += "; waiting for " + std::to_string(leaving) + " preempted pod(s) to leave " + node;
          }
        } else if (options_.preemptor != nullptr && !request.preempt_never) {
          plan = PlanPreemption(request, state, *result, inter_pod, pod.queue, within_guarantee);
          if (plan.has_value() && !HoldNomination(uid, *plan, state)) {
            plan.reset();
          }
          if (!plan.has_value() && !within_guarantee && request.RequestsGpu()) {
            blockers |= sched::kBlockedByGuarantee;  // back within it, it may take room from borrowers
          }
        }
        if (may_reuse && leaving == 0 && !plan.has_value() && fit_nowhere_.size() < kFitNowhereMax) {
          fit_nowhere_.push_back(FitNowhere{.request = request,
                                            .queue = pod.queue,
                                            .reclaim = within_guarantee,
                                            .summary = summary,
                                            .blockers = blockers});
        }
        lock.unlock();
        bool backoff = false;
        if (plan.has_value()) {
          const size_t victims = plan->victims.size();
          const std::string node = plan->reserved.node.str();
          if (Preempt(uid, pod, *plan)) {
            const size_t reclaimed = plan->reclaimed_from.size();
            summary += reclaimed == 0
                           ? "; preempting " + std::to_string(victims) + " pod(s) of lower priority on " + node
                           : "; preempting " + std::to_string(victims) + " pod(s) on " + node + ", " +
                                 std::to_string(reclaimed) + " reclaimed for queue " + pod.queue +
                                 "'s guarantee from queues beyond theirs";
          } else {
            summary += "; preemption on " + node + " failed";
            backoff = true;  // tried again after the backoff, not at the next event (which could come at once)
          }
        }
        Log(common::LogLevel::kDebug, "pod " + pod.namespace_ + "/" + request.name + " is unschedulable: " + summary,
            {{"pod", pod.namespace_ + "/" + request.name}, {"reason", "unschedulable"}});
        Unschedulable(uid, pod, std::move(summary), blockers, backoff);
        ObserveAttempt(started);
        return;
      }
      task.allocation = std::move(*result->allocation);
      RecordAssumed(uid, pod, task.allocation);
    }
    cache_.BindStarting(request, options_.bind_in_flight_ms);
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.scheduled;
  }
  ObserveAttempt(started);
  Dispatch(std::move(task));
}

void SchedulerCore::ScheduleGang(const std::string& uid, const Pending& pod, const std::string& group, size_t placed,
                                 std::unique_lock<std::shared_mutex>& lock,
                                 std::chrono::steady_clock::time_point started) {
  const core::PodRequest& request = *pod.request;
  const size_t min_available = static_cast<size_t>(request.min_available);
  const size_t need = min_available - placed;
  core::ClusterState& state = cache_.state();
  // The pending members that may be tried: this pod first, then the others by priority and name.
  struct Member {
    std::string uid;
    Pending pending;
  };
  std::vector<Member> members{{uid, pod}};
  {
    std::lock_guard guard(mu_);
    for (const auto& [other, p] : pending_) {
      if (other == uid || !p.request.ok() || p.namespace_ != request.namespace_ ||
          p.request->pod_group != request.pod_group || !p.hard_fields.empty() ||
          state.FindAllocation(p.request->uid) != nullptr) {
        continue;
      }
      members.push_back({other, p});
    }
  }
  std::sort(members.begin() + 1, members.end(), [](const Member& a, const Member& b) {
    return std::make_pair(-a.pending.request->priority, a.pending.name) <
           std::make_pair(-b.pending.request->priority, b.pending.name);
  });
  const std::string who = "pod group " + group + " (min-available " + std::to_string(min_available) + ")";
  // Every pending member waits with the same reason (claimed from the queue, so that each is not tried alone).
  auto park = [&](const std::string& message, uint32_t blockers, bool backoff = false) {
    Unschedulable(uid, pod, message, blockers, backoff);
    for (size_t i = 1; i < members.size(); ++i) {
      if (queue_.Claim(members[i].uid)) {
        Unschedulable(members[i].uid, members[i].pending, message, blockers, backoff);
      }
    }
    ObserveAttempt(started);
  };
  // Rooms held for members since the group preempted are given back for this attempt (the members may go
  // anywhere); while the victims are still leaving they are held again if the group does not fit yet.
  std::vector<std::pair<std::string, Nomination>> held;
  size_t leaving = 0;
  for (const Member& m : members) {
    if (auto n = TakeNomination(m.uid); n.has_value()) {
      for (const Victim& v : n->victims) {
        leaving += state.FindAllocation(v.uid) != nullptr ? 1U : 0U;
      }
      held.emplace_back(m.uid, std::move(*n));
    }
  }
  auto given_back = [&] {  // rooms given back and not taken again: what they blocked may fit now
    if (!held.empty() && queue_.OnClusterEvent(kFreedByRelease) > 0) {
      Wake();
    }
  };
  if (members.size() < need) {
    lock.unlock();
    given_back();
    park(who + ": " + std::to_string(placed) + " placed and " + std::to_string(members.size()) +
             " pending; waiting for the other members before placing any",
         sched::kBlockedByGang);
    return;
  }
  // Whether the group may preempt if it does not fit: every member may (no preemptionPolicy Never), none has
  // inter-pod constraints (a plan for many members evaluates node resources and GPUs only), and no victims of an
  // earlier preemption are still leaving.
  bool may_preempt = options_.preemptor != nullptr && leaving == 0;
  for (const Member& m : members) {
    may_preempt = may_preempt && !m.pending.request->preempt_never && !m.pending.request->HasInterPodConstraints();
  }
  bool quota_refused = false;
  std::vector<std::pair<std::string, const Pending*>> unplaced;  // members that fit nowhere, in order
  bool labels_matter = false;  // placed pods have anti-affinity: members' labels decide where they fit
  {
    std::lock_guard guard(mu_);
    labels_matter = !with_anti_affinity_.empty();
  }
  // Reserve members one after the other against one state, until the group has its minimum.
  std::vector<BindTask> reserved;
  std::vector<std::string> group_nodes;  // where the group has members placed or reserved, first used first
  {
    std::lock_guard guard(mu_);
    if (auto placed_members = placed_by_group_.find(group); placed_members != placed_by_group_.end()) {
      for (const std::string& member : placed_members->second) {
        if (auto it = running_.find(member); it != running_.end()) {
          group_nodes.push_back(it->second.node.str());
        }
      }
    }
  }
  std::sort(group_nodes.begin(), group_nodes.end());
  group_nodes.erase(std::unique(group_nodes.begin(), group_nodes.end()), group_nodes.end());
  std::string first_failure;
  uint32_t blockers = 0;
  size_t left = members.size();  // members not tried yet
  for (const Member& m : members) {
    if (reserved.size() == need || ((!may_preempt || quota_refused) && reserved.size() + left < need)) {
      break;  // done, or the minimum can no longer be reached (with preemption, every member is tried)
    }
    --left;
    const core::PodRequest& r = *m.pending.request;
    // The members reserved so far are charged to the queue already: the group as a whole stays within its limit.
    if (r.RequestsGpu()) {
      auto admission = gpu_queues_.Admit(m.pending.queue, m.pending.demand);
      if (std::string refusal = QueueJoinRefusal(m.pending); !refusal.empty()) {
        admission = {.reason = std::move(refusal)};
      }
      if (!admission.admitted) {
        if (first_failure.empty()) {
          first_failure = m.pending.name + ": " + admission.reason;
        }
        blockers |= sched::kBlockedByQuota;
        quota_refused = true;
        continue;
      }
    }
    // A member that passes the same filters as one that fit nowhere fits nowhere either: the state only filled
    // since.
    if (std::any_of(unplaced.begin(), unplaced.end(),
                    [&](const auto& failed) { return SameFit(*failed.second->request, r, labels_matter); })) {
      unplaced.emplace_back(m.uid, &m.pending);
      continue;
    }
    const sched::InterPodConstraints inter_pod = PrepareInterPod(r, state);
    sched::SnapshotBuilder::Hold hold;
    const policy::Snapshot snapshot = SnapshotFor(r, state, hold);  // the member's own forecast (its class)
    // Fewer nodes: a node the group already has members on, where the member fits, comes first (the policy picks
    // the GPUs there); else the whole cluster, by the policy's score.
    std::optional<common::Result<sched::CycleResult>> on_group_node;
    for (const std::string& node : group_nodes) {
      const core::NodeView* view = state.Find(common::NodeName(node));
      if (view == nullptr || !runner_.Filter(r, *view).fits()) {
        continue;
      }
      core::PodRequest pinned = r;
      pinned.node_name = node;
      auto tried = runner_.Schedule(pinned, state, snapshot, rng_, cache_.NextAllocationId(), &inter_pod);
      if (tried.ok() && tried->allocation.has_value()) {
        on_group_node = std::move(tried);
        break;
      }
    }
    auto result = on_group_node.has_value()
                      ? std::move(*on_group_node)
                      : runner_.Schedule(r, state, snapshot, rng_, cache_.NextAllocationId(), &inter_pod);
    if (result.ok() && result->allocation.has_value()) {
      if (std::find(group_nodes.begin(), group_nodes.end(), result->allocation->node.str()) == group_nodes.end()) {
        group_nodes.push_back(result->allocation->node.str());
      }
      RecordAssumed(m.uid, m.pending, *result->allocation);
      reserved.push_back(BindTask{.request = r,
                                  .allocation = std::move(*result->allocation),
                                  .namespace_ = m.pending.namespace_,
                                  .name = m.pending.name,
                                  .first_seen_ms = m.pending.first_seen_ms,
                                  .soft_fields = m.pending.soft_fields});
      continue;
    }
    if (first_failure.empty()) {
      first_failure = m.pending.name + ": " + (result.ok() ? result->Summary() : result.status().message());
    }
    if (result.ok()) {
      blockers |= BlockersOf(*result, r, state, inter_pod);
      unplaced.emplace_back(m.uid, &m.pending);
    }
  }
  if (reserved.size() < need) {
    // Preemption for the whole group: victims for the members that fit nowhere, chosen once, with the members
    // reserved so far staying where they are.
    std::optional<GangPreemption> plan;
    if (may_preempt && !quota_refused && unplaced.size() >= need - reserved.size()) {
      core::GpuAmount demand;
      for (size_t i = 0; i < need - reserved.size(); ++i) {
        demand += unplaced[i].second->demand;
      }
      const bool within_guarantee = gpu_queues_.Admit(pod.queue, demand).within_guarantee;
      plan = PlanGangPreemption(unplaced, need - reserved.size(), state, pod.queue, within_guarantee);
      if (!plan.has_value() && !within_guarantee) {
        blockers |= sched::kBlockedByGuarantee;  // back within it, it may take room from borrowers
      }
    }
    // All or nothing: give back what was reserved; with a plan, every member's room is held instead while the
    // victims leave (the reserved ones where they were reserved), and nothing binds until the group fits whole.
    std::vector<std::pair<std::string, Nomination>> rooms;
    if (plan.has_value()) {
      for (const BindTask& t : reserved) {
        rooms.emplace_back(t.request.uid.str(), RoomFor(t.request, t.allocation));
      }
      rooms.insert(rooms.end(), plan->rooms.begin(), plan->rooms.end());
      plan->rooms = rooms;  // every member's room: nominated, and given back if an eviction fails
    } else if (leaving > 0) {
      rooms = std::move(held);
      held.clear();
    }
    for (const BindTask& t : reserved) {
      (void)state.Forget(t.request.uid);
    }
    {
      std::lock_guard guard(mu_);
      for (const BindTask& t : reserved) {
        Unplace(t.request.uid.str());
      }
    }
    bool holding = !rooms.empty();
    for (const auto& [member, room] : rooms) {
      holding = holding && HoldNomination(member, room, state);
    }
    if (!holding) {
      for (const auto& [member, room] : rooms) {
        (void)TakeNomination(member);
      }
      plan.reset();
    }
    lock.unlock();
    given_back();
    Count(&SchedulerStats::gangs_refused);
    std::string message = who + ": " + std::to_string(reserved.size()) + " of the " + std::to_string(need) +
                          " members it still needs fit together; none is placed. " + first_failure;
    blockers = blockers == 0 ? sched::kBlockedByAnything : blockers;
    bool backoff = false;
    if (plan.has_value()) {
      if (PreemptForGang(uid, pod, *plan)) {
        message += "; preempting " + std::to_string(plan->victims.size()) + " pod(s) on " +
                   std::to_string(plan->nodes) + " node(s) for the whole group";
        if (!plan->reclaimed_from.empty()) {
          message += ", " + std::to_string(plan->reclaimed_from.size()) + " reclaimed for queue " + pod.queue +
                     "'s guarantee from queues beyond theirs";
        }
        blockers |= kFreedByRelease;
      } else {
        message += "; preemption for the group failed";
        backoff = true;  // tried again after the backoff, not at the next event
      }
    } else if (holding) {
      message += "; waiting for " + std::to_string(leaving) + " preempted pod(s) to leave";
      blockers |= kFreedByRelease;
    }
    park(message, blockers, backoff);
    return;
  }
  for (const BindTask& t : reserved) {
    cache_.BindStarting(t.request, options_.bind_in_flight_ms);
  }
  lock.unlock();
  given_back();
  // The placed members are in flight until their binds end (Done, or Requeue on failure); members beyond the
  // minimum stay queued and are placed like any pod, this one too when the others filled the minimum.
  bool this_one_placed = false;
  for (const BindTask& t : reserved) {
    if (t.request.uid.str() == uid) {
      this_one_placed = true;
    } else {
      (void)queue_.Claim(t.request.uid.str());
    }
  }
  if (!this_one_placed) {
    queue_.Requeue(uid, sched::SchedulingQueue::Outcome::kError);
  }
  {
    std::lock_guard guard(mu_);
    stats_.scheduled += reserved.size();
    ++stats_.gangs_placed;
  }
  Log(common::LogLevel::kInfo, who + ": " + std::to_string(reserved.size()) + " member(s) placed together");
  ObserveAttempt(started);
  for (BindTask& t : reserved) {
    Dispatch(std::move(t));
  }
}

void SchedulerCore::Dispatch(BindTask task) {
  {
    std::lock_guard lock(loop_mu_);
    if (started_ && !stop_) {
      binds_.push_back(std::move(task));
      bind_cv_.notify_one();
      return;
    }
  }
  Bind(std::move(task));
}

void SchedulerCore::Bind(BindTask task) {
  const common::PodUid& uid = task.request.uid;
  common::Status bound = options_.may_bind && !options_.may_bind()
                             ? common::FailedPrecondition("this replica lost the leader lease before the bind")
                             : binder_.Bind(task.request, task.allocation);
  const bool unknown =
      cache_.FinishBind(uid, task.allocation.node, bound, options_.assumed_ttl_ms) == ClusterCache::BindEnd::kUnknown;
  const std::string key = task.namespace_ + "/" + task.name;
  if (bound.ok()) {
    queue_.Done(uid.str());
    ObserveE2e(static_cast<double>(clock_.NowMs() - task.first_seen_ms) / 1000.0);
    {
      std::lock_guard lock(mu_);
      ++stats_.binds_ok;
    }
    if (options_.min_log_level <= common::LogLevel::kInfo) {
      Log(common::LogLevel::kInfo,
          "pod " + key + " bound to " + task.allocation.node.str() + " (" + std::to_string(task.allocation.GpuCount()) +
              " GPU share(s), allocation " + std::to_string(task.allocation.id) + ")",
          {{"pod", key},
           {"node", task.allocation.node.str()},
           {"gpus", sched::DescribeGpus(task.allocation)},
           {"allocation", std::to_string(task.allocation.id)}});
    }
    if (events_) {  // (the message is built only for someone who reads it)
      std::string message = "Successfully assigned " + key + " to " + task.allocation.node.str();
      // Which GPUs, so that `kubectl describe pod` answers it: ", GPUs 0,1" (whole) or ", GPU 2 (30%)" (a share).
      if (std::string gpus = sched::DescribeGpus(task.allocation); !gpus.empty()) {
        message += ", " + gpus;
      }
      if (!task.soft_fields.empty()) {
        message += " (not evaluated: " + Join(task.soft_fields) + ")";
      }
      Emit(PodEvent{.namespace_ = task.namespace_,
                    .name = task.name,
                    .uid = uid.str(),
                    .type = task.soft_fields.empty() ? "Normal" : "Warning",
                    .reason = "Scheduled",
                    .message = std::move(message)});
    }
    return;
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.binds_failed;
    stats_.binds_unknown += unknown ? 1 : 0;
  }
  Log(common::LogLevel::kWarn,
      "bind of " + key + " to " + task.allocation.node.str() + " failed" +
          (unknown ? " (outcome unknown; its GPUs stay assumed until the watch tells)" : "") + ": " + bound.message(),
      {{"pod", key},
       {"node", task.allocation.node.str()},
       {"gpus", sched::DescribeGpus(task.allocation)},
       {"reason", unknown ? "bind_outcome_unknown" : "bind_failed"}});
  queue_.Requeue(uid.str(), sched::SchedulingQueue::Outcome::kError);
  if (!unknown) {
    (void)DropStaleAssumed();
    // What it held is free, and it no longer counts against anti-affinity and spread.
    (void)queue_.OnClusterEvent(kFreedByRelease);
  }
  Emit(PodEvent{.namespace_ = task.namespace_,
                .name = task.name,
                .uid = uid.str(),
                .type = "Warning",
                .reason = "FailedScheduling",
                .message = "binding rejected: " + bound.message()});
  Wake();
}

size_t SchedulerCore::ExpireAssumed() {
  const size_t expired = cache_.ExpireAssumed();
  const size_t stale = DropStaleAssumed();
  if (expired > 0) {
    std::lock_guard lock(mu_);
    stats_.expired_assumptions += expired;
  }
  if (expired + stale > 0 && queue_.OnClusterEvent(kFreedByRelease) > 0) {
    Wake();
  }
  return expired;
}

sched::InterPodConstraints SchedulerCore::PrepareInterPod(const core::PodRequest& request,
                                                          const core::ClusterState& state) {
  std::lock_guard lock(mu_);
  if (!request.HasInterPodConstraints() && with_anti_affinity_.empty()) {
    return {};
  }
  std::vector<const sched::PodOnNode*> all;
  std::vector<const sched::PodOnNode*> anti;
  if (request.HasInterPodConstraints()) {
    all.reserve(running_.size());
    for (const auto& [uid, r] : running_) {
      if (Counts(r, state)) {
        all.push_back(&r);
      }
    }
  }
  for (const std::string& uid : with_anti_affinity_) {
    auto it = running_.find(uid);
    if (it != running_.end() && Counts(it->second, state)) {
      anti.push_back(&it->second);
    }
  }
  return sched::InterPodConstraints::Prepare(request, all, anti, state, namespaces_);
}

void SchedulerCore::RecordAssumed(const std::string& uid, const Pending& pod, const core::Allocation& allocation) {
  const core::PodRequest& request = *pod.request;
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = running_.try_emplace(uid);
    Running& r = it->second;
    if (!inserted && !r.assumed) {
      return;  // the watch has shown it bound already
    }
    r.uid = request.uid;
    r.namespace_ = request.namespace_;
    r.name = pod.name;
    r.labels = request.labels;
    r.node = allocation.node;
    r.anti_affinity = request.pod_anti_affinity;
    r.priority = request.priority;
    r.assumed = true;
    r.group = request.pod_group.empty() ? std::string() : GroupKey(request.namespace_, request.pod_group);
    r.min_available = request.min_available;
    r.coscheduling = pod.coscheduling;
    r.queue = pod.queue;
    r.demand = core::DemandOf(allocation);
    if (!r.demand.IsZero()) {
      gpu_queues_.Charge(uid, r.queue, r.demand);
    }
    Reindex(uid, r);
  }
  ++placed_epoch_;                                         // its queue holds more: who may be reclaimed from changed
  (void)queue_.OnClusterEvent(sched::kBlockedByPodAdded);  // the caller goes on scheduling: no wake needed
}

size_t SchedulerCore::DropStaleAssumed() {
  auto lock = cache_.ReadLock();
  const core::ClusterState& state = cache_.state();
  std::lock_guard guard(mu_);
  std::vector<std::string> stale;
  for (const std::string& uid : assumed_) {
    auto r = running_.find(uid);
    if (r == running_.end() || !Counts(r->second, state)) {
      stale.push_back(uid);
    }
  }
  for (const std::string& uid : stale) {
    Unplace(uid);
  }
  return stale.size();
}

bool SchedulerCore::Counts(const Running& r, const core::ClusterState& state) {
  if (!r.assumed) {
    return true;
  }
  const core::Allocation* a = state.FindAllocation(r.uid);
  return a != nullptr && a->node == r.node;
}

void SchedulerCore::Recount(const std::string& uid, const Running* r) {
  if (auto was = counted_.find(uid); was != counted_.end()) {
    auto q = priorities_by_queue_.find(was->second.first);
    q->second.erase(q->second.find(was->second.second));
    if (q->second.empty()) {
      priorities_by_queue_.erase(q);
    }
    counted_.erase(was);
  }
  if (r != nullptr && !r->assumed && !r->deleting && !IsReservation(r->uid)) {
    counted_.emplace(uid, std::make_pair(r->queue, r->priority));
    priorities_by_queue_[r->queue].insert(r->priority);
  }
}

void SchedulerCore::Reindex(const std::string& uid, const Running& r) {
  Recount(uid, &r);
  if (r.anti_affinity.empty()) {
    with_anti_affinity_.erase(uid);
  } else {
    with_anti_affinity_.insert(uid);
  }
  if (r.assumed) {
    assumed_.insert(uid);
  } else {
    assumed_.erase(uid);
  }
  if (auto g = group_of_.find(uid); g != group_of_.end() && g->second == r.group) {
    return;
  }
  Ungroup(uid);
  if (!r.group.empty()) {
    group_of_.emplace(uid, r.group);
    placed_by_group_[r.group].insert(uid);
  }
}

void SchedulerCore::Ungroup(const std::string& uid) {
  auto g = group_of_.find(uid);
  if (g == group_of_.end()) {
    return;
  }
  if (auto members = placed_by_group_.find(g->second); members != placed_by_group_.end()) {
    members->second.erase(uid);
    if (members->second.empty()) {
      placed_by_group_.erase(members);
    }
  }
  group_of_.erase(g);
}

void SchedulerCore::Unplace(const std::string& uid) {
  running_.erase(uid);
  Recount(uid, nullptr);
  // Back to the queue's demand while the pod is still pending here; else it holds nothing of it any more.
  if (auto p = pending_.find(uid); p != pending_.end()) {
    gpu_queues_.SetPending(uid, p->second.queue, p->second.demand);
  } else {
    gpu_queues_.Release(uid);
  }
  with_anti_affinity_.erase(uid);
  assumed_.erase(uid);
  Ungroup(uid);
}

size_t SchedulerCore::PlacedInGroup(const std::string& group) const {
  auto it = placed_by_group_.find(group);
  return it == placed_by_group_.end() ? 0 : it->second.size();
}

void SchedulerCore::Start() {
  std::lock_guard lock(loop_mu_);
  if (started_ || stop_) {
    return;
  }
  started_ = true;
  for (size_t i = 0; i < options_.bind_workers; ++i) {
    workers_.emplace_back([this] { Worker(); });
  }
  loop_ = std::thread([this] { Loop(); });
}

void SchedulerCore::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  bind_cv_.notify_all();
  if (loop_.joinable()) {
    loop_.join();
  }
  for (auto& w : workers_) {
    if (w.joinable()) {
      w.join();
    }
  }
  workers_.clear();
}

void SchedulerCore::Loop() {
  int64_t next_expiry = clock_.NowMs() + 1000;
  for (;;) {
    {
      std::lock_guard lock(loop_mu_);
      if (stop_) {
        return;
      }
      wake_ = false;
    }
    if (clock_.NowMs() >= next_expiry) {
      (void)ExpireAssumed();
      next_expiry = clock_.NowMs() + 1000;
    }
    if (ScheduleOne()) {
      continue;
    }
    // Nothing ready: sleep until an event, the queue's next deadline, or the next expiry check.
    int64_t wait_ms = std::max<int64_t>(1, next_expiry - clock_.NowMs());
    if (auto at = queue_.NextWakeMs(); at.has_value()) {
      wait_ms = std::clamp<int64_t>(*at - clock_.NowMs(), 1, wait_ms);
    }
    std::unique_lock lock(loop_mu_);
    loop_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return stop_ || wake_; });
  }
}

void SchedulerCore::Worker() {
  for (;;) {
    BindTask task;
    {
      std::unique_lock lock(loop_mu_);
      bind_cv_.wait(lock, [this] { return stop_ || !binds_.empty(); });
      if (binds_.empty()) {
        return;  // stopping, and every handed-off bind is done
      }
      task = std::move(binds_.front());
      binds_.pop_front();
    }
    Bind(std::move(task));
  }
}

bool SchedulerCore::StillPending(const std::string& uid) const {
  {
    std::lock_guard lock(mu_);
    if (!pending_.contains(uid)) {
      return false;
    }
  }
  auto lock = cache_.ReadLock();
  return cache_.state().FindAllocation(common::PodUid(uid)) == nullptr;
}

SchedulerStats SchedulerCore::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

int64_t SchedulerCore::OldestPendingMs() const {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.NowMs();
  int64_t oldest_ms = 0;
  for (const auto& [uid, p] : pending_) {
    oldest_ms = std::max(oldest_ms, now - p.first_seen_ms);
  }
  return oldest_ms;
}

size_t SchedulerCore::DisruptionBudgets() const {
  std::lock_guard lock(mu_);
  return budgets_.size();
}

void SchedulerCore::ObserveAttempt(std::chrono::steady_clock::time_point started) const {
  if (options_.observe_attempt) {
    options_.observe_attempt(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
}

void SchedulerCore::ObserveE2e(double seconds) const {
  if (options_.observe_e2e) {
    options_.observe_e2e(seconds);
  }
}

}  // namespace gpusched::sched
