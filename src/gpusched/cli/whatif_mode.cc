#include "gpusched/cli/whatif_mode.h"

#include <iostream>

#include "gpusched/cli/live_cluster.h"
#include "gpusched/monitor/manifest.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::cli {

using nlohmann::json;

int RunWhatIfMode(const WhatIfFlags& flags) {
  if (flags.files.empty()) {
    std::cerr << "gpusched-lab simulate: --from-cluster needs -f FILE (the pods to place)\n";
    return 2;
  }
  const std::vector<std::string> policies =
      flags.policies.empty() ? std::vector<std::string>{"binpack", "spread", "bestfit", "fgd"} : flags.policies;
  auto workloads = monitor::LoadWorkloads(flags.files);
  if (!workloads.ok()) {
    std::cerr << "gpusched-lab simulate: " << workloads.status().message() << "\n";
    return 2;
  }
  std::vector<std::pair<std::string, json>> objects;
  for (const monitor::Workload& w : workloads.value()) {
    for (const monitor::ManifestObject& o : w.objects) {
      objects.emplace_back(o.Where(), o.object);
    }
  }
  auto pods = PodsFromObjects(objects);
  if (!pods.ok()) {
    std::cerr << "gpusched-lab simulate: " << pods.status().message() << "\n";
    return 2;
  }
  for (const std::string& i : pods->ignored) {
    std::cerr << "gpusched-lab simulate: ignored (makes no pods to place now): " << i << "\n";
  }
  if (pods->pods.empty()) {
    std::cerr << "gpusched-lab simulate: the files make no pods to place\n";
    return 2;
  }
  auto cluster = ReadLiveCluster(flags.kubeconfig, flags.context, std::cerr);
  if (!cluster.ok()) {
    std::cerr << "gpusched-lab simulate: " << cluster.status().message() << "\n";
    return 1;
  }
  auto outcomes = sim::WhatIf(*cluster, pods->pods, policies, flags.seed);
  if (!outcomes.ok()) {
    std::cerr << "gpusched-lab simulate: " << outcomes.status().message() << "\n";
    return 2;
  }
  sim::PrintWhatIf(std::cout, sim::SummarizeCluster(*cluster), pods->pods, outcomes.value());
  return 0;
}

}  // namespace gpusched::cli
