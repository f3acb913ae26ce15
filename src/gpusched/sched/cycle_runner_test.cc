#include "gpusched/sched/cycle_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpusched/policy/registry.h"
#include "gpusched/testing/builders.h"
#include "gpusched/testing/fake_cluster.h"

namespace gpusched::sched {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<policy::PlacementPolicy> Make(const std::string& name) {
  auto p = policy::MakePolicy(name, {});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p.value());
}

core::ClusterState TwoNodes() {
  core::ClusterState state;
  EXPECT_TRUE(state.AddNode(testing::Node("big").Gpus(8).Cpu(64000).Build()).ok());
  EXPECT_TRUE(state.AddNode(testing::Node("small").Gpus(2).Cpu(8000).Build()).ok());
  return state;
}

TEST(NormalizeScoresTest, MinMaxWithIntegerDivision) {
  // (s - 10) * 100 / (30 - 10): 10 -> 0, 20 -> 50, 30 -> 100
  std::vector<int64_t> s = {10, 20, 30};
  NormalizeScores(s);
  EXPECT_EQ(s, (std::vector<int64_t>{0, 50, 100}));
  // all equal: min is lowered by one, so all become (s - (s-1)) * 100 / 1 = 100
  std::vector<int64_t> eq = {7, 7};
  NormalizeScores(eq);
  EXPECT_EQ(eq, (std::vector<int64_t>{100, 100}));
}

TEST(CycleRunnerTest, BinpackPicksTheFullerNodeAndReserves) {
  core::ClusterState state = TwoNodes();
  auto pol = Make("binpack");
  CycleRunner runner(*pol, {});
  common::Rng rng(1);
  // big: (0 + 1000) * 100 / 8000 = 12; small: (0 + 1000) * 100 / 2000 = 50 -> small
  auto r = runner.Schedule(testing::Pod("p").Cpu(1000).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->allocation.has_value());
  EXPECT_EQ(r->allocation->node.str(), "small");
  EXPECT_EQ(r->feasible_nodes, 2U);
  EXPECT_EQ(state.FindAllocation(common::PodUid("p"))->node.str(), "small");
  EXPECT_FALSE(state.IsConfirmed(common::PodUid("p")));
}

TEST(CycleRunnerTest, NodeResourcesAreEnforced) {
  core::ClusterState state = TwoNodes();
  auto pol = Make("binpack");
  CycleRunner runner(*pol, {});
  common::Rng rng(1);
  // small has 8000m CPU: a 16000m pod only fits on big.
  auto r = runner.Schedule(testing::Pod("p").Cpu(16000).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allocation->node.str(), "big");
}

TEST(CycleRunnerTest, NowhereToFitReportsReasons) {
  core::ClusterState state = TwoNodes();
  auto pol = Make("spread");
  CycleRunner runner(*pol, {});
  common::Rng rng(1);
  // 9 GPUs: big has 8, small 2 -> nothing could ever fit.
  auto r = runner.Schedule(testing::Pod("p").Cpu(1000).Gpus(9).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->allocation.has_value());
  ASSERT_EQ(r->rejections.size(), 2U);
  EXPECT_EQ(r->rejections[0].second.code, policy::Fit::Code::kUnresolvable);
  EXPECT_THAT(r->Summary(), HasSubstr("0/2 nodes are available"));
  EXPECT_THAT(r->Summary(), HasSubstr("needs 9 GPU(s)"));
  EXPECT_EQ(state.AllocationCount(), 0U);
}

