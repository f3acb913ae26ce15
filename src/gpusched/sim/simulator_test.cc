#include "gpusched/sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sim/builtin_workload.h"
#include "gpusched/sim/report.h"

namespace gpusched::sim {
namespace {

TEST(SimulatorTest, BuiltinRunsEveryPolicyAndRepeatsExactly) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  for (const auto& name : policy::PolicyNames()) {
    SCOPED_TRACE(name);
    auto a = RunOne(cluster, workload, RunSpec{.policy = name, .seed = 42});
    auto b = RunOne(cluster, workload, RunSpec{.policy = name, .seed = 42});
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->pods_scheduled + a->pods_failed, a->pods_submitted);
    EXPECT_EQ(a->events.size(), static_cast<size_t>(a->pods_submitted));
    ASSERT_EQ(a->events.size(), b->events.size());
    for (size_t i = 0; i < a->events.size(); ++i) {
      ASSERT_EQ(a->events[i].allocated_milli, b->events[i].allocated_milli) << "event " << i;
    }
    // Tune 1.3: the last event's arrived GPU milli passes 1.3 x capacity.
    EXPECT_GT(static_cast<double>(a->events.back().arrived_milli), 1.3 * a->total_gpus * 1000);
    // Never more allocated than the cluster has; allocated never decreases (no departures).
    int64_t last = 0;
    for (const Event& e : a->events) {
      EXPECT_LE(e.allocated_milli, a->total_gpus * 1000);
      EXPECT_GE(e.allocated_milli, last);
      last = e.allocated_milli;
      EXPECT_GE(e.frag_milli, 0);
      EXPECT_LE(e.frag_milli, static_cast<double>(e.idle_milli) + 1e-6);
    }
  }
}

// The demo's point: on the built-in openb-shaped cluster the policies come out in the paper's order at 100 % arrived
// (random < dotprod < bestfit < fgd, fgd ahead of bestfit by more than a point), over three seeds.
TEST(SimulatorTest, BuiltinWorkloadSeparatesThePoliciesAsOpenbDoes) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  int64_t gpus = 0;
  for (const auto& n : cluster.nodes) {
    gpus += n.gpus.size();
  }
  EXPECT_EQ(cluster.nodes.size(), 244U);
  EXPECT_EQ(gpus, 1248);
  EXPECT_EQ(workload.pods.size(), 1630U);
  auto alloc_at_100 = [&](const std::string& policy) {
    double sum = 0;
    for (uint64_t seed = 42; seed <= 44; ++seed) {
      auto run = RunOne(cluster, workload, RunSpec{.policy = policy, .seed = seed});
      EXPECT_TRUE(run.ok()) << run.status();
      sum += BucketCurves(*run).alloc[100];
    }
    return sum / 3;
  };
  const double random = alloc_at_100("random");
  const double dotprod = alloc_at_100("dotprod");
  const double bestfit = alloc_at_100("bestfit");
  const double fgd = alloc_at_100("fgd");
  EXPECT_LT(random, dotprod);
  EXPECT_LT(dotprod, bestfit);
  EXPECT_GT(fgd, bestfit + 1.0) << "fgd " << fgd << " bestfit " << bestfit;
}

TEST(SimulatorTest, IncrementalFragmentationMatchesAFullRecount) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  for (const auto& name : {"fgd", "random"}) {
    SCOPED_TRACE(name);
    auto run = RunOne(cluster, workload, RunSpec{.policy = name, .seed = 3, .keep_allocations = true});
    ASSERT_TRUE(run.ok());
    ASSERT_EQ(run->allocations.size(), static_cast<size_t>(run->pods_scheduled));
    // Rebuild the final state from the recorded binds and recount every node from scratch.
    core::ClusterState state;
    for (const auto& n : cluster.nodes) {
      ASSERT_TRUE(state.AddNode(n).ok());
    }
    for (const auto& a : run->allocations) {
      ASSERT_TRUE(state.Assume(a).ok());
    }
    ASSERT_TRUE(state.CheckInvariants().ok());
    double frag = 0;
    for (size_t i = 0; i < state.SlotCount(); ++i) {
      frag += policy::NodeFragmentation(*workload.target, state.View(i));
    }
    EXPECT_NEAR(run->events.back().frag_milli, frag, 1e-6 * std::max(1.0, frag));
    EXPECT_EQ(run->events.back().allocated_milli, state.AllocatedMilli().value());
  }
}

TEST(SimulatorTest, BadSpecsAreErrors) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  EXPECT_EQ(RunOne(cluster, workload, RunSpec{.policy = "nope"}).status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunOne(cluster, workload, RunSpec{.policy = "fgd", .tune = -1}).status().code(),
            common::StatusCode::kInvalidArgument);
  Workload no_target = workload;
  no_target.target = nullptr;
  EXPECT_EQ(RunOne(cluster, no_target, RunSpec{.policy = "fgd"}).status().code(), common::StatusCode::kInvalidArgument);
}

TEST(SimulatorTest, RunManyKeepsRequestOrder) {
  const Cluster cluster = BuiltinCluster();
  const Workload workload = BuiltinWorkload();
  std::vector<RunRequest> reqs;
  for (uint64_t s = 1; s <= 4; ++s) {
    reqs.push_back({.workload = &workload, .spec = {.policy = s % 2 == 0 ? "fgd" : "bestfit", .seed = s}});
  }
  size_t calls = 0;
  auto runs = RunMany(cluster, reqs, 2, [&](size_t, size_t) { ++calls; });
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 4U);
  EXPECT_EQ(calls, 4U);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*runs)[i].spec.seed, i + 1);
    auto single = RunOne(cluster, workload, reqs[i].spec);
    EXPECT_EQ(single->events.back().allocated_milli, (*runs)[i].events.back().allocated_milli);
  }
}

}  // namespace
}  // namespace gpusched::sim
