// Filter and Score of every registered policy over N node views (N = 1000 .. 8000), for one GPU-sharing pod
// (470 milli, 4000 CPU). Items processed = node evaluations, so the reported rate is nodes per second.
//
// The views are built once, deterministically: 8 A100s each, free milli cycling through a fixed list (every fifth
// node idle; some nodes too full for the pod, so Filter rejects them), CPU free between 8000 and 64000, a few shape
// tags for gpuclustering. FGD's target workload is
// TypicalPods of 400 synthetic pods in the trace's common shapes.

#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/policy/topology.h"
#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

constexpr int kMaxNodes = 8000;
constexpr int kGpusPerNode = 8;

// Free milli per GPU, cycled: mostly free, the trace's common shares taken out of some, a few GPUs full.
constexpr std::array<int64_t, 11> kFreeCycle = {1000, 1000, 530, 190, 1000, 0, 810, 350, 1000, 650, 120};

const std::vector<core::NodeView>& Views() {
  static const std::vector<core::NodeView> views = [] {
    std::vector<core::NodeView> out;
    out.reserve(kMaxNodes);
    for (int i = 0; i < kMaxNodes; ++i) {
      testing::ViewBuilder b = testing::View("node-" + std::to_string(i));
      b.Gpus(kGpusPerNode, "A100").CpuFree(8000 + (i % 15) * 4000);
      const bool idle = i % 5 == 0;
      if (!idle) {
        b.Shape(0, 1 + i % 3);  // sharing pods
        if (i % 4 == 0) {
          b.Shape(1, 1);  // and sometimes a whole-GPU pod
        }
      }
      core::NodeView v = b.Build();
      if (!idle) {
        for (size_t g = 0; g < v.gpus.size(); ++g) {
          int64_t free = kFreeCycle[(static_cast<size_t>(i) * 3 + g * 7) % kFreeCycle.size()];
          if (i % 7 == 3 && free >= 470) {
            free = 0;  // a node too full for the pod: Filter rejects it
          }
          v.gpus[g].free = common::MilliGpu{free};
          if (free < 1000) {
            v.gpus[g].holders = 1;
            v.pods += 1;
          }
        }
      }
      out.push_back(std::move(v));
    }
    return out;
  }();
  return views;
}

std::shared_ptr<const TargetWorkload> SyntheticWorkload() {
  struct Spec {
    int64_t cpu;
    int32_t gpus;  // 0 = CPU only, -1 = a share of `milli`
    int64_t milli;
    int count;
  };
  // 400 pods; with coverage 0.95 TypicalPods keeps the top 8 classes (380 pods).
  constexpr std::array<Spec, 11> kSpecs = {{{4000, 0, 0, 60},
                                            {3150, -1, 810, 80},
                                            {4000, -1, 470, 60},
                                            {2000, -1, 320, 30},
                                            {6000, -1, 650, 25},
                                            {11300, 1, 1000, 70},
                                            {11400, 1, 1000, 45},
                                            {16000, 2, 1000, 10},
                                            {32000, 4, 1000, 6},
                                            {64000, 8, 1000, 4},
                                            {2000, -1, 230, 10}}};
  std::vector<core::PodRequest> pods;
  for (const Spec& s : kSpecs) {
    for (int k = 0; k < s.count; ++k) {
      testing::PodBuilder p = testing::Pod("pod-" + std::to_string(pods.size()));
      p.Cpu(s.cpu);
      if (s.gpus < 0) {
        p.Share(s.milli);
      } else if (s.gpus > 0) {
        p.Gpus(s.gpus);
      }
      pods.push_back(p.Build());
    }
  }
  return std::make_shared<const TargetWorkload>(TypicalPods(pods));
}

std::unique_ptr<PlacementPolicy> MakeNamed(const std::string& name) {
  static const PolicyOptions options{.target_workload = SyntheticWorkload()};
  auto p = MakePolicy(name, options);
  if (!p.ok()) {
    return nullptr;
  }
  return std::move(p).value();
}

const core::PodRequest& SharingPod() {
  static const core::PodRequest pod = testing::Pod("bench").Cpu(4000).Share(470).Build();
  return pod;
}

void BM_Filter(benchmark::State& state, const std::string& name) {
  const auto policy = MakeNamed(name);
  if (policy == nullptr) {
    state.SkipWithError(("cannot build policy " + name).c_str());
    return;
  }
  const auto n = static_cast<size_t>(state.range(0));
  const auto& views = Views();
  const core::PodRequest& pod = SharingPod();
  for (auto _ : state) {
    int64_t fits = 0;
    for (size_t i = 0; i < n; ++i) {
      fits += policy->Filter(pod, views[i]).fits() ? 1 : 0;
    }
    benchmark::DoNotOptimize(fits);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Score(benchmark::State& state, const std::string& name) {
  const auto policy = MakeNamed(name);
  if (policy == nullptr) {
    state.SkipWithError(("cannot build policy " + name).c_str());
    return;
  }
  const auto n = static_cast<size_t>(state.range(0));
  const auto& views = Views();
  const core::PodRequest& pod = SharingPod();
  std::vector<const core::NodeView*> feasible;  // Score runs only on nodes that passed Filter
  for (size_t i = 0; i < n; ++i) {
    if (policy->Filter(pod, views[i]).fits()) {
      feasible.push_back(&views[i]);
    }
  }
  const Snapshot snapshot;
  for (auto _ : state) {
    int64_t sum = 0;
    for (const core::NodeView* v : feasible) {
      sum += policy->Score(pod, *v, snapshot);
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(feasible.size()));
  state.counters["feasible"] = static_cast<double>(feasible.size());
}

void RegisterAll() {
  for (const std::string& name : PolicyNames()) {
    for (const auto& [phase, fn] : {std::pair{"Filter", &BM_Filter}, std::pair{"Score", &BM_Score}}) {
      const std::string bench = std::string(phase) + "/" + name;
      benchmark::RegisterBenchmark(bench.c_str(), [fn = fn, name](benchmark::State& s) { fn(s, name); })
          ->Arg(1000)
          ->Arg(2000)
          ->Arg(4000)
          ->Arg(8000)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// ChooseWholeGpus on a node of `gpus` GPUs whose links alternate NVLink and cross-socket (a worst case for ties: many
// equal sets), all free, for a container of `count` GPUs: what topology adds to every whole-GPU placement.
void BM_ChooseWholeGpus(benchmark::State& state) {
  const auto gpus = static_cast<size_t>(state.range(0));
  const auto count = static_cast<size_t>(state.range(1));
  core::Node node;
  node.gpus.resize(gpus);
  for (size_t i = 0; i < gpus; ++i) {
    node.gpus[i].index = static_cast<int32_t>(i);
    for (size_t j = 0; j < gpus; ++j) {
      if (i != j) {
        const bool nv = (i / 4 == j / 4);
        node.gpus[i].links.push_back({.peer = static_cast<int32_t>(j),
                                      .kind = nv ? core::LinkKind::kNvlink : core::LinkKind::kCrossSocket,
                                      .nvlinks = nv ? 1 + static_cast<int32_t>((i + j) % 2) : 0});
      }
    }
  }
  std::vector<size_t> free(gpus);
  for (size_t i = 0; i < gpus; ++i) {
    free[i] = i;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(ChooseWholeGpus(node, free, count));
  }
}
BENCHMARK(BM_ChooseWholeGpus)
    ->Args({8, 1})
    ->Args({8, 2})
    ->Args({8, 4})
    ->Args({16, 4})
    ->Args({16, 8})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpusched::policy

int main(int argc, char** argv) {
  gpusched::policy::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
