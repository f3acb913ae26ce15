// Table tests of GpuQueues: fair shares, admission and reclaim choices, each expected value derived by hand in the
// comment beside it.

#include "gpusched/sched/gpu_queues.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::sched {
namespace {

GpuAmount Gpus(int64_t n) { return {n, n * 1000, 0}; }

QueueSpec Q(std::string name, int64_t guaranteed, double weight, std::string parent = {},
            int64_t limit = GpuAmount::kUnlimited) {
  QueueSpec s;
  s.name = std::move(name);
  s.parent = std::move(parent);
  s.guaranteed = Gpus(guaranteed);
  if (limit != GpuAmount::kUnlimited) s.limit = {limit, limit * 1000, GpuAmount::kUnlimited};
  s.weight = weight;
  return s;
}

// `n` pending pods of one whole GPU each in `queue`.
void Pending(GpuQueues& q, const std::string& queue, int n) {
  for (int i = 0; i < n; ++i) q.SetPending(queue + "-p" + std::to_string(i), queue, Gpus(1));
}

TEST(GpuQueuesTest, DemandCountsWholeGpusComputeAndMemory) {
  core::PodRequest pod;
  core::GpuRequest whole;
  whole.count = 2;
  whole.milli_per_gpu = common::MilliGpu(1000);
  core::GpuRequest shared;
  shared.count = 1;
  shared.milli_per_gpu = common::MilliGpu(300);
  shared.memory_per_gpu = common::MiB(4096);
  pod.containers = {whole, shared};
  // 2 whole GPUs; compute 2×1000 + 300; memory only what is named: 4096.
  EXPECT_EQ(DemandOf(pod), (GpuAmount{2, 2300, 4096}));
}

TEST(GpuQueuesTest, GuaranteesFirstThenIdleCapacityByWeight) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("a", 4, 1), Q("b", 4, 3), Q("c", 0, 1)}).empty());
  Pending(q, "a", 100);
  Pending(q, "b", 100);
  Pending(q, "c", 100);
  // Guarantees 4 + 4 + 0; the 8 left split 1:3:1 → a 4+1.6, b 4+4.8, c 1.6 (rounded down).
  EXPECT_EQ(q.Status("a")->fair_share.gpus, 5);
  EXPECT_EQ(q.Status("b")->fair_share.gpus, 8);
  EXPECT_EQ(q.Status("c")->fair_share.gpus, 1);
  EXPECT_EQ(q.Status("b")->fair_share.milli, 8800);
}

TEST(GpuQueuesTest, ShareIsCappedByDemandAndWhatIsLeftGoesToOthers) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("a", 4, 1), Q("b", 4, 3), Q("c", 0, 1)}).empty());
  Pending(q, "a", 2);
  Pending(q, "b", 100);
  Pending(q, "c", 1);
  // a wants 2 (< its guarantee 4): a 2. b 4, c 0; 10 left split 3:1 → b +7.5, c +2.5 capped at 1; the 1.5 c leaves
  // goes to b: b 4 + 7.5 + 1.5 = 13.
  EXPECT_EQ(q.Status("a")->fair_share.gpus, 2);
  EXPECT_EQ(q.Status("b")->fair_share.gpus, 13);
  EXPECT_EQ(q.Status("c")->fair_share.gpus, 1);
}

TEST(GpuQueuesTest, LimitCapsTheShare) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("a", 0, 1, {}, 3), Q("b", 0, 1)}).empty());
  Pending(q, "a", 10);
  Pending(q, "b", 100);
  // a wants 10 but may hold 3: a 3, b the other 13.
  EXPECT_EQ(q.Status("a")->fair_share.gpus, 3);
  EXPECT_EQ(q.Status("b")->fair_share.gpus, 13);
}

TEST(GpuQueuesTest, ParentShareIsSplitAmongItsChildren) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("p", 8, 1), Q("p1", 6, 1, "p"), Q("p2", 2, 1, "p"), Q("q", 0, 1)}).empty());
  Pending(q, "p1", 100);
  Pending(q, "p2", 100);
  Pending(q, "q", 100);
  // Top: p 8 (guarantee), q 0; 8 left split 1:1 → p 12, q 4. In p: p1 6, p2 2; 4 left split 1:1 → p1 8, p2 4.
  EXPECT_EQ(q.Status("p")->fair_share.gpus, 12);
  EXPECT_EQ(q.Status("q")->fair_share.gpus, 4);
  EXPECT_EQ(q.Status("p1")->fair_share.gpus, 8);
  EXPECT_EQ(q.Status("p2")->fair_share.gpus, 4);
}

