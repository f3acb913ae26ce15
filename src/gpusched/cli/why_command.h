#pragma once

// `gpusched why POD` (as a kubectl plugin: `kubectl gpusched why POD`): where a pod was placed and on which GPUs, or
// why it is pending: the scheduler's last word (the PodScheduled condition), then the analysis of sim/why.h against
// the live cluster. Read-only. Wiring and formatting only.

#include <string>

namespace CLI {
class App;
}

namespace gpusched::cli {

struct WhyFlags {
  std::string pod;
  std::string ns;  // default: the kubeconfig context's namespace, else "default"
  std::string kubeconfig, context;
};

void AddWhyCommand(CLI::App& app, WhyFlags& flags, int& exit_code);

}  // namespace gpusched::cli
