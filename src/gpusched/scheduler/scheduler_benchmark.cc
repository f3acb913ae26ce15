// In-process decisions per second of the standalone scheduler at 5000 nodes x 8 GPUs (and one gang decision, below):
// each iteration is one pod arriving from the watch (decoded), popped from the queue, scheduled over every node (node
// predicates, CPU, memory, the policy's GPU filter and score), assumed, bound (a binder that only records) and
// confirmed. The pods are fractional (30 % of a GPU, 20000 MiB), fewer than the cluster holds.
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/scheduler/scheduler.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::scheduler {
namespace {

using nlohmann::json;

struct NullBinder : ports::Binder {
  common::Status Bind(const core::PodRequest&, const core::Allocation&) override { return common::Status::Ok(); }
};

json NodeJson(const std::string& name) {
  return testing::GpuNodeJson(name)
      .Gpus(8)
      .Label("kubernetes.io/hostname", name)
      .EmptySpec()
      .Cpu("128")
      .Memory("1Ti")
      .Pods("110");
}

// `count` nodes of 8 GPUs, gpu-node-0 onwards.
void AddNodes(ClusterCache& mirror, int count) {
  for (int n = 0; n < count; ++n) {
    mirror.ApplyNode(kube::DecodeNode(NodeJson("gpu-node-" + std::to_string(n))));
  }
}

json PodJson(int i) {
  return testing::PodJson("p" + std::to_string(i))
      .Uid("u" + std::to_string(i))
      .Created("2026-11-25T10:00:00Z")
      .SchedulerName("gpusched")
      .Requests({{"cpu", "1"}, {"memory", "4Gi"}})
      .Limits(testing::ShareLimits(30, 20000))
      .Phase("Pending");
}

void BM_ScheduleFractionalPods(benchmark::State& state, const char* policy) {
  common::SetLogLevel(common::LogLevel::kWarn);  // every bind is logged at info: not part of what is measured
  constexpr int kNodes = 5000;
  if (state.max_iterations > 100000) {  // 5000 x 8 GPUs hold 120,000 such pods
    state.SkipWithError("more pods than the cluster holds; use a shorter --benchmark_min_time");
    return;
  }
  ClusterCache mirror(sched::CacheOptions{.charge_every_pod = true});
  AddNodes(mirror, kNodes);
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

json GangPodJson(int gang, int member, int members, int gpus) {
  json p = PodJson(gang * 1000 + member);
  p["metadata"]["name"] = "g" + std::to_string(gang) + "-" + std::to_string(member);
  p["metadata"]["annotations"] = {{"gpusched.io/pod-group", "g" + std::to_string(gang)},
                                  {"gpusched.io/min-available", std::to_string(members)}};
  p["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
  return p;
}

// One gang decision at 5000 nodes x 8 GPUs: 64 members of 8 whole GPUs each (min-available 64) placed together
// against one state (reserved one after the other, then bound), or, with 9 GPUs a member, refused (nothing fits:
// the attempt stops at the first member that fits nowhere). The members' arrival (decoding) is not timed.
void BM_Gang(benchmark::State& state, int gpus) {
  common::SetLogLevel(common::LogLevel::kWarn);
  constexpr int kNodes = 5000;
  constexpr int kMembers = 64;
  ClusterCache mirror(sched::CacheOptions{.charge_every_pod = true});
  AddNodes(mirror, kNodes);
  NullBinder binder;
  auto made = Scheduler::Create(mirror, binder, nullptr, SchedulerOptions{.policy = "binpack", .seed = 1});
  if (!made.ok()) {
    state.SkipWithError(made.status().message().c_str());
    return;
  }
  Scheduler& sched = **made;
  int gang = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if (gpus <= 8 && (gang + 1) * kMembers > kNodes) {
      state.SkipWithError("the cluster is full; use fewer iterations");
      break;
    }
    for (int m = 0; m < kMembers; ++m) {
      sched.OnPod(EventType::kAdded, GangPodJson(gang, m, kMembers, gpus));
    }
    ++gang;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sched.ScheduleOne());
    state.PauseTiming();
    while (sched.ScheduleOne()) {  // parked or bound members: drain what is left of this gang, untimed
    }
    state.ResumeTiming();
  }
  const SchedulerStats s = sched.stats();
  if (gpus <= 8 && s.binds_ok != static_cast<uint64_t>(gang) * kMembers) {
    state.SkipWithError("a gang was not bound whole");
  }
  if (gpus > 8 && s.binds_ok != 0) {
    state.SkipWithError("an impossible gang was bound");
  }
  state.counters["members"] = kMembers;
}

struct RecordingBinder : ports::Binder {
  common::Status Bind(const core::PodRequest&, const core::Allocation& allocation) override {
    bound.push_back(allocation);
    return common::Status::Ok();
  }
  std::vector<core::Allocation> bound;
};

struct CountingPreemptor : ports::Preemptor {
  common::Status Evict(const std::string&, const std::string&, const common::PodUid&) override {
    ++evicted;
    return common::Status::Ok();
  }
  common::Status Nominate(const std::string&, const std::string&, const std::string&) override {
    return common::Status::Ok();
  }
  size_t evicted = 0;
};

// One gang preemption decision at 5000 nodes x 8 GPUs, every GPU held by pods of priority 0 (one 8-GPU pod a
// node, bound and shown by the watch): a gang of 64 members x 8 GPUs at priority 10 finds no room, plans victims
// for all 64 members at once (one node each), holds 64 rooms and evicts 64 pods. Each iteration is a new gang; the
// rooms of the earlier ones stay held, so each finds other nodes.
void BM_GangPreemption(benchmark::State& state) {
  common::SetLogLevel(common::LogLevel::kWarn);
  constexpr int kNodes = 5000;
  constexpr int kMembers = 64;
  ClusterCache mirror(sched::CacheOptions{.charge_every_pod = true});
  AddNodes(mirror, kNodes);
  RecordingBinder binder;
  CountingPreemptor preemptor;
  auto made = Scheduler::Create(mirror, binder, nullptr,
                                SchedulerOptions{.policy = "binpack", .seed = 1, .preemptor = &preemptor});
  if (!made.ok()) {
    state.SkipWithError(made.status().message().c_str());
    return;
  }
  Scheduler& sched = **made;
  std::vector<json> fill;
  for (int i = 0; i < kNodes; ++i) {
    json p = PodJson(100000 + i);
    p["spec"]["containers"][0]["resources"]["limits"] = {{"nvidia.com/gpu", "8"}};
    sched.OnPod(EventType::kAdded, p);
    fill.push_back(std::move(p));
  }
  while (sched.ScheduleOne()) {
  }
  if (binder.bound.size() != static_cast<size_t>(kNodes)) {
    state.SkipWithError("the cluster was not filled");
    return;
  }
  for (size_t i = 0; i < binder.bound.size(); ++i) {
    json p = fill[i];
    p["spec"]["nodeName"] = binder.bound[i].node.str();
    p["metadata"]["annotations"]["gpusched.io/allocation"] = kube::EncodeAllocation(binder.bound[i]);
    sched.OnPod(EventType::kModified, p);
  }
  int gang = 0;
  for (auto _ : state) {
    state.PauseTiming();
    if ((gang + 1) * kMembers > kNodes) {
      state.SkipWithError("every node is taken; use fewer iterations");
      break;
    }
    for (int m = 0; m < kMembers; ++m) {
      json p = GangPodJson(gang, m, kMembers, 8);
      p["spec"]["priority"] = 10;
      sched.OnPod(EventType::kAdded, p);
    }
    ++gang;
    state.ResumeTiming();
    benchmark::DoNotOptimize(sched.ScheduleOne());
    state.PauseTiming();
    while (sched.ScheduleOne()) {  // the other members, parked with the group: untimed
    }
    state.ResumeTiming();
  }
  if (preemptor.evicted != static_cast<size_t>(gang) * kMembers || binder.bound.size() != static_cast<size_t>(kNodes)) {
    state.SkipWithError("a gang did not preempt exactly one pod per member, or bound early");
  }
  state.counters["members"] = kMembers;
}

// Figures: scheduler_benchmark --benchmark_min_time=2 --benchmark_repetitions=5 (release build), medians.
BENCHMARK_CAPTURE(BM_ScheduleFractionalPods, binpack, "binpack")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_ScheduleFractionalPods, fgd, "fgd")->Unit(benchmark::kMicrosecond);
// 5000 nodes hold 78 gangs of 64 x 8 GPUs: a fixed iteration count keeps every run within the cluster.
BENCHMARK_CAPTURE(BM_Gang, placed_64x8gpu, 8)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK_CAPTURE(BM_Gang, refused_64x9gpu, 9)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_GangPreemption)->Unit(benchmark::kMillisecond)->Iterations(10);

}  // namespace
}  // namespace gpusched::scheduler

BENCHMARK_MAIN();
