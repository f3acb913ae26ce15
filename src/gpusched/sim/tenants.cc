#include "gpusched/sim/tenants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "gpusched/common/clock.h"
#include "gpusched/common/rng.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/plot/line_chart.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sched/gpu_queues.h"
#include "gpusched/sched/preemption.h"
#include "gpusched/sched/scheduling_queue.h"
#include "gpusched/sim/percentile.h"

namespace gpusched::sim {
namespace {

class SimClock final : public common::Clock {
 public:
  [[nodiscard]] int64_t NowMs() const override { return now_ms; }
  int64_t now_ms = 0;
};

class TenantSimulation {
 public:
  TenantSimulation(const Cluster& cluster, const std::vector<TenantPod>& pods, const TenantSpec& spec,
                   const policy::PlacementPolicy& policy)
      : cluster_(cluster),
        pods_(pods),
        spec_(spec),
        runner_(policy, sched::CycleOptions{.collect_reasons = false}),
        rng_(spec.seed),
        queue_(clock_, sched::QueueOptions{.flush_after_ms = 0}) {}

  common::Result<TenantOutcome> Run() {
    const auto started = std::chrono::steady_clock::now();
    core::GpuAmount capacity;
    for (const core::Node& n : cluster_.nodes) {
      GPUSCHED_RETURN_IF_ERROR(state_.AddNode(n));
      for (const core::Gpu& g : n.gpus) capacity += core::GpuAmount{1, common::kGpuMilli.value(), g.memory.value()};
    }
    capacity_milli_ = static_cast<double>(capacity.milli);
    book_.SetCapacity(capacity);
    std::vector<core::QueueSpec> specs;
    for (const auto& q : spec_.queues) specs.push_back(q.spec);
    if (auto rejected = book_.SetQueues(specs); !rejected.empty()) {
      return common::InvalidArgument("queue " + rejected.begin()->first + ": " + rejected.begin()->second);
    }
    queue_.SetQueueChooser([this](std::span<const std::string* const> q) { return book_.Lowest(q); });
    runs_.resize(pods_.size());
    out_.queues.resize(spec_.queues.size());
    out_.shares.resize(spec_.queues.size());
    for (size_t q = 0; q < spec_.queues.size(); ++q) out_.queues[q].name = spec_.queues[q].spec.name;
    for (size_t i = 0; i < pods_.size(); ++i) {
      if (pods_[i].queue >= spec_.queues.size()) {
        return common::InvalidArgument("pod " + pods_[i].pod.name + " names queue " + std::to_string(pods_[i].queue) +
                                       " of " + std::to_string(spec_.queues.size()));
      }
      runs_[i].pod = pods_[i].pod;
      runs_[i].pod.uid = common::PodUid("t-" + std::to_string(i));
      runs_[i].demand = core::DemandOf(runs_[i].pod);
      runs_[i].duration_s = std::max<int64_t>(1, pods_[i].deletion_s - pods_[i].creation_s);
      index_[runs_[i].pod.uid.str()] = i;
      if (!runs_[i].pod.pod_group.empty() && runs_[i].pod.min_available > 1) {
        runs_[i].gang = runs_[i].pod.namespace_ + "/" + runs_[i].pod.pod_group;
        auto& members = gangs_[runs_[i].gang];
        if (members.empty()) ++out_.queues[pods_[i].queue].gangs;
        members.push_back(i);
      }
      const auto arrival = static_cast<int64_t>(
          std::llround(static_cast<double>(pods_[i].creation_s) / std::max(1.0, spec_.arrival_speedup)));
      events_.push({arrival + spec_.queues[pods_[i].queue].offset_s, 1, i});
      last_arrival_ = std::max(last_arrival_, arrival + spec_.queues[pods_[i].queue].offset_s);
      ++out_.queues[pods_[i].queue].pods;
    }
    double last_t = 0;
    bool first = true;
    while (!events_.empty()) {
      const int64_t t = events_.top().time;
      if (!first && t <= last_arrival_) Accumulate(static_cast<double>(t) - last_t);
      first = false;
      last_t = static_cast<double>(t);
      clock_.now_ms = t * 1000;
      bool freed = false;
      while (!events_.empty() && events_.top().time == t) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == 0) {
          PodRun& r = runs_[e.pod];
          if (!r.running || r.generation != e.generation) continue;  // evicted since
          GPUSCHED_RETURN_IF_ERROR(Stop(e.pod));
          freed = true;
        } else {
          Arrive(e.pod, t);
        }
      }
      if (freed) (void)queue_.OnClusterEvent(sched::kBlockedByAnything);
      GPUSCHED_RETURN_IF_ERROR(SchedulePass(t));
      if (PartialGangs()) ++out_.partial_gang_events;
      out_.times_s.push_back(static_cast<double>(t));
      for (size_t q = 0; q < spec_.queues.size(); ++q) {
        const auto s = book_.Status(spec_.queues[q].spec.name);
        out_.shares[q].push_back(s.has_value() ? static_cast<double>(s->allocated.milli) / capacity_milli_ : 0);
      }
      ++out_.events;
    }
    Finish();
    out_.cluster_gpus = capacity.gpus;
    out_.last_arrival_s = last_arrival_;
    out_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return out_;
  }

