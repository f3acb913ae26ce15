#include "gpusched/sim/colocation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/registry.h"
#include "gpusched/testing/fake_slowdown_model.h"

namespace gpusched::sim {
namespace {

// Measured slowdowns as a table: s(a | b) per ordered pair (1 when not listed), and the pairs that do not fit in
// memory together.
testing::FakeSlowdownModel Table() { return testing::FakeSlowdownModel({.incoming = 1.0, .resident = 1.0}); }

std::unique_ptr<policy::PlacementPolicy> Policy(const std::string& name) {
  auto p = policy::MakePolicy(name, policy::PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p.value());
}

// A cluster of `gpus` GPUs on one node.
ColocationSpec OneNode(int gpus) {
  return ColocationSpec{.apps = {"a", "b", "c"}, .gpu_type = "p100", .nodes = 1, .gpus_per_node = gpus};
}

struct TimingCase {
  std::string name;
  const testing::FakeSlowdownModel truth = Table();
  int gpus = 1;
  std::vector<ColocationJob> jobs;
  std::vector<double> want_jct;
  double want_makespan = 0;
  int64_t want_oom = 0;
};

TEST(ColocationTest, CompletionTimesFollowTheMeasuredSlowdowns) {
  const std::vector<TimingCase> cases = {
      // Alone: runs at its isolated speed.
      {.name = "a single job takes its isolated duration",
       .jobs = {{.app = "a", .arrival_s = 5, .duration_s = 100}},
       .want_jct = {100},
       .want_makespan = 100},
      // One GPU, both from t=0 at slowdown 1.5: 100 s of work at 1/1.5 per second -> 150 s each.
      {.name = "two jobs sharing a GPU both take 1.5x",
       .truth = Table().SetPair("a", "b", 1.5, 1.5),
       .jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100}, {.app = "b", .arrival_s = 0, .duration_s = 100}},
       .want_jct = {150, 150},
       .want_makespan = 150},
      // s(a|b) = 1.5, s(b|a) = 2. a: 100 s x 1.5 -> ends at 150. b by then: 150 / 2 = 75 s done, 225 s left
      // alone -> ends at 375.
      {.name = "the survivor speeds up when its co-resident leaves",
       .truth = Table().SetPair("a", "b", 1.5, 2.0),
       .jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100}, {.app = "b", .arrival_s = 0, .duration_s = 300}},
       .want_jct = {150, 375},
       .want_makespan = 375},
      // a alone 0..40 (40 s done, 60 left); both at slowdown 2 from 40: a ends at 40 + 60 x 2 = 160; b did 60 s
      // by then, 40 s left alone -> ends at 200, JCT 200 - 40 = 160.
      {.name = "a job slows down when a co-resident arrives",
       .truth = Table().SetPair("a", "b", 2.0, 2.0),
       .jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100}, {.app = "b", .arrival_s = 40, .duration_s = 100}},
       .want_jct = {160, 160},
       .want_makespan = 200},
      // Two GPUs, binpack pairs b with a (the most used GPU), but they do not fit in memory: b is undone (one OOM)
      // and waits for the next completion (a at 100), then binpack puts it on the emptied GPU: 100..150.
      {.name = "an infeasible pair runs out of memory and the job runs later",
       .truth = Table().SetPair("a", "b", 1.5, 1.5).Infeasible("a", "b"),
       .gpus = 2,
       .jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100}, {.app = "b", .arrival_s = 0, .duration_s = 50}},
       .want_jct = {100, 150},
       .want_makespan = 150,
       .want_oom = 1},
      // The third job finds the one GPU full (two halves) and queues until a ends: a and b at 1.5 end at 150;
      // c then runs alone 150..250.
      {.name = "a job queues while the GPU is full",
       .truth = Table().SetPair("a", "b", 1.5, 1.5),
       .jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100},
                {.app = "b", .arrival_s = 0, .duration_s = 100},
                {.app = "c", .arrival_s = 10, .duration_s = 100}},
       .want_jct = {150, 150, 240},
       .want_makespan = 250},
  };
  for (const TimingCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto binpack = Policy("binpack");
    auto run = SimulateColocation(OneNode(c.gpus), c.jobs, c.truth, nullptr, *binpack);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(run->jct_s.size(), c.want_jct.size());
    for (size_t i = 0; i < c.want_jct.size(); ++i) {
      EXPECT_NEAR(run->jct_s[i], c.want_jct[i], 1e-9) << "job " << i;
    }
    EXPECT_NEAR(run->makespan_s, c.want_makespan, 1e-9);
    EXPECT_EQ(run->oom_retries, c.want_oom);
    EXPECT_EQ(run->policy, "binpack");
  }
}

