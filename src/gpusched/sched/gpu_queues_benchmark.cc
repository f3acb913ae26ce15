// What GPU queues cost the scheduler: one pass over 10,000 pending pods in 100 queues, as the scheduling thread
// makes it minus node placement: pop the next pod (the queue of the lowest rank, then priority and age within
// it), admit it against its queue's limit, charge it (or leave it pending when the queue is full). Fair shares are
// recomputed after every charge (each one changes the ranks), as in the scheduler.
//
//   build/release/src/gpusched/sched/gpu_queues_benchmark --benchmark_repetitions=5

#include <benchmark/benchmark.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/sched/gpu_queues.h"
#include "gpusched/sched/scheduling_queue.h"
#include "gpusched/testing/fake_clock.h"

namespace gpusched::sched {
namespace {

void BM_QueueCycle(benchmark::State& state) {
  const int queues = static_cast<int>(state.range(0));
  const int pods = static_cast<int>(state.range(1));
  common::Rng rng(42);
  std::vector<QueueSpec> specs;
  for (int q = 0; q < queues; ++q) {
    QueueSpec s;
    s.name = "q" + std::to_string(q);
    const int64_t g = static_cast<int64_t>(rng.Uniform(64));
    s.guaranteed = {g, g * 1000, GpuAmount::kUnlimited};
    s.limit = {g * 3 + 8, (g * 3 + 8) * 1000, GpuAmount::kUnlimited};
    s.weight = 1 + static_cast<double>(rng.Uniform(4));
    specs.push_back(s);
  }
  struct Pod {
    std::string uid, queue;
    GpuAmount demand;
    int32_t priority;
  };
  std::vector<Pod> all;
  for (int i = 0; i < pods; ++i) {
    const int64_t n = 1 + static_cast<int64_t>(rng.Uniform(8));
    all.push_back(Pod{"pod-" + std::to_string(i),
                      "q" + std::to_string(rng.Uniform(static_cast<uint64_t>(queues))),
                      {n, n * 1000, 0},
                      static_cast<int32_t>(rng.Uniform(3))});
  }
  size_t admitted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    GpuQueues book({40000, 40000000, 40000LL * 81920});
    (void)book.SetQueues(specs);
    testing::FakeClock clock;
    SchedulingQueue queue(clock);
    queue.SetQueueChooser([&book](std::span<const std::string* const> q) { return book.Lowest(q); });
    for (const Pod& p : all) {
      book.SetPending(p.uid, p.queue, p.demand);
      queue.AddOrUpdate(QueuedPod{.uid = p.uid, .key = "ns/" + p.uid, .priority = p.priority, .queue = p.queue});
    }
    std::unordered_map<std::string, const Pod*> by_uid;
    for (const Pod& p : all) by_uid[p.uid] = &p;
    admitted = 0;
    state.ResumeTiming();
    while (auto next = queue.Pop()) {
      const Pod& p = *by_uid.at(next->uid);
      if (book.Admit(p.queue, p.demand).admitted) {
        book.Charge(p.uid, p.queue, p.demand);
        queue.Done(p.uid);
        ++admitted;
      } else {
        queue.Requeue(p.uid, SchedulingQueue::Outcome::kUnschedulable, kBlockedByQuota);
      }
    }
  }
  state.counters["admitted"] = static_cast<double>(admitted);
  state.counters["pods"] = pods;
}
BENCHMARK(BM_QueueCycle)->Args({100, 10000})->Args({10, 10000})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::sched

BENCHMARK_MAIN();
