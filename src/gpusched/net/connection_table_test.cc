// ConnectionTable: the connection policy on its own (no sockets): the per-peer cap, the idle connection closed
// first at the global cap (idle longest), the slow head of the peer holding most closed when none is idle, and
// refusals only when nothing can give way.

#include "gpusched/net/connection_table.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpusched::net {
namespace {

using Verdict = ConnectionTable::Verdict;
using Evicted = ConnectionTable::Evicted;

// Admits a connection and records its closing in `closed` (as the server's session would do on its strand).
uint64_t Open(ConnectionTable& table, const std::string& peer, std::vector<uint64_t>& closed) {
  const ConnectionTable::Admission a = table.Admit(peer);
  if (a.close_victim) {
    a.close_victim();
  }
  if (a.verdict != Verdict::kServed) {
    return 0;
  }
  const uint64_t id = a.id;
  table.Attach(id, [&closed, id] { closed.push_back(id); });
  return id;
}

TEST(ConnectionTableTest, PerPeerCapRefusesTheExcessOfThatPeerOnly) {
  ConnectionTable table(16, 4);
  std::vector<uint64_t> closed;
  for (int i = 0; i < 4; ++i) {
    const uint64_t id = Open(table, "10.0.0.9", closed);
    ASSERT_NE(id, 0U);
    ASSERT_TRUE(table.MarkReadingHead(id));  // slow heads: nothing of theirs may give way
  }
  for (int i = 0; i < 100; ++i) {
    const auto a = table.Admit("10.0.0.9");
    EXPECT_EQ(a.verdict, Verdict::kRefusedPerPeer);
    EXPECT_FALSE(a.close_victim);
  }
  EXPECT_EQ(table.open_from("10.0.0.9"), 4U);
  EXPECT_NE(Open(table, "10.0.0.1", closed), 0U);  // another peer is served
  const auto c = table.counts();
  EXPECT_EQ(c.refused_per_peer, 100U);
  EXPECT_EQ(c.refused, 0U);
  EXPECT_EQ(c.open, 5U);
  EXPECT_TRUE(closed.empty());  // nothing of the capped peer was closed
}

TEST(ConnectionTableTest, PerPeerCapHoldsWhateverTheState) {
  ConnectionTable table(16, 3);
  std::vector<uint64_t> closed;
  const uint64_t a = Open(table, "p", closed);
  const uint64_t b = Open(table, "p", closed);
  const uint64_t c = Open(table, "p", closed);
  ASSERT_TRUE(table.MarkReadingHead(a));  // a slow head
  ASSERT_TRUE(table.MarkBusy(b));         // a handler running
  ASSERT_TRUE(table.MarkBusy(c));
  EXPECT_EQ(table.Admit("p").verdict, Verdict::kRefusedPerPeer);
  table.Remove(b);  // one ends: room for one more
  const uint64_t d = Open(table, "p", closed);
  ASSERT_NE(d, 0U);
  ASSERT_TRUE(table.MarkBusy(d));
  EXPECT_EQ(table.Admit("p").verdict, Verdict::kRefusedPerPeer);
  EXPECT_TRUE(closed.empty());
}

TEST(ConnectionTableTest, AtThePerPeerCapThePeersOwnIdleLongestGivesWay) {
  ConnectionTable table(16, 4);
  std::vector<uint64_t> closed;
  const uint64_t other = Open(table, "q", closed);  // idle longest of all, but another peer's
  const uint64_t a = Open(table, "p", closed);
  const uint64_t b = Open(table, "p", closed);
  const uint64_t c = Open(table, "p", closed);
  const uint64_t d = Open(table, "p", closed);
  ASSERT_TRUE(table.MarkBusy(a));
  ASSERT_TRUE(table.MarkReadingHead(b));
  ASSERT_TRUE(table.MarkBusy(d));
  ASSERT_TRUE(table.MarkIdle(d));  // d idle after c
  const ConnectionTable::Admission e = table.Admit("p");
  ASSERT_EQ(e.verdict, Verdict::kServed);
  EXPECT_EQ(e.evicted, Evicted::kIdle);
  ASSERT_TRUE(e.close_victim);
  e.close_victim();
  EXPECT_EQ(closed, std::vector<uint64_t>{c});
  EXPECT_EQ(table.open_from("p"), 4U);
  EXPECT_TRUE(table.MarkIdle(other));  // q's is untouched
  EXPECT_EQ(table.counts().evicted_idle, 1U);
  EXPECT_EQ(table.counts().refused_per_peer, 0U);
}

TEST(ConnectionTableTest, AtTheCapTheConnectionIdleLongestIsClosedAndTheNewOneServed) {
  ConnectionTable table(4, 4);
  std::vector<uint64_t> closed;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(Open(table, "tenant", closed));
  }
  // All served a request; ids[2] went idle first, then 0, 3, 1.
  for (uint64_t id : ids) {
    ASSERT_TRUE(table.MarkReadingHead(id));
    ASSERT_TRUE(table.MarkBusy(id));
  }
  for (uint64_t id : {ids[2], ids[0], ids[3], ids[1]}) {
    ASSERT_TRUE(table.MarkIdle(id));
  }
  const uint64_t probe = Open(table, "kubelet", closed);
  ASSERT_NE(probe, 0U);
  EXPECT_EQ(closed, std::vector<uint64_t>{ids[2]});
  EXPECT_FALSE(table.MarkReadingHead(ids[2]));  // it was removed: its session closes itself
  ASSERT_NE(Open(table, "kubelet", closed), 0U);
  EXPECT_EQ(closed, (std::vector<uint64_t>{ids[2], ids[0]}));
  const auto c = table.counts();
  EXPECT_EQ(c.evicted_idle, 2U);
  EXPECT_EQ(c.refused, 0U);
  EXPECT_EQ(c.open, 4U);
  EXPECT_EQ(table.open_from("tenant"), 2U);
}