TEST(CycleRunnerTest, SummaryGroupsByWhatThePodNeedsLargestFirstWithinTheLimit) {
  CycleResult r;
  r.considered_nodes = 5000;
  for (int i = 0; i < 3012; ++i) {
    r.rejections.emplace_back(common::NodeName("n" + std::to_string(i)),
                              policy::Fit::Unschedulable("container main: needs 300 milli and 20000 MiB on 1 GPU(s); "
                                                         "most free is GPU 0 (A100) with " +
                                                         std::to_string(i % 300) + " milli and 100 MiB free"));
  }
  for (int i = 0; i < 1988; ++i) {
    r.rejections.emplace_back(common::NodeName("t" + std::to_string(i)),
                              policy::Fit::Unresolvable("node(s) had untolerated taint {team: a}"));
  }
  EXPECT_EQ(r.Summary(),
            "0/5000 nodes are available: 3012 x container main: needs 300 milli and 20000 MiB on 1 "
            "GPU(s), 1988 x node(s) had untolerated taint {team: a}");
  // Too many distinct reasons for the limit: the rest is counted, and the message stays within it.
  CycleResult many;
  many.considered_nodes = 400;
  for (int i = 0; i < 400; ++i) {
    many.rejections.emplace_back(common::NodeName("n" + std::to_string(i)),
                                 policy::Fit::Unresolvable("node(s) had untolerated taint {key-" + std::to_string(i) +
                                                           ": " + std::string(i < 10 ? 1 : 0, 'x') + "}"));
  }
  many.rejections.emplace_back(common::NodeName("z"),
                               policy::Fit::Unresolvable("node(s) had untolerated taint {key-0: x}"));
  const std::string s = many.Summary();
  EXPECT_LE(s.size(), CycleResult::kMaxSummaryBytes);
  EXPECT_THAT(s,
              ::testing::StartsWith("0/400 nodes are available: 2 x node(s) had untolerated taint {key-0: x}, 1 x "));
  EXPECT_THAT(s, ::testing::MatchesRegex(".*, [0-9]+ x [0-9]+ other reason\\(s\\)$"));
}

TEST(CycleRunnerTest, NodeConstraintsWhenAsked) {
  core::ClusterState state;
  core::Node tainted = testing::Node("tainted").Gpus(8).Cpu(64000).Build();
  tainted.taints.push_back(core::Taint{.key = "team", .value = "a", .effect = core::TaintEffect::kNoSchedule});
  ASSERT_TRUE(state.AddNode(tainted).ok());
  core::Node full = testing::Node("full").Gpus(8).Cpu(64000).Build();
  full.max_pods = 1;
  ASSERT_TRUE(state.AddNode(full).ok());
  ASSERT_TRUE(state.Assume(core::Allocation{.pod = common::PodUid("x"), .node = common::NodeName("full")}).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("ok").Gpus(1).Cpu(64000).Build()).ok());
  auto pol = Make("binpack");
  CycleRunner runner(*pol, CycleOptions{.check_node_constraints = true});
  common::Rng rng(1);
  auto r = runner.Schedule(testing::Pod("p").Cpu(1000).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->allocation.has_value());
  EXPECT_EQ(r->allocation->node.str(), "ok") << "binpack would prefer the fuller nodes, but they are excluded";
  auto again = runner.Schedule(testing::Pod("q").Cpu(1000).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(again.ok());
  ASSERT_FALSE(again->allocation.has_value());
  EXPECT_EQ(again->Summary(),
            "0/3 nodes are available: 1 x Too many pods, 1 x container main: needs 1 fully free GPU(s), "
            "1 x node(s) had untolerated taint {team: a}");
  // Without the option (the extender: kube-scheduler checked them), taints are not this runner's business.
  CycleRunner plain(*pol, {});
  EXPECT_TRUE(
      plain.Filter(testing::Pod("p").Cpu(1000).Gpus(1).Build(), *state.Find(common::NodeName("tainted"))).fits());
}

