#pragma once

// The co-location workload mode: judges a placement policy by its effect on job completion times when jobs share
// GPUs and slow each other down, not only by how well its model predicts slowdowns.
//
// Workload (GenerateColocationJobs, deterministic given the seed, so every policy sees the same job list):
//   - `jobs` jobs; each job's application is drawn uniformly from `apps` (e.g. the Gavel applications);
//   - Poisson arrivals: the first job arrives at t = 0, then exponential gaps of mean `mean_interarrival_s`
//     (0 = every job arrives at t = 0);
//   - isolated duration (seconds of run time alone on a GPU) log-uniform in [min_duration_s, max_duration_s];
//   - each job is one pod asking for half of one shared GPU (500 milli, no memory, no CPU), so at most two jobs
//     share a GPU; PodRequest::app is the application name.
// Cluster: `nodes` nodes of `gpus_per_node` GPUs of model `gpu_type` (16 GiB each), CPU and memory ample.
//
// Simulation (SimulateColocation), event-driven over arrivals and completions:
//   1. Each job has remaining isolated work w (seconds). While running with slowdown s it does 1/s seconds of
//      isolated work per second. s comes from `truth`, the MEASURED slowdowns: 1 alone; next to one co-resident r,
//      truth.Pair(job, r).incoming; next to several, the excess slowdowns add (ports::JoinSlowdown's rule). When a
//      job starts or ends, every job on its GPUs has its w advanced to now and its s recomputed, so completion
//      times (now + w·s) always reflect the current co-residents.
//   2. The next event is the earlier of the next arrival and the earliest completion (a completion first on a
//      tie). A completion releases the job's allocation (ClusterState::Release) and records JCT = end − arrival.
//   3. After every event the queue (sched::SchedulingQueue, the production queue, on simulated time; every job has
//      the same priority, so arrival order) offers its active jobs to the production path in order, without
//      head-of-line blocking (a job that does not fit waits in the queue until the next completion, and later jobs
//      are still tried; nothing else can free what it needs): per job a Snapshot whose
//      interference forecast comes from sched::ForecastInterference(app, state, app_of, *predictor) when a
//      predictor is given (interference_generation is fresh per call), then sched::CycleRunner::Schedule, then
//      ClusterState::Confirm.
//   4. Memory: the data marks some pairs as not fitting in GPU memory together (truth.Pair(...).feasible false).
//      A job placed next to such a resident runs out of memory: its allocation is released at once, oom_retries
//      counts it, it goes back to its place in the queue and is not offered again until the next completion
//      (something must change first, or a deterministic policy would choose the same GPU forever). This models
//      the OOM-and-restart a real cluster sees; only a policy that reads the forecast can avoid it. The failed
//      attempt costs no simulated time beyond the wait.
//   5. The run ends when every job has completed. An empty GPU always takes a job alone, so the loop ends; a
//      policy that refuses a job on an empty cluster is reported as FailedPrecondition rather than looping.
//
// Outcome: average, median and 95th percentile JCT (percentiles interpolate linearly between order statistics),
// makespan (last completion − first arrival), mean per-job slowdown ((end − start) / isolated duration), OOM
// retries and mean queueing time (first start − arrival).
//
// Thread-safety: the functions are pure apart from the policy and models they are handed, which must be safe to
// call from the calling thread (policies and SlowdownModels are immutable).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/node.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/ports/slowdown_model.h"

