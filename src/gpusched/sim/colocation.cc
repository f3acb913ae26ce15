#include "gpusched/sim/colocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "gpusched/common/rng.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/sched/scheduling_queue.h"

namespace gpusched::sim {
namespace {

constexpr common::MilliGpu kJobMilli{500};  // half a GPU: at most two jobs share one
constexpr int64_t kGpuMemoryMib = 16384;
constexpr int64_t kNodeCpuMilli = 1'000'000;
constexpr int64_t kNodeMemoryMib = 1 << 24;
// Separates the policy's random stream from the workload's, which both derive from spec.seed.
constexpr uint64_t kPolicyStream = 0x9E3779B97F4A7C15ULL;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kWorkEpsilonS = 1e-9;

bool Finite(double x) { return std::isfinite(x); }

// Linear interpolation between order statistics of sorted `v` (numpy's default); v non-empty.
double Percentile(const std::vector<double>& sorted, double p) {
  const double h = static_cast<double>(sorted.size() - 1) * p;
  const auto lo = static_cast<size_t>(std::floor(h));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) {
    sum += x;
  }
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double Median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// A GPU: (node slot, GPU index).
using GpuKey = std::pair<size_t, int32_t>;

struct JobRun {
  core::PodRequest pod;
  double remaining = 0;   // isolated seconds of work left, as of updated_at
  double slowdown = 1;    // current slowdown while running
  double updated_at = 0;  // when `remaining` was last brought up to date
  double start = -1;      // first (successful) start
  double end = -1;
  std::vector<GpuKey> gpus;
  std::string gpu_model;
};

// Simulated time for the scheduling queue.
class SimClock final : public common::Clock {
 public:
  [[nodiscard]] int64_t NowMs() const override { return now_ms; }
  int64_t now_ms = 0;
};

// The event loop of one run (see the header for the algorithm).
class Simulation {
 public:
  Simulation(const ColocationSpec& spec, std::span<const ColocationJob> jobs, const ports::SlowdownModel& truth,
             const ports::SlowdownModel* predictor, const policy::PlacementPolicy& policy)
      : spec_(spec),
        jobs_(jobs),
        truth_(truth),
        predictor_(predictor),
        policy_(policy),
        runner_(policy, sched::CycleOptions{.collect_reasons = false}),
        rng_(spec.seed ^ kPolicyStream),
        // No safety flush: a job waits for a completion, whatever the simulated time.
        queue_(clock_, sched::QueueOptions{.flush_after_ms = 0}) {}