 private:
  struct PodRun {
    core::PodRequest pod;
    core::GpuAmount demand;
    int64_t duration_s = 1;
    int64_t arrived_s = -1;
    int64_t first_bind_s = -1;
    bool running = false;
    bool tried = false;
    bool within_at_arrival = false;
    uint64_t generation = 0;  // completion events of an earlier run are stale
    std::string gang;         // namespace/pod-group of a gang member, else empty
  };
  struct Event {
    int64_t time;
    int kind;  // 0 completion, 1 arrival: completions first at equal times
    size_t pod;
    uint64_t generation = 0;
    bool operator>(const Event& o) const { return std::tie(time, kind, pod) > std::tie(o.time, o.kind, o.pod); }
  };

  const std::string& QueueName(size_t i) const { return spec_.queues[pods_[i].queue].spec.name; }

  void Arrive(size_t i, int64_t t) {
    PodRun& r = runs_[i];
    if (r.arrived_s < 0) r.arrived_s = t;
    book_.SetPending(r.pod.uid.str(), QueueName(i), r.demand);
    queue_.AddOrUpdate(sched::QueuedPod{.uid = r.pod.uid.str(),
                                        .key = r.pod.name,
                                        .priority = r.pod.priority,
                                        .created_ms = t * 1000,
                                        .queue = QueueName(i)});
  }

  // A running pod stops (completed or evicted): its GPUs and its queue's share are freed.
  common::Status Stop(size_t i) {
    PodRun& r = runs_[i];
    GPUSCHED_RETURN_IF_ERROR(state_.Release(r.pod.uid));
    book_.Release(r.pod.uid.str());
    r.running = false;
    running_.erase(i);
    if (!r.gang.empty()) --gang_running_[r.gang];
    return common::Status::Ok();
  }

  // Whether some gang runs with fewer members than its minimum (but at least one).
  bool PartialGangs() const {
    for (const auto& [gang, running] : gang_running_) {
      const size_t first = gangs_.at(gang).front();
      if (running > 0 && running < runs_[first].pod.min_available) return true;
    }
    return false;
  }

  // The first time a pod is tried: whether it arrived within its queue's guarantee (for "guarantee met at once").
  void FirstTry(size_t i, const sched::GpuQueues::Admission& admission, int64_t t) {
    PodRun& r = runs_[i];
    if (r.tried) return;
    r.tried = true;
    if (admission.admitted && admission.within_guarantee && r.arrived_s == t) {
      r.within_at_arrival = true;
      ++out_.queues[pods_[i].queue].within_guarantee;
    }
  }

  void CountMetAtOnce(size_t i, int64_t t) {
    PodRun& r = runs_[i];
    if (r.within_at_arrival && r.arrived_s == t && r.first_bind_s == t) {
      ++out_.queues[pods_[i].queue].met_at_once;
      r.within_at_arrival = false;  // counted once
    }
  }