TEST(GpuQueuesTest, RankIsTheDominantRatioOfAllocatedToFairShare) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("a", 0, 1), Q("b", 0, 1)}).empty());
  Pending(q, "a", 20);
  Pending(q, "b", 20);
  // Fair shares 8 and 8. a holds 4 GPUs → 4/8 = 0.5; b holds 2 GPUs and 6000 MiB of memory it asked for, while
  // memory has no capacity (0): memory held beyond a zero share ranks b last.
  for (int i = 0; i < 4; ++i) q.Charge("a-p" + std::to_string(i), "a", Gpus(1));
  EXPECT_DOUBLE_EQ(q.Rank("a"), 0.5);
  q.Charge("b-p0", "b", Gpus(1));
  EXPECT_DOUBLE_EQ(q.Rank("b"), 1.0 / 8);
  q.Charge("b-p1", "b", GpuAmount{1, 1000, 6000});
  EXPECT_GT(q.Rank("b"), q.Rank("a"));
  // A queue that holds nothing ranks 0.
  EXPECT_DOUBLE_EQ(q.Rank("default"), 0);
}

TEST(GpuQueuesTest, AdmissionHonoursLimitsOfTheQueueAndItsParent) {
  GpuQueues q(Gpus(64));
  ASSERT_TRUE(q.SetQueues({Q("p", 4, 1, {}, 6), Q("p1", 2, 1, "p", 5), Q("p2", 2, 1, "p")}).empty());
  q.Charge("x", "p1", Gpus(2));
  auto a = q.Admit("p1", Gpus(1));
  // p1: 3 > guarantee 2, within limit 5; the parent 3 ≤ 6.
  EXPECT_TRUE(a.admitted);
  EXPECT_FALSE(a.within_guarantee);
  EXPECT_TRUE(q.Admit("p2", Gpus(2)).within_guarantee);  // p2 2 ≤ 2, the parent 4 ≤ 4
  a = q.Admit("p1", Gpus(4));
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "queue p1: gpus 6 > limit 5");
  q.Charge("y", "p2", Gpus(3));
  a = q.Admit("p1", Gpus(2));  // p1 4 ≤ 5, but the parent 2 + 3 + 2 = 7 > 6
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "queue p: gpus 7 > limit 6");
  EXPECT_EQ(q.Admit("p", Gpus(1)).reason, "queue p is a parent queue: pods go to its children");
  EXPECT_EQ(q.Admit("nope", Gpus(1)).reason, "queue nope does not exist");
}

TEST(GpuQueuesTest, ReclaimTakesOnlyFromQueuesBeyondTheirGuarantee) {
  GpuQueues q(Gpus(8));
  ASSERT_TRUE(q.SetQueues({Q("a", 4, 1), Q("b", 4, 1)}).empty());
  for (int i = 0; i < 6; ++i) q.Charge("b" + std::to_string(i), "b", Gpus(1));
  q.Charge("a0", "a", Gpus(1));
  // b holds 6 with a guarantee of 4: two of its GPUs may be reclaimed, not a third.
  EXPECT_TRUE(q.MayReclaim("b", Gpus(1), {}, "a"));
  EXPECT_TRUE(q.MayReclaim("b", Gpus(1), Gpus(1), "a"));
  EXPECT_FALSE(q.MayReclaim("b", Gpus(1), Gpus(2), "a"));
  // a holds 1 ≤ 4: never.
  EXPECT_FALSE(q.MayReclaim("a", Gpus(1), {}, "b"));
  // A victim holding nothing of the dimension b borrows in is no help.
  EXPECT_FALSE(q.MayReclaim("b", GpuAmount{0, 0, 100}, {}, "a"));
}

TEST(GpuQueuesTest, ReclaimAcrossParentsNeedsTheParentBorrowingToo) {
  GpuQueues q(Gpus(16));
  ASSERT_TRUE(q.SetQueues({Q("p", 8, 1), Q("p1", 2, 1, "p"), Q("p2", 2, 1, "p"), Q("r", 8, 1)}).empty());
  for (int i = 0; i < 4; ++i) q.Charge("p1-" + std::to_string(i), "p1", Gpus(1));
  // p1 holds 4 > 2, but p holds 4 ≤ 8: r (another parent) may not take from it, p2 (a sibling) may.
  EXPECT_FALSE(q.MayReclaim("p1", Gpus(1), {}, "r"));
  EXPECT_TRUE(q.MayReclaim("p1", Gpus(1), {}, "p2"));
}

TEST(GpuQueuesTest, ValidationNamesWhatIsWrong) {
  auto bad_limit = Q("a", 5, 1, {}, 4);
  auto rejected = ValidateQueues({bad_limit, Q("p", 2, 1), Q("p1", 2, 1, "p"), Q("p2", 1, 1, "p"),
                                  Q("deep", 0, 1, "p1"), Q("orphan", 0, 1, "missing"), Q("w", 0, 0)});
  EXPECT_EQ(rejected["a"], "guaranteed gpus 5 exceeds its limit 4");
  EXPECT_EQ(rejected["p"],
            "its children's guarantees (gpus=3 milli=3000 memory=0Mi) exceed its own "
            "(gpus=2 milli=2000 memory=0Mi)");
  EXPECT_EQ(rejected["p1"], "parent p is rejected");
  EXPECT_EQ(rejected["deep"], "parent p1 has a parent itself (queues nest 2 levels at most)");
  EXPECT_EQ(rejected["orphan"], "parent missing does not exist");
  EXPECT_EQ(rejected["w"], "weight 0 is not > 0");

  QueueSpec x = Q("x", 0, 1), y = Q("y", 0, 1);
  x.namespaces = {"team"};
  y.namespaces = {"team"};
  rejected = ValidateQueues({x, y});
  EXPECT_EQ(rejected.size(), 1U);
  EXPECT_EQ(rejected["y"], "namespace team is served by queue x already");
}

