// In-process decisions per second of the standalone scheduler at 5000 nodes x 8 GPUs: each iteration is one pod
// arriving from the watch (decoded), popped from the queue, scheduled over every node (node predicates, CPU,
// memory, the policy's GPU filter and score), assumed, bound (a binder that only records) and confirmed. The pods
// are fractional (30 % of a GPU, 20000 MiB), fewer than the cluster holds.
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
#include "gpusched/kube/objects.h"
#include "gpusched/scheduler/scheduler.h"

namespace gpusched::scheduler {
namespace {

using nlohmann::json;

struct NullBinder : ports::Binder {
  common::Status Bind(const core::PodRequest&, const core::Allocation&) override { return common::Status::Ok(); }
};

json NodeJson(const std::string& name) {
  json gpus = json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({{"uuid", "GPU-" + name + "-" + std::to_string(i)},
                    {"index", i},
                    {"model", "A100-SXM4-80GB"},
                    {"memory_mib", 81920}});
  }
  return {{"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}}},
            {"annotations", {{"gpusched.io/gpus", gpus.dump()}}}}},
          {"spec", json::object()},
          {"status", {{"allocatable", {{"cpu", "128"}, {"memory", "1Ti"}, {"pods", "110"}}}}}};
}

json PodJson(int i) {
  return {{"metadata",
           {{"name", "p" + std::to_string(i)},
            {"namespace", "default"},
            {"uid", "u" + std::to_string(i)},
            {"creationTimestamp", "2026-11-25T10:00:00Z"}}},
          {"spec",
           {{"schedulerName", "gpusched"},
            {"containers", json::array({{{"name", "main"},
                                         {"resources",
                                          {{"requests", {{"cpu", "1"}, {"memory", "4Gi"}}},
                                           {"limits",
                                            {{"gpusched.io/gpu", "1"},
                                             {"gpusched.io/gpu-core", "30"},
                                             {"gpusched.io/gpu-memory", "20000"}}}}}}})}}},
          {"status", {{"phase", "Pending"}}}};
}

void BM_ScheduleFractionalPods(benchmark::State& state, const char* policy) {
  common::SetLogLevel(common::LogLevel::kWarn);  // every bind is logged at info: not part of what is measured
  constexpr int kNodes = 5000;
  if (state.max_iterations > 100000) {  // 5000 x 8 GPUs hold 120,000 such pods
    state.SkipWithError("more pods than the cluster holds; use a shorter --benchmark_min_time");
    return;
  }
  ClusterCache mirror(sched::CacheOptions{.charge_every_pod = true});
  for (int n = 0; n < kNodes; ++n) {
    mirror.ApplyNode(kube::DecodeNode(NodeJson("gpu-node-" + std::to_string(n))));
  }
  NullBinder binder;
  auto made = Scheduler::Create(mirror, binder, nullptr, SchedulerOptions{.policy = policy, .seed = 1});
  if (!made.ok()) {
    state.SkipWithError(made.status().message().c_str());
    return;
  }
  Scheduler& sched = **made;
  std::vector<json> pods;
  for (int64_t i = 0; i < state.max_iterations; ++i) {
    pods.push_back(PodJson(static_cast<int>(i)));
  }
  size_t next = 0;
  for (auto _ : state) {
    sched.OnPod(EventType::kAdded, pods[next++]);
    benchmark::DoNotOptimize(sched.ScheduleOne());
  }
  const SchedulerStats s = sched.stats();
  if (s.binds_ok != next) {
    state.SkipWithError("not every pod was bound");
  }
  state.SetItemsProcessed(static_cast<int64_t>(next));
  state.counters["nodes"] = kNodes;
}

// bench/scheduler-decisions.sh runs these with --benchmark_min_time=2 --benchmark_repetitions=5.
BENCHMARK_CAPTURE(BM_ScheduleFractionalPods, binpack, "binpack")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ScheduleFractionalPods, fgd, "fgd")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpusched::scheduler

BENCHMARK_MAIN();