  // A gang member was popped: every member is placed against one state, or none. The others are claimed from the
  // scheduling queue (they are tried with it, not alone).
  common::Status PlaceGang(size_t i, int64_t t) {
    const std::vector<size_t>& members = gangs_.at(runs_[i].gang);
    std::vector<size_t> todo;
    core::GpuAmount demand;
    for (size_t m : members) {
      if (runs_[m].running) continue;                                 // cannot be: gangs start and stop whole
      if (m != i && !queue_.Claim(runs_[m].pod.uid.str())) continue;  // not waiting (not arrived yet)
      todo.push_back(m);
      demand += runs_[m].demand;
    }
    auto requeue = [&](uint32_t blockers) {
      for (size_t m : todo) {
        queue_.Requeue(runs_[m].pod.uid.str(), sched::SchedulingQueue::Outcome::kUnschedulable, blockers);
      }
    };
    const auto admission = book_.Admit(QueueName(i), demand);
    for (size_t m : todo) FirstTry(m, admission, t);
    if (static_cast<int32_t>(todo.size()) < runs_[i].pod.min_available) {
      requeue(sched::kBlockedByGang);
      return common::Status::Ok();
    }
    if (!admission.admitted) {
      requeue(sched::kBlockedByQuota);
      return common::Status::Ok();
    }
    const policy::Snapshot snapshot{.now_ms = t * 1000};
    // Members are reserved one after the other; a member that fits nowhere may take borrowers off (whole gangs),
    // which are evicted only if the whole gang fits in the end, else put back as they ran.
    std::vector<size_t> reserved, taken_off;
    std::vector<core::Allocation> taken_held;
    for (size_t m : todo) {
      GPUSCHED_ASSIGN_OR_RETURN(cycle, runner_.Schedule(runs_[m].pod, state_, snapshot, rng_));
      if (!cycle.allocation.has_value() && admission.within_guarantee) {
        const std::vector<size_t> victims = PlanReclaim(m);
        if (!victims.empty()) {
          GPUSCHED_ASSIGN_OR_RETURN(held, TakeOff(victims));
          taken_off.insert(taken_off.end(), victims.begin(), victims.end());
          for (auto& a : held) taken_held.push_back(std::move(a));
          GPUSCHED_ASSIGN_OR_RETURN(again, runner_.Schedule(runs_[m].pod, state_, snapshot, rng_));
          cycle = std::move(again);
        }
      }
      if (!cycle.allocation.has_value()) break;
      reserved.push_back(m);
    }
    if (reserved.size() < todo.size()) {
      for (size_t m : reserved) GPUSCHED_RETURN_IF_ERROR(state_.Forget(runs_[m].pod.uid));
      GPUSCHED_RETURN_IF_ERROR(PutBack(taken_off, std::move(taken_held)));
      requeue(sched::kBlockedByGpu | sched::kBlockedByQuota);
      return common::Status::Ok();
    }
    Evicted(taken_off, i, t);
    const bool first_run = runs_[i].first_bind_s < 0;
    for (size_t m : todo) {
      GPUSCHED_RETURN_IF_ERROR(Start(m, t));
      queue_.Done(runs_[m].pod.uid.str());
      CountMetAtOnce(m, t);
    }
    if (first_run) {
      ++out_.queues[pods_[i].queue].gangs_bound;
      gang_waits_[pods_[i].queue].push_back(static_cast<double>(t - runs_[i].arrived_s));
    }
    return common::Status::Ok();
  }

  common::Status Start(size_t i, int64_t t) {
    PodRun& r = runs_[i];
    GPUSCHED_RETURN_IF_ERROR(state_.Confirm(r.pod.uid));
    book_.Charge(r.pod.uid.str(), QueueName(i), r.demand);
    r.running = true;
    running_.insert(i);
    if (!r.gang.empty()) ++gang_running_[r.gang];
    ++r.generation;
    if (r.first_bind_s < 0) {
      r.first_bind_s = t;
      ++out_.queues[pods_[i].queue].bound;
    }
    events_.push({t + r.duration_s, 0, i, r.generation});
    return common::Status::Ok();
  }

