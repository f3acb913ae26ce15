// Whole simulator runs on the built-in cluster (the openb-scale figures are bench/sim-speed.sh's).

#include <benchmark/benchmark.h>

#include "gpusched/policy/registry.h"
#include "gpusched/sim/builtin_workload.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {
namespace {

void BM_RunBuiltin(benchmark::State& state, const std::string& policy) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  int64_t pods = 0;
  for (auto _ : state) {
    auto run = RunOne(cluster, workload, RunSpec{.policy = policy, .seed = 42});
    benchmark::DoNotOptimize(run);
    pods += run.ok() ? run->pods_submitted : 0;
  }
  state.SetItemsProcessed(pods);
}

const bool kRegistered = [] {
  for (const auto& name : policy::PolicyNames()) {
    benchmark::RegisterBenchmark(("BM_RunBuiltin/" + name).c_str(),
                                 [name](benchmark::State& s) { BM_RunBuiltin(s, name); });
  }
  return true;
}();

}  // namespace
}  // namespace gpusched::sim

BENCHMARK_MAIN();
