#pragma once

// FGD's target workload M and the fragmentation measure F_n(M) built on it (fgd-benchmark.md §3).
//
// M: group the trace's pods by (cpu, gpu_milli, gpu_count, allowed models); sort the groups by pod count,
// descending (ties by key, so the result is deterministic); keep the top groups until they cover >= 95 % of the
// pods; renormalise their frequencies to sum to 1.
//
// Fragment of node n for one task class m, with idle = Σ free milli of n's healthy GPUs:
//   m asks no GPU                                   -> idle
//   n cannot host m's GPUs (count, share, model)    -> idle
//   n can host m's GPUs but lacks m's CPU           -> idle
//   both fit                                        -> Σ free milli of the GPUs that cannot host one of m's GPUs
// F_n(M) = Σ_m p_m · frag_n(m), in milli-GPU. Cost: O(|M| · GPUs) per node.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpusched/common/units.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node_view.h"

namespace gpusched::policy {

struct TaskClass {
  common::MilliCpu cpu{0};
  int32_t gpu_count = 0;
  common::MilliGpu gpu_milli{0};
  std::vector<std::string> models;  // empty = any
  int64_t pods = 0;                 // pods of this class in the trace
  common::MiB memory{0};            // the mean memory of those pods (not part of the class's key)
  double weight = 0;                // p_m, Σ weight = 1 over the kept classes
};

struct TargetWorkload {
  std::vector<TaskClass> classes;
  int64_t distinct_classes = 0;  // before the coverage cut
  int64_t total_pods = 0;
  int64_t covered_pods = 0;
};

struct TypicalPodsOptions {
  double coverage = 0.95;
};

[[nodiscard]] TargetWorkload TypicalPods(std::span<const core::PodRequest> pods,
                                         const TypicalPodsOptions& options = {});

// The workload fgd assumes for a live cluster until it has seen its own pods: one pod each of a quarter GPU, half a
// GPU, and 1, 2, 4 and 8 whole GPUs (1 CPU each), equally likely.
[[nodiscard]] std::shared_ptr<const TargetWorkload> DefaultTargetWorkload();

// F_n(M) of a node in the given (possibly hypothetical) state: cpu_free and the free milli of each GPU
// (free_milli[i] for node.node->gpus[i]).
[[nodiscard]] double Fragmentation(const TargetWorkload& m, const core::NodeView& node, common::MilliCpu cpu_free,
                                   std::span<const int64_t> free_milli);
// F_n(M) of the node as it is.
[[nodiscard]] double NodeFragmentation(const TargetWorkload& m, const core::NodeView& node);

// M's classes arranged for nodes whose GPUs are all of one model (most nodes): per model, the GPU classes that may
// use it (they name it, or name no model) and the summed weight of the classes that strand all of a node's idle milli
// there (no GPU, or tied to other models). Fragmentation over it then visits only the usable classes and compares
// no model names per class: a fgd-scarcity run on openb gpuspec33, where most classes are tied to models, takes
// 0.86 s instead of 1.16 s.
struct FragmentationIndex {
  explicit FragmentationIndex(std::shared_ptr<const TargetWorkload> m);
  std::shared_ptr<const TargetWorkload> m;
  std::vector<std::string> models;            // every model some class names
  std::vector<std::vector<uint32_t>> usable;  // per models[k], then (last) for a model no class names
  std::vector<double> idle_weight;            // likewise
};
// Fragmentation(*index.m, ...), the same value up to the order of summation.
[[nodiscard]] double Fragmentation(const FragmentationIndex& index, const core::NodeView& node,
                                   common::MilliCpu cpu_free, std::span<const int64_t> free_milli);

}  // namespace gpusched::policy
