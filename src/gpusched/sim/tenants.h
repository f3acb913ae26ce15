#pragma once

// The multi-tenant mode: several GPU queues (sched/gpu_queues.h: guaranteed quota, limit, weight) share one
// cluster, each with its own arrival stream of trace pods, and the production scheduler decides who runs: the
// scheduling core of `gpusched scheduler` (sched::SchedulerCore, sched/scheduler_core.h), driven through in-memory
// ports over simulated time. Its queue takes pods queue by queue (lowest rank first), admits each against its
// queue's limit, places it with the policy, and a pod within its queue's guarantee that fits nowhere reclaims
// from queues borrowing beyond theirs (its preemption: victims evicted, the room held until they are gone). A
// Binding always succeeds and the watch shows it at once; an eviction always succeeds and the pod is gone at once.
//
// Streams (TenantPod): a trace pod with its real creation and deletion times (openb's creation_time and
// deletion_time, seconds); it arrives at creation / arrival_speedup + its queue's offset_s and runs deletion −
// creation seconds (at least 1) once bound, wherever it waited. Queue k's pods are pods of namespace k's name,
// which the queue serves. A reclaimed pod goes back to its queue with its whole duration (its controller
// recreates it: a new pod). Pods without GPUs are left out (the queues account GPUs only).
//
// Event loop over simulated time: completions first, then arrivals, then the scheduler's attempts until no pod is
// ready. A pod that does not fit waits for an event that can help it (the scheduler's event-driven requeue),
// never for time, except the scheduler's own backoffs, which end at their simulated time.
// After every event time the share of each queue (its allocated GPU compute over the cluster's) is recorded.
//
// Gangs (TenantPods whose pod names a pod_group, with min_available > 1; GroupIntoGangs makes them from the
// trace): all members of a gang arrive together and the scheduler places them all or nothing; a gang that needs
// room preempts for the whole group, and a victim that is a gang member takes its whole gang down. A gang runs as
// long as its longest member. After every event time the simulation counts gangs holding GPUs with fewer members
// running than their minimum (TenantOutcome::partial_gang_events: 0 unless all-or-nothing is broken).
//
// Outcome per queue: pods, bound, time to first bind (mean and 95th percentile over the pods bound, seconds), its
// pods evicted by reclaim and the reclaims it made, its mean share of the cluster and mean borrowed GPUs (compute
// held beyond its guarantee, in GPUs, time-weighted), and how often a pod that arrived within its queue's
// guarantee (its demand admitted within the guarantee at its arrival) was bound at the same event time as its
// arrival ("guarantee met at once").

#include <cstdint>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

struct TenantQueue {
  core::QueueSpec spec;
  int64_t offset_s = 0;  // added to the creation times of its stream
};

struct TenantPod {
  core::PodRequest pod;
  int64_t creation_s = 0;
  int64_t deletion_s = 0;
  size_t queue = 0;  // index into TenantSpec::queues
};

struct TenantSpec {
  std::vector<TenantQueue> queues;
  std::string policy = "fgd";
  uint64_t seed = 42;
  // Creation times are divided by this (durations are not): openb's pod list spans 149 days with at most 66 GPUs
  // in use at once, so its real times never fill the cluster; compressed arrivals load it while each pod keeps
  // its real lifetime. 1 = the real times.
  double arrival_speedup = 1;
};

struct TenantQueueReport {
  std::string name;
  int64_t pods = 0, bound = 0;
  double mean_wait_s = 0, p95_wait_s = 0;  // arrival to first bind, over the pods bound
  int64_t evicted = 0;                     // its pods evicted to give others their guarantee
  int64_t reclaims = 0;                    // pods of others it evicted
  // Time-weighted from the first to the last arrival: its share of the cluster's GPU compute, and the compute it
  // held beyond its guarantee, in GPUs.
  double mean_share = 0;
  double mean_borrowed_gpus = 0;
  int64_t within_guarantee = 0;        // pods first tried within their queue's guarantee
  int64_t met_at_once = 0;             // of those, bound at their arrival's event time
  int64_t gangs = 0, gangs_bound = 0;  // its gangs, and those that ran (all members bound together)
  double mean_gang_wait_s = 0;         // arrival to first bind, over the gangs bound
};

struct TenantOutcome {
  std::vector<TenantQueueReport> queues;
  std::vector<double> times_s;              // event times
  std::vector<std::vector<double>> shares;  // [queue][event]: share of the cluster's GPU compute
  int64_t cluster_gpus = 0;
  int64_t last_arrival_s = 0;  // the report's plot and CSV stop at twice this (the long-lived pods' tail is flat)
  int64_t events = 0;
  int64_t partial_gang_events = 0;  // event times after which some gang held GPUs below its minimum
  double wall_seconds = 0;
};

// The default streams: the GPU pods of `pods` (with their times) dealt to `queues` in turn (pod i to queue i mod
// n), in trace order.
[[nodiscard]] std::vector<TenantPod> DealToQueues(const std::vector<core::PodRequest>& pods,
                                                  const std::vector<std::pair<int64_t, int64_t>>& times, size_t queues);

// The FGD protocol's inflation for streams: clones of uniformly drawn pods (with their times, renamed) are dealt to
// the queues in turn until the pods ask for `target_milli` of GPU compute in all.
void InflateStreams(std::vector<TenantPod>& pods, int64_t target_milli, size_t queues, uint64_t seed);

// Gangs from the trace: the multi-GPU pods (2 or more GPUs) of each queue's stream, in order of creation, are
// grouped into gangs of a size drawn uniformly from [min_size, max_size] (a last group smaller than min_size stays
// single pods). Each gang's members get pod_group "gang-<n>", min_available its size, the first member's creation
// time and the longest lifetime among them (they run together). Returns how many gangs were made.
size_t GroupIntoGangs(std::vector<TenantPod>& pods, int32_t min_size, int32_t max_size, uint64_t seed);

[[nodiscard]] common::Result<TenantOutcome> SimulateTenants(const Cluster& cluster, const Workload& workload,
                                                            const std::vector<TenantPod>& pods, const TenantSpec& spec);

// Three queues for the openb cluster of `gpus` GPUs: prod (guaranteed 40 %, weight 1), research (guaranteed 20 %,
// weight 2), batch (no guarantee, weight 1). Batch's stream starts at once; research's `delay_s` later and prod's
// twice that, so batch first borrows the idle cluster and the others' demand appears on a full one.
[[nodiscard]] std::vector<TenantQueue> DefaultTenantQueues(int64_t gpus, int64_t delay_s);

// The per-queue table (one line per queue) and the share plot and CSV (shares.csv, shares.svg, shares.png) in `dir`.
void PrintTenantTable(std::ostream& out, const TenantOutcome& outcome);
[[nodiscard]] common::Status WriteTenantReport(const std::string& dir, const TenantOutcome& outcome);

}  // namespace gpusched::sim