  common::Status SchedulePass(int64_t t) {
    while (auto next = queue_.Pop()) {
      const size_t i = index_.at(next->uid);
      PodRun& r = runs_[i];
      if (!r.gang.empty()) {
        GPUSCHED_RETURN_IF_ERROR(PlaceGang(i, t));
        continue;
      }
      const auto admission = book_.Admit(QueueName(i), r.demand);
      FirstTry(i, admission, t);
      if (!admission.admitted) {
        queue_.Requeue(next->uid, sched::SchedulingQueue::Outcome::kUnschedulable, sched::kBlockedByQuota);
        continue;
      }
      const policy::Snapshot snapshot{.now_ms = t * 1000};
      GPUSCHED_ASSIGN_OR_RETURN(cycle, runner_.Schedule(r.pod, state_, snapshot, rng_));
      if (!cycle.allocation.has_value() && admission.within_guarantee) {
        GPUSCHED_ASSIGN_OR_RETURN(reclaimed, Reclaim(i, t));
        if (reclaimed) {
          GPUSCHED_ASSIGN_OR_RETURN(again, runner_.Schedule(r.pod, state_, snapshot, rng_));
          cycle = std::move(again);
        }
      }
      if (cycle.allocation.has_value()) {
        GPUSCHED_RETURN_IF_ERROR(Start(i, t));
        queue_.Done(next->uid);
        CountMetAtOnce(i, t);
      } else {
        queue_.Requeue(next->uid, sched::SchedulingQueue::Outcome::kUnschedulable,
                       sched::kBlockedByGpu | sched::kBlockedByQuota);
      }
    }
    return common::Status::Ok();
  }

  // Evicts the fewest, least important pods of borrowing queues that make pod i fit on one node; false when none
  // does.
  common::Result<bool> Reclaim(size_t i, int64_t t) {
    const std::vector<size_t> victims = PlanReclaim(i);
    if (victims.empty()) return false;
    GPUSCHED_RETURN_IF_ERROR(TakeOff(victims).status());
    Evicted(victims, i, t);
    return true;
  }

  // The running pods (whole gangs) whose eviction makes pod i fit on one node: the fewest, least important pods of
  // borrowing queues; empty when none does. Changes nothing.
  std::vector<size_t> PlanReclaim(size_t i) {
    const PodRun& r = runs_[i];
    const std::string& queue = QueueName(i);
    // Only queues over their guarantee can give anything back.
    std::vector<bool> borrowing(spec_.queues.size(), false);
    bool any = false;
    for (size_t q = 0; q < spec_.queues.size(); ++q) {
      const auto st = book_.Status(spec_.queues[q].spec.name);
      borrowing[q] = q != pods_[i].queue && st.has_value() && !st->allocated.FitsIn(st->guaranteed);
      any = any || borrowing[q];
    }
    if (!any) return {};
    std::unordered_map<std::string, std::vector<size_t>> by_node;
    for (size_t j : running_) {
      if (!borrowing[pods_[j].queue]) continue;
      if (!book_.MayReclaim(QueueName(j), Taken(j), {}, queue)) continue;
      const core::Allocation* a = state_.FindAllocation(runs_[j].pod.uid);
      if (a != nullptr) by_node[a->node.str()].push_back(j);
    }
    std::vector<sched::VictimSet> candidates;
    auto fits = [&](const core::NodeView& v) { return runner_.Filter(r.pod, v).fits(); };
    std::vector<std::string> names;
    for (const auto& [name, _] : by_node) names.push_back(name);
    std::sort(names.begin(), names.end());  // a deterministic order
    for (const std::string& name : names) {
      const core::NodeView* view = state_.Find(common::NodeName(name));
      if (view == nullptr) continue;
      // Even every borrower gone would not free the compute the pod needs: no candidate (and no copy of the view).
      int64_t could_free = view->IdleMilli().value();
      for (size_t j : by_node[name]) could_free += runs_[j].demand.milli;
      if (could_free < r.pod.TotalGpuMilli().value()) continue;
      std::vector<sched::PotentialVictim> potential;
      for (size_t j : by_node[name]) {
        potential.push_back(sched::PotentialVictim{.allocation = state_.FindAllocation(runs_[j].pod.uid),
                                                   .priority = runs_[j].pod.priority,
                                                   .start_ms = runs_[j].first_bind_s * 1000,
                                                   .over_share = book_.Rank(QueueName(j))});
      }
      auto set = sched::SelectVictimsOnNode(*view, potential, {}, fits);
      if (!set.has_value() || set->victims.empty()) continue;
      std::map<std::string, core::GpuAmount> taken;
      std::set<std::string> gangs_taken;
      bool allowed = true;
      for (const common::PodUid& v : set->victims) {
        const size_t j = index_.at(v.str());
        if (!runs_[j].gang.empty() && !gangs_taken.insert(runs_[j].gang).second) continue;  // counted whole
        allowed = allowed && book_.MayReclaim(QueueName(j), Taken(j), taken[QueueName(j)], queue);
        taken[QueueName(j)] += Taken(j);
      }
      if (allowed) candidates.push_back(std::move(*set));
    }
    if (candidates.empty()) return {};
    const sched::VictimSet& chosen = candidates[sched::PickCandidate(candidates)];
    std::vector<size_t> evict;
    for (const common::PodUid& v : chosen.victims) {
      const size_t j = index_.at(v.str());
      if (runs_[j].gang.empty()) {
        evict.push_back(j);
        continue;
      }
      for (size_t m : gangs_.at(runs_[j].gang)) {  // the whole gang goes down with it
        if (runs_[m].running && std::find(evict.begin(), evict.end(), m) == evict.end()) evict.push_back(m);
      }
    }
    return evict;
  }

