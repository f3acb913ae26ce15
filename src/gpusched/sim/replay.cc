#include "gpusched/sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "gpusched/common/rng.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/sim/percentile.h"
#include "gpusched/sim/production_scheduler.h"

namespace gpusched::sim {
namespace {

// The production scheduling core (ProductionScheduler) over trace time: pods arrive, wait in its queue, are
// woken by the room that departures free, and run their lifetimes once bound.
class Replayer {
 public:
  Replayer(const Cluster& cluster, const Workload& workload, const std::vector<ReplayPod>& pods, const ReplaySpec& spec)
      : cluster_(cluster), workload_(workload), pods_(pods), spec_(spec) {}

  common::Result<ReplayOutcome> Run() {
    const auto started = std::chrono::steady_clock::now();
    GPUSCHED_ASSIGN_OR_RETURN(mix, ParsePolicyMix(spec_.policy));
    // Ties between equal nodes: a fixed random rank per node (in the order they are added), as the FGD protocol's
    // runs break them.
    common::Rng rng(spec_.seed);
    std::vector<uint32_t> rank = TieRank(cluster_.nodes.size(), rng);
    GPUSCHED_ASSIGN_OR_RETURN(
        scheduler,
        ProductionScheduler::Create(
            cluster_.nodes, {},
            sched::SchedulerCoreOptions{.policy = mix.front().first,
                                        .weights = mix.size() > 1 ? mix : std::vector<std::pair<std::string, double>>{},
                                        .queue = sched::QueueOptions{.flush_after_ms = 0},
                                        .seed = spec_.seed,
                                        .target_workload = workload_.target,
                                        .gpus_by_model = GpusByModel(cluster_.nodes),
                                        .tie_rank = std::move(rank),
                                        .min_log_level = common::LogLevel::kError,
                                        .collect_reasons = false},
            /*preemption=*/false));
    scheduler_ = std::move(scheduler);
    const core::ClusterState& state = scheduler_->cache().state();
    capacity_ = static_cast<double>(std::max<int64_t>(1, state.CapacityMilli().value()));
    out_.cluster_gpus = state.CapacityMilli().value() / common::kGpuMilli.value();

    runs_.resize(pods_.size());
    for (size_t i = 0; i < pods_.size(); ++i) {
      PodRun& r = runs_[i];
      r.duration_s = std::max<int64_t>(1, pods_[i].deletion_s - pods_[i].creation_s);
      r.arrival_s = static_cast<int64_t>(
          std::llround(static_cast<double>(pods_[i].creation_s) / std::max(1.0, spec_.arrival_speedup)));
      events_.push({r.arrival_s, 1, i});
      out_.last_arrival_s = std::max(out_.last_arrival_s, r.arrival_s);
      ++out_.pods;
      out_.gpu_pods += pods_[i].pod.RequestsGpu() ? 1 : 0;
    }
    // The busy window: from the arrival of the pod at the 10th percentile of arrivals to that at the 90th.
    std::vector<int64_t> arrivals_sorted;
    for (const PodRun& r : runs_) {
      arrivals_sorted.push_back(r.arrival_s);
    }
    std::sort(arrivals_sorted.begin(), arrivals_sorted.end());
    if (!arrivals_sorted.empty()) {
      out_.window_start_s = arrivals_sorted[arrivals_sorted.size() / 10];
      out_.window_end_s = arrivals_sorted[arrivals_sorted.size() * 9 / 10];
    }
    std::vector<double> waits;
    const auto on_bound = [&](const common::PodUid& uid, const core::Allocation&) {
      const size_t i = std::stoull(uid.str().substr(2));
      runs_[i].placed = true;
      ++out_.placed;
      waits.push_back(static_cast<double>(now_ - runs_[i].arrival_s));
      events_.push({now_ + runs_[i].duration_s, 0, i});
    };
    double last_t = 0, weighted = 0;
    bool first = true;
    while (!events_.empty()) {
      const int64_t t = events_.top().time;
      if (!first) {  // the allocation since the last event time, clipped to the window
        const double lo = std::max(last_t, static_cast<double>(out_.window_start_s));
        const double hi = std::min(static_cast<double>(t), static_cast<double>(out_.window_end_s));
        if (hi > lo) {
          weighted += (hi - lo) * out_.allocation.back();
        }
      }
      first = false;
      last_t = static_cast<double>(t);
      now_ = t;
      scheduler_->SetTime(t);
      while (!events_.empty() && events_.top().time == t) {
        const Event e = events_.top();
        events_.pop();
        if (e.kind == 0) {
          scheduler_->Remove(Uid(e.pod));
        } else if (e.kind == 1) {
          core::PodRequest pod = pods_[e.pod].pod;
          pod.uid = Uid(e.pod);
          if (pod.namespace_.empty()) {
            pod.namespace_ = "default";
          }
          scheduler_->Add(pod);
        }
      }
      scheduler_->RunAttempts(on_bound, nullptr);
      if (auto at = scheduler_->NextWakeSeconds(); at.has_value() && timers_.insert(std::max(t + 1, *at)).second) {
        events_.push({std::max(t + 1, *at), 2, 0});  // a backoff ends
      }
      const double alloc = static_cast<double>(state.AllocatedMilli().value()) / capacity_;
      out_.times_s.push_back(static_cast<double>(t));
      out_.allocation.push_back(alloc);
      out_.peak_allocation = std::max(out_.peak_allocation, alloc);
      ++out_.events;
    }
    const auto span = static_cast<double>(out_.window_end_s - out_.window_start_s);
    out_.mean_allocation = span > 0 ? weighted / span : 0;
    for (size_t i = 0; i < runs_.size(); ++i) {
      if (!runs_[i].placed) {
        ++out_.never_placed;
        out_.gpu_pods_never_placed += pods_[i].pod.RequestsGpu() ? 1 : 0;
      }
    }
    double sum = 0;
    for (double w : waits) {
      sum += w;
      out_.max_wait_s = std::max(out_.max_wait_s, w);
      out_.waited += w > 0 ? 1 : 0;
    }
    out_.mean_wait_s = waits.empty() ? 0 : sum / static_cast<double>(waits.size());
    out_.p95_wait_s = Percentile(std::move(waits), 0.95);
    out_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return std::move(out_);
  }