TEST(CycleRunnerTest, OtherResourcesAndHostPortsAreEnforcedAndCharged) {
  core::ClusterState state;
  core::Node rdma = testing::Node("rdma").Gpus(1).Cpu(64000).Build();
  rdma.scalar_resources = {{"rdma/hca", 2}};
  ASSERT_TRUE(state.AddNode(rdma).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("plain").Gpus(1).Cpu(64000).Build()).ok());
  auto pol = Make("binpack");
  CycleRunner runner(*pol, CycleOptions{.check_node_constraints = true});
  common::Rng rng(1);
  core::PodRequest one = testing::Pod("one").Cpu(100).Build();
  one.scalars = {{"rdma/hca", 1}};
  one.host_ports = {core::HostPort{.port = 8080}};
  auto r = runner.Schedule(one, state, {}, rng);
  ASSERT_TRUE(r.ok() && r->allocation.has_value());
  EXPECT_EQ(r->allocation->node.str(), "rdma") << "the only node with the resource";
  EXPECT_EQ(r->allocation->scalars, one.scalars);
  EXPECT_EQ(state.Find(common::NodeName("rdma"))->scalar_free.at("rdma/hca"), 1);
  ASSERT_EQ(state.Find(common::NodeName("rdma"))->host_ports.size(), 1U);

  core::PodRequest two = testing::Pod("two").Cpu(100).Build();
  two.scalars = {{"rdma/hca", 2}};
  auto none = runner.Schedule(two, state, {}, rng);
  ASSERT_TRUE(none.ok());
  ASSERT_FALSE(none->allocation.has_value());
  EXPECT_EQ(none->Summary(), "0/2 nodes are available: 2 x Insufficient rdma/hca: needs 2");
  for (const auto& [node, fit] : none->rejections) {
    // rdma could have room after a preemption; plain never has the resource.
    EXPECT_EQ(fit.code, node.str() == "rdma" ? policy::Fit::Code::kUnschedulable : policy::Fit::Code::kUnresolvable);
  }
  // The same host port (any address) only fits where it is free.
  core::PodRequest port = testing::Pod("port").Cpu(100).Build();
  port.host_ports = {core::HostPort{.ip = "10.0.0.1", .port = 8080}};
  auto p = runner.Schedule(port, state, {}, rng);
  ASSERT_TRUE(p.ok() && p->allocation.has_value());
  EXPECT_EQ(p->allocation->node.str(), "plain");
  EXPECT_TRUE(state.CheckInvariants().ok()) << state.CheckInvariants().message();
  // Released, the resource and the port are free again.
  ASSERT_TRUE(state.Release(common::PodUid("one")).ok());
  EXPECT_EQ(state.Find(common::NodeName("rdma"))->scalar_free.at("rdma/hca"), 2);
  EXPECT_TRUE(state.Find(common::NodeName("rdma"))->host_ports.empty());
  EXPECT_TRUE(state.CheckInvariants().ok());
  // The extender's runner (node resources left to kube-scheduler) neither checks nor charges them.
  CycleRunner extender(*pol, CycleOptions{.check_node_resources = false});
  auto e = extender.Schedule(two, state, {}, rng);
  ASSERT_TRUE(e.ok() && e->allocation.has_value());
  EXPECT_TRUE(e->allocation->scalars.empty());
}

