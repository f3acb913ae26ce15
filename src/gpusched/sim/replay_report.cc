#include "gpusched/sim/replay.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpusched/plot/line_chart.h"

namespace gpusched::sim {

common::Status WriteReplayReport(const std::string& dir, const std::vector<ReplayOutcome>& runs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return common::InvalidArgument("cannot create " + dir + ": " + ec.message());
  }
  std::ofstream summary(dir + "/replay.csv");
  summary << "workload,policy,seed,arrival_speedup,pods,placed,never_placed,gpu_pods,gpu_pods_never_placed,waited,"
             "mean_wait_s,p95_wait_s,max_wait_s,mean_allocation,peak_allocation,wall_s\n";
  for (const ReplayOutcome& r : runs) {
    summary << fmt::format("{},{},{},{},{},{},{},{},{},{},{:.1f},{:.1f},{:.1f},{:.5f},{:.5f},{:.3f}\n", r.workload,
                           r.spec.policy, r.spec.seed, r.spec.arrival_speedup, r.pods, r.placed, r.never_placed,
                           r.gpu_pods, r.gpu_pods_never_placed, r.waited, r.mean_wait_s, r.p95_wait_s, r.max_wait_s,
                           r.mean_allocation, r.peak_allocation, r.wall_seconds);
  }
  if (!summary) {
    return common::InvalidArgument("cannot write " + dir + "/replay.csv");
  }
  // The first run of each (workload, policy), up to its last arrival plus as long again, at most 2000 points.
  std::vector<const ReplayOutcome*> shown;
  std::set<std::pair<std::string, std::string>> seen;
  for (const ReplayOutcome& r : runs) {
    if (seen.insert({r.workload, r.spec.policy}).second) {
      shown.push_back(&r);
    }
  }
  const bool several_workloads = std::any_of(shown.begin(), shown.end(),
                                             [&](const ReplayOutcome* r) { return r->workload != shown[0]->workload; });
  plot::LineChart chart{.title = "GPU allocation over time (trace replay with departures)",
                        .x_label = "trace time (hours)",
                        .y_label = "GPU compute allocated (%)"};
  std::ofstream csv(dir + "/replay-allocation.csv");
  csv << "workload,policy,seed,time_h,allocation\n";
  for (const ReplayOutcome* r : shown) {
    plot::Series s{.name = several_workloads ? r->workload + " " + r->spec.policy : r->spec.policy};
    const double end = 2.0 * static_cast<double>(std::max<int64_t>(1, r->last_arrival_s));
    size_t n = 0;
    while (n < r->times_s.size() && r->times_s[n] <= end) {
      ++n;
    }
    const size_t step = std::max<size_t>(1, n / 2000);
    for (size_t e = 0; e < n; e += step) {
      const double h = r->times_s[e] / 3600.0;
      s.xs.push_back(h);
      s.ys.push_back(100 * r->allocation[e]);
      csv << fmt::format("{},{},{},{:.4f},{:.5f}\n", r->workload, r->spec.policy, r->spec.seed, h, r->allocation[e]);
    }
    chart.series.push_back(std::move(s));
  }
  if (!csv) {
    return common::InvalidArgument("cannot write " + dir + "/replay-allocation.csv");
  }
  chart.y_min = 0;
  GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(chart, dir + "/replay-allocation.svg"));
  return plot::WritePng(chart, dir + "/replay-allocation.png");
}

}  // namespace gpusched::sim