TEST(ColocationTest, OutcomeAggregates) {
  // The "leaves" case above: JCTs 150 and 375; run times 150/100 and 375/300 -> slowdowns 1.5 and 1.25.
  const testing::FakeSlowdownModel truth = Table().SetPair("a", "b", 1.5, 2.0);
  const std::vector<ColocationJob> jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100},
                                           {.app = "b", .arrival_s = 0, .duration_s = 300}};
  auto binpack = Policy("binpack");
  auto run = SimulateColocation(OneNode(1), jobs, truth, nullptr, *binpack);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->jobs, 2);
  EXPECT_NEAR(run->avg_jct_s, (150 + 375) / 2.0, 1e-9);
  EXPECT_NEAR(run->p50_jct_s, (150 + 375) / 2.0, 1e-9);  // halfway between the two order statistics
  EXPECT_NEAR(run->p95_jct_s, 150 + 0.95 * 225, 1e-9);
  EXPECT_NEAR(run->mean_slowdown, (1.5 + 1.25) / 2, 1e-9);
  EXPECT_NEAR(run->avg_queue_s, 0, 1e-9);
}

TEST(ColocationTest, SameSeedSameJobsForEveryPolicy) {
  ColocationSpec spec{.apps = {"a", "b", "c", "d"},
                      .jobs = 50,
                      .mean_interarrival_s = 30,
                      .min_duration_s = 60,
                      .max_duration_s = 600,
                      .seed = 7};
  auto first = GenerateColocationJobs(spec);
  auto again = GenerateColocationJobs(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(first->size(), 50u);
  std::set<std::string> apps_seen;
  for (size_t i = 0; i < first->size(); ++i) {
    const ColocationJob& j = (*first)[i];
    EXPECT_EQ(j.app, (*again)[i].app);
    EXPECT_EQ(j.arrival_s, (*again)[i].arrival_s);
    EXPECT_EQ(j.duration_s, (*again)[i].duration_s);
    EXPECT_GE(j.duration_s, 60);
    EXPECT_LE(j.duration_s, 600);
    EXPECT_GE(j.arrival_s, i == 0 ? 0.0 : (*first)[i - 1].arrival_s);
    apps_seen.insert(j.app);
  }
  EXPECT_EQ((*first)[0].arrival_s, 0);
  EXPECT_EQ(apps_seen.size(), 4u);
  spec.seed = 8;
  auto other = GenerateColocationJobs(spec);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[1].arrival_s, (*first)[1].arrival_s);

  // Every entrant of a comparison runs the seed's one job list, and a run repeats exactly.
  const testing::FakeSlowdownModel truth =
      Table().SetPair("a", "b", 1.8, 1.2).SetPair("c", "d", 1.3, 1.4).Infeasible("a", "c");
  auto binpack = Policy("binpack");
  auto random = Policy("random");
  const std::vector<ColocationEntrant> entrants = {{.policy = binpack.get()},
                                                   {.label = "random (seeded)", .policy = random.get()}};
  const std::vector<uint64_t> seeds = {1, 2, 3};
  auto compared = CompareColocation(spec, seeds, truth, entrants);
  ASSERT_TRUE(compared.ok()) << compared.status();
  ASSERT_EQ(compared->size(), 2u);
  EXPECT_EQ((*compared)[0].label, "binpack");
  EXPECT_EQ((*compared)[1].label, "random (seeded)");
  for (size_t s = 0; s < seeds.size(); ++s) {
    ColocationSpec seeded = spec;
    seeded.seed = seeds[s];
    for (size_t e = 0; e < entrants.size(); ++e) {
      const ColocationOutcome& run = (*compared)[e].runs[s];
      EXPECT_EQ(run.seed, seeds[s]);
      EXPECT_EQ(run.jobs, 50);
      auto alone = RunColocation(seeded, truth, nullptr, *entrants[e].policy);
      ASSERT_TRUE(alone.ok());
      EXPECT_EQ(alone->jct_s, run.jct_s) << "seed " << seeds[s] << " entrant " << e;
    }
  }
  const std::string table = FormatColocationTable(*compared);
  EXPECT_NE(table.find("avg JCT (s)"), std::string::npos) << table;
  EXPECT_NE(table.find("random (seeded)"), std::string::npos) << table;
}