// PreferNoSchedule: kube-scheduler's weighted sum (policy 0..100 + 3 x TaintToleration 0..100) moves the pod off
// a node binpack prefers when that node has a taint the pod does not tolerate; a toleration moves it back.
TEST(CycleRunnerTest, PreferNoScheduleTaintsLowerTheScore) {
  core::ClusterState state = TwoNodes();
  core::Node small = testing::Node("small").Gpus(2).Cpu(8000).Build();
  small.taints.push_back(core::Taint{.key = "spot", .value = "true", .effect = core::TaintEffect::kPreferNoSchedule});
  ASSERT_TRUE(state.UpdateNode(small).ok());
  EXPECT_EQ(state.PreferNoScheduleNodes(), 1U) << "counted: the runner scores taints only where there are any";
  EXPECT_TRUE(state.CheckInvariants().ok());
  auto pol = Make("binpack");
  CycleRunner runner(*pol, CycleOptions{.check_node_constraints = true});
  common::Rng rng(1);
  auto r = runner.Schedule(testing::Pod("p").Cpu(1000).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok() && r->allocation.has_value());
  EXPECT_EQ(r->allocation->node.str(), "big") << "binpack alone picks small (BinpackPicksTheFullerNode...)";
  core::PodRequest tolerant = testing::Pod("q").Cpu(1000).Gpus(1).Build();
  tolerant.tolerations.push_back(core::Toleration{.key = "spot", .op = core::Toleration::Operator::kExists});
  auto t = runner.Schedule(tolerant, state, {}, rng);
  ASSERT_TRUE(t.ok() && t->allocation.has_value());
  EXPECT_EQ(t->allocation->node.str(), "small");
  // Without node constraints (the extender, the simulator) taints do not score.
  core::ClusterState plain_state = TwoNodes();
  ASSERT_TRUE(plain_state.UpdateNode(small).ok());
  CycleRunner plain(*pol, {});
  auto u = plain.Schedule(testing::Pod("u").Cpu(1000).Gpus(1).Build(), plain_state, {}, rng);
  ASSERT_TRUE(u.ok() && u->allocation.has_value());
  EXPECT_EQ(u->allocation->node.str(), "small");
  // The taint removed, and the node removed: the count follows.
  core::Node untainted = small;
  untainted.taints.clear();
  ASSERT_TRUE(plain_state.UpdateNode(untainted).ok());
  EXPECT_EQ(plain_state.PreferNoScheduleNodes(), 0U);
  ASSERT_TRUE(state.RemoveNode(common::NodeName("small")).ok());
  EXPECT_EQ(state.PreferNoScheduleNodes(), 0U);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(CycleRunnerTest, CacheGivesTheSameDecisionsAsNoCache) {
  for (const auto& name : std::vector<std::string>{"binpack", "spread", "dotprod", "bestfit", "gpupacking"}) {
    SCOPED_TRACE(name);
    auto pol = Make(name);
    core::ClusterState a, b;
    for (int i = 0; i < 20; ++i) {
      const auto node = testing::Node("n" + std::to_string(i)).Gpus(1 + i % 8).Cpu(16000 + 1000 * i).Build();
      ASSERT_TRUE(a.AddNode(node).ok());
      ASSERT_TRUE(b.AddNode(node).ok());
    }
    CycleRunner cached(*pol, {.use_score_cache = true});
    CycleRunner uncached(*pol, {.use_score_cache = false});
    common::Rng ra(7), rb(7);
    for (int k = 0; k < 150; ++k) {
      auto pod = k % 3 == 0 ? testing::Pod("p" + std::to_string(k)).Cpu(1000).Share(100 + 50 * (k % 9)).Build()
                            : testing::Pod("p" + std::to_string(k)).Cpu(2000).Gpus(1 + k % 2).Build();
      auto x = cached.Schedule(pod, a, {}, ra);
      auto y = uncached.Schedule(pod, b, {}, rb);
      ASSERT_TRUE(x.ok() && y.ok());
      ASSERT_EQ(x->allocation.has_value(), y->allocation.has_value()) << k;
      if (x->allocation) {
        EXPECT_EQ(x->allocation->node, y->allocation->node) << k;
      }
    }
  }
}

// A score mix is the weighted mean of each member's score where it fits, a normalising member normalised first.
TEST(CycleRunnerTest, MixScoresIsTheWeightedMeanOfTheMembersScores) {
  core::ClusterState state = TwoNodes();
  const auto pod = testing::Pod("p").Cpu(1000).Gpus(1).Build();
  const std::vector<size_t> slots = {*state.SlotOf("big"), *state.SlotOf("small")};
  auto binpack = Make("binpack");
  auto spread = Make("spread");
  auto bestfit = Make("bestfit");
  CycleRunner rb(*binpack, {}), rs(*spread, {}), rf(*bestfit, {});
  std::vector<CycleRunner::NodeEval> eb, es, ef;
  rb.Evaluate(pod, state, slots, {}, eb);
  rs.Evaluate(pod, state, slots, {}, es);
  rf.Evaluate(pod, state, slots, {}, ef);
  ASSERT_TRUE(eb[0].fits && eb[1].fits && es[0].fits && es[1].fits && ef[0].fits && ef[1].fits);
  ASSERT_NE(eb[0].score, eb[1].score);  // the members disagree, so the weights decide
  std::vector<int64_t> fitted = {ef[0].score, ef[1].score};
  NormalizeScores(fitted);

  const std::vector<ScoreWeight> mix = {
      {.runner = &rb, .weight = 1}, {.runner = &rs, .weight = 3}, {.runner = &rf, .weight = 0.5}};
  std::vector<double> out;
  MixScores(mix, pod, state, slots, {}, out);
  ASSERT_EQ(out.size(), 2U);
  for (size_t i = 0; i < 2; ++i) {
    const double expected = (1.0 * static_cast<double>(eb[i].score) + 3.0 * static_cast<double>(es[i].score) +
                             0.5 * static_cast<double>(fitted[i])) /
                            4.5;
    EXPECT_DOUBLE_EQ(out[i], expected) << i;
  }

  // A node a member's filter refuses gets 0 from that member (9 GPUs fit nowhere: every score is 0).
  MixScores(mix, testing::Pod("q").Gpus(9).Build(), state, slots, {}, out);
  EXPECT_EQ(out, (std::vector<double>{0.0, 0.0}));
}

// With a score mix, the runner ranks nodes by the mix; its own policy still filters and chooses the GPUs.
TEST(CycleRunnerTest, AScoreMixReplacesThePolicysScore) {
  auto binpack = Make("binpack");
  auto spread = Make("spread");
  const auto pod = testing::Pod("p").Cpu(1000).Gpus(1).Build();
  {
    core::ClusterState state = TwoNodes();
    CycleRunner plain(*binpack, {});
    common::Rng rng(1);
    auto r = plain.Schedule(pod, state, {}, rng);
    ASSERT_TRUE(r.ok() && r->allocation.has_value());
    EXPECT_EQ(r->allocation->node.str(), "small");  // binpack alone: the fuller node
  }
  {
    core::ClusterState state = TwoNodes();
    const std::vector<std::pair<const policy::PlacementPolicy*, double>> mix = {{binpack.get(), 1}, {spread.get(), 3}};
    CycleRunner mixed(*binpack, {}, mix);
    common::Rng rng(1);
    auto r = mixed.Schedule(pod, state, {}, rng);
    ASSERT_TRUE(r.ok() && r->allocation.has_value());
    EXPECT_EQ(r->allocation->node.str(), "big");  // spread weighs three times binpack: the emptier node
    EXPECT_EQ(r->allocation->containers.size(), 1U);
  }
}

// Scores at 1000 points per point of kube-scheduler's: "big" 50.1, "small" 50.9.
class FineScorePolicy final : public policy::PlacementPolicy {
 public:
  [[nodiscard]] std::string_view Name() const override { return "fine-score"; }
  [[nodiscard]] int64_t Score(const core::PodRequest&, const core::NodeView& node,
                              const policy::Snapshot&) const override {
    return node.name().str() == "big" ? 50100 : 50900;
  }
  [[nodiscard]] int64_t ScoreScale() const override { return 1000; }
};

// The runner's own pick compares a policy's fine scores; what needs 0..100 (Evaluate, ScoreNodes, a score mix) gets
// score / ScoreScale(), where the two nodes tie.
TEST(CycleRunnerTest, ThePickComparesFineScoresAndEverythingElseSeesZeroToHundred) {
  FineScorePolicy fine;
  const auto pod = testing::Pod("p").Cpu(1000).Gpus(1).Build();
  core::ClusterState state = TwoNodes();
  const std::vector<size_t> slots = {*state.SlotOf("big"), *state.SlotOf("small")};
  std::vector<uint32_t> rank(2);
  rank[*state.SlotOf("big")] = 0;  // a tie would go to big
  rank[*state.SlotOf("small")] = 1;
  CycleRunner runner(fine, {.tie_rank = rank});
  common::Rng rng(1);
  auto r = runner.Schedule(pod, state, {}, rng);
  ASSERT_TRUE(r.ok() && r->allocation.has_value());
  EXPECT_EQ(r->allocation->node.str(), "small");

  core::ClusterState fresh = TwoNodes();
  std::vector<CycleRunner::NodeEval> evals;
  runner.Evaluate(pod, fresh, slots, {}, evals);
  ASSERT_EQ(evals.size(), 2U);
  EXPECT_EQ(evals[0].score, 50);
  EXPECT_EQ(evals[1].score, 50);
  const std::vector<const core::NodeView*> views = {&fresh.View(slots[0]), &fresh.View(slots[1])};
  EXPECT_EQ(runner.ScoreNodes(pod, views, {}), (std::vector<int64_t>{50, 50}));
  std::vector<double> out;
  MixScores(std::vector<ScoreWeight>{{.runner = &runner, .weight = 2}}, pod, fresh, slots, {}, out);
  EXPECT_EQ(out, (std::vector<double>{50.0, 50.0}));
}

// Scores the snapshot itself: metrics_generation + now_ms / 1000 + staleness_ms / 1000 (clamped to 100), counting
// its calls. Reads() says whether the runner may know that.
class SnapshotScorePolicy final : public policy::PlacementPolicy {
 public:
  explicit SnapshotScorePolicy(bool declares) : declares_(declares) {}
  [[nodiscard]] std::string_view Name() const override { return "snapshot-score"; }
  [[nodiscard]] int64_t Score(const core::PodRequest&, const core::NodeView&,
                              const policy::Snapshot& snapshot) const override {
    ++calls;
    return std::min<int64_t>(policy::kMaxScore, static_cast<int64_t>(snapshot.metrics_generation) +
                                                    snapshot.now_ms / 1000 + snapshot.staleness_ms / 1000);
  }
  [[nodiscard]] policy::Inputs Reads() const override { return {.gpu_metrics = declares_}; }
  mutable int calls = 0;

 private:
  bool declares_;
};

TEST(CycleRunnerTest, SnapshotScoresAreCachedPerSnapshot) {
  core::ClusterState state = TwoNodes();
  const std::vector<size_t> slots = {0, 1};
  const core::GpuMetricsMap map_a;
  const core::GpuMetricsMap map_b;
  auto snap = [](const core::GpuMetricsMap* m, uint64_t gen, int64_t now_ms, int64_t staleness_ms) {
    return policy::Snapshot{
        .gpu_metrics = m, .now_ms = now_ms, .staleness_ms = staleness_ms, .metrics_generation = gen};
  };
  struct Step {
    std::string name;
    policy::Snapshot snapshot;
    int64_t want_score = 0;  // each of the two nodes
    int want_calls = 0;      // Score calls this step (2 = both nodes recomputed, 0 = both from the cache)
  };
  const std::vector<Step> steps = {
      // 1 + 10 + 30 = 41
      {.name = "first snapshot computes", .snapshot = snap(&map_a, 1, 10000, 30000), .want_score = 41, .want_calls = 2},
      {.name = "the same snapshot hits", .snapshot = snap(&map_a, 1, 10000, 30000), .want_score = 41, .want_calls = 0},
      // 2 + 10 + 30
      {.name = "a new metrics generation recomputes",
       .snapshot = snap(&map_a, 2, 10000, 30000),
       .want_score = 42,
       .want_calls = 2},
      // 2 + 11 + 30: samples may have gone stale since
      {.name = "a later now recomputes", .snapshot = snap(&map_a, 2, 11000, 30000), .want_score = 43, .want_calls = 2},
      // 2 + 11 + 20
      {.name = "another staleness bound recomputes",
       .snapshot = snap(&map_a, 2, 11000, 20000),
       .want_score = 33,
       .want_calls = 2},
      {.name = "another map recomputes", .snapshot = snap(&map_b, 2, 11000, 20000), .want_score = 33, .want_calls = 2},
      {.name = "back to an earlier snapshot recomputes (one epoch is remembered)",
       .snapshot = snap(&map_a, 1, 10000, 30000),
       .want_score = 41,
       .want_calls = 2},
      {.name = "no map at all", .snapshot = policy::Snapshot{}, .want_score = 30, .want_calls = 2},
  };
  SnapshotScorePolicy pol(/*declares=*/true);
  CycleRunner runner(pol, {.check_node_resources = false});
  std::vector<CycleRunner::NodeEval> out;
  for (const Step& st : steps) {
    SCOPED_TRACE(st.name);
    pol.calls = 0;
    runner.Evaluate(testing::Pod("p").Gpus(1).Build(), state, slots, st.snapshot, out);
    ASSERT_EQ(out.size(), 2U);
    EXPECT_EQ(out[0].score, st.want_score);
    EXPECT_EQ(out[1].score, st.want_score);
    EXPECT_EQ(pol.calls, st.want_calls);
  }

  // A node change still recomputes that node alone under an unchanged snapshot.
  pol.calls = 0;
  common::Rng rng(1);
  auto r = runner.Schedule(testing::Pod("q").Gpus(1).Build(), state, policy::Snapshot{}, rng);
  ASSERT_TRUE(r.ok() && r->allocation);
  EXPECT_EQ(pol.calls, 0) << "Schedule with the same snapshot reuses Evaluate's entries";
  pol.calls = 0;
  runner.Evaluate(testing::Pod("p").Gpus(1).Build(), state, slots, policy::Snapshot{}, out);
  EXPECT_EQ(pol.calls, 1) << "only the node that took q changed";

  // A policy that does not declare it is cached per node generation only: the old score survives a new snapshot.
  // This is why a snapshot-reading policy must say so.
  SnapshotScorePolicy blind(/*declares=*/false);
  CycleRunner blind_runner(blind, {.check_node_resources = false});
  blind_runner.Evaluate(testing::Pod("p").Gpus(1).Build(), state, slots, snap(&map_a, 1, 10000, 30000), out);
  EXPECT_EQ(out[0].score, 41);
  blind_runner.Evaluate(testing::Pod("p").Gpus(1).Build(), state, slots, snap(&map_a, 2, 10000, 30000), out);
  EXPECT_EQ(out[0].score, 41);
}

// Scores the interference forecast: 10 x the incoming slowdown predicted for GPU 0 of the node (10 without a
// forecast or an entry), counting its calls.
class ForecastScorePolicy final : public policy::PlacementPolicy {
 public:
  [[nodiscard]] std::string_view Name() const override { return "forecast-score"; }
  [[nodiscard]] int64_t Score(const core::PodRequest&, const core::NodeView& node,
                              const policy::Snapshot& snapshot) const override {
    ++calls;
    const policy::GpuInterference* g =
        snapshot.interference != nullptr ? snapshot.interference->Find(node.name(), 0) : nullptr;
    return static_cast<int64_t>(10 * (g != nullptr ? g->incoming : 1.0));
  }
  [[nodiscard]] policy::Inputs Reads() const override { return {.interference_forecast = true}; }
  mutable int calls = 0;
};

TEST(CycleRunnerTest, EachInterferenceForecastGetsItsOwnScores) {
  core::ClusterState state = TwoNodes();
  const std::vector<size_t> slots = {0, 1};
  // One forecast object reused for pod after pod (as a front end's per-request local may be): only the generation
  // tells the forecasts apart.
  policy::InterferenceForecast forecast;
  auto predict = [&forecast](double big, double small) {
    forecast.nodes.clear();
    forecast.nodes[common::NodeName("big")] = {policy::GpuInterference{.residents = 1, .incoming = big}};
    forecast.nodes[common::NodeName("small")] = {policy::GpuInterference{.residents = 1, .incoming = small}};
  };
  ForecastScorePolicy pol;
  CycleRunner runner(pol, {.check_node_resources = false});
  std::vector<CycleRunner::NodeEval> out;
  auto evaluate = [&](const policy::Snapshot& snapshot) {
    pol.calls = 0;
    runner.Evaluate(testing::Pod("p").Gpus(1).Build(), state, slots, snapshot, out);
    EXPECT_EQ(out.size(), 2U);
  };

  predict(2.0, 3.0);  // big: 10 x 2.0 = 20, small: 10 x 3.0 = 30
  evaluate(policy::Snapshot{.interference = &forecast, .interference_generation = 1});
  EXPECT_EQ(out[0].score, 20);
  EXPECT_EQ(out[1].score, 30);
  EXPECT_EQ(pol.calls, 2);
  evaluate(policy::Snapshot{.interference = &forecast, .interference_generation = 1});
  EXPECT_EQ(pol.calls, 0) << "the same forecast hits the cache";

  // The next pod's forecast, at the same address, with a new generation: 10 x 4.0 = 40, 10 x 1.5 = 15. A cache
  // keyed by the metrics fields alone would still answer 20 and 30 here.
  predict(4.0, 1.5);
  evaluate(policy::Snapshot{.interference = &forecast, .interference_generation = 2});
  EXPECT_EQ(out[0].score, 40);
  EXPECT_EQ(out[1].score, 15);
  EXPECT_EQ(pol.calls, 2);

  // Another forecast object with a generation seen before is still another forecast: 10 x 5.0 = 50, 10 x 6.0 = 60.
  policy::InterferenceForecast other;
  other.nodes[common::NodeName("big")] = {policy::GpuInterference{.residents = 1, .incoming = 5.0}};
  other.nodes[common::NodeName("small")] = {policy::GpuInterference{.residents = 1, .incoming = 6.0}};
  evaluate(policy::Snapshot{.interference = &other, .interference_generation = 2});
  EXPECT_EQ(out[0].score, 50);
  EXPECT_EQ(out[1].score, 60);
  EXPECT_EQ(pol.calls, 2);

  // No forecast at all: every GPU empty, 10 x 1.0 = 10.
  evaluate(policy::Snapshot{});
  EXPECT_EQ(out[0].score, 10);
  EXPECT_EQ(out[1].score, 10);
  EXPECT_EQ(pol.calls, 2);
}

TEST(CycleRunnerTest, ScheduleHandsTheSnapshotToSelectGpus) {
  // load-aware picks GPU 1 of "small" when GPU 0 is busy by metrics; binpack-style best fit would take GPU 0.
  core::ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("small").Gpus(2).Build()).ok());
  auto pol = Make("load-aware");
  core::GpuMetricsMap m;
  m[common::GpuUuid("GPU-small-0")].Set(core::GpuMetric::kGpuUtil, {.value = 95, .timestamp_ms = 1000});
  m[common::GpuUuid("GPU-small-1")].Set(core::GpuMetric::kGpuUtil, {.value = 5, .timestamp_ms = 1000});
  CycleRunner runner(*pol, {});
  common::Rng rng(1);
  auto r = runner.Schedule(testing::Pod("p").Gpus(1).Build(), state,
                           policy::Snapshot{.gpu_metrics = &m, .now_ms = 2000, .metrics_generation = 1}, rng);
  ASSERT_TRUE(r.ok() && r->allocation);
  ASSERT_EQ(r->allocation->containers.size(), 1U);
  EXPECT_EQ(r->allocation->containers[0].gpus.at(0).index, 1);
}

