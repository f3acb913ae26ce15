#pragma once

// The built-in cluster and workload that `gpusched-lab simulate` uses when no trace is given (and `make demo` shows).
// Nothing is read from disk: both are generated here from a fixed seed, shaped after the openb trace
// (openb_pod_list_default on openb's GPU nodes) at one fifth of its size:
//   cluster: 244 nodes, 1248 GPUs: openb's node kinds (G2x8, T4x2, P100x2, G3x8, V100 nodes of 1/4/8 GPUs, T4x4, A10)
//            in its proportions, each with the kind's most common CPU and memory;
//   pods:    1630, of openb's four kinds in its proportions (13 % CPU-only, 38 % sharing one GPU with openb's share
//            sizes and their frequencies, 48 % one whole GPU, 1 % 2/4/8 whole GPUs), each with one of its kind's
//            most common CPU/memory requests, drawn with their frequencies.
// With the paper's protocol (tune 1.3, seeds 42-51) the six policies allocate about what they do on openb itself
// (at 100 % arrived: random 86.3 %, dotprod 90.2 %, gpuclustering 91.6 %, gpupacking 91.9 %, bestfit 92.6 %, fgd
// 94.8 %; the paper's: 86.3, 90.6, 91.7, 91.8, 92.9, 95.2), in about a second for all 60 runs.
// Generation is deterministic, so the demo prints the same table on every machine.

#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

[[nodiscard]] Cluster BuiltinCluster();
// The workload, with its target workload M already computed.
[[nodiscard]] Workload BuiltinWorkload();

}  // namespace gpusched::sim
