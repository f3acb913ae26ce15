#pragma once

// `gpusched-lab simulate`: flags, loading the traces, running, reporting. Wiring only.

#include <functional>
#include <string>
#include <vector>

#include "gpusched/cli/colocation_command.h"
#include "gpusched/cli/whatif_mode.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct SimulateFlags {
  std::string trace_dir;
  std::string node_list = "openb_node_list_gpu_node";
  std::vector<std::string> workloads;
  std::vector<std::string> policies;
  std::string seeds = "42";
  double tune = 1.3;
  int jobs = 1;
  std::string out;
  ColocationFlags colocation;  // colocation.source set: the co-location workload mode
  bool tenants = false;        // the multi-tenant mode: GPU queues sharing the trace's cluster
  double arrival_speedup = 0;  // 0: the mode's default (multi-tenant 20000, replay 1)
  std::string replay;          // "time": trace replay with departures
  bool bound = false;          // also print an upper bound on the allocation at 100 % arrived (sim/bound.h)
  bool from_cluster = false;   // what-if on the live cluster (whatif_mode.h)
  std::string kubeconfig, context;
  std::vector<std::string> files;  // -f: the pods to place
  bool random_ties = false;        // score ties at random, not in the stable node order (RunSpec::random_ties)
  bool topology = false;  // GPU topology templates on the nodes; every policy also run with go-gpuallocator's and
                          // first-fit GPU choice
  std::string gangs;  // the multi-tenant mode: "MIN-MAX" groups the multi-GPU pods into gangs of that size; empty: none
};

// The modes that need more than the simulator: --colocation (the interference learner) and --from-cluster (the
// Kubernetes client). gpusched-lab passes both; a build configured with GPUSCHED_SIM_ONLY (`make demo`) has
// neither, and the flags then say so.
struct SimulateModes {
  std::function<int(const ColocationFlags&, const std::vector<unsigned long long>&)> colocation;
  std::function<int(const WhatIfFlags&)> from_cluster;
};

void AddSimulateCommand(CLI::App& app, SimulateFlags& flags, int& exit_code, SimulateModes modes);

// "42-51" or "42,43,50" -> seeds; an InvalidArgument message on bad input (empty string on success).
std::string ParseSeeds(const std::string& text, std::vector<unsigned long long>& out);

}  // namespace gpusched::cli