TEST(CycleRunnerTest, TieRankBreaksTiesDeterministically) {
  core::ClusterState state;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(state.AddNode(testing::Node("n" + std::to_string(i)).Gpus(2).Build()).ok());
  }
  auto pol = Make("dotprod");                       // all empty, equal nodes: a four-way tie
  const std::vector<uint32_t> rank = {3, 1, 0, 2};  // slot 2 ranks first
  CycleRunner runner(*pol, {.tie_rank = rank});
  common::Rng rng(1);
  auto r = runner.Schedule(testing::Pod("p").Cpu(100).Gpus(1).Build(), state, {}, rng);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->allocation->node.str(), "n2");
}

// FNV-1a by hand: the empty string is the offset basis; "a" is (basis ^ 0x61) · prime mod 2^64.
TEST(CycleRunnerTest, NodeNameRankIsFnv1a) {
  EXPECT_EQ(NodeNameRank(""), 14695981039346656037ULL);
  EXPECT_EQ(NodeNameRank("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_NE(NodeNameRank("n1"), NodeNameRank("n2"));
}

// stable_ties: a tie goes to the node whose name ranks lowest, whatever the generator, and keeps going there while
// it stays tied (first fit); without it the same tie lands on different nodes for different seeds.
TEST(CycleRunnerTest, StableTiesFillOneNodeInTheNameOrder) {
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    names.push_back("gpu-node-" + std::to_string(i));
  }
  const std::string first = *std::min_element(
      names.begin(), names.end(), [](const auto& a, const auto& b) { return NodeNameRank(a) < NodeNameRank(b); });
  auto pol = Make("dotprod");  // CPU-only pods score 0 on every node: always a tie
  std::set<std::string> random_nodes;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    core::ClusterState state;
    core::ClusterState random_state;
    for (const auto& n : names) {
      ASSERT_TRUE(state.AddNode(testing::Node(n).Cpu(64000).Gpus(2).Build()).ok());
      ASSERT_TRUE(random_state.AddNode(testing::Node(n).Cpu(64000).Gpus(2).Build()).ok());
    }
    CycleRunner stable(*pol, {.stable_ties = true});
    CycleRunner random(*pol, {});
    common::Rng rng(seed);
    common::Rng random_rng(seed);
    for (int k = 0; k < 3; ++k) {
      const auto pod = testing::Pod("p" + std::to_string(k)).Cpu(1000).Build();
      auto r = stable.Schedule(pod, state, {}, rng);
      ASSERT_TRUE(r.ok() && r->allocation);
      EXPECT_EQ(r->allocation->node.str(), first) << "seed " << seed << " pod " << k;
      auto q = random.Schedule(pod, random_state, {}, random_rng);
      ASSERT_TRUE(q.ok() && q->allocation);
      random_nodes.insert(q->allocation->node.str());
    }
  }
  EXPECT_GT(random_nodes.size(), 1U) << "random ties should not all land on one node";
}

