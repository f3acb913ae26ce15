#include "gpusched/sim/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "gpusched/plot/csv_writer.h"
#include "gpusched/plot/line_chart.h"

namespace gpusched::sim {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Round2(double x) { return std::nearbyint(x * 100.0) / 100.0; }

struct Acc {
  double alloc = 0, frag = 0, ratio = 0;
  int64_t n = 0;
  void Add(const Acc& o) {
    alloc += o.alloc;
    frag += o.frag;
    ratio += o.ratio;
    n += o.n;
  }
};

// Rows grouped by (workload, policy), in first-seen order.
std::vector<std::pair<std::string, std::vector<const RunOutcome*>>> ByPolicy(const std::vector<RunOutcome>& runs) {
  std::vector<std::pair<std::string, std::vector<const RunOutcome*>>> groups;
  for (const auto& r : runs) {
    const std::string key = r.workload + "\t" + r.spec.policy;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {&r}});
    } else {
      it->second.push_back(&r);
    }
  }
  return groups;
}

std::string TuneString(double tune) { return plot::FormatNumber(tune, -1); }

}  // namespace

Curves BucketCurves(const RunOutcome& run) {
  std::array<Acc, kBuckets + 2> acc{};  // index k+1 holds arrive == k; -1 and 131 at the ends
  const double total = static_cast<double>(run.total_gpus);
  for (const Event& e : run.events) {
    const double arrive = std::nearbyint(static_cast<double>(e.arrived_milli) / total / 10.0);
    if (arrive < -1 || arrive > kBuckets) {
      continue;
    }
    Acc& a = acc[static_cast<size_t>(arrive + 1)];
    a.alloc += Round2(static_cast<double>(e.allocated_milli) / total / 10.0);
    a.frag += e.frag_milli;
    a.ratio += e.idle_milli > 0 ? 100.0 * e.frag_milli / static_cast<double>(e.idle_milli) : 0.0;
    a.n += 1;
  }
  Curves c;
  for (int k = 0; k < kBuckets; ++k) {
    Acc a = acc[static_cast<size_t>(k + 1)];
    if (a.n == 0) {
      a.Add(acc[static_cast<size_t>(k)]);
      a.Add(acc[static_cast<size_t>(k + 2)]);
    }
    const auto i = static_cast<size_t>(k);
    if (a.n == 0) {
      c.alloc[i] = c.frag_amount[i] = c.frag_ratio[i] = kNaN;
      continue;
    }
    const double n = static_cast<double>(a.n);
    c.alloc[i] = a.alloc / n;
    c.frag_amount[i] = Round2(100.0 * (a.frag / n) / 1000.0 / total);
    c.frag_ratio[i] = a.ratio / n;
  }
  return c;
}