  // Takes running pods off the cluster; returns their allocations (for PutBack).
  common::Result<std::vector<core::Allocation>> TakeOff(const std::vector<size_t>& victims) {
    std::vector<core::Allocation> held;
    for (size_t j : victims) {
      held.push_back(*state_.FindAllocation(runs_[j].pod.uid));
      GPUSCHED_RETURN_IF_ERROR(Stop(j));
    }
    return held;
  }

  // Puts pods taken off back as they ran (a gang that could not be placed after all evicts nobody).
  common::Status PutBack(const std::vector<size_t>& victims, std::vector<core::Allocation> held) {
    for (size_t k = 0; k < victims.size(); ++k) {
      PodRun& r = runs_[victims[k]];
      GPUSCHED_RETURN_IF_ERROR(state_.Charge(std::move(held[k])));
      book_.Charge(r.pod.uid.str(), QueueName(victims[k]), r.demand);
      r.running = true;
      running_.insert(victims[k]);
      if (!r.gang.empty()) ++gang_running_[r.gang];
    }
    return common::Status::Ok();
  }

  // Pods taken off for pod i are evicted: counted, and recreated by their controllers (back in their queues with
  // their whole durations).
  void Evicted(const std::vector<size_t>& victims, size_t i, int64_t t) {
    for (size_t j : victims) {
      book_.CountReclaim(QueueName(j));
      ++out_.queues[pods_[j].queue].evicted;
      ++out_.queues[pods_[i].queue].reclaims;
    }
    for (size_t j : victims) Arrive(j, t);
  }

  // What evicting running pod j takes from its queue: its demand, or its whole gang's.
  core::GpuAmount Taken(size_t j) const {
    if (runs_[j].gang.empty()) return runs_[j].demand;
    core::GpuAmount sum;
    for (size_t m : gangs_.at(runs_[j].gang)) {
      if (runs_[m].running) sum += runs_[m].demand;
    }
    return sum;
  }

  void Accumulate(double dt) {
    if (dt <= 0) return;
    total_time_ += dt;
    // What each queue held since the last event time: the share recorded there.
    for (size_t q = 0; q < spec_.queues.size(); ++q) {
      const double held = out_.shares[q].back() * capacity_milli_;
      share_time_[q] += dt * out_.shares[q].back();
      borrowed_time_[q] +=
          dt * std::max(0.0, held - static_cast<double>(spec_.queues[q].spec.guaranteed.milli)) / 1000.0;
    }
  }

