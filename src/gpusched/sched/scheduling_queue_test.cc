#include "gpusched/sched/scheduling_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"
#include "gpusched/testing/fake_clock.h"

namespace gpusched::sched {
namespace {

using Outcome = SchedulingQueue::Outcome;

QueuedPod P(const std::string& name, int32_t priority = 0, int64_t created = 0) {
  return QueuedPod{.uid = "uid-" + name, .key = "default/" + name, .priority = priority, .created_ms = created};
}

std::vector<std::string> Drain(SchedulingQueue& q) {
  std::vector<std::string> out;
  while (auto p = q.Pop()) {
    out.push_back(p->key.substr(8));
    q.Done(p->uid);
  }
  return out;
}

TEST(SchedulingQueueTest, HigherPriorityFirstThenOlderThenByName) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("low-old", 0, 1));
  q.AddOrUpdate(P("high-new", 100, 9));
  q.AddOrUpdate(P("low-new", 0, 5));
  q.AddOrUpdate(P("high-old", 100, 2));
  q.AddOrUpdate(P("b-tie", 0, 5));
  q.AddOrUpdate(P("negative", -5, 0));
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"high-old", "high-new", "low-old", "b-tie", "low-new", "negative"}));
  EXPECT_FALSE(q.Pop().has_value());
}

TEST(SchedulingQueueTest, QueuesTakeTurnsByRankAndKeepTheirOwnOrder) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  std::map<std::string, double> rank = {{"a", 0}, {"b", 0}};
  q.SetQueueChooser([&](std::span<const std::string* const> names) {
    size_t best = 0;
    for (size_t i = 1; i < names.size(); ++i) {
      if (rank.at(*names[i]) < rank.at(*names[best])) best = i;
    }
    return best;
  });
  auto in = [](std::string queue, const std::string& name, int32_t priority, int64_t created) {
    QueuedPod p = P(name, priority, created);
    p.queue = std::move(queue);
    return p;
  };
  q.AddOrUpdate(in("a", "a-low", 0, 1));
  q.AddOrUpdate(in("a", "a-high", 100, 2));
  q.AddOrUpdate(in("b", "b-old", 0, 0));
  q.AddOrUpdate(in("b", "b-new", 0, 9));
  EXPECT_EQ(q.counts().active, 4U);
  // Equal ranks: by queue name; within a queue, priority then creation. Each pop charges the queue it took from.
  std::vector<std::string> order;
  while (auto p = q.Pop()) {
    order.push_back(p->key.substr(8));
    rank[p->queue] += p->queue == "a" ? 1.0 : 0.4;  // b's pods weigh less of its fair share
    q.Done(p->uid);
  }
  // a (0) → a-high; b (0 < 1) → b-old; b (0.4) → b-new; a → a-low.
  EXPECT_EQ(order, (std::vector<std::string>{"a-high", "b-old", "b-new", "a-low"}));
  EXPECT_EQ(q.counts().active, 0U);
}

TEST(SchedulingQueueTest, ErrorsBackOffOneSecondDoublingToTen) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("p"));
  const std::vector<int64_t> waits = {1000, 2000, 4000, 8000, 10000, 10000};
  for (int64_t wait : waits) {
    auto p = q.Pop();
    ASSERT_TRUE(p.has_value());
    q.Requeue(p->uid, Outcome::kError);
    EXPECT_EQ(q.counts().backoff, 1U);
    EXPECT_EQ(q.NextWakeMs(), clock.NowMs() + wait);
    clock.AdvanceMs(wait - 1);
    EXPECT_FALSE(q.Pop().has_value()) << "out of backoff early (wait " << wait << ")";
    clock.AdvanceMs(1);
  }
  EXPECT_TRUE(q.Pop().has_value());
  EXPECT_EQ(q.attempts("uid-p"), static_cast<int>(waits.size()) + 1);
}

