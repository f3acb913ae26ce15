#pragma once

// `gpusched-lab simulate --colocation gavel`: the co-location workload mode (sim/colocation.h) on Gavel's measured
// pairs. Wiring only.

#include <cstdint>
#include <string>
#include <vector>

namespace gpusched::cli {

struct ColocationFlags {
  std::string source;  // "gavel" (the only one with durations and enough applications), or a CSV of our format
  std::string data;    // required with --colocation gavel: where the measurements are
  std::string gpu = "p100";
  int nodes = 4;
  int gpus_per_node = 4;
  int jobs = 200;
  double interarrival_s = 150;
  double min_duration_s = 600;
  double max_duration_s = 7200;
  double min_sharing_gain = 0.25;  // interference-aware's InterferenceAwareOptions::min_sharing_gain
  bool oracle = true;              // also run interference-aware on the measured slowdowns (the upper bound)
};

// Runs interference-aware (on leave-one-out predictions), Co-scheML's greedy pairing (the same predictions,
// the incoming application's slowdown only), binpack and random on the same workloads; prints the table.
// Returns the process exit code.
int RunColocationMode(const ColocationFlags& flags, const std::vector<unsigned long long>& seeds);

}  // namespace gpusched::cli
