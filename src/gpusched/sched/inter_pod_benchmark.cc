// What inter-pod constraints cost one scheduling attempt at scale: 5000 nodes (50 zones of 100) with 50,000 placed
// pods (10 per node; 500 applications of 100 pods, in 20 namespaces). Prepare is the PreFilter (one pass over the
// placed pods for a pod with constraints of its own); Check is the per-node Filter, run here over every node.
//   BM_Prepare/0  a pod with no constraints while 1,000 placed pods have anti-affinity (what every pod pays then)
//   BM_Prepare/1  required anti-affinity on the hostname
//   BM_Prepare/2  required affinity on the zone
//   BM_Prepare/3  a DoNotSchedule spread constraint on the zone
// Items processed = placed pods read, so the rate is pods per second.

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/core/cluster_state.h"
#include "gpusched/sched/inter_pod.h"
#include "gpusched/testing/builders.h"

namespace gpusched::sched {
namespace {

constexpr int kNodes = 5000;
constexpr int kPodsPerNode = 10;
constexpr int kWithAnti = 1000;

struct Cluster {
  core::ClusterState state;
  std::vector<std::unique_ptr<PodOnNode>> pods;
  std::vector<const PodOnNode*> all;
  std::vector<const PodOnNode*> anti;
};

core::PodAffinityTerm Term(const std::string& app, const std::string& key) {
  core::PodAffinityTerm t;
  t.selector.match_labels = {{"app", app}};
  t.topology_key = key;
  return t;
}

const Cluster& Build() {
  static const Cluster* cluster = [] {
    auto* c = new Cluster();
    for (int n = 0; n < kNodes; ++n) {
      core::Node node = testing::Node("node-" + std::to_string(n)).Gpus(8).Cpu(64000).Build();
      node.labels = {{"kubernetes.io/hostname", node.name.str()},
                     {"topology.kubernetes.io/zone", "zone-" + std::to_string(n / 100)},
                     {"nvidia.com/gpu.product", "A100"}};
      (void)c->state.AddNode(std::move(node));
    }
    for (int i = 0; i < kNodes * kPodsPerNode; ++i) {
      auto p = std::make_unique<PodOnNode>();
      p->uid = common::PodUid("pod-" + std::to_string(i));
      const int app = i % 500;
      p->namespace_ = "ns-" + std::to_string(app % 20);
      p->labels = {{"app", "app-" + std::to_string(app)}, {"pod-template-hash", std::to_string(i % 7)}};
      p->node = common::NodeName("node-" + std::to_string(i % kNodes));
      if (i < kWithAnti) {
        p->anti_affinity = {Term("app-" + std::to_string(app), "kubernetes.io/hostname")};
        c->anti.push_back(p.get());
      }
      c->all.push_back(p.get());
      c->pods.push_back(std::move(p));
    }
    return c;
  }();
  return *cluster;
}

void BM_Prepare(benchmark::State& st) {
  const Cluster& c = Build();
  core::PodRequest pod = testing::Pod("incoming").Share(300).Build();
  pod.namespace_ = "ns-3";
  pod.labels = {{"app", "app-3"}};
  switch (st.range(0)) {
    case 1:
      pod.pod_anti_affinity = {Term("app-3", "kubernetes.io/hostname")};
      break;
    case 2:
      pod.pod_affinity = {Term("app-3", "topology.kubernetes.io/zone")};
      break;
    case 3: {
      core::TopologySpreadConstraint k;
      k.topology_key = "topology.kubernetes.io/zone";
      k.selector.match_labels = {{"app", "app-3"}};
      pod.spread = {k};
      break;
    }
    default:
      break;
  }
  const std::span<const PodOnNode* const> all =
      pod.HasInterPodConstraints() ? std::span<const PodOnNode* const>(c.all) : std::span<const PodOnNode* const>();
  size_t passing = 0;
  for (auto _ : st) {
    const InterPodConstraints ip = InterPodConstraints::Prepare(pod, all, c.anti, c.state);
    for (size_t slot = 0; slot < c.state.SlotCount(); ++slot) {
      passing += ip.Check(*c.state.View(slot).node).fits() ? 1 : 0;
    }
    benchmark::DoNotOptimize(passing);
  }
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(all.size() + c.anti.size()));
  st.counters["passing_nodes"] = static_cast<double>(passing) / static_cast<double>(st.iterations());
}
BENCHMARK(BM_Prepare)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gpusched::sched

BENCHMARK_MAIN();
