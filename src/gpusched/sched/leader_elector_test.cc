#include "gpusched/sched/leader_elector.h"

#include <gtest/gtest.h>

#include "gpusched/testing/fake_clock.h"
#include "gpusched/testing/fake_leader_lock.h"

namespace gpusched::sched {
namespace {

using testing::FakeClock;
using testing::FakeLeaderLock;
using testing::LeaseStore;

LeaderElectionOptions Opts(const std::string& id) {
  return LeaderElectionOptions{.identity = id,
                               .lease_duration_ms = 15000,
                               .renew_deadline_ms = 10000,
                               .retry_period_ms = 2000,
                               .settle_ms = 2000};
}

// Two replicas, each with its own clock (not in step) and its own client of one lease.
struct Pair {
  LeaseStore store;
  FakeClock clock_a{1'000'000};
  FakeClock clock_b{77'000'000};
  FakeLeaderLock lock_a{store};
  FakeLeaderLock lock_b{store};
  LeaderElector a{lock_a, clock_a, [] { return int64_t{1'700'000'000'000}; }, Opts("a")};
  LeaderElector b{lock_b, clock_b, [] { return int64_t{1'700'000'000'000}; }, Opts("b")};
  void Advance(int64_t ms) {
    clock_a.AdvanceMs(ms);
    clock_b.AdvanceMs(ms);
  }
};

TEST(LeaderElectorTest, FirstReplicaLeadsTheOtherStandsBy) {
  Pair p;
  EXPECT_TRUE(p.a.Tick());
  EXPECT_FALSE(p.b.Tick());
  EXPECT_TRUE(p.a.IsLeader());
  EXPECT_FALSE(p.b.IsLeader());
  EXPECT_EQ(p.b.Holder(), "a");
  // Renewals keep it; the standby never takes over a lease that is being renewed.
  for (int i = 0; i < 20; ++i) {
    p.Advance(2000);
    EXPECT_TRUE(p.a.Tick());
    EXPECT_FALSE(p.b.Tick());
  }
  EXPECT_EQ(p.store.record()->holder, "a");
  EXPECT_EQ(p.store.record()->transitions, 0);
}

TEST(LeaderElectorTest, ANewLeaderActsOnlyAfterSettling) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  EXPECT_TRUE(p.a.IsLeader());
  EXPECT_FALSE(p.a.CanAct());
  p.Advance(1999);
  EXPECT_FALSE(p.a.CanAct());
  p.Advance(1);
  EXPECT_TRUE(p.a.CanAct());
}

// The leader crashes (stops ticking): the standby takes over only after a whole lease duration of silence as its
// own clock measures from when it last saw the record change, whatever the times written in the record.
TEST(LeaderElectorTest, StandbyTakesOverAfterTheLeaseRunsOut) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  ASSERT_FALSE(p.b.Tick());  // b observes the record now
  for (int64_t t = 2000; t < 15000; t += 2000) {
    p.Advance(2000);
    EXPECT_FALSE(p.b.Tick()) << "took over after " << t << " ms";
  }
  p.Advance(2000);  // 16 s since b saw the record change
  EXPECT_TRUE(p.b.Tick());
  EXPECT_EQ(p.store.record()->holder, "b");
  EXPECT_EQ(p.store.record()->transitions, 1);
  // The old leader comes back: it learns that it lost and does not lead.
  EXPECT_FALSE(p.a.Tick());
  EXPECT_FALSE(p.a.IsLeader());
  EXPECT_EQ(p.a.Holder(), "b");
}

// A leader that cannot reach the lock stops leading at the renew deadline, before the lease can run out for the
// standby (which needs lease duration): at no instant do both lead.
TEST(LeaderElectorTest, PartitionedLeaderStopsBeforeTheStandbyStarts) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  ASSERT_FALSE(p.b.Tick());
  p.lock_a.SetUnreachable(true);
  bool a_stopped = false;
  for (int step = 1; step <= 20; ++step) {
    p.Advance(1000);
    const bool a_leads = p.a.Tick();
    const bool b_leads = p.b.Tick();
    EXPECT_FALSE(a_leads && b_leads) << "both lead at step " << step;
    EXPECT_FALSE(a_leads && p.b.IsLeader());
    if (!a_leads) {
      a_stopped = true;
    }
    if (b_leads) {
      EXPECT_TRUE(a_stopped);
      EXPECT_GE(step, 15);
    }
    if (step < 10) {
      EXPECT_TRUE(a_leads) << "stopped early at step " << step;
      EXPECT_FALSE(p.a.LastError().empty());
    }
  }
  EXPECT_TRUE(p.b.IsLeader());
  EXPECT_FALSE(p.a.IsLeader());
}

