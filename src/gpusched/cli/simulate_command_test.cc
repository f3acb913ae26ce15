#include "gpusched/cli/simulate_command.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gpusched/cli/colocation_command.h"
#include "gpusched/cli/live_cluster.h"
#include "gpusched/cli/whatif_mode.h"

namespace gpusched::cli {
namespace {

// `gpusched-lab simulate ARGS`: the exit status it sets.
int RunSimulateArgs(std::vector<std::string> args) {
  CLI::App app;
  SimulateFlags flags;
  int exit_code = -1;
  AddSimulateCommand(app, flags, exit_code,
                     SimulateModes{.colocation = RunColocationMode, .from_cluster = RunWhatIfMode});
  args.insert(args.begin(), "simulate");
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  return exit_code;
}

TEST(ParseSeedsTest, RangesAndLists) {
  std::vector<unsigned long long> s;
  EXPECT_EQ(ParseSeeds("42-45", s), "");
  EXPECT_EQ(s, (std::vector<unsigned long long>{42, 43, 44, 45}));
  s.clear();
  EXPECT_EQ(ParseSeeds("7,9,11-12", s), "");
  EXPECT_EQ(s, (std::vector<unsigned long long>{7, 9, 11, 12}));
}

TEST(ParseSeedsTest, BadInputNamesTheItem) {
  for (const std::string bad : {"", "x", "5-3", "1,,2", "4-", "1-2-3"}) {
    SCOPED_TRACE(bad);
    std::vector<unsigned long long> s;
    EXPECT_NE(ParseSeeds(bad, s), "");
  }
}

TEST(ColocationModeTest, BadDataIsAUsageErrorBeforeAnyRun) {
  const std::vector<unsigned long long> seeds = {1};
  ColocationFlags missing;
  missing.source = "/nonexistent/pairs.csv";
  EXPECT_EQ(RunColocationMode(missing, seeds), 2);
  // A CSV without the asked GPU table.
  const std::string csv = (std::filesystem::temp_directory_path() / "gpusched-colocation-test.csv").string();
  std::ofstream(csv) << "gpu,app_a,app_b,slowdown_a,slowdown_b\nk80,x,y,1.2,1.3\n";
  ColocationFlags no_table;
  no_table.source = csv;
  no_table.gpu = "p100";
  EXPECT_EQ(RunColocationMode(no_table, seeds), 2);
  std::remove(csv.c_str());
}

// The multi-tenant mode needs a trace with times: without --trace-dir it is a usage error (2) before any run, and
// a pod list without creation and deletion times is named; a bad --gangs is a usage error too.
TEST(TenantModeTest, NeedsATraceWithTimes) {
  EXPECT_EQ(RunSimulateArgs({"--tenants"}), 2);
  const auto dir = std::filesystem::temp_directory_path() / "gpusched-tenants-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n";
  std::ofstream(dir / "pods.csv") << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n";
  EXPECT_EQ(RunSimulateArgs({"--tenants", "--trace-dir", dir.string(), "--node-list", "nodes", "--workloads", "pods"}),
            1);
  // A gang size that is not MIN-MAX with 2 <= MIN <= MAX is a usage error, before the trace is read.
  for (const char* bad : {"16-2", "1-4", "2", "2-x", "2-4-6"}) {
    EXPECT_EQ(RunSimulateArgs({"--tenants", "--trace-dir", dir.string(), "--node-list", "nodes", "--workloads", "pods",
                               "--gangs", bad}),
              2)
        << bad;
  }
  std::filesystem::remove_all(dir);
}

// The pods a set of objects makes, as the what-if places them: a Deployment's replicas numbered, a Job's parallelism;
// a Service makes none (listed as ignored); a request that cannot be read names the object.
TEST(WhatIfModeTest, PodsFromObjects) {
  using nlohmann::json;
  auto container = [](const std::string& gpus) {
    return json{{"name", "main"},
                {"image", "cuda"},
                {"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}, {"requests", {{"cpu", "1"}}}}}};
  };
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"metadata", {{"name", "solo"}}},
                    {"spec", {{"containers", json::array({container("1")})}}}};
  const json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
      {"spec", {{"replicas", 3}, {"template", {{"spec", {{"containers", json::array({container("2")})}}}}}}}};
  const json job = {{"apiVersion", "batch/v1"},
                    {"kind", "Job"},
                    {"metadata", {{"name", "eval"}}},
                    {"spec", {{"template", {{"spec", {{"containers", json::array({container("1")})}}}}}}}};
  const json service = {{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "web"}}}};
  auto made =
      PodsFromObjects({{"a.yaml:1", pod}, {"a.yaml:9", deployment}, {"a.yaml:30", job}, {"a.yaml:40", service}});
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->pods.size(), 5U);
  EXPECT_EQ(made->pods[0].name, "solo");
  EXPECT_EQ(made->pods[1].name, "train-0");
  EXPECT_EQ(made->pods[3].name, "train-2");
  EXPECT_EQ(made->pods[3].source, "a.yaml:9");
  EXPECT_EQ(made->pods[3].request.GpuCount(), 2);
  EXPECT_EQ(made->pods[4].name, "eval-0");
  ASSERT_EQ(made->ignored.size(), 1U);
  EXPECT_EQ(made->ignored[0], "a.yaml:40 Service web");
  json bad = deployment;
  bad["spec"]["replicas"] = "three";
  auto refused = PodsFromObjects({{"b.yaml:2", bad}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("b.yaml:2: spec.replicas"), std::string::npos) << refused.status();
  json nonsense = pod;
  nonsense["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "lots";
  auto unreadable = PodsFromObjects({{"c.yaml:5", nonsense}});
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("c.yaml:5 (Pod solo)"), std::string::npos) << unreadable.status();
}

// --from-cluster without files is a usage error; with files but no reachable cluster, 1.
TEST(WhatIfModeTest, UsageErrors) {
  EXPECT_EQ(RunSimulateArgs({"--from-cluster"}), 2);
  const auto dir = std::filesystem::temp_directory_path() / "gpusched-whatif-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "p.yaml") << "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                   "  - name: main\n    image: cuda\n    resources: {limits: {nvidia.com/gpu: 1}}\n";
  std::ofstream(dir / "kubeconfig") << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: "
                                       "'http://127.0.0.1:1'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                                       "current-context: x\nusers:\n- name: u\n  user: {token: t}\n";
  EXPECT_EQ(RunSimulateArgs({"--from-cluster", "-f", (dir / "p.yaml").string(), "--policies", "nosuch"}), 2);
  EXPECT_EQ(RunSimulateArgs({"--from-cluster", "-f", (dir / "missing.yaml").string()}), 2);
  EXPECT_EQ(RunSimulateArgs(
                {"--from-cluster", "-f", (dir / "p.yaml").string(), "--kubeconfig", (dir / "kubeconfig").string()}),
            1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpusched::cli