TEST(ColocationTest, EveryJobCompletesOnceAndTheClusterEndsEmpty) {
  // Bad partners and out-of-memory pairs on a small, busy cluster, for both baseline policies over a few seeds.
  const testing::FakeSlowdownModel truth = Table()
                                               .SetPair("a", "b", 2.5, 1.9)
                                               .SetPair("a", "a", 1.7, 1.7)
                                               .SetPair("b", "c", 1.1, 1.2)
                                               .SetPair("c", "c", 1.4, 1.4)
                                               .Infeasible("a", "c")
                                               .Infeasible("b", "b");
  for (const std::string name : {"binpack", "random", "spread"}) {
    auto pol = Policy(name);
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(name + " seed " + std::to_string(seed));
      const ColocationSpec spec{.apps = {"a", "b", "c"},
                                .nodes = 2,
                                .gpus_per_node = 2,
                                .jobs = 60,
                                .mean_interarrival_s = 20,
                                .min_duration_s = 50,
                                .max_duration_s = 500,
                                .seed = seed};
      auto jobs = GenerateColocationJobs(spec);
      ASSERT_TRUE(jobs.ok());
      // SimulateColocation fails when an allocation is left over or CheckInvariants finds a violation.
      auto run = SimulateColocation(spec, *jobs, truth, nullptr, *pol);
      ASSERT_TRUE(run.ok()) << run.status();
      ASSERT_EQ(run->jct_s.size(), jobs->size());
      double last_end = 0;
      for (size_t i = 0; i < jobs->size(); ++i) {
        // Slowdowns here are >= 1, so no job beats its isolated time.
        EXPECT_GE(run->jct_s[i], (*jobs)[i].duration_s - 1e-9) << "job " << i;
        last_end = std::max(last_end, (*jobs)[i].arrival_s + run->jct_s[i]);
      }
      EXPECT_NEAR(run->makespan_s, last_end, 1e-6);
      EXPECT_GE(run->mean_slowdown, 1.0);
      EXPECT_GE(run->avg_queue_s, 0.0);
      EXPECT_LE(run->p50_jct_s, run->p95_jct_s);
    }
  }
}