 private:
  struct PodRun {
    int64_t arrival_s = 0;
    int64_t duration_s = 1;
    bool placed = false;
  };
  struct Event {
    int64_t time;
    int kind;  // 0 departure, 1 arrival, 2 a backoff ends: departures first at equal times
    size_t pod;
    bool operator>(const Event& o) const { return std::tie(time, kind, pod) > std::tie(o.time, o.kind, o.pod); }
  };

  static common::PodUid Uid(size_t i) { return common::PodUid("r-" + std::to_string(i)); }

  const Cluster& cluster_;
  const Workload& workload_;
  const std::vector<ReplayPod>& pods_;
  const ReplaySpec& spec_;
  std::unique_ptr<ProductionScheduler> scheduler_;
  int64_t now_ = 0;
  std::vector<PodRun> runs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::set<int64_t> timers_;
  ReplayOutcome out_;
  double capacity_ = 1;
};

}  // namespace

void InflateReplay(std::vector<ReplayPod>& pods, int64_t target_milli, uint64_t seed) {
  int64_t total = 0;
  bool any_gpu = false;
  for (const ReplayPod& p : pods) {
    total += p.pod.TotalGpuMilli().value();
    any_gpu = any_gpu || p.pod.RequestsGpu();
  }
  if (!any_gpu) {
    return;
  }
  common::Rng rng(seed);
  const size_t originals = pods.size();
  size_t n = 0;
  while (total < target_milli) {
    ReplayPod clone = pods[rng.Uniform(originals)];
    clone.pod.name += "-clone-" + std::to_string(n++);
    total += clone.pod.TotalGpuMilli().value();
    pods.push_back(std::move(clone));
  }
}

int32_t PriorityOfQos(const std::string& qos) {
  if (qos == "LS" || qos == "Guaranteed") {
    return 2;
  }
  if (qos == "Burstable") {
    return 1;
  }
  return 0;
}

common::Result<ReplayOutcome> Replay(const Cluster& cluster, const Workload& workload,
                                     const std::vector<ReplayPod>& pods, const ReplaySpec& spec) {
  if (!(spec.arrival_speedup >= 1)) {
    return common::InvalidArgument("replay: arrival speedup must be >= 1, got " + std::to_string(spec.arrival_speedup));
  }
  for (const ReplayPod& p : pods) {
    if (p.creation_s < 0 || p.deletion_s < p.creation_s) {
      return common::InvalidArgument("replay: pod " + p.pod.name + " has creation " + std::to_string(p.creation_s) +
                                     " s and deletion " + std::to_string(p.deletion_s) +
                                     " s; replay needs 0 <= creation <= deletion");
    }
  }
  // The policies are made here first so that an unknown one, or options one refuses, is named before the run.
  GPUSCHED_RETURN_IF_ERROR(MakePolicySet(spec.policy, workload, cluster.nodes).status());
  Replayer replayer(cluster, workload, pods, spec);
  GPUSCHED_ASSIGN_OR_RETURN(out, replayer.Run());
  out.workload = workload.name;
  out.spec = spec;
  return out;
}

void PrintReplayTable(std::ostream& out, const std::vector<ReplayOutcome>& runs) {
  std::map<std::pair<std::string, std::string>, std::vector<const ReplayOutcome*>> groups;
  std::vector<std::pair<std::string, std::string>> order;
  for (const ReplayOutcome& r : runs) {
    auto key = std::make_pair(r.workload, r.spec.policy);
    if (!groups.contains(key)) {
      order.push_back(key);
    }
    groups[key].push_back(&r);
  }
  out << fmt::format("{:<44} {:>5} {:>7} {:>7} {:>7} {:>8} {:>10} {:>10} {:>10} {:>8} {:>7} {:>7}\n",
                     "workload / policy", "seeds", "pods", "placed", "never", "waited", "wait mean", "wait p95",
                     "wait max", "alloc", "peak", "wall s");
  for (const auto& key : order) {
    const auto& g = groups[key];
    const double n = static_cast<double>(g.size());
    double pods = 0, placed = 0, never = 0, waited = 0, mean = 0, p95 = 0, max = 0, alloc = 0, peak = 0, wall = 0;
    for (const ReplayOutcome* r : g) {
      pods += static_cast<double>(r->pods);
      placed += static_cast<double>(r->placed);
      never += static_cast<double>(r->never_placed);
      waited += static_cast<double>(r->waited);
      mean += r->mean_wait_s;
      p95 += r->p95_wait_s;
      max += r->max_wait_s;
      alloc += r->mean_allocation;
      peak += r->peak_allocation;
      wall += r->wall_seconds;
    }
    out << fmt::format(
        "{:<44} {:>5} {:>7.0f} {:>7.1f} {:>7.1f} {:>8.1f} {:>9.0f}s {:>9.0f}s {:>9.0f}s {:>7.2f}% {:>6.2f}% "
        "{:>7.3f}\n",
        key.first + " " + key.second, g.size(), pods / n, placed / n, never / n, waited / n, mean / n, p95 / n, max / n,
        100 * alloc / n, 100 * peak / n, wall / n);
  }
}

}  // namespace gpusched::sim