TEST(ConnectionTableTest, AnIdleConnectionOfTheNewcomersOwnPeerGivesWayToo) {
  // At the global cap (not the per-peer one) a peer's own idle connection is closed for its new one.
  ConnectionTable table(3, 3);
  std::vector<uint64_t> closed;
  const uint64_t a = Open(table, "q", closed);
  ASSERT_TRUE(table.MarkBusy(Open(table, "q", closed)));
  ASSERT_TRUE(table.MarkBusy(Open(table, "p", closed)));
  ASSERT_NE(Open(table, "q", closed), 0U);
  EXPECT_EQ(closed, std::vector<uint64_t>{a});
  EXPECT_EQ(table.open_from("q"), 2U);
}

TEST(ConnectionTableTest, BusyConnectionsAreNeverClosedAndTheNewOneIsRefused) {
  ConnectionTable table(3, 3);
  std::vector<uint64_t> closed;
  for (int i = 0; i < 3; ++i) {
    const uint64_t id = Open(table, i == 0 ? "a" : "b", closed);
    ASSERT_TRUE(table.MarkBusy(id));
  }
  const auto r = table.Admit("c");
  EXPECT_EQ(r.verdict, Verdict::kRefused);
  EXPECT_FALSE(r.close_victim);
  EXPECT_TRUE(closed.empty());
  EXPECT_EQ(table.counts().refused, 1U);
}

TEST(ConnectionTableTest, WithNoneIdleTheSlowHeadOfThePeerHoldingMostGivesWay) {
  ConnectionTable table(6, 6);
  std::vector<uint64_t> closed;
  // "heavy" holds 4 connections reading heads slowly, "light" 2.
  std::vector<uint64_t> heavy;
  for (int i = 0; i < 4; ++i) {
    heavy.push_back(Open(table, "heavy", closed));
  }
  const uint64_t l1 = Open(table, "light", closed);
  const uint64_t l2 = Open(table, "light", closed);
  for (uint64_t id : {heavy[1], heavy[0], l1, heavy[3], heavy[2], l2}) {
    ASSERT_TRUE(table.MarkReadingHead(id));
  }
  // The probe's peer holds none: heavy's oldest head (heavy[1], marked first) is closed.
  const auto a = table.Admit("kubelet");
  ASSERT_EQ(a.verdict, Verdict::kServed);
  EXPECT_EQ(a.evicted, Evicted::kReadingHead);
  ASSERT_TRUE(a.close_victim);
  a.close_victim();
  EXPECT_EQ(closed, std::vector<uint64_t>{heavy[1]});
  ASSERT_TRUE(table.MarkBusy(a.id));  // the probe's request is being handled
  EXPECT_EQ(table.open_from("heavy"), 3U);
  EXPECT_EQ(table.counts().evicted_head, 1U);
  // heavy (3) itself is not served at others' cost: it holds most.
  EXPECT_EQ(table.Admit("heavy").verdict, Verdict::kRefused);
  // light holds 2 of heavy's 3: after a swap it would hold 3 and heavy 2; no ping-pong, refused.
  EXPECT_EQ(table.Admit("light").verdict, Verdict::kRefused);
  // A new peer (0 + 1 < 3) still gets in, at heavy's cost again.
  EXPECT_EQ(table.Admit("other").verdict, Verdict::kServed);
  EXPECT_EQ(table.open_from("heavy"), 2U);
}

TEST(ConnectionTableTest, EqualSharesDoNotCloseEachOther) {
  ConnectionTable table(4, 4);
  std::vector<uint64_t> closed;
  for (const char* p : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(table.MarkReadingHead(Open(table, p, closed)));
  }
  EXPECT_EQ(table.Admit("e").verdict, Verdict::kRefused);  // every peer holds 1
  EXPECT_TRUE(closed.empty());
}

TEST(ConnectionTableTest, IdleIsPreferredOverASlowHead) {
  ConnectionTable table(3, 3);
  std::vector<uint64_t> closed;
  const uint64_t head = Open(table, "heavy", closed);
  const uint64_t head2 = Open(table, "heavy", closed);
  const uint64_t idle = Open(table, "light", closed);
  ASSERT_TRUE(table.MarkReadingHead(head));
  ASSERT_TRUE(table.MarkReadingHead(head2));
  ASSERT_TRUE(table.MarkIdle(idle));
  ASSERT_NE(Open(table, "new", closed), 0U);
  EXPECT_EQ(closed, std::vector<uint64_t>{idle});
}

TEST(ConnectionTableTest, RemoveFreesTheSlotAndIsIdempotent) {
  ConnectionTable table(1, 1);
  std::vector<uint64_t> closed;
  const uint64_t a = Open(table, "p", closed);
  ASSERT_TRUE(table.MarkBusy(a));
  EXPECT_EQ(table.Admit("q").verdict, Verdict::kRefused);
  table.Remove(a);
  table.Remove(a);
  EXPECT_EQ(table.counts().open, 0U);
  EXPECT_NE(Open(table, "q", closed), 0U);
  EXPECT_EQ(table.open_from("p"), 0U);
}

TEST(ConnectionTableTest, PerPeerCapAboveTheGlobalCapActsAsTheGlobalCap) {
  ConnectionTable table(2, 100);
  std::vector<uint64_t> closed;
  ASSERT_TRUE(table.MarkBusy(Open(table, "p", closed)));
  ASSERT_TRUE(table.MarkBusy(Open(table, "p", closed)));
  EXPECT_EQ(table.Admit("p").verdict, Verdict::kRefusedPerPeer);
}

}  // namespace
}  // namespace gpusched::net