TEST(ColocationTest, InterferenceAwareBeatsBinpackOnBadPartners) {
  // One node, two GPUs; a, b, a, b all at t=0 for 100 s. Same-app pairs are mild (1.2), mixed pairs bad (3).
  // binpack fills the most used GPU: (a, b) on GPU 0, (a, b) on GPU 1 -> every job at 3x: JCT 300.
  // interference-aware (forecast from the truth): a and b alone on the empty GPUs first, then each a or b joins
  // its own kind: slowdown 1.2 -> JCT 120. With a memory conflict instead, binpack's first pairing runs out of
  // memory (one OOM per job placed next to the other kind), while the forecast avoids it.
  const testing::FakeSlowdownModel bad =
      Table().SetPair("a", "b", 3.0, 3.0).SetPair("a", "a", 1.2, 1.2).SetPair("b", "b", 1.2, 1.2);
  const testing::FakeSlowdownModel oom =
      Table().SetPair("a", "a", 1.2, 1.2).SetPair("b", "b", 1.2, 1.2).Infeasible("a", "b");
  const std::vector<ColocationJob> jobs = {{.app = "a", .arrival_s = 0, .duration_s = 100},
                                           {.app = "b", .arrival_s = 0, .duration_s = 100},
                                           {.app = "a", .arrival_s = 0, .duration_s = 100},
                                           {.app = "b", .arrival_s = 0, .duration_s = 100}};
  struct Case {
    std::string name;
    const ports::SlowdownModel* truth;
    std::string policy;
    bool forecast;
    double want_avg_jct;
    int64_t want_oom;
  };
  // Memory conflict, binpack: job 0 (a) -> GPU 0; job 1 (b) -> GPU 0, out of memory, waits for a completion;
  // job 2 (a) -> GPU 0 at 1.2 (both end at 120); job 3 (b) -> GPU 1 alone (ends at 100). At 100 job 1 takes the
  // emptied GPU 1 alone: 100..200. JCTs 120, 200, 120, 100 -> mean 135.
  const std::vector<Case> cases = {
      {"bad partners, binpack", &bad, "binpack", false, 300, 0},
      {"bad partners, interference-aware", &bad, "interference-aware", true, 120, 0},
      {"memory conflict, binpack", &oom, "binpack", false, 135, 1},
      {"memory conflict, interference-aware", &oom, "interference-aware", true, 120, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto pol = Policy(c.policy);
    auto run = SimulateColocation(OneNode(2), jobs, *c.truth, c.forecast ? c.truth : nullptr, *pol);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_NEAR(run->avg_jct_s, c.want_avg_jct, 1e-9);
    EXPECT_EQ(run->oom_retries, c.want_oom);
  }
}

TEST(ColocationTest, BadSpecsNameTheField) {
  struct Case {
    std::string name;
    ColocationSpec spec;
    std::string want;
  };
  const ColocationSpec good{.apps = {"a"}};
  auto with = [&](auto change) {
    ColocationSpec s = good;
    change(s);
    return s;
  };
  const std::vector<Case> cases = {
      {"no nodes", with([](ColocationSpec& s) { s.nodes = 0; }), "nodes"},
      {"no GPUs", with([](ColocationSpec& s) { s.gpus_per_node = 0; }), "gpus_per_node"},
      {"no apps", with([](ColocationSpec& s) { s.apps.clear(); }), "apps"},
      {"no jobs", with([](ColocationSpec& s) { s.jobs = 0; }), "jobs"},
      {"negative gap", with([](ColocationSpec& s) { s.mean_interarrival_s = -1; }), "mean_interarrival_s"},
      {"zero duration", with([](ColocationSpec& s) { s.min_duration_s = 0; }), "min_duration_s"},
      {"min above max", with([](ColocationSpec& s) { s.min_duration_s = 10, s.max_duration_s = 5; }), "max_duration_s"},
  };
  auto binpack = Policy("binpack");
  const testing::FakeSlowdownModel truth;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto run = RunColocation(c.spec, truth, nullptr, *binpack);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(run.status().message().find(c.want), std::string::npos) << run.status();
  }
  EXPECT_TRUE(ValidateColocationSpec(good).ok());
  // A job list out of arrival order is refused too.
  const std::vector<ColocationJob> unordered = {{.app = "a", .arrival_s = 5, .duration_s = 1},
                                                {.app = "a", .arrival_s = 1, .duration_s = 1}};
  auto run = SimulateColocation(good, unordered, truth, nullptr, *binpack);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("arrival_s"), std::string::npos) << run.status();
}

}  // namespace
}  // namespace gpusched::sim