common::Status WriteReport(const std::string& dir, const std::vector<RunOutcome>& runs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return common::Unavailable("cannot create output directory " + dir + ": " + ec.message());
  }
  auto alloc = plot::CsvWriter::Open(dir + "/alloc.csv");
  auto amount = plot::CsvWriter::Open(dir + "/frag_amount.csv");
  auto ratio = plot::CsvWriter::Open(dir + "/frag_ratio.csv");
  for (auto* w : {&alloc, &amount, &ratio}) {
    if (!w->ok()) {
      return w->status();
    }
  }
  std::vector<std::string> head = {"workload", "sc_policy", "tune", "seed", "total_gpus"};
  std::vector<std::string> head_frag = {"workload", "sc_policy", "tune", "seed"};
  for (int k = 0; k < kBuckets; ++k) {
    head.push_back(std::to_string(k));
    head_frag.push_back(std::to_string(k));
  }
  GPUSCHED_RETURN_IF_ERROR(alloc->WriteRow(head));
  GPUSCHED_RETURN_IF_ERROR(amount->WriteRow(head_frag));
  GPUSCHED_RETURN_IF_ERROR(ratio->WriteRow(head_frag));

  std::vector<Curves> curves;
  curves.reserve(runs.size());
  for (const auto& r : runs) {
    const Curves c = BucketCurves(r);
    curves.push_back(c);
    std::vector<std::string> base = {r.workload, r.spec.policy, TuneString(r.spec.tune), std::to_string(r.spec.seed)};
    std::vector<std::string> a = base;
    a.push_back(std::to_string(r.total_gpus));
    std::vector<std::string> f = base;
    std::vector<std::string> q = base;
    for (int k = 0; k < kBuckets; ++k) {
      const auto i = static_cast<size_t>(k);
      a.push_back(plot::FormatNumber(c.alloc[i], 2));
      f.push_back(plot::FormatNumber(c.frag_amount[i], 2));
      q.push_back(plot::FormatNumber(c.frag_ratio[i], -1));
    }
    GPUSCHED_RETURN_IF_ERROR(alloc->WriteRow(a));
    GPUSCHED_RETURN_IF_ERROR(amount->WriteRow(f));
    GPUSCHED_RETURN_IF_ERROR(ratio->WriteRow(q));
  }
  GPUSCHED_RETURN_IF_ERROR(alloc->Close());
  GPUSCHED_RETURN_IF_ERROR(amount->Close());
  GPUSCHED_RETURN_IF_ERROR(ratio->Close());

  // Unallocated GPU % against arrived %, mean over seeds, one line per (workload, policy).
  plot::LineChart chart{.title = "Unallocated GPUs as the workload arrives (mean over seeds)",
                        .x_label = "arrived workload (% of cluster GPUs)",
                        .y_label = "unallocated GPUs (%)"};
  chart.x_min = 0;
  chart.x_max = kBuckets - 1;
  const bool many_workloads =
      std::any_of(runs.begin(), runs.end(), [&](const RunOutcome& r) { return r.workload != runs.front().workload; });
  // Per series, the spread over seeds: unallocated % of the seed that allocated most and least (the zoom's band).
  std::vector<std::vector<double>> lows, highs;
  size_t most_seeds = 0;
  for (const auto& [key, group] : ByPolicy(runs)) {
    plot::Series s{.name = many_workloads ? group.front()->workload + " " + group.front()->spec.policy
                                          : group.front()->spec.policy};
    std::vector<double> lo, hi;
    most_seeds = std::max(most_seeds, group.size());
    for (int k = 0; k < kBuckets; ++k) {
      double sum = 0;
      double least = kNaN, most = kNaN;
      int n = 0;
      for (const RunOutcome* r : group) {
        const double v = curves[static_cast<size_t>(r - runs.data())].alloc[static_cast<size_t>(k)];
        if (!std::isnan(v)) {
          sum += v;
          least = n == 0 ? v : std::min(least, v);
          most = n == 0 ? v : std::max(most, v);
          ++n;
        }
      }
      s.xs.push_back(k);
      s.ys.push_back(n > 0 ? 100.0 - sum / n : kNaN);
      lo.push_back(n > 0 ? 100.0 - most : kNaN);
      hi.push_back(n > 0 ? 100.0 - least : kNaN);
    }
    chart.series.push_back(std::move(s));
    lows.push_back(std::move(lo));
    highs.push_back(std::move(hi));
  }
  if (!chart.series.empty()) {
    GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(chart, dir + "/unallocated.svg"));
    GPUSCHED_RETURN_IF_ERROR(plot::WritePng(chart, dir + "/unallocated.png"));
    // The region where the policies part ways (the FGD paper's Figure 9(a) view): arrived 80-130 %, the y axis
    // fitted to the curves there rather than to the straight line before it.
    plot::LineChart zoom = chart;
    // With several seeds, each line carries a band from the seed with the fewest unallocated GPUs to the one with
    // the most.
    const bool bands = most_seeds > 1;
    zoom.title = bands ? "Unallocated GPUs where the policies differ (80-130 % arrived; mean, band: min-max over seeds)"
                       : "Unallocated GPUs where the policies differ (80-130 % arrived)";
    zoom.x_min = kZoomFrom;
    zoom.x_max = kBuckets - 1;
    bool any = false;
    for (size_t q = 0; q < zoom.series.size(); ++q) {
      plot::Series& s = zoom.series[q];
      plot::Series cut{.name = s.name};
      for (size_t i = 0; i < s.xs.size(); ++i) {
        if (s.xs[i] >= kZoomFrom) {
          cut.xs.push_back(s.xs[i]);
          cut.ys.push_back(s.ys[i]);
          if (bands) {
            cut.band_lo.push_back(lows[q][i]);
            cut.band_hi.push_back(highs[q][i]);
          }
          any = any || !std::isnan(s.ys[i]);
        }
      }
      s = std::move(cut);
    }
    if (any) {
      GPUSCHED_RETURN_IF_ERROR(plot::WriteSvg(zoom, dir + "/unallocated-zoom.svg"));
      GPUSCHED_RETURN_IF_ERROR(plot::WritePng(zoom, dir + "/unallocated-zoom.png"));
    }
  }
  return common::Status::Ok();
}

