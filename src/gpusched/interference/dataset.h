#pragma once

// Co-location measurements: applications, and for each GPU type the slowdown of every measured ordered pair.
//
// Loaders:
//   LoadGavel     Gavel's throughput JSON (simulation_throughputs.json / physical_cluster_throughputs.json):
//                 {gpu: {"('<job>', <scale>)": {"null": iso, "('<job2>', <scale2>)": [tput_job, tput_job2]}}}.
//                 Single-GPU jobs (scale 1) of the consolidated types (k80, p100, v100); [0, 0] = does not fit.
//   LoadCoscheml  Co-scheML's 12-application table {fg: {bg: slowdown | -1}} (-1 = not allowed: memory) and its
//                 per-application GPU utilisation; one GPU type, "coscheml".
//   LoadPairsCsv  our own CSV (docs/interference.md), so a user can bring measurements from their cluster:
//                   gpu,app_a,app_b,slowdown_a,slowdown_b[,iso_tput_a,iso_tput_b][,gpu_util_a,gpu_util_b]
//                 one row per unordered pair (both directions in one row; a row for (b, a) as well is accepted if
//                 it agrees); slowdown_a empty or "inf" = the pair does not fit. Gavel's derived
//                 gavel_pairs_flat.csv (job_a/job_b/scale_a/...) is read too: scale > 1 rows are skipped.
//   LoadDataDir   a folder laid out like ../shared/data/interference: gavel/ and coscheml/ subfolders (either may
//                 be missing, not both) and any *.csv of our format directly in it.
// Every loader reports the file, and the line or key, of the first thing it cannot read.

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::interference {

struct App {
  std::string name;       // as the data names it: "ResNet-50 (batch size 64)", "LAMMPS"
  std::string family;     // model family: the name without " (batch size N)"; "ResNet-50", "LAMMPS"
  double batch_size = 0;  // 0 = not given
  double gpu_util = -1;   // average GPU utilisation %, -1 = not measured
};

// kNaN = not measured; kInfeasible (0) = measured not to fit; otherwise the slowdown (> 0).
inline constexpr double kInfeasible = 0.0;

struct GpuTable {
  std::string gpu;               // "k80", "p100", "v100", "coscheml", or the CSV's gpu column
  std::vector<double> iso;       // isolated throughput per app, NaN = unknown (or app not run on this GPU)
  std::vector<double> slowdown;  // n × n, row-major: [i * n + j] = s(app i | app j on the same GPU)
};

struct Dataset {
  std::string source;  // what it was loaded from
  std::vector<App> apps;
  std::vector<GpuTable> gpus;

  [[nodiscard]] size_t size() const { return apps.size(); }
  [[nodiscard]] std::optional<size_t> AppIndex(std::string_view name) const;
  [[nodiscard]] const GpuTable* Find(std::string_view gpu) const;
  // s(i | j) on table t: NaN, kInfeasible or the slowdown.
  [[nodiscard]] double At(const GpuTable& t, size_t i, size_t j) const { return t.slowdown[i * apps.size() + j]; }
  [[nodiscard]] static bool Measured(double s) { return !std::isnan(s); }
  // Per application: whether it has any measured pair on table t (as the incoming one).
  [[nodiscard]] std::vector<bool> MeasuredApps(const GpuTable& t) const;
  [[nodiscard]] static bool Fits(double s) { return !std::isnan(s) && s > 0; }
};

// "ResNet-50 (batch size 64)" -> family "ResNet-50", batch 64; "A3C" -> "A3C", 0.
[[nodiscard]] App ParseAppName(std::string_view name);

[[nodiscard]] common::Result<Dataset> LoadGavel(const std::string& json_path);
[[nodiscard]] common::Result<Dataset> LoadCoscheml(const std::string& dir);
[[nodiscard]] common::Result<Dataset> LoadPairsCsv(const std::string& csv_path);
// The same from text already read; `source` names it in errors (fuzz targets, tests).
[[nodiscard]] common::Result<Dataset> ParseGavel(std::string_view text, const std::string& source);
[[nodiscard]] common::Result<Dataset> ParsePairsCsv(std::string_view text, const std::string& source);
// Every data set found in `dir` (see above), in the order gavel, coscheml, then CSVs by name.
[[nodiscard]] common::Result<std::vector<Dataset>> LoadDataDir(const std::string& dir);
// Our CSV format, one row per unordered measured pair (i <= j), every GPU table.
[[nodiscard]] common::Status WritePairsCsv(const Dataset& data, const std::string& csv_path);

}  // namespace gpusched::interference
