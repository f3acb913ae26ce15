// In-process costs of the extender's verbs (no HTTP): decoding request bodies of kube-scheduler's shape and the
// whole Filter / Prioritize over a 5000-node cluster. bench/extender-latency.sh measures the same over loopback.
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "gpusched/extender/service.h"
#include "gpusched/extender/wire.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/testing/json_builders.h"

#include <chrono>
#include <thread>

namespace gpusched::extender {
namespace {

using nlohmann::json;

struct NullBinder : ports::Binder {
  common::Status Bind(const core::PodRequest&, const core::Allocation&) override { return common::Status::Ok(); }
};

// Keys in Go's order (metadata first, name first), as kube-scheduler sends them.
nlohmann::ordered_json NodeJson(const std::string& name) {
  using json = nlohmann::ordered_json;
  json gpus = json::array();
  for (int i = 0; i < 8; ++i) {
    gpus.push_back({{"uuid", "GPU-" + name + "-" + std::to_string(i)},
                    {"index", i},
                    {"model", "A100-SXM4-80GB"},
                    {"memory_mib", 81920}});
  }
  json fields = json::array();
  for (int i = 0; i < 8; ++i) {  // managedFields: most of a real Node's 3.3 KB
    fields.push_back({{"manager", "kubectl-client-side-apply"},
                      {"operation", "Update"},
                      {"apiVersion", "v1"},
                      {"time", "2026-07-01T00:00:00Z"},
                      {"fieldsType", "FieldsV1"},
                      {"fieldsV1", {{"f:metadata", {{"f:labels", {{"f:kubernetes.io/hostname", json::object()}}}}}}}});
  }
  return {{"metadata",
           {{"name", name},
            {"labels", {{"kubernetes.io/hostname", name}, {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}},
            {"annotations", {{"gpusched.io/gpus", gpus.dump()}}},
            {"managedFields", fields}}},
          {"spec", json::object()},
          {"status", {{"allocatable", {{"cpu", "32"}, {"memory", "128Gi"}, {"nvidia.com/gpu", "8"}}}}}};
}

json PodJson(int i) {
  return testing::PodJson("p" + std::to_string(i))
      .Uid("u" + std::to_string(i))
      .Limits({{"gpusched.io/gpu", "1"}, {"gpusched.io/gpu-core", "30"}, {"gpusched.io/gpu-memory", "20k"}});
}

struct Fixture {
  ClusterMirror mirror;
  NullBinder binder;
  std::unique_ptr<ExtenderService> service;
  std::vector<std::string> names;
  std::vector<std::string> raw;
  Fixture() {
    for (int i = 0; i < 5000; ++i) {
      names.push_back("gpu-node-" + std::to_string(i));
      auto n = NodeJson(names.back());
      raw.push_back(n.dump());
      mirror.OnNode(EventType::kAdded, json::parse(raw.back()));
    }
    service = std::move(ExtenderService::Create(mirror, binder, nullptr, ServiceOptions{.seed = 1})).value();
  }
  std::string Body(int pod, int nodes, bool full) const {
    std::string b = "{\"Pod\":" + PodJson(pod).dump();
    if (full) {
      b += ",\"Nodes\":{\"metadata\":{},\"items\":[";
      for (int i = 0; i < nodes; ++i) b += (i ? "," : "") + raw[static_cast<size_t>(i * 7 % 5000)];
      return b + "]},\"NodeNames\":null}";
    }
    b += ",\"Nodes\":null,\"NodeNames\":[";
    for (int i = 0; i < nodes; ++i) b += (i ? ",\"" : "\"") + names[static_cast<size_t>(i * 7 % 5000)] + "\"";
    return b + "]}";
  }
};

Fixture& F() {
  static Fixture f;
  return f;
}

void BM_DecodeExtenderArgs(benchmark::State& state) {
  const std::string body = F().Body(0, static_cast<int>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) {
    auto args = DecodeExtenderArgs(body);
    benchmark::DoNotOptimize(args);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}
BENCHMARK(BM_DecodeExtenderArgs)->Args({500, 0})->Args({5000, 0})->Args({500, 1})->Unit(benchmark::kMicrosecond);

// Filter with a new pod each time (decoded every time; the score cache is warm for its shape).
void BM_Filter(benchmark::State& state) {
  std::vector<std::string> bodies;
  for (int i = 0; i < 64; ++i) {
    bodies.push_back(
        F().Body(i + 1000 * static_cast<int>(state.range(0)), static_cast<int>(state.range(0)), state.range(1) != 0));
  }
  size_t i = 0;
  for (auto _ : state) {
    Reply r = F().service->Filter(bodies[i++ % bodies.size()]);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Filter)->Args({500, 0})->Args({5000, 0})->Args({500, 1})->Unit(benchmark::kMicrosecond);

void BM_Prioritize(benchmark::State& state) {
  const std::string body = F().Body(1, static_cast<int>(state.range(0)), false);
  for (auto _ : state) {
    Reply r = F().service->Prioritize(body);
    benchmark::DoNotOptimize(r);
  }
}
BENCHMARK(BM_Prioritize)->Arg(500)->Unit(benchmark::kMicrosecond);

// A metrics source for all 40,000 GPUs that answers at once, slowly (each fetch takes 2 s) or not at all.
class BenchSource : public ports::MetricsSource {
 public:
  explicit BenchSource(int mode) : mode_(mode) {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    for (int n = 0; n < 5000; ++n) {
      for (int g = 0; g < 8; ++g) {
        core::GpuMetrics& m = map_[common::GpuUuid("GPU-gpu-node-" + std::to_string(n) + "-" + std::to_string(g))];
        m.Set(core::GpuMetric::kGpuUtil, {.value = static_cast<double>((n * 8 + g) % 100), .timestamp_ms = now});
        m.Set(core::GpuMetric::kMemoryUsedMib, {.value = 1000.0 * g, .timestamp_ms = now});
      }
    }
  }
  common::Result<core::GpuMetricsMap> Fetch() override {
    if (mode_ == 1 && fetched_++ > 0) {
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    if (mode_ == 2 && fetched_++ > 0) {
      return common::Unavailable("connection refused");
    }
    return map_;
  }
  std::string Describe() const override { return "bench"; }

 private:
  int mode_;
  int fetched_ = 0;
  core::GpuMetricsMap map_;
};

// Filter + Prioritize with load-aware while the background refresher runs against a healthy (0), slow (1) or down
// (2) source: a scheduling cycle never waits on the network, so the three must cost the same.
void BM_LoadAwareCycle(benchmark::State& state) {
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  sources.push_back(std::make_unique<BenchSource>(static_cast<int>(state.range(0))));
  sched::MetricsCache cache(std::move(sources), sched::MetricsCacheOptions{.interval = std::chrono::milliseconds(50)});
  cache.RefreshOnce();
  if (!cache.Start().ok()) {
    state.SkipWithError("cache did not start");
    return;
  }
  auto service =
      std::move(ExtenderService::Create(F().mirror, F().binder, nullptr,
                                        ServiceOptions{.policy = "load-aware", .seed = 1, .metrics = &cache}))
          .value();
  std::vector<std::string> bodies;
  for (int i = 0; i < 64; ++i) {
    bodies.push_back(F().Body(i + 7000, 500, false));
  }
  size_t i = 0;
  for (auto _ : state) {
    const std::string& b = bodies[i++ % bodies.size()];
    Reply f = service->Filter(b);
    Reply p = service->Prioritize(b);
    benchmark::DoNotOptimize(f);
    benchmark::DoNotOptimize(p);
  }
  cache.Stop();
}
BENCHMARK(BM_LoadAwareCycle)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace gpusched::extender

BENCHMARK_MAIN();