  void Finish() {
    std::vector<std::vector<double>> waits(spec_.queues.size());
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (runs_[i].first_bind_s >= 0) {
        waits[pods_[i].queue].push_back(static_cast<double>(runs_[i].first_bind_s - runs_[i].arrived_s));
      }
    }
    for (size_t q = 0; q < spec_.queues.size(); ++q) {
      TenantQueueReport& rep = out_.queues[q];
      double sum = 0;
      for (double w : waits[q]) sum += w;
      rep.mean_wait_s = waits[q].empty() ? 0 : sum / static_cast<double>(waits[q].size());
      rep.p95_wait_s = Percentile(waits[q], 0.95);
      rep.mean_share = total_time_ > 0 ? share_time_[q] / total_time_ : 0;
      rep.mean_borrowed_gpus = total_time_ > 0 ? borrowed_time_[q] / total_time_ : 0;
      double gang_sum = 0;
      for (double w : gang_waits_[q]) gang_sum += w;
      rep.mean_gang_wait_s = gang_waits_[q].empty() ? 0 : gang_sum / static_cast<double>(gang_waits_[q].size());
    }
  }

  const Cluster& cluster_;
  const std::vector<TenantPod>& pods_;
  const TenantSpec& spec_;
  sched::CycleRunner runner_;
  common::Rng rng_;
  SimClock clock_;
  sched::SchedulingQueue queue_;
  sched::GpuQueues book_;
  core::ClusterState state_;
  std::vector<PodRun> runs_;
  std::set<size_t> running_;  // indices of the running pods, in order (a deterministic reclaim search)
  std::unordered_map<std::string, size_t> index_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  TenantOutcome out_;
  double capacity_milli_ = 1;
  double total_time_ = 0;
  int64_t last_arrival_ = 0;  // shares and borrowing are averaged up to the last arrival
  std::map<size_t, double> share_time_, borrowed_time_;
  std::unordered_map<std::string, std::vector<size_t>> gangs_;  // members by namespace/pod-group
  std::unordered_map<std::string, int32_t> gang_running_;       // members running, by gang
  std::map<size_t, std::vector<double>> gang_waits_;            // by queue: arrival to first bind of its gangs
};

}  // namespace

std::vector<TenantPod> DealToQueues(const std::vector<core::PodRequest>& pods,
                                    const std::vector<std::pair<int64_t, int64_t>>& times, size_t queues) {
  std::vector<TenantPod> out;
  size_t n = 0;
  for (size_t i = 0; i < pods.size() && i < times.size(); ++i) {
    if (!pods[i].RequestsGpu()) continue;
    out.push_back(TenantPod{.pod = pods[i],
                            .creation_s = times[i].first,
                            .deletion_s = times[i].second,
                            .queue = queues == 0 ? 0 : n++ % queues});
  }
  return out;
}

void InflateStreams(std::vector<TenantPod>& pods, int64_t target_milli, size_t queues, uint64_t seed) {
  if (pods.empty() || queues == 0) return;
  int64_t total = 0;
  for (const auto& p : pods) total += p.pod.TotalGpuMilli().value();
  common::Rng rng(seed);
  const size_t originals = pods.size();
  size_t next = originals;
  while (total < target_milli) {
    TenantPod clone = pods[rng.Uniform(originals)];
    clone.pod.name += "-clone-" + std::to_string(next);
    clone.queue = next++ % queues;
    total += clone.pod.TotalGpuMilli().value();
    pods.push_back(std::move(clone));
  }
}

size_t GroupIntoGangs(std::vector<TenantPod>& pods, int32_t min_size, int32_t max_size, uint64_t seed) {
  if (min_size < 2 || max_size < min_size) return 0;
  std::map<size_t, std::vector<size_t>> multi;  // by queue: its pods of 2 or more GPUs, in order of creation
  for (size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].pod.GpuCount() >= 2 && pods[i].pod.pod_group.empty()) multi[pods[i].queue].push_back(i);
  }
  common::Rng rng(seed);
  size_t gangs = 0;
  for (auto& [queue, list] : multi) {
    std::stable_sort(list.begin(), list.end(),
                     [&](size_t a, size_t b) { return pods[a].creation_s < pods[b].creation_s; });
    size_t at = 0;
    while (at < list.size()) {
      const auto size = static_cast<size_t>(min_size) +
                        rng.Uniform(static_cast<size_t>(max_size) - static_cast<size_t>(min_size) + 1);
      if (list.size() - at < static_cast<size_t>(min_size)) break;
      const size_t end = std::min(list.size(), at + size);
      int64_t lifetime = 1;
      for (size_t k = at; k < end; ++k) {
        lifetime = std::max(lifetime, pods[list[k]].deletion_s - pods[list[k]].creation_s);
      }
      const int64_t created = pods[list[at]].creation_s;
      const std::string name = "gang-" + std::to_string(gangs++);
      for (size_t k = at; k < end; ++k) {
        TenantPod& p = pods[list[k]];
        p.pod.pod_group = name;
        p.pod.min_available = static_cast<int32_t>(end - at);
        p.creation_s = created;
        p.deletion_s = created + lifetime;
      }
      at = end;
    }
  }
  return gangs;
}