// An unschedulable pod waits for an event that can make it fit; time alone (short of the safety flush) does not
// bring it back, and an event about something else does not either.
TEST(SchedulingQueueTest, UnschedulablePodsMoveOnTheEventsThatCanHelpThem) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("gpu"));
  q.AddOrUpdate(P("taint"));
  for (auto [uid, blocker] : {std::pair{"uid-gpu", kBlockedByGpu}, std::pair{"uid-taint", kBlockedByNodeSpec}}) {
    auto p = q.Pop();
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->uid, uid);
    q.Requeue(p->uid, Outcome::kUnschedulable, blocker);
  }
  EXPECT_EQ(q.counts().unschedulable, 2U);
  clock.AdvanceMs(60'000);
  EXPECT_FALSE(q.Pop().has_value()) << "an unschedulable pod came back on a timer";
  EXPECT_EQ(q.OnClusterEvent(kBlockedByQuota), 0U);
  EXPECT_FALSE(q.Pop().has_value());
  // GPU capacity freed: the GPU-blocked pod at once, not the tainted one.
  EXPECT_EQ(q.OnClusterEvent(kBlockedByGpu | kBlockedByResources), 1U);
  auto p = q.Pop();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->uid, "uid-gpu");
  q.Done(p->uid);
  EXPECT_FALSE(q.Pop().has_value());
  EXPECT_EQ(q.OnClusterEvent(kBlockedByNodeSpec), 1U);
  EXPECT_EQ(q.Pop()->uid, "uid-taint");
}

TEST(SchedulingQueueTest, AnEventDuringTheAttemptIsNotLost) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("p"));
  auto p = q.Pop();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(q.counts().in_flight, 1U);
  q.OnClusterEvent(kBlockedByGpu);  // a release while the cycle found no GPU
  q.Requeue(p->uid, Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(q.counts().active, 1U);
  p = q.Pop();
  ASSERT_TRUE(p.has_value());
  q.OnClusterEvent(kBlockedByNodeSpec);  // unrelated to what blocks it
  q.Requeue(p->uid, Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(q.counts().unschedulable, 1U);
}

TEST(SchedulingQueueTest, UpdatesReorderAndWakePodsAndDeletesForgetThem) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("a", 0, 1));
  q.AddOrUpdate(P("b", 0, 2));
  q.AddOrUpdate(P("b", 50, 2));  // its priority went up
  auto first = q.Pop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->uid, "uid-b");
  EXPECT_EQ(first->priority, 50);
  q.Requeue(first->uid, Outcome::kUnschedulable, kBlockedByGpu);
  q.AddOrUpdate(P("b", 50, 2));  // a changed pod may fit now
  EXPECT_EQ(q.counts().unschedulable, 0U);
  EXPECT_EQ(q.Pop()->uid, "uid-b");
  // Updated while in flight: its requeue as unschedulable goes to active instead.
  q.AddOrUpdate(P("b", 60, 2));
  q.Requeue("uid-b", Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(q.attempts("uid-b"), 2);
  EXPECT_TRUE(q.Delete("uid-b"));
  EXPECT_FALSE(q.Delete("uid-b"));
  EXPECT_EQ(q.attempts("uid-b"), -1);
  auto a = q.Pop();
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(q.Delete(a->uid));       // deleted while in flight
  q.Requeue(a->uid, Outcome::kError);  // the cycle's late requeue is ignored
  EXPECT_EQ(q.counts().backoff + q.counts().active + q.counts().unschedulable + q.counts().in_flight, 0U);
}

