// The decode cost of a scheduler refresh from Prometheus for 5000 nodes x 8 GPUs (goal: one query per metric, parse
// <= 50 ms). Synthetic /api/v1/query answers, 40,000 series each, in two shapes:
//   * full:     the raw selector (DCGM_FI_DEV_GPU_UTIL) with the agent's label set plus Prometheus's job/instance,
//               about 350 bytes per series;
//   * by_uuid:  the default query, max by (UUID) (...), one label per series, about 90 bytes.
// BM_Metric decodes one answer and maps it to GPUs (InstantDecoder::Add, what Fetch does per metric); BM_Refresh does
// it for all 7 metrics into one GpuMetricsMap (a whole Fetch minus HTTP). Both include building the map and, at the
// end of each iteration, freeing it (40,000 GPUs), as a refresh that replaces the previous snapshot does.
// BM_ParseOnly is the JSON decode alone (QueryResponseParser::Visit with an empty callback). nlohmann's DOM
// parse of the full answer is the baseline that motivated simdjson.
// BM_FetchLive (only with GPUSCHED_PROMETHEUS_URL set; bench/metrics-refresh.sh starts a backfilled Prometheus) is a
// whole PrometheusSource::Fetch against a real server, with its HTTP and decode times as counters.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpusched/adapters/prometheus/prometheus_source.h"
#include "gpusched/adapters/prometheus/query_response.h"

namespace gpusched::adapters::prometheus {
namespace {

constexpr int kNodes = 5000;
constexpr int kGpusPerNode = 8;

std::string Uuid(int node, int gpu) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-%04x-%04x-%04x-%012x", node, gpu, 0x4a2b, 0x9c1d, node * 8 + gpu);
  return buf;
}

std::string Response(std::string_view metric, bool full, int salt) {
  std::string out = R"({"status":"success","data":{"resultType":"vector","result":[)";
  out.reserve(kNodes * kGpusPerNode * (full ? 380 : 100));
  char buf[512];
  for (int n = 0; n < kNodes; ++n) {
    for (int g = 0; g < kGpusPerNode; ++g) {
      if (n + g > 0) {
        out += ',';
      }
      const double value = (n * 7 + g * 13 + salt) % 101;
      if (full) {
        std::snprintf(buf, sizeof(buf),
                      R"({"metric":{"Hostname":"gpu-node-%05d","UUID":"%s","__name__":"%.*s","device":"nvidia%d",)"
                      R"("gpu":"%d","hostname":"gpu-node-%05d","instance":"10.%d.%d.%d:9400","job":"gpusched-agent",)"
                      R"("modelName":"NVIDIA A100-SXM4-80GB","pci_bus_id":"00000000:%02X:00.0"},)"
                      R"("value":[1700000000.781,"%g"]})",
                      n, Uuid(n, g).c_str(), static_cast<int>(metric.size()), metric.data(), g, g, n, n / 65536,
                      (n / 256) % 256, n % 256, 0x07 + g * 0x10, value);
      } else {
        std::snprintf(buf, sizeof(buf), R"({"metric":{"UUID":"%s"},"value":[1700000000.781,"%g"]})", Uuid(n, g).c_str(),
                      value);
      }
      out += buf;
    }
  }
  out += "]}}";
  return out;
}

const std::vector<std::string>& Bodies(bool full) {
  static const std::vector<std::string> kFull = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
      v.push_back(Response(DcgmMetricName(static_cast<core::GpuMetric>(i)), true, static_cast<int>(i)));
    }
    return v;
  }();
  static const std::vector<std::string> kByUuid = [] {
    std::vector<std::string> v;
    for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
      v.push_back(Response(DcgmMetricName(static_cast<core::GpuMetric>(i)), false, static_cast<int>(i)));
    }
    return v;
  }();
  return full ? kFull : kByUuid;
}

void Decode(benchmark::State& state, size_t metrics) {
  const bool full = state.range(0) == 1;
  const auto& bodies = Bodies(full);
  QueryResponseParser parser;
  // Fetch's response strings come from libcurl; copies outside the timed region stand in for them.
  std::vector<std::string> copies(metrics);
  int64_t bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (size_t i = 0; i < metrics; ++i) {
      copies[i] = bodies[i];
    }
    state.ResumeTiming();
    InstantDecoder decoder(parser, "UUID", kNodes * kGpusPerNode);
    for (size_t i = 0; i < metrics; ++i) {
      auto r = decoder.Add(copies[i], static_cast<core::GpuMetric>(i));
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
      bytes += static_cast<int64_t>(bodies[i].size());
    }
    core::GpuMetricsMap out = decoder.Take();
    if (out.size() != static_cast<size_t>(kNodes * kGpusPerNode)) {
      state.SkipWithError("wrong GPU count");
      return;
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(bytes);
  state.counters["series_per_metric"] = kNodes * kGpusPerNode;
  state.counters["MB_per_metric"] = static_cast<double>(bodies[0].size()) / 1e6;
}

void BM_Metric(benchmark::State& state) { Decode(state, 1); }
void BM_Refresh(benchmark::State& state) { Decode(state, core::kGpuMetricCount); }

void BM_ParseOnly(benchmark::State& state) {
  const bool full = state.range(0) == 1;
  std::string body = Bodies(full)[0];
  QueryResponseParser parser;
  for (auto _ : state) {
    auto r = parser.Visit(body, "UUID", [](std::string_view, std::span<const core::MetricSample>) {});
    benchmark::DoNotOptimize(r);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

void BM_NlohmannDomBaseline(benchmark::State& state) {
  const std::string& body = Bodies(true)[0];
  for (auto _ : state) {
    auto j = nlohmann::json::parse(body);
    benchmark::DoNotOptimize(j);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(body.size()));
}

void BM_FetchLive(benchmark::State& state, std::string url) {
  auto source = PrometheusSource::Create({.url = std::move(url), .timeout = std::chrono::seconds(30)});
  if (!source.ok()) {
    state.SkipWithError(source.status().ToString().c_str());
    return;
  }
  double http_ms = 0;
  double parse_ms = 0;
  double gpus = 0;
  for (auto _ : state) {
    auto r = (*source)->Fetch();
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      return;
    }
    const FetchStats stats = (*source)->last_fetch_stats();
    http_ms += static_cast<double>(stats.http_us) / 1000;
    parse_ms += static_cast<double>(stats.parse_us) / 1000;
    gpus = static_cast<double>(r->size());
    state.counters["MB"] = static_cast<double>(stats.response_bytes) / 1e6;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["http_ms"] = http_ms / n;
  state.counters["parse_ms"] = parse_ms / n;
  state.counters["gpus"] = gpus;
}

[[maybe_unused]] const bool kLiveRegistered = [] {
  const char* url = std::getenv("GPUSCHED_PROMETHEUS_URL");  // NOLINT(concurrency-mt-unsafe): before main
  if (url != nullptr && *url != '\0') {
    benchmark::RegisterBenchmark("BM_FetchLive", BM_FetchLive, std::string(url))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

// Arg 1: full label set; 0: max by (UUID).
BENCHMARK(BM_Metric)->ArgName("full")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Refresh)->ArgName("full")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ParseOnly)->ArgName("full")->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_NlohmannDomBaseline)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::adapters::prometheus

BENCHMARK_MAIN();
