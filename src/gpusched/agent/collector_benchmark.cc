// The agent's per-tick and per-scrape CPU cost for 8 fake GPUs: one Sample (FakeInventory), one render of the
// /metrics page (8 GPUs, 2 of them shared by two pods each), and both together as one tick plus one scrape.
// Goal: < 1 % of a core at a 1 s interval, i.e. well under 10 ms per tick + scrape; /metrics p99 <= 5 ms.
#include <benchmark/benchmark.h>

#include "gpusched/adapters/influxdb/line_protocol.h"
#include "gpusched/adapters/nvml/fake_inventory.h"
#include "gpusched/agent/collector.h"

namespace gpusched::agent {
namespace {

std::unique_ptr<Collector> MakeCollector() {
  auto inv = adapters::nvml::FakeInventory::Create("8xA100-80GB", {.node_name = "bench-node", .seed = 1});
  return std::make_unique<Collector>(std::move(inv).value(), CollectorOptions{});
}

PodAttribution Pods() {
  PodAttribution pods;
  for (int i = 0; i < 8; ++i) {
    pods[common::GpuUuid("GPU-fake-bench-node-" + std::to_string(i))] = {
        {"team-a", "train-" + std::to_string(i), "main"}};
  }
  pods[common::GpuUuid("GPU-fake-bench-node-6")].push_back({"team-b", "infer-1", "server"});
  pods[common::GpuUuid("GPU-fake-bench-node-7")].push_back({"team-b", "infer-2", "server"});
  return pods;
}

AllocationMap Allocations() {
  AllocationMap out;
  for (int i = 0; i < 8; ++i) {
    out[common::GpuUuid("GPU-fake-bench-node-" + std::to_string(i))] = {common::MilliGpu(500), common::MiB(40000)};
  }
  return out;
}

void BM_Sample(benchmark::State& state) {
  auto c = MakeCollector();
  for (auto _ : state) {
    benchmark::DoNotOptimize(c->SampleOnce());
  }
}
BENCHMARK(BM_Sample);

void BM_RenderMetrics(benchmark::State& state) {
  auto c = MakeCollector();
  (void)c->SampleOnce();
  const PodAttribution pods = Pods();
  const AllocationMap alloc = Allocations();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string page = c->RenderMetrics(pods, alloc, "bench-node");
    bytes = page.size();
    benchmark::DoNotOptimize(page.data());
  }
  state.counters["page_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetrics);

void BM_SampleAndRender(benchmark::State& state) {
  auto c = MakeCollector();
  const PodAttribution pods = Pods();
  const AllocationMap alloc = Allocations();
  for (auto _ : state) {
    benchmark::DoNotOptimize(c->SampleOnce());
    const std::string page = c->RenderMetrics(pods, alloc, "bench-node");
    benchmark::DoNotOptimize(page.data());
  }
}
BENCHMARK(BM_SampleAndRender);

void BM_InfluxLines(benchmark::State& state) {
  auto c = MakeCollector();
  (void)c->SampleOnce();
  const auto snap = c->Latest();
  for (auto _ : state) {
    const std::string lines =
        adapters::influxdb::GpuSampleLines(snap->samples, {.hostname = "bench-node"}, 1700000000000);
    benchmark::DoNotOptimize(lines.data());
  }
}
BENCHMARK(BM_InfluxLines);

}  // namespace
}  // namespace gpusched::agent

BENCHMARK_MAIN();