TEST(CycleRunnerTest, BindConfirmsOrForgets) {
  core::ClusterState state = TwoNodes();
  auto pol = Make("binpack");
  CycleRunner runner(*pol, {});
  common::Rng rng(1);
  testing::RecordingBinder binder;
  const auto pod = testing::Pod("p").Cpu(1000).Share(300).Build();
  auto r = runner.Schedule(pod, state, {}, rng);
  ASSERT_TRUE(r.ok() && r->allocation);
  ASSERT_TRUE(CycleRunner::Bind(state, binder, pod, *r->allocation).ok());
  EXPECT_TRUE(state.IsConfirmed(pod.uid));
  EXPECT_EQ(binder.bound().size(), 1U);

  const auto pod2 = testing::Pod("q").Cpu(1000).Share(300).Build();
  auto r2 = runner.Schedule(pod2, state, {}, rng);
  ASSERT_TRUE(r2.ok() && r2->allocation);
  binder.FailNext(1, common::Unavailable("apiserver down"));
  common::Status s = CycleRunner::Bind(state, binder, pod2, *r2->allocation);
  EXPECT_EQ(s.code(), common::StatusCode::kUnavailable);
  EXPECT_EQ(state.FindAllocation(pod2.uid), nullptr) << "a failed bind must give the capacity back";
  EXPECT_TRUE(state.CheckInvariants().ok());
}

}  // namespace
}  // namespace gpusched::sched