namespace gpusched::sim {

struct ColocationSpec {
  std::vector<std::string> apps;  // application classes, as the slowdown models name them
  std::string gpu_type = "p100";  // the GPUs' model string, handed to the models
  int nodes = 4;
  int gpus_per_node = 4;
  int jobs = 200;
  double mean_interarrival_s = 60;  // >= 0; 0 = every job arrives at t = 0
  double min_duration_s = 600;      // isolated duration, log-uniform in [min, max]; 0 < min <= max
  double max_duration_s = 7200;
  uint64_t seed = 42;
};

// One job of the workload.
struct ColocationJob {
  std::string app;
  double arrival_s = 0;
  double duration_s = 0;  // isolated run time
};

struct ColocationOutcome {
  std::string policy;  // the label it ran under
  uint64_t seed = 0;
  int64_t jobs = 0;
  double avg_jct_s = 0;
  double p50_jct_s = 0;
  double p95_jct_s = 0;
  double makespan_s = 0;      // last completion − first arrival
  double mean_slowdown = 0;   // mean over jobs of (end − start) / isolated duration
  int64_t oom_retries = 0;    // placements undone because the pair does not fit in memory (truth)
  double avg_queue_s = 0;     // mean over jobs of first start − arrival
  std::vector<double> jct_s;  // per job, in job order
};

// InvalidArgument naming the field for a spec that cannot describe a workload (no nodes, no apps, min > max ...).
[[nodiscard]] common::Status ValidateColocationSpec(const ColocationSpec& spec);

// The nodes the spec describes: "node-0".."node-<n-1>", GPUs of model spec.gpu_type with 16384 MiB each.
[[nodiscard]] std::vector<core::Node> ColocationNodes(const ColocationSpec& spec);

// The workload the spec and its seed describe (see the file comment); arrival order.
[[nodiscard]] common::Result<std::vector<ColocationJob>> GenerateColocationJobs(const ColocationSpec& spec);

// Runs the given jobs (sorted by arrival; the spec supplies the cluster and the policy's seed) under the policy.
// `truth` stretches run times and decides memory fit; `predictor` (may be null for policies that ignore the
// forecast) fills the snapshot's interference forecast. Errors: an invalid spec or job, broken state.
[[nodiscard]] common::Result<ColocationOutcome> SimulateColocation(const ColocationSpec& spec,
                                                                   std::span<const ColocationJob> jobs,
                                                                   const ports::SlowdownModel& truth,
                                                                   const ports::SlowdownModel* predictor,
                                                                   const policy::PlacementPolicy& policy);

// GenerateColocationJobs then SimulateColocation; the outcome is labelled with policy.Name().
[[nodiscard]] common::Result<ColocationOutcome> RunColocation(const ColocationSpec& spec,
                                                              const ports::SlowdownModel& truth,
                                                              const ports::SlowdownModel* predictor,
                                                              const policy::PlacementPolicy& policy);

// One contestant of a comparison: a policy, the model that feeds its forecast (null = none), and its label
// (empty = the policy's name), so one policy can run with several predictors ("interference-aware (xgboost)").
struct ColocationEntrant {
  std::string label;
  const policy::PlacementPolicy* policy = nullptr;
  const ports::SlowdownModel* predictor = nullptr;
};

// Per-field medians over seeds (the median of an even count is the mean of the middle two, hence doubles).
struct ColocationMedians {
  double avg_jct_s = 0;
  double p50_jct_s = 0;
  double p95_jct_s = 0;
  double makespan_s = 0;
  double mean_slowdown = 0;
  double oom_retries = 0;
  double avg_queue_s = 0;
};

// Per entrant: every run (one per seed, in seed order) and the medians over them.
struct ColocationSummary {
  std::string label;
  std::vector<ColocationOutcome> runs;
  ColocationMedians median;
};

// Every entrant on the same workloads: one per seed (spec with seed replaced). Entrants in the given order.
[[nodiscard]] common::Result<std::vector<ColocationSummary>> CompareColocation(
    const ColocationSpec& spec, std::span<const uint64_t> seeds, const ports::SlowdownModel& truth,
    std::span<const ColocationEntrant> entrants);

// An aligned table, one row per entrant, medians over seeds:
//   policy | seeds | avg JCT (s) | p95 JCT (s) | makespan (s) | mean slowdown | OOM retries
[[nodiscard]] std::string FormatColocationTable(std::span<const ColocationSummary> summaries);

}  // namespace gpusched::sim
