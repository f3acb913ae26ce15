// What allocating a pod's ResourceClaim costs the scheduler at 5000 nodes x 8 GPUs, one node after another as a
// scheduling cycle tries them: the claim's class and request selectors (CEL, compiled once and cached) on every
// device of the node, then the device search with the consumed capacity of the GPUs' other sharers. "Decisions"
// are whole-cluster allocations (one claim tried on all 5000 nodes); items are node trials.
//   shared:  one shared GPU (20 GiB and 25 % compute) of an A100 model, nodes half full of other sharers
//   pair:    two whole GPUs in one NVLink group (matchAttribute), a quarter of the GPUs taken
//
//   build/release/src/gpusched/sched/dra_allocator_benchmark --benchmark_repetitions=5

#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gpusched/common/rng.h"
#include "gpusched/sched/dra_allocator.h"
#include "gpusched/sched/dra_selectors.h"

namespace gpusched::sched {
namespace {

using core::dra::AttributeValue;
using core::dra::CapacityRequestPolicy;
using core::dra::Device;
using core::dra::DeviceCapacity;
using core::dra::DevicePool;
using core::dra::Quantity;

constexpr const char* kDriver = "gpu.gpusched.io";
constexpr int64_t kMi = 1024LL * 1024;

struct Cluster {
  std::vector<DevicePool> pools;
  std::vector<std::vector<DraCandidate>> candidates;  // per node
};

Cluster MakeCluster(int nodes, bool shareable, common::Rng& rng) {
  Cluster c;
  c.pools.reserve(static_cast<size_t>(nodes));
  const std::string d = kDriver;
  for (int n = 0; n < nodes; ++n) {
    DevicePool pool{
        .driver = d, .pool = "node-" + std::to_string(n), .node = common::NodeName("node-" + std::to_string(n))};
    const bool a100 = rng.Uniform(2) == 0;
    for (int g = 0; g < 8; ++g) {
      Device dev;
      dev.name = "gpu-" + std::to_string(g);
      dev.attributes[d + "/uuid"] = AttributeValue::String("GPU-" + std::to_string(n) + "-" + std::to_string(g));
      dev.attributes[d + "/index"] = AttributeValue::Int(g);
      dev.attributes[d + "/model"] = AttributeValue::String(a100 ? "A100-SXM4-80GB" : "V100-SXM2-32GB");
      dev.attributes[d + "/linkGroup"] = AttributeValue::String(std::to_string(g / 4));
      dev.attributes[d + "/driverVersion"] = AttributeValue::Version("535.104.5");
      const int64_t mem = (a100 ? 81920 : 32768) * kMi;
      dev.capacity[d + "/memory"] =
          DeviceCapacity{.value = Quantity::FromUnits(mem),
                         .request_policy = CapacityRequestPolicy{.default_value = Quantity::FromUnits(mem),
                                                                 .min = Quantity::FromUnits(256 * kMi),
                                                                 .step = Quantity::FromUnits(256 * kMi)}};
      dev.capacity[d + "/compute"] =
          DeviceCapacity{.value = Quantity::FromUnits(100),
                         .request_policy = CapacityRequestPolicy{.default_value = Quantity::FromUnits(100),
                                                                 .min = Quantity::FromUnits(1),
                                                                 .max = Quantity::FromUnits(100),
                                                                 .step = Quantity::FromUnits(1)}};
      dev.allow_multiple_allocations = shareable;
      pool.devices.push_back(std::move(dev));
    }
    c.pools.push_back(std::move(pool));
  }
  for (const DevicePool& pool : c.pools) {
    std::vector<DraCandidate> cands;
    for (const Device& dev : pool.devices) {
      DraCandidate cand{.pool = &pool, .device = &dev};
      if (shareable) {
        const int64_t used = static_cast<int64_t>(rng.Uniform(2));  // half of the GPUs have 40 GiB, 50 % used
        cand.available[d + "/memory"] =
            Quantity{dev.capacity.at(d + "/memory").value.milli - used * 40 * 1024 * kMi * 1000};
        cand.available[d + "/compute"] = Quantity::FromUnits(100 - used * 50);
        if (used != 0) {
          cand.share_ids = {DraShareId("other", "r", dev.name, 0)};
        }
      } else {
        cand.taken = rng.Uniform(4) == 0;
      }
      cands.push_back(std::move(cand));
    }
    c.candidates.push_back(std::move(cands));
  }
  return c;
}

void Run(benchmark::State& state, bool shared) {
  const int nodes = static_cast<int>(state.range(0));
  common::Rng rng(42);
  Cluster cluster = MakeCluster(nodes, shared, rng);
  const std::string d = kDriver;
  std::map<std::string, core::dra::DeviceClass> classes = {
      {"gpu.gpusched.io", {.name = "gpu.gpusched.io", .selectors = {"device.driver == \"gpu.gpusched.io\""}}}};
  core::dra::DeviceSubRequest sub{.name = "gpu", .device_class = "gpu.gpusched.io"};
  core::dra::ResourceClaim claim{.namespace_ = "ml", .name = "c", .uid = "uid-c"};
  if (shared) {
    sub.selectors = {"device.attributes[\"gpu.gpusched.io\"].model.startsWith(\"A100\")"};
    sub.capacity = {{"memory", Quantity::FromUnits(20 * 1024 * kMi)}, {"compute", Quantity::FromUnits(25)}};
  } else {
    sub.count = 2;
    claim.constraints = {{.match_attribute = d + "/linkGroup"}};
  }
  claim.requests = {{.name = "gpu", .exactly = sub}};
  const core::dra::ResourceClaim* claims[] = {&claim};
  DraSelectorCache selectors;
  const DraSelectorMatch match = selectors.Matcher();
  int64_t fits = 0;
  const DraAllocatorOptions filter{.allocations = false};
  for (auto _ : state) {
    // Filter: whether the claim fits, on every node; then the allocation on one of them (the first here; the
    // policy's pick in the scheduler).
    size_t chosen = cluster.candidates.size();
    for (size_t n = 0; n < cluster.candidates.size(); ++n) {
      auto r = AllocateClaimsOnNode(claims, cluster.pools[n].node, cluster.candidates[n], classes, match, filter);
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        return;
      }
      if (r->fits) {
        ++fits;
        chosen = std::min(chosen, n);
      }
    }
    if (chosen < cluster.candidates.size()) {
      auto r = AllocateClaimsOnNode(claims, cluster.pools[chosen].node, cluster.candidates[chosen], classes, match);
      benchmark::DoNotOptimize(r);
    }
  }
  state.SetItemsProcessed(state.iterations() * nodes);
  state.counters["decisions_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["feasible_nodes"] = static_cast<double>(fits) / static_cast<double>(state.iterations());
}

void BM_DraAllocateShared(benchmark::State& state) { Run(state, true); }
void BM_DraAllocatePair(benchmark::State& state) { Run(state, false); }
BENCHMARK(BM_DraAllocateShared)->Arg(5000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DraAllocatePair)->Arg(5000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::sched
BENCHMARK_MAIN();