std::vector<TenantQueue> DefaultTenantQueues(int64_t gpus, int64_t delay_s) {
  auto queue = [](std::string name, int64_t guaranteed, double weight, int64_t offset_s) {
    TenantQueue q;
    q.spec.name = std::move(name);
    q.spec.guaranteed = {guaranteed, guaranteed * 1000, core::GpuAmount::kUnlimited};
    q.spec.weight = weight;
    q.offset_s = offset_s;
    return q;
  };
  return {queue("prod", gpus * 40 / 100, 1, 2 * delay_s), queue("research", gpus * 20 / 100, 2, delay_s),
          queue("batch", 0, 1, 0)};
}

common::Result<TenantOutcome> SimulateTenants(const Cluster& cluster, const Workload& workload,
                                              const std::vector<TenantPod>& pods, const TenantSpec& spec) {
  if (spec.queues.empty()) return common::InvalidArgument("multi-tenant simulation: no queues");
  GPUSCHED_ASSIGN_OR_RETURN(
      policy, policy::MakePolicy(spec.policy, policy::PolicyOptions{.target_workload = workload.target,
                                                                    .gpus_by_model = GpusByModel(cluster.nodes)}));
  TenantSimulation sim(cluster, pods, spec, *policy);
  return sim.Run();
}

void PrintTenantTable(std::ostream& out, const TenantOutcome& o) {
  bool with_gangs = false;
  for (const auto& q : o.queues) with_gangs = with_gangs || q.gangs > 0;
  out << fmt::format("{:<10} {:>6} {:>6} {:>10} {:>10} {:>8} {:>8} {:>7} {:>9} {:>12}", "queue", "pods", "bound",
                     "wait_mean", "wait_p95", "evicted", "reclaims", "share", "borrowed", "guarantee_at");
  out << (with_gangs ? fmt::format(" {:>11} {:>10}\n", "gangs_run", "gang_wait") : "\n");
  for (const auto& q : o.queues) {
    const std::string at_once = q.within_guarantee == 0 ? "-" : fmt::format("{}/{}", q.met_at_once, q.within_guarantee);
    out << fmt::format("{:<10} {:>6} {:>6} {:>9.0f}s {:>9.0f}s {:>8} {:>8} {:>6.1f}% {:>9.1f} {:>12}", q.name, q.pods,
                       q.bound, q.mean_wait_s, q.p95_wait_s, q.evicted, q.reclaims, 100 * q.mean_share,
                       q.mean_borrowed_gpus, at_once);
    out << (with_gangs
                ? fmt::format(" {:>11} {:>9.0f}s\n", fmt::format("{}/{}", q.gangs_bound, q.gangs), q.mean_gang_wait_s)
                : "\n");
  }
}

common::Status WriteTenantReport(const std::string& dir, const TenantOutcome& o) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return common::InvalidArgument("cannot create " + dir + ": " + ec.message());
  // At most 2000 points per series: every k-th event, the last one always.
  size_t n = 0;
  while (n < o.times_s.size() && o.times_s[n] <= 2.0 * static_cast<double>(std::max<int64_t>(1, o.last_arrival_s))) {
    ++n;
  }
  const size_t step = std::max<size_t>(1, n / 2000);
  std::ofstream csv(dir + "/shares.csv");
  csv << "time_min";
  for (const auto& q : o.queues) csv << "," << q.name;
  csv << "\n";
  plot::LineChart chart{.title = "Share of the cluster's GPU compute per queue",
                        .x_label = "simulated time (minutes)",
                        .y_label = "share (%)"};
  for (const auto& q : o.queues) chart.series.push_back(plot::Series{.name = q.name});
  std::vector<size_t> points;
  for (size_t e = 0; e < n; e += step) points.push_back(e);
  if (n > 0 && points.back() != n - 1) points.push_back(n - 1);
  for (size_t e : points) {
    const double h = o.times_s[e] / 60.0;
    csv << fmt::format("{:.4f}", h);
    for (size_t q = 0; q < o.queues.size(); ++q) {
      csv << fmt::format(",{:.5f}", o.shares[q][e]);
      chart.series[q].xs.push_back(h);
      chart.series[q].ys.push_back(100 * o.shares[q][e]);
    }
    csv << "\n";
  }
  if (!csv) return common::InvalidArgument("cannot write " + dir + "/shares.csv");
  chart.y_min = 0;
  GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(chart, dir + "/shares.svg"));
  return plot::WritePng(chart, dir + "/shares.png");
}

}  // namespace gpusched::sim
