#pragma once

// `gpusched-lab simulate --from-cluster`: the live cluster, read-only, and the pods of -f files placed on a copy of it
// under each policy (sim/whatif.h). Wiring only: reading the API and the files, printing.

#include <string>
#include <vector>

namespace gpusched::cli {

struct WhatIfFlags {
  std::string kubeconfig;
  std::string context;
  std::vector<std::string> files;
  std::vector<std::string> policies;  // empty: binpack, spread, bestfit, fgd
  unsigned long long seed = 42;
};

// Places the pods of flags.files on a copy of the live cluster under each policy and prints the table.
// Exit status: 0 done, 2 usage error (bad files, unknown policy), 1 the cluster could not be read.
int RunWhatIfMode(const WhatIfFlags& flags);

}  // namespace gpusched::cli
