#pragma once

// `gpusched status` (as a kubectl plugin: `kubectl gpusched status`): per node and per GPU, what is allocated
// against capacity and who holds it (sim/cluster_status.h). Read-only. Wiring and formatting only.

#include <string>
#include <vector>

#include "gpusched/sim/cluster_status.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct StatusFlags {
  std::vector<std::string> nodes;
  std::string output;  // "" (table), "wide" (a row per GPU too), "json", "yaml"
  bool no_headers = false;
  std::string kubeconfig, context;
};

// The text `status` prints: the node table (kubectl's column style), with -o wide a row per GPU under its node (a
// bar of its compute, its memory, the pods holding it), then the cluster's totals; or the JSON document.
[[nodiscard]] std::string FormatStatus(const sim::ClusterStatus& status, const StatusFlags& flags);

void AddStatusCommand(CLI::App& app, StatusFlags& flags, int& exit_code);

}  // namespace gpusched::cli
