#pragma once

// What a monitor run records and writes: the metric catalog, the samples of each GPU, the per-GPU summary, and the
// files of a run (metrics.csv, one PNG and one SVG per metric, index.html) and of a set of runs (summary.csv,
// index.html).
//
// Summary arithmetic, per GPU and metric, over the finite samples in the run's window:
//   mean: the plain mean of the samples (they are `step` apart); p95: nearest rank (the ceil(0.95 n)-th smallest);
//   max; energy (power only): the trapezoid integral of the samples over time, in joules (W x s), summed over the
//   intervals between consecutive samples; an interval longer than max_gap_s (a hole in the data) adds nothing.
//
// index.html is self-contained: the charts are inlined as SVG, there is no script, style sheet or image from
// elsewhere, and every text from the cluster is HTML-escaped.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::monitor {

struct MetricInfo {
  std::string name;    // util, temp, memcopy, power, fb_used, ...; or a raw DCGM_* name
  std::string dcgm;    // Prometheus series name
  std::string influx;  // the agent's InfluxDB field ("" = not there)
  std::string unit;    // "%", "C", "W", "MiB", "MHz"
  std::string title;   // "GPU utilisation"
};

// The known names, in the default order.
[[nodiscard]] const std::vector<MetricInfo>& KnownMetrics();
// "util,temp,memcopy,power,fb_used"
[[nodiscard]] std::string DefaultMetricList();
// A comma-separated list of known names and raw DCGM_* names (Prometheus only). InvalidArgument naming the unknown
// entry, and listing the known ones; an empty or duplicate entry is an error too.
[[nodiscard]] common::Result<std::vector<MetricInfo>> ParseMetricList(std::string_view list);

// One GPU a pod's container holds.
struct GpuRef {
  std::string ns;
  std::string pod;
  std::string container;
  std::string node;
  std::string uuid;
  int index = -1;
  [[nodiscard]] std::string Label() const;  // "node/GPU 3 (pod)"
};

struct Sample {
  double t = 0;  // seconds since the run's start
  double value = 0;
};

// metric name -> GPU UUID -> samples in time order.
using SampleSet = std::map<std::string, std::map<std::string, std::vector<Sample>>>;

struct Stats {
  size_t count = 0;
  double mean = 0;
  double p95 = 0;
  double max = 0;
  std::optional<double> energy_j;  // power only
};
[[nodiscard]] Stats Summarize(const std::vector<Sample>& samples, bool is_power, double max_gap_s);

struct RunFacts {
  std::string workload;
  std::string file;
  std::string run_id;
  std::string ns;
  std::vector<std::string> objects;  // "Pod default/train"
  std::string source;                // "prometheus http://..."
  std::string outcome;               // "succeeded", "failed: <reason>", "timed out: ...", "interrupted"
  bool succeeded = false;
  std::string created_utc, started_utc, ended_utc;  // RFC 3339; empty when it never got there
  std::optional<double> wait_s;                     // created -> scheduled
  std::optional<double> duration_s;                 // started -> ended
  double step_s = 1;
  std::vector<std::string> notes;  // e.g. "the range query failed; the live samples are used"
};

struct RunReport {
  RunFacts facts;
  std::vector<MetricInfo> metrics;
  std::vector<GpuRef> gpus;  // one per (pod, container, GPU)
  SampleSet samples;
};

// Writes metrics.csv, <metric>.png and <metric>.svg for every metric, and index.html into `dir` (created).
[[nodiscard]] common::Status WriteRun(const RunReport& report, const std::string& dir);
// The CSV text alone (for tests): time_s,pod,container,node,gpu_uuid,gpu_index,metric,value,unit.
[[nodiscard]] std::string RunCsv(const RunReport& report);
// The page alone, with the charts' SVG text by metric name (for tests).
[[nodiscard]] std::string RunHtml(const RunReport& report, const std::map<std::string, std::string>& svgs);

// One line per run: workload,outcome,duration_s,wait_s,gpus,mean_util_pct,energy_j,dir.
struct RunSummary {
  RunFacts facts;
  size_t gpus = 0;
  std::optional<double> mean_util;
  std::optional<double> energy_j;
  std::string dir;  // relative to the summary's directory
};
[[nodiscard]] RunSummary SummarizeRun(const RunReport& report, const std::string& relative_dir);
[[nodiscard]] common::Status WriteSummary(const std::vector<RunSummary>& runs, const std::string& dir);

[[nodiscard]] std::string HtmlEscape(std::string_view s);

}  // namespace gpusched::monitor