  common::Result<ColocationOutcome> Run() {
    for (core::Node& n : ColocationNodes(spec_)) {
      GPUSCHED_RETURN_IF_ERROR(state_.AddNode(std::move(n)));
    }
    runs_.resize(jobs_.size());
    for (size_t i = 0; i < jobs_.size(); ++i) {
      core::PodRequest& pod = runs_[i].pod;
      pod.uid = common::PodUid("job-" + std::to_string(i));
      pod.name = "colocation/job-" + std::to_string(i);
      pod.app = jobs_[i].app;
      pod.containers.push_back(core::GpuRequest{.container = "main", .count = 1, .milli_per_gpu = kJobMilli});
      job_of_.emplace(pod.uid, i);
    }

    size_t next_arrival = 0;
    size_t done = 0;
    while (done < jobs_.size()) {
      size_t first = jobs_.size();
      double first_end = kInf;
      for (size_t j : running_) {
        const double end = CompletionTime(runs_[j]);
        if (end < first_end || (end == first_end && j < first)) {
          first = j;
          first_end = end;
        }
      }
      const double next_arrival_at = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival_s : kInf;
      if (first == jobs_.size() && next_arrival == jobs_.size()) {
        queue_.OnClusterEvent(sched::kBlockedByAnything);
        const std::optional<sched::QueuedPod> head = queue_.Pop();
        const size_t stuck = head.has_value() ? job_of_.at(common::PodUid(head->uid)) : 0;
        return common::FailedPrecondition(
            fmt::format("policy {} placed job {} ({}) nowhere on an empty cluster of {} nodes", policy_.Name(), stuck,
                        jobs_[stuck].app, spec_.nodes));
      }
      if (first != jobs_.size() && first_end <= next_arrival_at) {
        now_ = first_end;
        clock_.now_ms = std::max<int64_t>(clock_.now_ms, static_cast<int64_t>(std::llround(now_ * 1000)));
        GPUSCHED_RETURN_IF_ERROR(Complete(first));
        ++done;
      } else {
        now_ = next_arrival_at;
        clock_.now_ms = std::max<int64_t>(clock_.now_ms, static_cast<int64_t>(std::llround(now_ * 1000)));
        const size_t j = next_arrival++;
        // Arrival order: every job has the same priority, and its index for creation time.
        queue_.AddOrUpdate(sched::QueuedPod{.uid = runs_[j].pod.uid.str(),
                                            .key = runs_[j].pod.name,
                                            .priority = 0,
                                            .created_ms = static_cast<int64_t>(j)});
      }
      // Every event of this instant first, so that a job is never placed next to one that is ending now.
      if (NextEventTime(next_arrival) > now_) {
        GPUSCHED_RETURN_IF_ERROR(SchedulePass());
      }
    }
    GPUSCHED_RETURN_IF_ERROR(state_.CheckInvariants());
    if (state_.AllocationCount() != 0) {
      return common::Internal(fmt::format("{} allocations left after every job completed", state_.AllocationCount()));
    }
    return Outcome();
  }

 private:
  static double CompletionTime(const JobRun& r) { return r.updated_at + r.remaining * r.slowdown; }

  double NextEventTime(size_t next_arrival) const {
    double t = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival_s : kInf;
    for (size_t j : running_) {
      t = std::min(t, CompletionTime(runs_[j]));
    }
    return t;
  }

  // Brings r.remaining up to now_ at its current slowdown. Rounding residue below kWorkEpsilonS counts as done,
  // so that co-residents that end together end at the same instant.
  void Advance(JobRun& r) const {
    r.remaining -= (now_ - r.updated_at) / r.slowdown;
    if (r.remaining < kWorkEpsilonS) {
      r.remaining = 0;
    }
    r.updated_at = now_;
  }

  // The distinct jobs other than j on j's GPUs.
  std::vector<size_t> CoResidents(size_t j, const std::vector<GpuKey>& gpus) const {
    std::vector<size_t> out;
    for (const GpuKey& g : gpus) {
      auto it = residents_.find(g);
      if (it == residents_.end()) {
        continue;
      }
      for (size_t r : it->second) {
        if (r != j && std::find(out.begin(), out.end(), r) == out.end()) {
          out.push_back(r);
        }
      }
    }
    return out;
  }

  // s(j | its co-residents) by the truth: 1 + Σ (s(j | r) − 1).
  common::Status UpdateSlowdown(size_t j) {
    JobRun& r = runs_[j];
    double s = 1;
    for (size_t other : CoResidents(j, r.gpus)) {
      const ports::PairSlowdown p = truth_.Pair(r.pod.app, runs_[other].pod.app, r.gpu_model);
      if (!Finite(p.incoming) || p.incoming <= 0) {
        return common::InvalidArgument(fmt::format("truth model: slowdown of {} next to {} on {} is {}, want > 0",
                                                   r.pod.app, runs_[other].pod.app, r.gpu_model, p.incoming));
      }
      s += p.incoming - 1;
    }
    if (!(s > 0)) {
      return common::InvalidArgument(
          fmt::format("truth model: combined slowdown of {} on {} is {}, want > 0", r.pod.app, r.gpu_model, s));
    }
    r.slowdown = s;
    return common::Status::Ok();
  }