void PrintSummary(std::ostream& os, const std::vector<RunOutcome>& runs) {
  constexpr std::array kAt = {90, 100, 110, 130};
  os << fmt::format("{:<34} {:>5} {:>22} {:>22} {:>22} {:>22} {:>9} {:>8}\n", "workload / policy", "seeds",
                    "alloc% @90 mean (min-max)", "@100", "@110", "@130", "failed", "wall s");
  for (const auto& [key, group] : ByPolicy(runs)) {
    std::string line =
        fmt::format("{:<34} {:>5}",
                    group.front()->workload == "builtin" ? group.front()->spec.policy
                                                         : group.front()->workload + " " + group.front()->spec.policy,
                    group.size());
    std::vector<Curves> cs;
    for (const RunOutcome* r : group) {
      cs.push_back(BucketCurves(*r));
    }
    for (int at : kAt) {
      double sum = 0, lo = 1e9, hi = -1e9;
      int n = 0;
      for (const auto& c : cs) {
        const double v = c.alloc[static_cast<size_t>(at)];
        if (!std::isnan(v)) {
          sum += v;
          lo = std::min(lo, v);
          hi = std::max(hi, v);
          ++n;
        }
      }
      line += n > 0 ? fmt::format(" {:>22}", fmt::format("{:.2f} ({:.2f}-{:.2f})", sum / n, lo, hi))
                    : fmt::format(" {:>22}", "-");
    }
    double failed = 0, wall = 0;
    for (const RunOutcome* r : group) {
      failed += static_cast<double>(r->pods_failed);
      wall += r->wall_seconds;
    }
    const double n = static_cast<double>(group.size());
    line += fmt::format(" {:>9.1f} {:>8.3f}\n", failed / n, wall / n);
    os << line;
  }
}

void PrintTopologySummary(std::ostream& os, const std::vector<RunOutcome>& runs) {
  os << fmt::format("{:<52} {:>10} {:>11} {:>15} {:>16}\n", "workload / policy", "alloc@100", "multi-GPU",
                    "fully NVLinked", "mean pair score");
  for (const auto& [key, group] : ByPolicy(runs)) {
    const RunOutcome& first = *group.front();
    double alloc = 0;
    int n_alloc = 0;
    double multi = 0;
    double nvlinked = 0;
    double nvlinkable = 0;
    double score = 0;
    for (const RunOutcome* r : group) {
      const double v = BucketCurves(*r).alloc[100];
      if (!std::isnan(v)) {
        alloc += v;
        ++n_alloc;
      }
      multi += static_cast<double>(r->topology.multi_gpu_pods);
      nvlinkable += static_cast<double>(r->topology.nvlinkable);
      nvlinked += static_cast<double>(r->topology.fully_nvlinked);
      score += r->topology.mean_pair_score;
    }
    const double n = static_cast<double>(group.size());
    const std::string name = first.workload == "builtin" ? first.spec.policy : first.workload + " " + first.spec.policy;
    const std::string alloc_text = n_alloc > 0 ? fmt::format("{:.2f}", alloc / n_alloc) : "-";
    const double share = nvlinkable > 0 ? 100.0 * nvlinked / nvlinkable : 0.0;
    os << fmt::format("{:<52} {:>10} {:>11.1f} {:>14.1f}% {:>16.1f}\n", name, alloc_text, multi / n, share, score / n);
  }
}

}  // namespace gpusched::sim
