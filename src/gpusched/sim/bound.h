#pragma once

// An upper bound on the GPU compute that any placement of a set of pods can allocate, online or offline: what the
// best possible policy could have allocated when those pods had arrived (`simulate --bound`, bench/beyond-fgd.sh).
//
// The relaxation: only the GPU dimension counts (CPU, memory, GPU models and node boundaries are ignored, which can
// only raise the bound), every GPU holds 1000 milli, and a pod's GPUs are items: a whole GPU is an item of 1000, a
// share of s milli an item of s. Items above 500 ("big") cannot share a GPU with each other, so each packed big item
// leaves 1000 − s on its GPU that only items that small can fill. With F the most that the items of 500 or less could
// fill of all those leftovers together (each item counted whole, but allowed to spread over leftovers at least its
// size: a max-flow over nested sets, solved greedily largest item first), a packing that leaves out the big items X
// allocates at most
//     min( D − Σ_X s,  C − Σ_{big ∉ X} (1000 − s) + F )
// (D: all items, C: the cluster's milli). Both terms are largest when X holds the smallest big items, so the bound
// is the largest over k of that minimum with X the k smallest. It is a bound, not a packing: no placement is shown
// to reach it, and it is loose where CPU, models or small items' own leftovers (470 + 470 leaves 60) bind.

#include <cstdint>
#include <span>
#include <vector>

#include "gpusched/core/gpu_request.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

struct PackingBound {
  int64_t capacity_milli = 0;
  int64_t demand_milli = 0;        // D
  int64_t big_items = 0;           // items above 500 milli
  int64_t big_leftover_milli = 0;  // Σ (1000 − s) over them
  int64_t fill_milli = 0;          // F
  int64_t dropped_big = 0;         // the k that attains the bound
  int64_t bound_milli = 0;         // the bound on allocated milli
  // Not a bound: what an offline packer reaches in the same relaxation (OfflineBestFitDecreasing), a placement of
  // these items that exists when CPU, memory, models and node boundaries do not bind. The best placement in the
  // relaxation allocates between this and bound_milli.
  int64_t offline_packed_milli = 0;
};

// An offline packer over the same items (GPU dimension only, node boundaries ignored): every whole GPU first, then
// the shares largest first, each on the GPU whose room it fills most tightly (best fit decreasing), a share with no
// room left out. It sees all the arrivals at once, so no online policy is held to it; it shows how much of the
// room under the bound a packing of these pods can actually use.
[[nodiscard]] int64_t OfflineBestFitDecreasing(std::span<const core::PodRequest* const> pods, int64_t capacity_milli);

[[nodiscard]] PackingBound GpuPackingBound(std::span<const core::PodRequest* const> pods, int64_t capacity_milli);

// The bound for the pods a run (RunOne's order for `seed` and `tune`) has submitted when arrivals reach `arrived`
// × capacity (1.0: the "arrived 100 %" point of the FGD curves; the pods whose running total stays within it).
[[nodiscard]] PackingBound BoundAtArrived(const Workload& workload, int64_t capacity_milli, uint64_t seed, double tune,
                                          double arrived = 1.0);

}  // namespace gpusched::sim