  // Re-rates every job on `gpus` (after someone arrived or left): advance to now at the old rate, then recompute.
  common::Status RerateOn(const std::vector<GpuKey>& gpus) {
    for (size_t other : CoResidents(jobs_.size(), gpus)) {
      Advance(runs_[other]);
      GPUSCHED_RETURN_IF_ERROR(UpdateSlowdown(other));
    }
    return common::Status::Ok();
  }

  common::Status Complete(size_t j) {
    JobRun& r = runs_[j];
    r.remaining = 0;
    r.updated_at = now_;
    r.end = now_;
    running_.erase(std::find(running_.begin(), running_.end(), j));
    for (const GpuKey& g : r.gpus) {
      std::vector<size_t>& on = residents_[g];
      on.erase(std::remove(on.begin(), on.end(), j), on.end());
    }
    GPUSCHED_RETURN_IF_ERROR(RerateOn(r.gpus));
    GPUSCHED_RETURN_IF_ERROR(state_.Release(r.pod.uid));
    queue_.OnClusterEvent(sched::kBlockedByGpu);  // every waiting job may fit now
    return common::Status::Ok();
  }

  // Starts j on its reserved allocation, or undoes it when j does not fit in memory next to a resident.
  // Returns whether j started.
  common::Result<bool> Start(size_t j, const core::Allocation& a) {
    JobRun& r = runs_[j];
    const std::optional<size_t> slot = state_.SlotOf(a.node);
    if (!slot.has_value()) {
      return common::Internal("allocation on unknown node " + a.node.str());
    }
    std::vector<GpuKey> gpus;
    for (const core::ContainerAllocation& c : a.containers) {
      for (const core::GpuShare& share : c.gpus) {
        gpus.emplace_back(*slot, share.index);
      }
    }
    if (gpus.empty()) {
      return common::Internal(fmt::format("job {} got an allocation without GPUs", j));
    }
    const std::string& model = state_.View(*slot).GpuModel(static_cast<size_t>(gpus.front().second));
    for (size_t other : CoResidents(j, gpus)) {
      if (!truth_.Pair(r.pod.app, runs_[other].pod.app, model).feasible) {
        GPUSCHED_RETURN_IF_ERROR(state_.Release(r.pod.uid));
        ++oom_retries_;
        return false;
      }
    }
    GPUSCHED_RETURN_IF_ERROR(state_.Confirm(r.pod.uid));
    for (size_t other : CoResidents(j, gpus)) {
      Advance(runs_[other]);  // the residents' work up to now at their old rates
    }
    for (const GpuKey& g : gpus) {
      residents_[g].push_back(j);
    }
    r.gpus = std::move(gpus);
    r.gpu_model = model;
    r.remaining = jobs_[j].duration_s;
    r.updated_at = now_;
    r.start = now_;
    running_.push_back(j);
    GPUSCHED_RETURN_IF_ERROR(RerateOn(r.gpus));  // everyone on the GPUs, the newcomer included
    return true;
  }

  // Offers the queue's active jobs, in order, to the cycle (no head-of-line blocking). A job that fits nowhere, or
  // ran out of memory where it was placed, waits in the queue for the next completion (a GPU released): until then
  // nothing it could use is freed, and a deterministic policy would choose the same GPU again.
  common::Status SchedulePass() {
    const sched::AppOfPod app_of = [this](const common::PodUid& uid) -> std::string {
      auto it = job_of_.find(uid);
      return it == job_of_.end() ? std::string() : jobs_[it->second].app;
    };
    while (state_.AllocatedMilli() < state_.CapacityMilli()) {  // every job needs compute: else nothing fits
      const std::optional<sched::QueuedPod> next = queue_.Pop();
      if (!next.has_value()) {
        break;
      }
      const size_t j = job_of_.at(common::PodUid(next->uid));
      policy::InterferenceForecast forecast;
      policy::Snapshot snapshot{.now_ms = std::llround(now_ * 1000)};
      if (predictor_ != nullptr) {
        forecast = sched::ForecastInterference(jobs_[j].app, state_, app_of, *predictor_);
        snapshot.interference = &forecast;
        snapshot.interference_generation = ++forecast_generation_;
      }
      auto cycle = runner_.Schedule(runs_[j].pod, state_, snapshot, rng_);
      if (!cycle.ok()) {
        return cycle.status();
      }
      bool started = false;
      if (cycle->allocation.has_value()) {
        auto ran = Start(j, *cycle->allocation);
        if (!ran.ok()) {
          return ran.status();
        }
        started = *ran;
      }
      if (started) {
        queue_.Done(next->uid);
      } else {
        queue_.Requeue(next->uid, sched::SchedulingQueue::Outcome::kUnschedulable, sched::kBlockedByGpu);
      }
    }
    return common::Status::Ok();
  }

