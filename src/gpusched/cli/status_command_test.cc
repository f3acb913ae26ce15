#include "gpusched/cli/status_command.h"
#include "gpusched/cli/top_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "gpusched/testing/builders.h"

#include <nlohmann/json.hpp>

namespace gpusched::cli {
namespace {

core::Node GpuNode(const std::string& name, int32_t gpus) {
  return testing::NodeBuilder(name).Gpus(gpus, "A100", 40960).Cpu(32000).Memory(131072).Build();
}

core::PodUpdate Holding(const std::string& key, const std::string& node,
                        std::vector<std::pair<int32_t, int64_t>> gpus) {
  core::PodUpdate p{.uid = common::PodUid("uid-" + key), .key = key, .node_name = node};
  p.annotated = true;
  core::ContainerAllocation c{.container = "main"};
  for (const auto& [index, milli] : gpus) {
    c.gpus.push_back(core::GpuShare{.index = index,
                                    .uuid = common::GpuUuid("GPU-" + node + "-" + std::to_string(index)),
                                    .milli = common::MilliGpu{milli},
                                    .memory = common::MiB{milli * 40960 / 1000},
                                    .exclusive = milli == 1000});
  }
  p.requests = core::Allocation{
      .pod = p.uid, .node = common::NodeName(node), .cpu = common::MilliCpu{2000}, .memory = common::MiB{4096}};
  p.allocation = core::Allocation{.pod = p.uid,
                                  .node = common::NodeName(node),
                                  .cpu = common::MilliCpu{2000},
                                  .memory = common::MiB{4096},
                                  .containers = {c},
                                  .id = 1};
  return p;
}

sim::WhatIfCluster Cluster() {
  sim::WhatIfCluster c;
  c.nodes = {GpuNode("node-a", 4), GpuNode("node-b", 2), GpuNode("cpu-only", 0)};
  c.nodes[1].gpus[1].healthy = false;
  c.pods = {Holding("ml/train", "node-a", {{0, 1000}, {1, 1000}}), Holding("ml/infer-1", "node-a", {{2, 500}}),
            Holding("ml/infer-2", "node-a", {{2, 250}})};
  return c;
}

// Golden: the table, the wide table and the totals, for a cluster built by hand.
TEST(StatusCommandTest, TableGolden) {
  const sim::ClusterStatus st = sim::BuildStatus(Cluster(), {});
  // 2.25 GPUs free: GPU 2 of node-a (250) and 3, and node-b's healthy GPU. Fragmented, against the default typical
  // pods (250, 500, 1, 2, 4 and 8 GPUs, equally likely): node-a's 250 for 500 and 1 GPU, all 1250 for 2, 4 and 8
  // GPUs: 708.3; node-b's 1000 for 2, 4 and 8 GPUs: 500. 1208.3 of 2250 is 54 %.
  EXPECT_EQ(FormatStatus(st, StatusFlags{}),
            "NODE    MODEL  GPUS  HEALTHY  GPU COMPUTE   GPU MEMORY (MiB)  CPU       PODS\n"
            "node-a  A100   4     4        2.75/4 (68%)  112640/163840     6.0/32.0  3\n"
            "node-b  A100   2     1        0.00/2 (0%)   0/81920           0.0/32.0  0\n"
            "\n"
            "cluster: 2 nodes, 6 GPUs (5 healthy), 2.75 GPUs of compute allocated (45%), 2.25 free; 54% of the free "
            "compute is fragmented for the typical pod (FGD's measure)\n");
  EXPECT_EQ(FormatStatus(st, StatusFlags{.output = "wide", .no_headers = true}),
            "node-a   A100  4  4    2.75/4 (68%)       112640/163840  6.0/32.0  3\n"
            "  gpu 0  A100     yes  [##########] 100%  40960/40960              ml/train\n"
            "  gpu 1  A100     yes  [##########] 100%  40960/40960              ml/train\n"
            "  gpu 2  A100     yes  [########..]  75%  30720/40960              ml/infer-1,ml/infer-2\n"
            "  gpu 3  A100     yes  [..........]   0%  0/40960                  -\n"
            "node-b   A100  2  1    0.00/2 (0%)        0/81920        0.0/32.0  0\n"
            "  gpu 0  A100     yes  [..........]   0%  0/40960                  -\n"
            "  gpu 1  A100     NO   [..........]   0%  0/40960                  -\n");
}

TEST(StatusCommandTest, JsonAndNodeFilter) {
  std::vector<std::string> missing;
  const sim::ClusterStatus st = sim::BuildStatus(Cluster(), {"node-b", "cpu-only", "nope"}, &missing);
  EXPECT_EQ(missing, std::vector<std::string>{"nope"});
  const auto j = nlohmann::json::parse(FormatStatus(st, StatusFlags{.output = "json"}));
  ASSERT_EQ(j["nodes"].size(), 2U);  // named nodes are shown even without GPUs, by name
  EXPECT_EQ(j["nodes"][0]["name"], "cpu-only");
  EXPECT_EQ(j["nodes"][1]["name"], "node-b");
  EXPECT_EQ(j["nodes"][1]["gpus"][1]["healthy"], false);
  EXPECT_EQ(j["totals"]["gpus"], 2);
  EXPECT_EQ(j["totals"]["free_milli"], 1000);  // the unhealthy GPU is not free
  const std::string yaml = FormatStatus(st, StatusFlags{.output = "yaml"});
  EXPECT_NE(yaml.find("kind: GpuClusterStatus\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("healthy: false"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("  free_milli: 1000"), std::string::npos) << yaml;
}

// Golden: `top` with samples for some GPUs; a GPU without a sample shows "-"; a pod's row sums its GPUs.
TEST(TopCommandTest, TablesGolden) {
  const sim::ClusterStatus st = sim::BuildStatus(Cluster(), {"node-a"});
  const TopSamples samples = {{"GPU-node-a-0", {{"util", 37}, {"fb_used", 2048}, {"power", 100}}},
                              {"GPU-node-a-1", {{"util", 41}, {"fb_used", 1024}, {"power", 120}}},
                              {"GPU-node-a-2", {{"util", 71}, {"fb_used", 4096}}}};
  EXPECT_EQ(FormatTop(st, samples, TopFlags{}),
            "NODE    GPU  MODEL  UTIL  MEMORY USED (MiB)  POWER (W)  PODS\n"
            "node-a  0    A100   37%   2048/40960         100        ml/train\n"
            "node-a  1    A100   41%   1024/40960         120        ml/train\n"
            "node-a  2    A100   71%   4096/40960         -          ml/infer-1,ml/infer-2\n"
            "node-a  3    A100   -     -/40960            -          -\n"
            "\n"
            "POD         NODE    GPUS        UTIL  MEMORY USED (MiB)  POWER (W)\n"
            "ml/infer-1  node-a  2 (shared)  71%   4096               -\n"
            "ml/infer-2  node-a  2 (shared)  71%   4096               -\n"
            "ml/train    node-a  0,1         39%   3072               220\n");
  const auto j = nlohmann::json::parse(FormatTop(st, samples, TopFlags{.output = "json"}));
  EXPECT_EQ(j["gpus"][3]["util"], nullptr);
  EXPECT_EQ(j["pods"][2]["pod"], "ml/train");
  EXPECT_EQ(j["pods"][2]["power"], 220);
  // YAML: the same document, block style; unknown values are null (~).
  const std::string yaml = FormatTop(st, samples, TopFlags{.output = "yaml"});
  EXPECT_NE(yaml.find("kind: GpuTop\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("    util: ~\n"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("    pod: ml/train\n"), std::string::npos) << yaml;
  // -n: the pod table holds that namespace's pods only; the GPU rows still name every holder.
  const std::string other = FormatTop(st, samples, TopFlags{.ns = "other"});
  EXPECT_EQ(other.find("POD "), std::string::npos) << other;
  EXPECT_NE(other.find("ml/infer-1,ml/infer-2"), std::string::npos) << other;
  const auto mine = nlohmann::json::parse(FormatTop(st, samples, TopFlags{.output = "json", .ns = "ml"}));
  EXPECT_EQ(mine["pods"].size(), 3U);
}

// top needs exactly one metrics source; neither or both is a usage error, before the cluster is read.
TEST(TopCommandTest, ExactlyOneSourceIsAUsageError) {
  auto run = [](std::vector<std::string> args) {
    CLI::App app;
    TopFlags flags;
    int exit_code = -1;
    AddTopCommand(app, flags, exit_code);
    args.insert(args.begin(), "top");
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
    return exit_code;
  };
  EXPECT_EQ(run({}), 2);
  EXPECT_EQ(run({"--prometheus", "http://127.0.0.1:1", "--influxdb", "http://127.0.0.1:2"}), 2);
}

}  // namespace
}  // namespace gpusched::cli
