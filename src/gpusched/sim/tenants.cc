#include "gpusched/sim/tenants.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "gpusched/common/clock.h"
#include "gpusched/common/rng.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sim/percentile.h"
#include "gpusched/sim/production_scheduler.h"

namespace gpusched::sim {
namespace {

// The production scheduling core over in-memory ports and simulated time (ProductionScheduler). Each trace pod is
// a pod of the namespace named like its queue (each queue serves the namespace of its name); a run of it has the
// uid t-<index>-<run>, a run after an eviction being the pod its controller recreated.
class TenantSimulation {
 public:
  TenantSimulation(const Cluster& cluster, const Workload& workload, const std::vector<TenantPod>& pods,
                   const TenantSpec& spec)
      : cluster_(cluster), workload_(workload), pods_(pods), spec_(spec) {}

  common::Result<TenantOutcome> Run() {
    const auto started = std::chrono::steady_clock::now();
    std::vector<core::QueueSpec> queues;
    for (const auto& q : spec_.queues) queues.push_back(q.spec);
    GPUSCHED_ASSIGN_OR_RETURN(
        scheduler,
        ProductionScheduler::Create(cluster_.nodes, queues,
                                    sched::SchedulerCoreOptions{.policy = spec_.policy,
                                                                .queue = sched::QueueOptions{.flush_after_ms = 0},
                                                                .seed = spec_.seed,
                                                                .target_workload = workload_.target,
                                                                .gpus_by_model = GpusByModel(cluster_.nodes),
                                                                .min_log_level = common::LogLevel::kError,
                                                                .collect_reasons = false},
                                    /*preemption=*/true));
    scheduler_ = std::move(scheduler);
    core::GpuAmount capacity;
    for (const core::Node& n : cluster_.nodes) {
      for (const core::Gpu& g : n.gpus) capacity += core::GpuAmount{1, common::kGpuMilli.value(), g.memory.value()};
    }
    capacity_milli_ = static_cast<double>(capacity.milli);
    runs_.resize(pods_.size());
    out_.queues.resize(spec_.queues.size());
    out_.shares.resize(spec_.queues.size());
    for (size_t q = 0; q < spec_.queues.size(); ++q) out_.queues[q].name = spec_.queues[q].spec.name;
    for (size_t i = 0; i < pods_.size(); ++i) {
      if (pods_[i].queue >= spec_.queues.size()) {
        return common::InvalidArgument("pod " + pods_[i].pod.name + " names queue " + std::to_string(pods_[i].queue) +
                                       " of " + std::to_string(spec_.queues.size()));
      }
      runs_[i].duration_s = std::max<int64_t>(1, pods_[i].deletion_s - pods_[i].creation_s);
      const core::PodRequest& p = pods_[i].pod;
      if (!p.pod_group.empty() && p.min_available > 1) {
        runs_[i].gang = QueueName(i) + "/" + p.pod_group;
        Gang& g = gangs_[runs_[i].gang];
        if (g.members.empty()) ++out_.queues[pods_[i].queue].gangs;
        g.members.push_back(i);
        g.min_available = p.min_available;
      }
      const auto arrival = static_cast<int64_t>(
          std::llround(static_cast<double>(pods_[i].creation_s) / std::max(1.0, spec_.arrival_speedup)));
      events_.push({arrival + spec_.queues[pods_[i].queue].offset_s, kArrival, i});
      last_arrival_ = std::max(last_arrival_, arrival + spec_.queues[pods_[i].queue].offset_s);
      ++out_.queues[pods_[i].queue].pods;
    }
    const auto on_bound = [this](const common::PodUid& uid, const core::Allocation&) { Bound(IndexOf(uid)); };
    const auto on_evicted = [this](const common::PodUid& uid, const std::string& by) { Evicted(IndexOf(uid), by); };
    double last_t = 0;
    bool first = true;
    while (!events_.empty()) {
      const int64_t t = events_.top().time;
      if (!first && t <= last_arrival_) Accumulate(static_cast<double>(t) - last_t);
      first = false;
      last_t = static_cast<double>(t);
      now_ = t;
      scheduler_->SetTime(t);
      while (!events_.empty() && events_.top().time == t) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == kCompletion) {
          PodRun& r = runs_[e.pod];
          if (!r.running || r.run != e.run) continue;  // evicted since
          Stop(e.pod);
        } else if (e.kind == kArrival) {
          Arrive(e.pod);
        } else {
          timers_.erase(t);
        }
      }
      scheduler_->RunAttempts(on_bound, on_evicted);
      if (auto at = scheduler_->NextWakeSeconds(); at.has_value()) {
        const int64_t when = std::max(t + 1, *at);
        if (timers_.insert(when).second) events_.push({when, kTimer, 0});
      }
      if (PartialGangs()) ++out_.partial_gang_events;
      out_.times_s.push_back(static_cast<double>(t));
      for (size_t q = 0; q < spec_.queues.size(); ++q) {
        const auto st = scheduler_->core().QueueStatusOf(spec_.queues[q].spec.name);
        out_.shares[q].push_back(st.has_value() ? static_cast<double>(st->allocated.milli) / capacity_milli_ : 0);
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
  static constexpr int kCompletion = 0, kArrival = 1, kTimer = 2;  // completions first at equal times
  struct PodRun {
    int64_t duration_s = 1;
    int64_t arrived_s = -1;
    int64_t first_bind_s = -1;
    bool running = false;
    bool within_at_arrival = false;
    uint64_t run = 0;  // its uid's run; completion events of an earlier run are stale
    std::string gang;  // namespace/pod-group of a gang member, else empty
  };
  struct Event {
    int64_t time;
    int kind;
    size_t pod;
    uint64_t run = 0;
    bool operator>(const Event& o) const { return std::tie(time, kind, pod) > std::tie(o.time, o.kind, o.pod); }
  };
  struct Gang {
    std::vector<size_t> members;
    int32_t min_available = 0;
    int32_t running = 0;
    int32_t first_bound = 0;  // members bound for the first time
    int64_t arrived_s = -1;
  };

  const std::string& QueueName(size_t i) const { return spec_.queues[pods_[i].queue].spec.name; }
  std::string Uid(size_t i) const { return "t-" + std::to_string(i) + "-" + std::to_string(runs_[i].run); }

  // Pod i is created (again, after an eviction: a new pod with its whole duration).
  void Arrive(size_t i) {
    PodRun& r = runs_[i];
    if (r.arrived_s < 0) {
      r.arrived_s = now_;
      // Whether it arrives within its queue's guarantee (for "guarantee met at once").
      if (scheduler_->core().gpu_queues().Admit(QueueName(i), core::DemandOf(pods_[i].pod)).within_guarantee) {
        r.within_at_arrival = true;
        ++out_.queues[pods_[i].queue].within_guarantee;
      }
      if (!r.gang.empty() && gangs_[r.gang].arrived_s < 0) gangs_[r.gang].arrived_s = now_;
    }
    core::PodRequest pod = pods_[i].pod;
    pod.uid = common::PodUid(Uid(i));
    pod.namespace_ = QueueName(i);
    pod.name = pods_[i].pod.name + "-" + std::to_string(r.run);
    scheduler_->Add(pod);
  }

  // The scheduler bound pod i: it runs for its duration.
  void Bound(size_t i) {
    PodRun& r = runs_[i];
    r.running = true;
    events_.push({now_ + r.duration_s, kCompletion, i, r.run});
    if (!r.gang.empty()) ++gangs_[r.gang].running;
    if (r.first_bind_s >= 0) return;
    r.first_bind_s = now_;
    ++out_.queues[pods_[i].queue].bound;
    if (r.within_at_arrival && r.arrived_s == now_) ++out_.queues[pods_[i].queue].met_at_once;
    if (!r.gang.empty()) {
      Gang& g = gangs_[r.gang];
      if (++g.first_bound == g.min_available) {
        ++out_.queues[pods_[i].queue].gangs_bound;
        gang_waits_[pods_[i].queue].push_back(static_cast<double>(now_ - g.arrived_s));
      }
    }
  }

  // The scheduler evicted pod i (gone already) to give queue `by` its guarantee: its controller recreates it.
  void Evicted(size_t i, const std::string& by) {
    ++out_.queues[pods_[i].queue].evicted;
    for (size_t q = 0; q < spec_.queues.size(); ++q) {
      if (spec_.queues[q].spec.name == by) ++out_.queues[q].reclaims;
    }
    Ended(i);
    Arrive(i);
  }

  // A running pod completes: the watch shows it gone.
  void Stop(size_t i) {
    scheduler_->Remove(common::PodUid(Uid(i)));
    Ended(i);
  }

  void Ended(size_t i) {
    PodRun& r = runs_[i];
    r.running = false;
    ++r.run;
    if (!r.gang.empty()) --gangs_[r.gang].running;
  }

  static size_t IndexOf(const common::PodUid& uid) {
    const std::string& s = uid.str();
    return static_cast<size_t>(std::stoull(s.substr(2, s.rfind('-') - 2)));
  }

  // Whether some gang runs with fewer members than its minimum (but at least one).
  bool PartialGangs() const {
    for (const auto& [name, g] : gangs_) {
      if (g.running > 0 && g.running < g.min_available) return true;
    }
    return false;
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
  const Workload& workload_;
  const std::vector<TenantPod>& pods_;
  const TenantSpec& spec_;
  std::unique_ptr<ProductionScheduler> scheduler_;
  int64_t now_ = 0;
  std::vector<PodRun> runs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::set<int64_t> timers_;  // times of backoff ends already in events_
  TenantOutcome out_;
  double capacity_milli_ = 1;
  double total_time_ = 0;
  int64_t last_arrival_ = 0;  // shares and borrowing are averaged up to the last arrival
  std::map<size_t, double> share_time_, borrowed_time_;
  std::map<std::string, Gang> gangs_;                 // by namespace/pod-group
  std::map<size_t, std::vector<double>> gang_waits_;  // by queue: arrival to first bind of its gangs
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
  (void)policy;  // made here too, so that an unknown policy or options it refuses are named before the run
  TenantSimulation sim(cluster, workload, pods, spec);
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

}  // namespace gpusched::sim