TEST(SchedulingQueueTest, TheSafetyFlushBringsBackPodsAfterFiveMinutes) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  q.AddOrUpdate(P("p"));
  q.Requeue(q.Pop()->uid, Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(q.NextWakeMs(), clock.NowMs() + 300'000);
  clock.AdvanceMs(299'999);
  EXPECT_FALSE(q.Pop().has_value());
  clock.AdvanceMs(1);
  EXPECT_TRUE(q.Pop().has_value());

  // Without the flush (the simulator) only events bring pods back.
  SchedulingQueue never(clock, QueueOptions{.flush_after_ms = 0});
  never.AddOrUpdate(P("p"));
  never.Requeue(never.Pop()->uid, Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(never.NextWakeMs(), std::nullopt);
  clock.AdvanceMs(int64_t{1} << 40);
  EXPECT_FALSE(never.Pop().has_value());
  EXPECT_EQ(never.OnClusterEvent(kBlockedByGpu), 1U);
  EXPECT_TRUE(never.Pop().has_value());
}

// A hinted event moves only the unschedulable pods its hint accepts; a pod in flight remembers the event anyway.
TEST(SchedulingQueueTest, AHintedEventMovesOnlyThePodsItAccepts) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  for (const char* name : {"a-small", "b-big", "c-flight"}) {
    q.AddOrUpdate(P(name));
  }
  for (int i = 0; i < 2; ++i) {
    auto p = q.Pop();
    ASSERT_TRUE(p.has_value());
    q.Requeue(p->uid, Outcome::kUnschedulable, kBlockedByGpu);
  }
  auto in_flight = q.Pop();
  ASSERT_TRUE(in_flight.has_value());
  std::vector<std::string> asked;
  EXPECT_EQ(q.OnClusterEvent(kBlockedByGpu,
                             [&asked](const QueuedPod& p) {
                               asked.push_back(p.key);
                               return p.key == "default/a-small";
                             }),
            1U);
  EXPECT_EQ(asked.size(), 2U) << "the unschedulable pods only";
  EXPECT_EQ(q.OnClusterEvent(kBlockedByQuota, [](const QueuedPod&) { return true; }), 0U) << "not blocked by quota";
  q.Requeue(in_flight->uid, Outcome::kUnschedulable, kBlockedByGpu);
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a-small", "c-flight"}));
  EXPECT_EQ(q.counts().unschedulable, 1U) << "b-big stays";
}

// Room freed on a node: the parked pods are offered it in Pop's order; those woken for the room carry the node when
// popped and are counted until then; a pod's decline is what the offer sees; kStop ends the offer.
TEST(SchedulingQueueTest, WakeInOrderOffersInPopOrderAndTicketsThePodsWokenForTheRoom) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  for (const auto& [name, priority] : std::vector<std::pair<std::string, int32_t>>{{"lo", 0}, {"hi", 10}, {"mid", 5}}) {
    q.AddOrUpdate(P(name, priority));
  }
  while (auto p = q.Pop()) {
    q.Requeue(p->uid, Outcome::kUnschedulable, kBlockedByGpu);
  }
  EXPECT_EQ(q.WakeInOrder(kBlockedByQuota, "n1", [](const QueuedPod&) { return SchedulingQueue::Offer::kWake; }), 0U)
      << "nobody waits for quota";
  std::vector<std::string> asked;
  const size_t woken = q.WakeInOrder(kBlockedByGpu, "n1", [&asked](const QueuedPod& p) {
    asked.push_back(p.key.substr(8));
    if (p.key == "default/hi") return SchedulingQueue::Offer::kWakeForRoom;
    return p.key == "default/lo" ? SchedulingQueue::Offer::kWake : SchedulingQueue::Offer::kPass;
  });
  EXPECT_EQ(woken, 2U);
  EXPECT_EQ(asked, (std::vector<std::string>{"hi", "mid", "lo"}));
  EXPECT_EQ(q.TicketsFor("n1"), 1U);
  auto hi = q.Pop();
  ASSERT_TRUE(hi.has_value());
  EXPECT_EQ(hi->key, "default/hi");
  EXPECT_EQ(hi->woken_for, "n1");
  EXPECT_EQ(q.TicketsFor("n1"), 0U) << "popped: the front end decides what its room does next";
  auto lo = q.Pop();
  ASSERT_TRUE(lo.has_value());
  EXPECT_EQ(lo->woken_for, "") << "woken without a ticket";
  EXPECT_TRUE(q.TakeOrphanedRooms().empty());
  q.Requeue(hi->uid, Outcome::kUnschedulable, kBlockedByGpu);
  q.Requeue(lo->uid, Outcome::kUnschedulable, kBlockedByGpu);
  q.Decline(hi->uid, "n1", 7);
  std::vector<std::string> declined;
  EXPECT_EQ(q.WakeInOrder(kBlockedByGpu, "n1",
                          [&declined](const QueuedPod& p) {
                            declined.push_back(p.declined_node + "@" + std::to_string(p.declined_generation));
                            return SchedulingQueue::Offer::kStop;
                          }),
            0U);
  EXPECT_EQ(declined, (std::vector<std::string>{"n1@7"})) << "kStop ends the offer at the first pod";
  // A pod woken for the room and deleted before it is popped gives the room back.
  EXPECT_EQ(q.WakeInOrder(kBlockedByGpu, "n2",
                          [](const QueuedPod& p) {
                            return p.key == "default/mid" ? SchedulingQueue::Offer::kWakeForRoom
                                                          : SchedulingQueue::Offer::kPass;
                          }),
            1U);
  EXPECT_TRUE(q.Delete("uid-mid"));
  EXPECT_EQ(q.TicketsFor("n2"), 0U);
  EXPECT_EQ(q.TakeOrphanedRooms(), (std::vector<std::string>{"n2"}));
  EXPECT_TRUE(q.TakeOrphanedRooms().empty()) << "each once";
}

// With a rank, the offer turns to the queue of the lowest rank as the pods woken so far count into their queues,
// as Pop would take turns once they are placed; only_queue keeps the offer to one queue.
TEST(SchedulingQueueTest, WakeInOrderTurnsToTheLowestRankAsWokenPodsCountIn) {
  testing::FakeClock clock;
  SchedulingQueue q(clock);
  auto gpu = std::make_shared<const core::PodRequest>(testing::Pod("any").Gpus(1).Build());
  auto park_all = [&q, &gpu] {
    for (const char* name : {"a1", "a2", "b1", "b2"}) {
      QueuedPod p = P(name);
      p.queue = std::string(1, name[0]);
      p.request = gpu;
      q.AddOrUpdate(p);
    }
    while (auto p = q.Pop()) {
      q.Requeue(p->uid, Outcome::kUnschedulable, kBlockedByGpu);
    }
  };
  park_all();
  const std::map<std::string, double> base = {{"a", 0.0}, {"b", 0.5}};
  auto rank = [&base](const std::string& queue, const core::GpuAmount& more) {
    return base.at(queue) + static_cast<double>(more.gpus);
  };
  std::vector<std::string> order;
  auto all = [&order](const QueuedPod& p) {
    order.push_back(p.key.substr(8));
    return SchedulingQueue::Offer::kWakeForRoom;
  };
  auto only_b1 = [&order](const QueuedPod& p) {
    order.push_back(p.key.substr(8));
    return p.key == "default/b1" ? SchedulingQueue::Offer::kWakeForRoom : SchedulingQueue::Offer::kPass;
  };
  EXPECT_EQ(q.WakeInOrder(kBlockedByGpu, "n", only_b1, rank, "b"), 1U);
  EXPECT_EQ(order, (std::vector<std::string>{"b1", "b2"})) << "b's pods only";
  EXPECT_EQ(q.TicketsFor("n"), 1U);
  order.clear();
  // b1, woken and not yet popped, counts: b stands at 1.5, so both of a's come before b2.
  EXPECT_EQ(q.WakeInOrder(kBlockedByGpu, "m", all, rank), 3U);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "a2", "b2"}));
  EXPECT_EQ(Drain(q), (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
  // Parked again with nothing ticketed: the turns alternate as each woken pod raises its queue's rank.
  park_all();
  order.clear();
  EXPECT_EQ(q.WakeInOrder(kBlockedByGpu, "n", all, rank), 4U);
  EXPECT_EQ(order, (std::vector<std::string>{"a1", "b1", "a2", "b2"}));
}

}  // namespace
}  // namespace gpusched::sched
