#include "gpusched/sim/builtin_workload.h"

#include <array>
#include <memory>
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

// openb's mix scaled down (G2x8 549 -> 20, T4x2 387 -> 14, P100x2 131 -> 5, ...), at least one of the rarer kinds.
constexpr std::array kNodeKinds = {
    NodeKind{"G2", 8, 20, 96000, 786432},     NodeKind{"T4", 2, 14, 64000, 262144},
    NodeKind{"P100", 2, 5, 64000, 262144},    NodeKind{"G3", 8, 2, 96000, 786432},
    NodeKind{"V100M16", 4, 2, 96000, 393216}, NodeKind{"V100M32", 8, 2, 96000, 786432},
    NodeKind{"V100M16", 1, 1, 32000, 131072}, NodeKind{"T4", 4, 1, 96000, 393216},
    NodeKind{"A10", 1, 1, 32000, 131072},
};

struct Share {
  int64_t milli;
  int weight;  // pods in the default trace
};
constexpr std::array kShares = {Share{810, 1078}, Share{470, 750}, Share{320, 328}, Share{650, 253}, Share{230, 150},
                                Share{460, 120},  Share{590, 100}, Share{550, 90},  Share{160, 80},  Share{220, 70},
                                Share{370, 50},   Share{110, 40},  Share{50, 30}};

int64_t Pick(common::Rng& rng, std::initializer_list<int64_t> values) {
  return *(values.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(values.size())));
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
  int share_total = 0;
  for (const Share& s : kShares) {
    share_total += s.weight;
  }
  Workload w{.name = "builtin"};
  constexpr int kPods = 320;
  for (int i = 0; i < kPods; ++i) {
    TracePod p{.name = "demo-pod-" + std::to_string(i)};
    const uint64_t kind = rng.Uniform(100);
    if (kind < 13) {  // CPU-only
      p.cpu_milli = Pick(rng, {2000, 4000, 8000, 16000});
      p.memory_mib = Pick(rng, {4096, 8192, 16384});
    } else if (kind < 51) {  // sharing one GPU
      int r = static_cast<int>(rng.Uniform(static_cast<uint64_t>(share_total)));
      int64_t milli = kShares.back().milli;
      for (const Share& s : kShares) {
        if (r < s.weight) {
          milli = s.milli;
          break;
        }
        r -= s.weight;
      }
      p.num_gpu = 1;
      p.gpu_milli = milli;
      p.cpu_milli = Pick(rng, {2000, 3150, 4000, 6000});
      p.memory_mib = Pick(rng, {8192, 12288, 16384});
    } else if (kind < 99) {  // one whole GPU
      p.num_gpu = 1;
      p.gpu_milli = 1000;
      p.cpu_milli = Pick(rng, {6000, 8000, 11300, 11400, 12000});
      p.memory_mib = Pick(rng, {16384, 32768, 49152});
    } else {  // several whole GPUs
      p.num_gpu = static_cast<int32_t>(Pick(rng, {2, 4, 8}));
      p.gpu_milli = 1000;
      p.cpu_milli = 8000 * p.num_gpu;
      p.memory_mib = 65536L * p.num_gpu;
    }
    w.pods.push_back(ToPodRequest(p));
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  return w;
}

}  // namespace gpusched::sim
