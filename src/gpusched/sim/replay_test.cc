#include "gpusched/sim/replay.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>

#include "gpusched/policy/target_workload.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

Cluster OneNode(int32_t gpus) {
  Cluster c{.name = "one"};
  c.nodes.push_back(
      ToNode(TraceNode{.name = "n0", .cpu_milli = 64000, .memory_mib = 262144, .gpus = gpus, .model = "T4"}));
  return c;
}

ReplayPod Pod(const std::string& name, int32_t gpus, int64_t created, int64_t lifetime, const std::string& qos = "") {
  core::PodRequest p = ToPodRequest(
      TracePod{.name = name, .cpu_milli = 1000, .memory_mib = 1024, .num_gpu = gpus, .gpu_milli = gpus > 0 ? 1000 : 0});
  p.priority = PriorityOfQos(qos);
  return ReplayPod{.pod = std::move(p), .creation_s = created, .deletion_s = created + lifetime};
}

Workload WorkloadOf(const std::vector<ReplayPod>& pods) {
  Workload w{.name = "w"};
  for (const auto& p : pods) {
    w.pods.push_back(p.pod);
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  return w;
}

// Worked by hand: A holds both GPUs from 0 to 100; B (t=10, 50 s) and C (t=20, 30 s) wait for it, and both start
// at 100 (waits 90 and 80); C leaves at 130, B at 150.
TEST(ReplayTest, PodsWaitForDeparturesByHand) {
  const Cluster cluster = OneNode(2);
  const std::vector<ReplayPod> pods = {Pod("a", 2, 0, 100), Pod("b", 1, 10, 50), Pod("c", 1, 20, 30)};
  for (const char* policy : {"fgd", "binpack", "bestfit", "fgd:3+topology:1"}) {
    auto r = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = policy});
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->pods, 3);
    EXPECT_EQ(r->placed, 3);
    EXPECT_EQ(r->never_placed, 0);
    EXPECT_EQ(r->waited, 2);
    EXPECT_DOUBLE_EQ(r->mean_wait_s, (0 + 90 + 80) / 3.0);
    EXPECT_DOUBLE_EQ(r->max_wait_s, 90);
    EXPECT_EQ(r->times_s, (std::vector<double>{0, 10, 20, 100, 130, 150}));
    EXPECT_EQ(r->allocation, (std::vector<double>{1, 1, 1, 1, 0.5, 0}));
    EXPECT_DOUBLE_EQ(r->mean_allocation, 1.0);  // full from the first arrival (0) to the last (20)
    EXPECT_DOUBLE_EQ(r->peak_allocation, 1.0);
  }
}

// The queue's order is priority, then arrival: the later LS pod gets the freed GPU before the earlier BE one.
TEST(ReplayTest, PriorityThenArrival) {
  const Cluster cluster = OneNode(1);
  const std::vector<ReplayPod> pods = {Pod("a", 1, 0, 100), Pod("be", 1, 10, 40, "BE"), Pod("ls", 1, 20, 30, "LS"),
                                       Pod("be2", 1, 30, 10, "BE")};
  auto r = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "binpack"});
  ASSERT_TRUE(r.ok()) << r.status();
  // ls: 20 -> 100 (80); be: 10 -> 130 (120); be2: 30 -> 170 (140).
  EXPECT_EQ(r->placed, 4);
  EXPECT_DOUBLE_EQ(r->mean_wait_s, (0 + 80 + 120 + 140) / 4.0);
  EXPECT_DOUBLE_EQ(r->max_wait_s, 140);
  EXPECT_EQ(r->times_s.back(), 180);
}

// A pod that no node can ever hold waits to the end and counts as never placed; the rest go on around it, and a
// pod without GPUs runs on CPU alone.
TEST(ReplayTest, NeverPlacedAndCpuOnly) {
  const Cluster cluster = OneNode(2);
  const std::vector<ReplayPod> pods = {Pod("huge", 4, 0, 10), Pod("one", 1, 5, 10), Pod("cpu", 0, 6, 10)};
  auto r = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "fgd"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->placed, 2);
  EXPECT_EQ(r->never_placed, 1);
  EXPECT_EQ(r->gpu_pods, 2);
  EXPECT_EQ(r->gpu_pods_never_placed, 1);
  EXPECT_EQ(r->waited, 0);
}

// Arrivals are compressed by the speedup, lifetimes are not.
TEST(ReplayTest, ArrivalSpeedup) {
  const Cluster cluster = OneNode(1);
  const std::vector<ReplayPod> pods = {Pod("a", 1, 0, 100), Pod("b", 1, 1000, 10)};
  auto real = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "binpack"});
  auto fast = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "binpack", .arrival_speedup = 20});
  ASSERT_TRUE(real.ok() && fast.ok());
  EXPECT_EQ(real->waited, 0);
  EXPECT_EQ(fast->waited, 1);  // b arrives at 50, a leaves at 100
  EXPECT_DOUBLE_EQ(fast->max_wait_s, 50);
  EXPECT_EQ(fast->last_arrival_s, 50);
}

TEST(ReplayTest, BadInputIsNamed) {
  const Cluster cluster = OneNode(1);
  std::vector<ReplayPod> pods = {Pod("a", 1, 0, 100)};
  pods[0].deletion_s = -5;
  auto r = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pod a"), std::string::npos) << r.status().message();
  pods[0].deletion_s = 100;
  auto slow = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.arrival_speedup = 0.5});
  ASSERT_FALSE(slow.ok());
  auto unknown = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "nosuch"});
  ASSERT_FALSE(unknown.ok());
}

TEST(ReplayTest, TableAndReport) {
  const Cluster cluster = OneNode(2);
  const std::vector<ReplayPod> pods = {Pod("a", 2, 0, 100), Pod("b", 1, 10, 50)};
  std::vector<ReplayOutcome> runs;
  for (uint64_t seed : {1, 2}) {
    auto r = Replay(cluster, WorkloadOf(pods), pods, ReplaySpec{.policy = "fgd", .seed = seed});
    ASSERT_TRUE(r.ok());
    runs.push_back(std::move(*r));
  }
  std::ostringstream table;
  PrintReplayTable(table, runs);
  EXPECT_NE(table.str().find("w fgd"), std::string::npos) << table.str();
  const std::string dir = ::testing::TempDir() + "/replay-report";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteReplayReport(dir, runs).ok());
  for (const char* f : {"replay.csv", "replay-allocation.csv", "replay-allocation.svg", "replay-allocation.png"}) {
    EXPECT_GT(std::filesystem::file_size(dir + "/" + f), 50U) << f;
  }
}

}  // namespace
}  // namespace gpusched::sim
