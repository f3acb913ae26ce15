#include "gpusched/sim/builtin_workload.h"

#include <array>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "gpusched/common/rng.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

constexpr uint64_t kSeed = 2023;

struct NodeKind {
  const char* model;
  int32_t gpus;
  int32_t count;
  int64_t cpu_milli;
  int64_t memory_mib;
};

// openb's GPU nodes at one fifth, each kind with its most common CPU and memory (G2x8 549 -> 110 nodes of 96 cores
// and 384 GiB, T4x2 387 -> 77, P100x2 131 -> 26 with 16 cores, ...), at least one node of every kind: 244 nodes,
// 1248 GPUs.
constexpr std::array kNodeKinds = {
    NodeKind{"G2", 8, 110, 96000, 393216},    NodeKind{"T4", 2, 77, 104000, 524288},
    NodeKind{"P100", 2, 26, 16000, 122880},   NodeKind{"G3", 8, 8, 128000, 786432},
    NodeKind{"V100M16", 4, 6, 32000, 131072}, NodeKind{"V100M32", 8, 4, 96000, 786432},
    NodeKind{"V100M16", 1, 4, 8000, 32768},   NodeKind{"T4", 4, 3, 96000, 393216},
    NodeKind{"V100M32", 4, 2, 48000, 376832}, NodeKind{"V100M16", 8, 2, 64000, 262144},
    NodeKind{"P100", 1, 1, 8000, 61440},      NodeKind{"A10", 1, 1, 128000, 1048576},
};

// A pod shape and how many of openb default's pods of its kind have it.
struct Shape {
  int64_t value;  // gpu milli (shares) or GPU count (multi-GPU pods); unused otherwise
  int64_t cpu_milli;
  int64_t memory_mib;
  int weight;
};

// openb default's 8152 pods: 1088 CPU-only, 3078 sharing one GPU, 3911 one whole GPU, 75 with 2, 4 or 8 GPUs. Their
// most common CPU/memory requests per kind (98 % of the CPU-only and sharing pods, 82 % of the one-GPU ones) and
// the share sizes with their frequencies.
constexpr std::array kCpuOnly = {Shape{0, 12500, 57344, 364}, Shape{0, 32000, 49152, 284}, Shape{0, 8000, 30517, 163},
                                 Shape{0, 15400, 51200, 120}, Shape{0, 16500, 51200, 95},  Shape{0, 8000, 15625, 11},
                                 Shape{0, 16000, 31250, 8}};
constexpr std::array kShareSizes = {
    Shape{810, 0, 0, 1078}, Shape{470, 0, 0, 750}, Shape{320, 0, 0, 328}, Shape{650, 0, 0, 253}, Shape{230, 0, 0, 140},
    Shape{460, 0, 0, 128},  Shape{590, 0, 0, 75},  Shape{160, 0, 0, 74},  Shape{550, 0, 0, 72},  Shape{220, 0, 0, 62},
    Shape{370, 0, 0, 47},   Shape{110, 0, 0, 24},  Shape{480, 0, 0, 19},  Shape{50, 0, 0, 7}};
constexpr std::array kShareHosts = {Shape{0, 3152, 5600, 1122}, Shape{0, 11908, 47104, 625}, Shape{0, 8000, 30517, 486},
                                    Shape{0, 4000, 22888, 189}, Shape{0, 4000, 15258, 182},  Shape{0, 4152, 10600, 152},
                                    Shape{0, 4000, 30517, 136}, Shape{0, 6000, 6144, 51},    Shape{0, 6000, 12288, 29}};
constexpr std::array kOneGpu = {Shape{0, 11300, 49152, 857}, Shape{0, 11400, 48128, 534}, Shape{0, 3152, 5600, 470},
                                Shape{0, 18708, 64512, 255}, Shape{0, 9810, 41560, 195},  Shape{0, 12000, 24576, 158},
                                Shape{0, 15700, 58368, 158}, Shape{0, 11908, 47104, 153}, Shape{0, 16000, 32768, 108},
                                Shape{0, 8000, 16384, 104},  Shape{0, 4000, 24576, 104},  Shape{0, 12000, 16384, 99}};
constexpr std::array kMultiGpu = {Shape{8, 88000, 327680, 18}, Shape{8, 64200, 263168, 18}, Shape{8, 64000, 262144, 8},
                                  Shape{4, 32200, 132096, 9},  Shape{4, 30200, 160768, 6},  Shape{2, 16200, 66560, 10},
                                  Shape{2, 17400, 43008, 6}};

const Shape& Draw(common::Rng& rng, std::span<const Shape> shapes) {
  int total = 0;
  for (const Shape& s : shapes) {
    total += s.weight;
  }
  int r = static_cast<int>(rng.Uniform(static_cast<uint64_t>(total)));
  for (const Shape& s : shapes) {
    if (r < s.weight) {
      return s;
    }
    r -= s.weight;
  }
  return shapes.back();
}

}  // namespace

Cluster BuiltinCluster() {
  Cluster c{.name = "builtin"};
  int n = 0;
  for (const NodeKind& k : kNodeKinds) {
    for (int32_t i = 0; i < k.count; ++i) {
      char name[32];
      std::snprintf(name, sizeof(name), "demo-node-%03d", n++);
      c.nodes.push_back(ToNode(TraceNode{
          .name = name, .cpu_milli = k.cpu_milli, .memory_mib = k.memory_mib, .gpus = k.gpus, .model = k.model}));
    }
  }
  return c;
}

Workload BuiltinWorkload() {
  common::Rng rng(kSeed);
  Workload w{.name = "builtin"};
  constexpr int kPods = 1630;  // openb default's 8152 at one fifth
  for (int i = 0; i < kPods; ++i) {
    TracePod p{.name = "demo-pod-" + std::to_string(i)};
    const uint64_t kind = rng.Uniform(8152);
    const Shape* host = nullptr;
    if (kind < 1088) {  // CPU-only
      host = &Draw(rng, kCpuOnly);
    } else if (kind < 1088 + 3078) {  // sharing one GPU
      p.num_gpu = 1;
      p.gpu_milli = Draw(rng, kShareSizes).value;
      host = &Draw(rng, kShareHosts);
    } else if (kind < 1088 + 3078 + 3911) {  // one whole GPU
      p.num_gpu = 1;
      p.gpu_milli = 1000;
      host = &Draw(rng, kOneGpu);
    } else {  // several whole GPUs
      host = &Draw(rng, kMultiGpu);
      p.num_gpu = static_cast<int32_t>(host->value);
      p.gpu_milli = 1000;
    }
    p.cpu_milli = host->cpu_milli;
    p.memory_mib = host->memory_mib;
    w.pods.push_back(ToPodRequest(p));
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  return w;
}

}  // namespace gpusched::sim