TEST(GpuQueuesTest, PodsFollowTheirQueueAndFallBackToDefault) {
  GpuQueues q(Gpus(8));
  QueueSpec a = Q("a", 2, 1);
  a.namespaces = {"team-a"};
  ASSERT_TRUE(q.SetQueues({a}).empty());
  EXPECT_EQ(q.QueueOf("team-a", ""), "a");
  EXPECT_EQ(q.QueueOf("team-a", "other"), "other");  // the label wins
  EXPECT_EQ(q.QueueOf("team-z", ""), "default");
  q.Charge("u1", "a", Gpus(2));
  q.SetPending("u2", "a", Gpus(1));
  EXPECT_EQ(q.Status("a")->allocated, Gpus(2));
  EXPECT_EQ(q.Status("a")->pending_pods, 1U);
  q.Charge("u2", "a", Gpus(1));  // pending → placed
  EXPECT_EQ(q.Status("a")->allocated, Gpus(3));
  EXPECT_EQ(q.Status("a")->pending_pods, 0U);
  // The queue disappears: its pods count in the default queue; it comes back: they return.
  q.SetQueues({});
  EXPECT_EQ(q.Status("default")->allocated, Gpus(3));
  EXPECT_FALSE(q.Status("a").has_value());
  q.SetQueues({a});
  EXPECT_EQ(q.Status("a")->allocated, Gpus(3));
  q.Release("u1");
  q.Release("u2");
  EXPECT_TRUE(q.Status("a")->allocated.IsZero());
}

TEST(GpuQueuesTest, ALabelJoinsOnlyAQueueThatAdmitsThePodsNamespace) {
  GpuQueues q(Gpus(8));
  QueueSpec a = Q("a", 2, 1, {}, 2), b = Q("b", 2, 1), research = Q("research", 4, 1), r1 = Q("r1", 2, 1, "research"),
            r2 = Q("r2", 2, 1, "research");
  a.namespaces = {"team-a"};
  b.namespaces = {"team-b"};
  research.namespaces = {"lab"};
  ASSERT_TRUE(q.SetQueues({a, b, research, r1, r2}).empty());
  // team-a's pod labelled with team-b's queue: refused, and counted against its own queue, never b.
  EXPECT_EQ(q.JoinRefusal("b", "team-a"),
            "pods of namespace team-a may not join queue b: it admits namespaces team-b only");
  EXPECT_EQ(q.QueueOf("team-a", "b"), "a");
  // ... nor can it leave its queue's limit for the default queue.
  EXPECT_EQ(q.JoinRefusal("default", "team-a"),
            "pods of namespace team-a may not join queue default: namespace team-a is served by queue a");
  EXPECT_EQ(q.QueueOf("team-a", "default"), "a");
  // Its own queue, and a namespace no queue serves joining the default queue, are fine.
  EXPECT_EQ(q.JoinRefusal("a", "team-a"), "");
  EXPECT_EQ(q.JoinRefusal("default", "team-z"), "");
  EXPECT_EQ(q.QueueOf("team-z", "default"), "default");
  // The parent's namespaces join any of its children by label; other namespaces none of them.
  EXPECT_EQ(q.JoinRefusal("r1", "lab"), "");
  EXPECT_EQ(q.QueueOf("lab", "r2"), "r2");
  EXPECT_EQ(q.QueueOf("lab", ""), "research");  // unlabelled: the parent, which Admit refuses with the reason
  EXPECT_FALSE(q.Admit("research", Gpus(1)).admitted);
  EXPECT_EQ(q.JoinRefusal("r1", "team-a"),
            "pods of namespace team-a may not join queue r1: it admits namespaces lab only");
  // A queue listing no namespace (nor its parent) admits no label.
  QueueSpec open = Q("open", 0, 1);
  ASSERT_TRUE(q.SetQueues({a, open}).empty());
  EXPECT_EQ(q.JoinRefusal("open", "team-a"),
            "pods of namespace team-a may not join queue open: it admits no namespace (list team-a in its "
            "spec.namespaces)");
  // An unknown queue is Admit's to refuse ("does not exist"), as before.
  EXPECT_EQ(q.JoinRefusal("missing", "team-a"), "");
  EXPECT_EQ(q.Admit(q.QueueOf("team-a", "missing"), Gpus(1)).reason, "queue missing does not exist");
}

TEST(GpuQueuesTest, AParentMayListTheNamespacesItsChildrenAdmit) {
  QueueSpec p = Q("p", 2, 1), c = Q("c", 2, 1, "p");
  p.namespaces = {"lab"};
  EXPECT_TRUE(ValidateQueues({p, c}).empty());
  c.namespaces = {"lab"};  // still one queue a namespace
  EXPECT_EQ(ValidateQueues({p, c})["p"], "namespace lab is served by queue c already");
}

}  // namespace
}  // namespace gpusched::sched