// A slow API server: the standby's GET is sent at t=0 and answered at t=13 s with the leader's renewal of t=13 s.
// The standby times the lease from the answer (t=13), so at t=15 it does not take over from a leader that may act
// until t=23 (timed from the GET's start it would: two leaders for 8 s).
TEST(LeaderElectorTest, AStandbyTimesTheLeaseFromWhenItsGetReturned) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  bool slow = true;
  p.lock_b.SetBeforeGet([&] {
    if (!slow) {
      return;
    }
    slow = false;
    p.Advance(13000);
    ASSERT_TRUE(p.a.Tick());  // the leader renews while the standby's GET is on its way
  });
  ASSERT_FALSE(p.b.Tick());
  p.lock_a.SetUnreachable(true);
  for (int step = 1; step <= 20; ++step) {
    p.Advance(1000);  // t = 13 + step s
    const bool a_leads = p.a.Tick();
    const bool b_leads = p.b.Tick();
    EXPECT_FALSE(a_leads && b_leads) << "both lead at t=" << 13 + step << " s";
    EXPECT_FALSE(b_leads && p.a.ActBudgetMs() > 0) << "the old leader may still write at t=" << 13 + step << " s";
    if (b_leads) {
      EXPECT_GE(step, 15) << "the standby took over before a whole lease since it saw the renewal";
    }
  }
  EXPECT_TRUE(p.b.IsLeader());
}

// The write fence: how long the leader may still write, counted from its last renewal; 0 once the deadline passed
// (partitioned), and always 0 for a standby.
TEST(LeaderElectorTest, TheWriteBudgetRunsOutAtTheRenewDeadline) {
  Pair p;
  EXPECT_EQ(p.a.ActBudgetMs(), 0);
  ASSERT_TRUE(p.a.Tick());
  ASSERT_FALSE(p.b.Tick());
  EXPECT_EQ(p.a.ActBudgetMs(), 10000);
  EXPECT_EQ(p.b.ActBudgetMs(), 0);
  p.Advance(4000);
  EXPECT_EQ(p.a.ActBudgetMs(), 6000);  // 10 s from the renewal at 0, 4 s gone
  ASSERT_TRUE(p.a.Tick());             // renewed at 4 s
  EXPECT_EQ(p.a.ActBudgetMs(), 10000);
  p.lock_a.SetUnreachable(true);
  p.Advance(9999);
  EXPECT_EQ(p.a.ActBudgetMs(), 1);
  p.Advance(1);
  EXPECT_EQ(p.a.ActBudgetMs(), 0);
  EXPECT_FALSE(p.a.Tick());
  EXPECT_EQ(p.a.ActBudgetMs(), 0);
}

// Between ticks too: IsLeader turns false by itself once the renew deadline passes.
TEST(LeaderElectorTest, LeadershipLapsesWithoutATick) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  p.Advance(9999);
  EXPECT_TRUE(p.a.IsLeader());
  p.Advance(1);
  EXPECT_FALSE(p.a.IsLeader());
  EXPECT_FALSE(p.a.CanAct());
}

TEST(LeaderElectorTest, ReleaseHandsOverAtTheStandbysNextTick) {
  Pair p;
  ASSERT_TRUE(p.a.Tick());
  ASSERT_FALSE(p.b.Tick());
  p.a.Release();
  EXPECT_FALSE(p.a.IsLeader());
  EXPECT_EQ(p.store.record()->holder, "");
  p.Advance(2000);
  EXPECT_TRUE(p.b.Tick());
  EXPECT_EQ(p.store.record()->holder, "b");
  EXPECT_EQ(p.b.transitions_seen(), 1U);
  p.b.Release();
  p.b.Release();  // idempotent: not holding, nothing written
  EXPECT_EQ(p.store.record()->holder, "");
}

// Two standbys race for a free lease: the lock's concurrency lets exactly one win.
TEST(LeaderElectorTest, OnlyOneWinsARace) {
  LeaseStore store;
  FakeClock clock;
  FakeLeaderLock la(store), lb(store);
  LeaderElector a(
      la, clock, [] { return int64_t{0}; }, Opts("a"));
  LeaderElector b(
      lb, clock, [] { return int64_t{0}; }, Opts("b"));
  ASSERT_TRUE(a.Tick());
  ASSERT_FALSE(b.Tick());
  a.Release();
  // Both read the released record, then both write: the second write is stale.
  clock.AdvanceMs(2000);
  const bool first = b.Tick();
  const bool second = a.Tick();
  EXPECT_TRUE(first != second || !first);
  EXPECT_EQ(static_cast<int>(a.IsLeader()) + static_cast<int>(b.IsLeader()), 1);
}

TEST(LeaderElectorTest, OptionsAreChecked) {
  EXPECT_TRUE(ValidateLeaderElection(Opts("x")).ok());
  EXPECT_FALSE(ValidateLeaderElection(Opts("")).ok());
  auto o = Opts("x");
  o.renew_deadline_ms = o.lease_duration_ms;
  EXPECT_NE(ValidateLeaderElection(o).message().find("renew deadline < lease duration"), std::string::npos);
  o = Opts("x");
  o.retry_period_ms = 0;
  EXPECT_FALSE(ValidateLeaderElection(o).ok());
}

}  // namespace
}  // namespace gpusched::sched
