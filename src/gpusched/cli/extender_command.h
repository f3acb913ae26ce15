#pragma once

// `gpusched extender`: the kube-scheduler extender, wired to the API server. Wiring only.

#include <functional>
#include <memory>
#include <string>

#include "gpusched/cli/live_inputs.h"
#include "gpusched/cli/logging.h"
#include "gpusched/common/status.h"
#include "gpusched/ports/slowdown_model.h"

namespace gpusched::cli {

struct ExtenderFlags {
  std::string config;      // YAML (extender/config.h); optional
  std::string kubeconfig;  // overrides the config's kubeconfig
  std::string listen;      // overrides the config's listen
  std::string policy;      // overrides the config's policy
  // The slowdown model file (`gpusched-lab interference train`); given, it turns the config's interference.enabled on.
  std::string interference_model;
  bool verbose = false;
  LogFlags log;
  std::string context;  // kubeconfig context (--context); empty: current-context
};

// Runs until SIGINT or SIGTERM; returns the process exit code. With interference enabled (config or
// --interference-model), `load_model` reads the model at start-up; a missing loader or file fails the start.
int RunExtender(const ExtenderFlags& flags, const SlowdownModelLoader& load_model = {});

}  // namespace gpusched::cli
