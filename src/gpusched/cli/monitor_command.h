#pragma once

// `gpusched-lab monitor`: run GPU workloads on the cluster, record their GPU metrics, plot them, clean up (monitor/).
// Wiring only: flags, set-up checks (files parse, the API server and the metrics source answer, every kind is
// served) before anything is created, signals, one run per workload (in sequence, or --parallel N at a time), the
// summary of several runs, and the exit status: 0 when every workload succeeded, 1 when one failed (timed out,
// was interrupted, or could not be cleaned up), 2 for usage or set-up errors.

#include <string>
#include <vector>

#include "gpusched/cli/logging.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct MonitorFlags {
  std::vector<std::string> files;
  std::string kubeconfig;
  std::string context;
  std::string ns;
  std::string prometheus;
  std::string influxdb;
  std::string influxdb_db = "gpusched";
  std::string interval = "1s";
  std::string timeout = "30m";
  std::string duration;
  std::string metrics;
  std::string out = "gpusched-monitor";
  bool keep = false;
  int parallel = 1;
  bool verbose = false;
  LogFlags log;
};

void AddMonitorCommand(CLI::App& app, MonitorFlags& flags, int& exit_code);

int RunMonitor(const MonitorFlags& flags);

}  // namespace gpusched::cli
