// gpusched-lab: the lab tools. simulate (the openb trace studies, replay, tenants, co-location, and what-if on a
// live cluster), interference (train and evaluate the slowdown model the daemons load), monitor (run workloads and
// chart their GPU metrics). Wiring only. A build configured with GPUSCHED_SIM_ONLY (`make demo`) has simulate alone.

#include <CLI/CLI.hpp>

#include <string>

#include "gpusched/cli/app_main.h"
#include "gpusched/cli/simulate_command.h"
#ifndef GPUSCHED_SIM_ONLY
#include "gpusched/cli/colocation_command.h"
#include "gpusched/cli/interference_command.h"
#include "gpusched/cli/monitor_command.h"
#include "gpusched/cli/whatif_mode.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"gpusched-lab: gpusched's lab tools (simulate, interference, monitor). The daemons are gpusched"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpusched-lab ") + GPUSCHED_VERSION);
  int exit_code = 0;
  gpusched::cli::SimulateFlags simulate;
#ifdef GPUSCHED_SIM_ONLY
  gpusched::cli::AddSimulateCommand(app, simulate, exit_code, gpusched::cli::SimulateModes{});
#else
  gpusched::cli::AddSimulateCommand(app, simulate, exit_code,
                                    gpusched::cli::SimulateModes{.colocation = gpusched::cli::RunColocationMode,
                                                                 .from_cluster = gpusched::cli::RunWhatIfMode});
  gpusched::cli::MonitorFlags monitor;
  gpusched::cli::AddMonitorCommand(app, monitor, exit_code);
  gpusched::cli::InterferenceFlags interference;
  gpusched::cli::AddInterferenceCommand(app, interference, exit_code);
#endif
  const std::map<std::string, std::string> elsewhere = {
      {"scheduler", "gpusched"}, {"extender", "gpusched"}, {"agent", "gpusched"}, {"webhook", "gpusched"},
      {"status", "gpusched"},    {"top", "gpusched"},      {"why", "gpusched"},   {"doctor", "gpusched"}};
  return gpusched::cli::ParseAndRun(app, argc, argv, "gpusched-lab", elsewhere, exit_code);
}
