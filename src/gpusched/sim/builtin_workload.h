#pragma once

// The built-in cluster and workload that `gpusched simulate` uses when no trace is given (and `make demo` shows).
// Nothing is read from disk: both are generated here from a fixed seed, shaped after the openb trace
// (fgd-benchmark.md §1-2) at about 1/25 of its size:
//   cluster: 48 nodes, 240 GPUs, the openb model mix (8-GPU G2/G3/V100M32 nodes, 2-GPU T4/P100, 4-GPU V100M16, ...)
//   pods:    13 % CPU-only, 38 % sharing one GPU (the openb share sizes with their frequencies: 810, 470, 320,
//            650 milli ...), 48 % one whole GPU, 1 % 2/4/8 whole GPUs; CPU and memory drawn from ranges like
//            the trace's.
// Generation is deterministic, so the demo prints the same table on every machine.

#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

[[nodiscard]] Cluster BuiltinCluster();
// The workload, with its target workload M already computed.
[[nodiscard]] Workload BuiltinWorkload();

}  // namespace gpusched::sim
