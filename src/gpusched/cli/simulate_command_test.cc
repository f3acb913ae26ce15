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

namespace gpusched::cli {
namespace {

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
  auto run = [](std::vector<std::string> args) {
    CLI::App app;
    SimulateFlags flags;
    int exit_code = -1;
    AddSimulateCommand(app, flags, exit_code);
    args.insert(args.begin(), "simulate");
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    app.parse(args);
    return exit_code;
  };
  EXPECT_EQ(run({"--tenants"}), 2);
  const auto dir = std::filesystem::temp_directory_path() / "gpusched-tenants-test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "nodes.csv") << "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n";
  std::ofstream(dir / "pods.csv") << "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,1000\n";
  EXPECT_EQ(run({"--tenants", "--trace-dir", dir.string(), "--node-list", "nodes", "--workloads", "pods"}), 1);
  // A gang size that is not MIN-MAX with 2 <= MIN <= MAX is a usage error, before the trace is read.
  for (const char* bad : {"16-2", "1-4", "2", "2-x", "2-4-6"}) {
    EXPECT_EQ(
        run({"--tenants", "--trace-dir", dir.string(), "--node-list", "nodes", "--workloads", "pods", "--gangs", bad}),
        2)
        << bad;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpusched::cli
