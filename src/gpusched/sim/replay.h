#pragma once

// Trace replay with departures (`gpusched-lab simulate --replay time`): the trace's pods arrive at their creation
// times (divided by arrival_speedup) and run for their real lifetimes (deletion − creation, at least 1 s) once
// placed, through the production scheduler: the scheduling core of `gpusched scheduler` (sim/production_scheduler.h)
// over in-memory ports and trace time.
//
// Event loop over trace time: at each time, departures first (their resources are freed), then arrivals, then the
// scheduler's attempts until no pod is ready. A pod that fits nowhere waits in the scheduler's queue (priority,
// highest first, then arrival); the room a departure frees wakes the waiting pods that fit where it was freed, and
// the scheduler places each over the whole cluster. Nothing is preempted (the trace's pods ran as they ran; the
// scheduler's preemption is the multi-tenant mode's). Pods still waiting when every placed pod has departed were
// never placed.
//
// Priority from the trace's QoS class (openb has no priorities): LS and Guaranteed 2, Burstable 1, BE and
// anything else 0. Pods without GPUs are replayed too (they take CPU and memory on the GPU nodes, as in the trace).
//
// Reports per run: pods, placed, never placed, waits (arrival to placement; mean, p95, max, over the placed pods;
// and how many waited at all), the GPU allocation over time (allocated GPU compute / the cluster's, after every
// event time), its time-weighted mean over the busy window (below), and its peak.
//
// InflateReplay clones pods, as the FGD protocol's tune does, so that the trace can load a cluster it would not
// fill alone (openb asks for 98 % of its cluster's GPUs in all, spread over 149 days).

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

struct ReplayPod {
  core::PodRequest pod;
  int64_t creation_s = 0;
  int64_t deletion_s = 0;
};

struct ReplaySpec {
  std::string policy = "fgd";  // a name or a mix ("fgd:3+topology:1")
  uint64_t seed = 42;          // ties between equal nodes (a fixed random rank per node), and random policies
  double arrival_speedup = 1;  // creation times are divided by this; lifetimes are not
};

struct ReplayOutcome {
  std::string workload;
  ReplaySpec spec;
  int64_t cluster_gpus = 0;
  int64_t pods = 0;
  int64_t placed = 0;
  int64_t never_placed = 0;
  int64_t gpu_pods = 0, gpu_pods_never_placed = 0;
  int64_t waited = 0;  // placed after waiting (later than their arrival)
  double mean_wait_s = 0, p95_wait_s = 0, max_wait_s = 0;
  // Time-weighted over the busy window, from the arrival at the 10th percentile of arrivals to that at the 90th
  // (openb's creations bunch up in its last month; the early months are nearly empty), 0..1.
  double mean_allocation = 0;
  int64_t window_start_s = 0, window_end_s = 0;
  double peak_allocation = 0;
  std::vector<double> times_s;     // event times
  std::vector<double> allocation;  // after each event time, 0..1
  int64_t last_arrival_s = 0;
  int64_t events = 0;
  double wall_seconds = 0;
};

// Appends clones of uniformly drawn pods (with their times; named "<name>-clone-<n>") until the pods ask for at
// least `target_milli` of GPU compute in all. Pods without GPUs are drawn too (they add nothing to the total).
void InflateReplay(std::vector<ReplayPod>& pods, int64_t target_milli, uint64_t seed);

// QoS class -> priority (see above).
[[nodiscard]] int32_t PriorityOfQos(const std::string& qos);

[[nodiscard]] common::Result<ReplayOutcome> Replay(const Cluster& cluster, const Workload& workload,
                                                   const std::vector<ReplayPod>& pods, const ReplaySpec& spec);

// One line per (workload, policy): the mean over its seeds.
void PrintReplayTable(std::ostream& out, const std::vector<ReplayOutcome>& runs);
// In `dir`: replay.csv (one row per run), replay-allocation.csv and replay-allocation.{svg,png} (the GPU allocation
// over time, one line per policy, its first seed).
[[nodiscard]] common::Status WriteReplayReport(const std::string& dir, const std::vector<ReplayOutcome>& runs);

}  // namespace gpusched::sim
