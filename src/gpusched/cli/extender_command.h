#pragma once

// `gpusched extender`: the kube-scheduler extender, wired to the API server. Wiring only.

#include <string>

namespace gpusched::cli {

struct ExtenderFlags {
  std::string config;      // YAML (adapters/extender/config.h); optional
  std::string kubeconfig;  // overrides the config's kubeconfig
  std::string listen;      // overrides the config's listen
  std::string policy;      // overrides the config's policy
  bool verbose = false;
};

// Runs until SIGINT or SIGTERM; returns the process exit code.
int RunExtender(const ExtenderFlags& flags);

}  // namespace gpusched::cli
