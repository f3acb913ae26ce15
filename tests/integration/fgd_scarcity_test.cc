// fgd-scarcity against fgd on the real openb trace (the FGD paper's protocol: tune 1.3, shuffled by seed), two seeds,
// unallocated GPU % at arrived 100:
//   - default: shares follow the offline packer's plan and the GPUs a node's CPU or memory cannot feed count as
//     fragmented; at least 0.7 points fewer on each seed (measured: 4.77 -> 3.87 and 5.00 -> 3.87);
//   - gpushare80 (80 % of the GPU pods share a GPU): where the plan matters most; at least 0.8 points fewer
//     (10.83 -> 9.64 and 10.81 -> 9.65);
//   - cpu250 (CPU asked for beyond what the cluster has): the stranded GPUs, and an integer score would leave the best
//     nodes tied in half the cycles where fgd-scarcity's finer score still orders them; at least 0.8 points fewer
//     (6.53 -> 5.46 and 7.61 -> 6.03);
//   - gpuspec33 (a third of the GPU pods tied to GPU models, T4 asked for beyond what the cluster has): fgd puts
//     pods that may use any model on the rare models and the tied pods fail; at least 4 points fewer on each seed
//     (11.78 -> 4.77 and 12.27 -> 4.90).
// bench/beyond-fgd.sh runs all 17 pod lists with ten seeds.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/policy/target_workload.h"
#include "gpusched/sim/report.h"
#include "gpusched/sim/simulator.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

const std::string kTrace = std::string(GPUSCHED_SHARED_DIR) + "/traces/alibaba-gpu-v2023";

Workload Load(const std::string& list) {
  auto pods = ReadPodList(kTrace + "/" + list + ".csv");
  EXPECT_TRUE(pods.ok()) << pods.status();
  Workload w{.name = list};
  for (const auto& p : pods.value()) {
    w.pods.push_back(ToPodRequest(p));
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  return w;
}

TEST(FgdScarcityTest, FewerUnallocatedGpusThanFgd) {
  if (!std::filesystem::exists(kTrace + "/openb_pod_list_gpuspec33.csv")) {
    GTEST_SKIP() << "the openb trace is not at " << kTrace << " (../shared beside the repository)";
  }
  auto nodes = ReadNodeList(kTrace + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  Cluster cluster{.name = "openb"};
  for (const auto& n : nodes.value()) {
    cluster.nodes.push_back(ToNode(n));
  }
  const std::vector<Workload> lists = {Load("openb_pod_list_default"), Load("openb_pod_list_gpushare80"),
                                       Load("openb_pod_list_gpuspec33"), Load("openb_pod_list_cpu250")};
  std::vector<RunRequest> reqs;
  for (const Workload& w : lists) {
    for (const std::string policy : {"fgd", "fgd-scarcity"}) {
      for (uint64_t seed : {42, 43}) {
        reqs.push_back({.workload = &w, .spec = {.policy = policy, .seed = seed, .tune = 1.3}});
      }
    }
  }
  auto runs = RunMany(cluster, reqs, 2, nullptr);
  ASSERT_TRUE(runs.ok()) << runs.status();
  // (list, seed) -> policy -> unallocated % at arrived 100, and the allocation curve.
  std::map<std::pair<std::string, uint64_t>, std::map<std::string, Curves>> curves;
  for (const auto& r : runs.value()) {
    curves[{r.workload, r.spec.seed}][r.spec.policy] = BucketCurves(r);
  }
  const std::map<std::string, double> min_gain = {{"openb_pod_list_default", 0.7},
                                                  {"openb_pod_list_gpushare80", 0.8},
                                                  {"openb_pod_list_gpuspec33", 4.0},
                                                  {"openb_pod_list_cpu250", 0.8}};
  for (const auto& [key, by_policy] : curves) {
    SCOPED_TRACE(key.first + " seed " + std::to_string(key.second));
    const Curves& fgd = by_policy.at("fgd");
    const Curves& ours = by_policy.at("fgd-scarcity");
    const double gain = (100 - fgd.alloc[100]) - (100 - ours.alloc[100]);
    EXPECT_GE(gain, min_gain.at(key.first))
        << "fgd leaves " << 100 - fgd.alloc[100] << " % unallocated, fgd-scarcity " << 100 - ours.alloc[100] << " %";
  }
  EXPECT_EQ(curves.size(), 8u);
}

}  // namespace
}  // namespace gpusched::sim