  ColocationOutcome Outcome() const {
    ColocationOutcome out{.policy = std::string(policy_.Name()),
                          .seed = spec_.seed,
                          .jobs = static_cast<int64_t>(jobs_.size()),
                          .oom_retries = oom_retries_};
    std::vector<double> slowdowns;
    std::vector<double> queued;
    double first_arrival = kInf;
    double last_end = 0;
    for (size_t i = 0; i < jobs_.size(); ++i) {
      const JobRun& r = runs_[i];
      out.jct_s.push_back(r.end - jobs_[i].arrival_s);
      slowdowns.push_back((r.end - r.start) / jobs_[i].duration_s);
      queued.push_back(r.start - jobs_[i].arrival_s);
      first_arrival = std::min(first_arrival, jobs_[i].arrival_s);
      last_end = std::max(last_end, r.end);
    }
    if (jobs_.empty()) {
      return out;
    }
    std::vector<double> sorted = out.jct_s;
    std::sort(sorted.begin(), sorted.end());
    out.avg_jct_s = Mean(out.jct_s);
    out.p50_jct_s = Percentile(sorted, 0.50);
    out.p95_jct_s = Percentile(sorted, 0.95);
    out.makespan_s = last_end - first_arrival;
    out.mean_slowdown = Mean(slowdowns);
    out.avg_queue_s = Mean(queued);
    return out;
  }

  const ColocationSpec& spec_;
  std::span<const ColocationJob> jobs_;
  const ports::SlowdownModel& truth_;
  const ports::SlowdownModel* predictor_;
  const policy::PlacementPolicy& policy_;
  sched::CycleRunner runner_;
  common::Rng rng_;
  core::ClusterState state_;

