#pragma once

// What a set of simulator runs produces: the FGD benchmark's bucketed curves (fgd-benchmark.md, "How the curves
// are bucketed"), the CSV files in the reference row format, the unallocated-GPU plot, and the summary table.
//
// Bucketing, per event: arrive = round_half_even(arrived_milli / total_gpus / 10) (an integer percent),
// alloc = round(allocated_milli / total_gpus / 10, 2). Bucket k (0..130) is the mean over events with arrive == k,
// else over events with k-1 <= arrive <= k+1, else empty (NaN).
//   alloc.csv        mean of alloc
//   frag_amount.csv  round(100 · mean(frag_milli) / 1000 / total_gpus, 2)
//   frag_ratio.csv   mean of 100 · frag_milli / idle_milli (unrounded)

#include <array>
#include <ostream>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

inline constexpr int kBuckets = 131;  // arrived 0..130 %

struct Curves {
  std::array<double, kBuckets> alloc{};        // GPU allocation %
  std::array<double, kBuckets> frag_amount{};  // fragment amount, % of all GPU milli
  std::array<double, kBuckets> frag_ratio{};   // fragmentation rate, % of idle GPU milli
};

[[nodiscard]] Curves BucketCurves(const RunOutcome& run);

// Where the zoomed chart starts (arrived %).
inline constexpr int kZoomFrom = 80;

// alloc.csv, frag_amount.csv, frag_ratio.csv, unallocated.svg, unallocated.png (0-130 % arrived) and
// unallocated-zoom.svg, unallocated-zoom.png (80-130 %, y fitted to the curves there) into `dir` (created if missing).
[[nodiscard]] common::Status WriteReport(const std::string& dir, const std::vector<RunOutcome>& runs);

// Per policy (in first-seen order): allocation % at arrived 90/100/110/130 (mean and min-max over seeds),
// failed pods (mean), wall time per run (mean).
void PrintSummary(std::ostream& os, const std::vector<RunOutcome>& runs);

// Per policy: allocation % at 100 % arrived (mean over seeds), multi-GPU pods placed (mean), the share of them on
// fully NVLink-joined GPUs among those whose node could have done that (all seeds together), and their mean pair
// score (mean over seeds; policy/topology.h).
void PrintTopologySummary(std::ostream& os, const std::vector<RunOutcome>& runs);

}  // namespace gpusched::sim
