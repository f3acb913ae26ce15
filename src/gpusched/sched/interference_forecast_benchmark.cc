// What interference-aware costs the extender per request: building the forecast for N candidate nodes (8 P100s
// each; GPUs 0–3 hold one pod, GPU 4 two, the rest are empty; 26 application classes), and the forecast plus the
// policy's Filter and Score over them. Items processed = nodes, so the rate is nodes per second.
//
// The model is a 26 × 26 table looked up by name through a hash map, the same work as the served model
// (interference/slowdown_models.h TableSlowdown), which sched may not include.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/testing/builders.h"

namespace gpusched::sched {
namespace {

constexpr int kApps = 26;
constexpr int kGpus = 8;

class TableModel final : public ports::SlowdownModel {
 public:
  TableModel() {
    for (int i = 0; i < kApps; ++i) {
      index_.emplace("app-" + std::to_string(i), i);
    }
    for (int i = 0; i < kApps; ++i) {
      for (int j = 0; j < kApps; ++j) {
        s_[i][j] = 1.1 + 0.03 * ((i * 7 + j * 3) % 29);
      }
    }
  }
  [[nodiscard]] ports::PairSlowdown Pair(std::string_view incoming, std::string_view resident,
                                         std::string_view) const override {
    auto a = index_.find(std::string(incoming));
    auto b = index_.find(std::string(resident));
    if (a == index_.end() || b == index_.end()) {
      return {.incoming = 1.5, .resident = 1.5};
    }
    return {.incoming = s_[a->second][b->second], .resident = s_[b->second][a->second]};
  }
  [[nodiscard]] bool Knows(std::string_view app, std::string_view) const override {
    return index_.contains(std::string(app));
  }
  [[nodiscard]] std::string Describe() const override { return "benchmark table"; }

 private:
  std::unordered_map<std::string, int> index_;
  double s_[kApps][kApps] = {};
};

struct Cluster {
  core::ClusterState state;
  std::unordered_map<common::PodUid, std::string> app;
  std::vector<size_t> slots;
};

const Cluster& MakeCluster(int nodes) {
  static std::unordered_map<int, std::unique_ptr<Cluster>> cache;
  auto& c = cache[nodes];
  if (c) {
    return *c;
  }
  c = std::make_unique<Cluster>();
  int pod = 0;
  for (int n = 0; n < nodes; ++n) {
    const std::string name = "node-" + std::to_string(n);
    (void)c->state.AddNode(testing::Node(name).Gpus(kGpus, "Tesla-P100-PCIE-16GB").Build());
    c->slots.push_back(*c->state.SlotOf(common::NodeName(name)));
    auto place = [&](int gpu, int64_t milli) {
      const std::string uid = "pod-" + std::to_string(pod);
      core::Allocation a{.pod = common::PodUid(uid), .node = common::NodeName(name)};
      a.containers.push_back(
          {.container = "main", .gpus = {core::GpuShare{.index = gpu, .milli = common::MilliGpu{milli}}}});
      (void)c->state.Assume(std::move(a));
      c->app.emplace(common::PodUid(uid), "app-" + std::to_string(pod % kApps));
      ++pod;
    };
    for (int g = 0; g < 4; ++g) {
      place(g, 500);
    }
    place(4, 300);
    place(4, 300);
  }
  return *c;
}

void BM_Forecast(benchmark::State& st) {
  const Cluster& c = MakeCluster(static_cast<int>(st.range(0)));
  const TableModel model;
  const AppOfPod app_of = [&c](const common::PodUid& p) { return c.app.at(p); };
  for (auto _ : st) {
    auto f = ForecastInterference("app-3", c.state, c.slots, app_of, model);
    benchmark::DoNotOptimize(f);
  }
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_Forecast)->Arg(500)->Arg(5000)->Unit(benchmark::kMicrosecond);

void BM_ForecastFilterScore(benchmark::State& st) {
  const Cluster& c = MakeCluster(static_cast<int>(st.range(0)));
  const TableModel model;
  const AppOfPod app_of = [&c](const common::PodUid& p) { return c.app.at(p); };
  auto policy = policy::MakePolicy("interference-aware", {});
  const core::PodRequest pod = testing::Pod("p").Share(500).Build();
  uint64_t generation = 0;
  for (auto _ : st) {
    const policy::InterferenceForecast f = ForecastInterference("app-3", c.state, c.slots, app_of, model);
    const policy::Snapshot snapshot{.interference = &f, .interference_generation = ++generation};
    int64_t sum = 0;
    for (size_t slot : c.slots) {
      const core::NodeView& v = c.state.View(slot);
      if ((*policy)->FilterWithSnapshot(pod, v, snapshot).fits()) {
        sum += (*policy)->Score(pod, v, snapshot);
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_ForecastFilterScore)->Arg(500)->Arg(5000)->Unit(benchmark::kMicrosecond);

// The extender's path: ForecastCache over unchanged nodes (every request after the first for this class).
void BM_CachedForecast(benchmark::State& st) {
  const Cluster& c = MakeCluster(static_cast<int>(st.range(0)));
  const TableModel model;
  const AppOfPod app_of = [&c](const common::PodUid& p) { return c.app.at(p); };
  ForecastCache cache;
  for (auto _ : st) {
    auto f = cache.Forecast("app-3", c.state, c.slots, app_of, model);
    benchmark::DoNotOptimize(f);
  }
  st.SetItemsProcessed(st.iterations() * st.range(0));
}
BENCHMARK(BM_CachedForecast)->Arg(500)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpusched::sched

BENCHMARK_MAIN();