  double now_ = 0;
  std::vector<JobRun> runs_;
  std::unordered_map<common::PodUid, size_t> job_of_;
  SimClock clock_;
  sched::SchedulingQueue queue_;  // arrived, not started: the production queue on simulated time
  std::vector<size_t> running_;   // started, not ended
  std::map<GpuKey, std::vector<size_t>> residents_;
  int64_t oom_retries_ = 0;
  uint64_t forecast_generation_ = 0;
};

}  // namespace

common::Status ValidateColocationSpec(const ColocationSpec& spec) {
  if (spec.apps.empty()) {
    return common::InvalidArgument("colocation spec: apps is empty");
  }
  for (size_t i = 0; i < spec.apps.size(); ++i) {
    if (spec.apps[i].empty()) {
      return common::InvalidArgument(fmt::format("colocation spec: apps[{}] is empty", i));
    }
  }
  if (spec.gpu_type.empty()) {
    return common::InvalidArgument("colocation spec: gpu_type is empty");
  }
  if (spec.nodes < 1) {
    return common::InvalidArgument(fmt::format("colocation spec: nodes must be >= 1, got {}", spec.nodes));
  }
  if (spec.gpus_per_node < 1) {
    return common::InvalidArgument(
        fmt::format("colocation spec: gpus_per_node must be >= 1, got {}", spec.gpus_per_node));
  }
  if (spec.jobs < 1) {
    return common::InvalidArgument(fmt::format("colocation spec: jobs must be >= 1, got {}", spec.jobs));
  }
  if (!Finite(spec.mean_interarrival_s) || spec.mean_interarrival_s < 0) {
    return common::InvalidArgument(
        fmt::format("colocation spec: mean_interarrival_s must be >= 0, got {}", spec.mean_interarrival_s));
  }
  if (!Finite(spec.min_duration_s) || spec.min_duration_s <= 0) {
    return common::InvalidArgument(
        fmt::format("colocation spec: min_duration_s must be > 0, got {}", spec.min_duration_s));
  }
  if (!Finite(spec.max_duration_s) || spec.min_duration_s > spec.max_duration_s) {
    return common::InvalidArgument(fmt::format("colocation spec: min_duration_s {} > max_duration_s {}",
                                               spec.min_duration_s, spec.max_duration_s));
  }
  return common::Status::Ok();
}

std::vector<core::Node> ColocationNodes(const ColocationSpec& spec) {
  std::vector<core::Node> nodes;
  for (int n = 0; n < spec.nodes; ++n) {
    core::Node node{.name = common::NodeName("node-" + std::to_string(n)),
                    .cpu = common::MilliCpu(kNodeCpuMilli),
                    .memory = common::MiB(kNodeMemoryMib)};
    for (int32_t g = 0; g < spec.gpus_per_node; ++g) {
      node.gpus.push_back(core::Gpu{.index = g,
                                    .uuid = common::GpuUuid(fmt::format("GPU-node-{}-{}", n, g)),
                                    .model = spec.gpu_type,
                                    .memory = common::MiB(kGpuMemoryMib)});
    }
    nodes.push_back(std::move(node));
  }
  return nodes;
}

common::Result<std::vector<ColocationJob>> GenerateColocationJobs(const ColocationSpec& spec) {
  GPUSCHED_RETURN_IF_ERROR(ValidateColocationSpec(spec));
  common::Rng rng(spec.seed);
  const double log_min = std::log(spec.min_duration_s);
  const double log_max = std::log(spec.max_duration_s);
  std::vector<ColocationJob> jobs;
  jobs.reserve(static_cast<size_t>(spec.jobs));
  double t = 0;
  for (int i = 0; i < spec.jobs; ++i) {
    ColocationJob job;
    job.app = spec.apps[rng.Uniform(spec.apps.size())];
    if (i > 0) {
      t += -spec.mean_interarrival_s * std::log1p(-rng.UniformDouble());
    }
    job.arrival_s = t;
    job.duration_s = spec.min_duration_s == spec.max_duration_s
                         ? spec.min_duration_s
                         : std::exp(log_min + rng.UniformDouble() * (log_max - log_min));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

common::Result<ColocationOutcome> SimulateColocation(const ColocationSpec& spec, std::span<const ColocationJob> jobs,
                                                     const ports::SlowdownModel& truth,
                                                     const ports::SlowdownModel* predictor,
                                                     const policy::PlacementPolicy& policy) {
  // The workload fields of the spec do not apply to a given job list; the cluster's do.
  ColocationSpec cluster = spec;
  cluster.jobs = std::max(cluster.jobs, 1);
  GPUSCHED_RETURN_IF_ERROR(ValidateColocationSpec(cluster));
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (jobs[i].app.empty()) {
      return common::InvalidArgument(fmt::format("colocation job {}: app is empty", i));
    }
    if (!Finite(jobs[i].duration_s) || jobs[i].duration_s <= 0) {
      return common::InvalidArgument(
          fmt::format("colocation job {}: duration_s must be > 0, got {}", i, jobs[i].duration_s));
    }
    if (!Finite(jobs[i].arrival_s) || jobs[i].arrival_s < 0 || (i > 0 && jobs[i].arrival_s < jobs[i - 1].arrival_s)) {
      return common::InvalidArgument(fmt::format(
          "colocation job {}: arrival_s {} must be >= 0 and not before the previous job's", i, jobs[i].arrival_s));
    }
  }
  return Simulation(spec, jobs, truth, predictor, policy).Run();
}

common::Result<ColocationOutcome> RunColocation(const ColocationSpec& spec, const ports::SlowdownModel& truth,
                                                const ports::SlowdownModel* predictor,
                                                const policy::PlacementPolicy& policy) {
  GPUSCHED_ASSIGN_OR_RETURN(jobs, GenerateColocationJobs(spec));
  return SimulateColocation(spec, jobs, truth, predictor, policy);
}

common::Result<std::vector<ColocationSummary>> CompareColocation(const ColocationSpec& spec,
                                                                 std::span<const uint64_t> seeds,
                                                                 const ports::SlowdownModel& truth,
                                                                 std::span<const ColocationEntrant> entrants) {
  if (seeds.empty()) {
    return common::InvalidArgument("colocation comparison: seeds is empty");
  }
  std::vector<ColocationSummary> out;
  for (size_t e = 0; e < entrants.size(); ++e) {
    if (entrants[e].policy == nullptr) {
      return common::InvalidArgument(fmt::format("colocation comparison: entrants[{}].policy is null", e));
    }
    out.push_back(ColocationSummary{.label = entrants[e].label.empty() ? std::string(entrants[e].policy->Name())
                                                                       : entrants[e].label});
  }
  for (uint64_t seed : seeds) {
    ColocationSpec s = spec;
    s.seed = seed;
    GPUSCHED_ASSIGN_OR_RETURN(jobs, GenerateColocationJobs(s));
    for (size_t e = 0; e < entrants.size(); ++e) {
      GPUSCHED_ASSIGN_OR_RETURN(run, SimulateColocation(s, jobs, truth, entrants[e].predictor, *entrants[e].policy));
      run.policy = out[e].label;
      out[e].runs.push_back(std::move(run));
    }
  }
  for (ColocationSummary& summary : out) {
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const ColocationOutcome& r : summary.runs) {
        v.push_back(static_cast<double>(r.*field));
      }
      return Median(std::move(v));
    };
    summary.median = ColocationMedians{.avg_jct_s = median(&ColocationOutcome::avg_jct_s),
                                       .p50_jct_s = median(&ColocationOutcome::p50_jct_s),
                                       .p95_jct_s = median(&ColocationOutcome::p95_jct_s),
                                       .makespan_s = median(&ColocationOutcome::makespan_s),
                                       .mean_slowdown = median(&ColocationOutcome::mean_slowdown),
                                       .oom_retries = median(&ColocationOutcome::oom_retries),
                                       .avg_queue_s = median(&ColocationOutcome::avg_queue_s)};
  }
  return out;
}

std::string FormatColocationTable(std::span<const ColocationSummary> summaries) {
  size_t width = 6;  // "policy"
  for (const ColocationSummary& s : summaries) {
    width = std::max(width, s.label.size());
  }
  std::string out = fmt::format("{:<{}}  {:>5}  {:>12}  {:>12}  {:>12}  {:>13}  {:>11}\n", "policy", width, "seeds",
                                "avg JCT (s)", "p95 JCT (s)", "makespan (s)", "mean slowdown", "OOM retries");
  for (const ColocationSummary& s : summaries) {
    const ColocationMedians& m = s.median;
    out += fmt::format("{:<{}}  {:>5}  {:>12.1f}  {:>12.1f}  {:>12.1f}  {:>13.3f}  {:>11.1f}\n", s.label, width,
                       s.runs.size(), m.avg_jct_s, m.p95_jct_s, m.makespan_s, m.mean_slowdown, m.oom_retries);
  }
  return out;
}

}  // namespace gpusched::sim
