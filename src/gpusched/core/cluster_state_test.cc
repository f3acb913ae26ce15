#include "gpusched/core/cluster_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpusched/testing/builders.h"

namespace gpusched::core {
namespace {

using common::MiB;
using common::MilliCpu;
using common::MilliGpu;
using ::testing::HasSubstr;

Allocation Share(const std::string& pod, const std::string& node, int32_t gpu, int64_t milli, int64_t mib = 0,
                 bool exclusive = false) {
  return Allocation{
      .pod = common::PodUid(pod),
      .node = common::NodeName(node),
      .cpu = MilliCpu{1000},
      .memory = MiB{1024},
      .containers = {ContainerAllocation{
          .container = "main",
          .gpus = {GpuShare{.index = gpu, .milli = MilliGpu{milli}, .memory = MiB{mib}, .exclusive = exclusive}}}}};
}

class ClusterStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(state_.AddNode(testing::Node("n1").Gpus(2, "A100", 40960).Cpu(8000).Memory(16384).Build()).ok());
  }
  ClusterState state_;
};

TEST_F(ClusterStateTest, AssumeChargesTheNodeAndReleaseGivesItBack) {
  ASSERT_TRUE(state_.Assume(Share("p1", "n1", 1, 300, 4096)).ok());
  const NodeView* v = state_.Find(common::NodeName("n1"));
  EXPECT_EQ(v->gpus[1].free, MilliGpu{700});
  EXPECT_EQ(v->gpus[1].memory_free, MiB{40960 - 4096});
  EXPECT_EQ(v->cpu_free, MilliCpu{7000});
  EXPECT_EQ(v->ShapeCount(0), 1);
  EXPECT_EQ(state_.AllocatedMilli(), MilliGpu{300});
  ASSERT_TRUE(state_.Release(common::PodUid("p1")).ok());
  EXPECT_EQ(v->gpus[1].free, MilliGpu{1000});
  EXPECT_FALSE(v->HasGpuPods());
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(ClusterStateTest, GenerationChangesOnEveryChange) {
  const uint64_t g0 = state_.Find(common::NodeName("n1"))->generation;
  ASSERT_TRUE(state_.Assume(Share("p1", "n1", 0, 100)).ok());
  const uint64_t g1 = state_.Find(common::NodeName("n1"))->generation;
  EXPECT_GT(g1, g0);
  ASSERT_TRUE(state_.Confirm(common::PodUid("p1")).ok());  // bookkeeping only: capacity did not change
  ASSERT_TRUE(state_.Release(common::PodUid("p1")).ok());
  EXPECT_GT(state_.Find(common::NodeName("n1"))->generation, g1);
}

TEST_F(ClusterStateTest, ConfirmForgetReleaseLifecycle) {
  ASSERT_TRUE(state_.Assume(Share("p1", "n1", 0, 500)).ok());
  EXPECT_FALSE(state_.IsConfirmed(common::PodUid("p1")));
  ASSERT_TRUE(state_.Confirm(common::PodUid("p1")).ok());
  EXPECT_TRUE(state_.IsConfirmed(common::PodUid("p1")));
  EXPECT_EQ(state_.Confirm(common::PodUid("p1")).code(), common::StatusCode::kFailedPrecondition);
  EXPECT_EQ(state_.Forget(common::PodUid("p1")).code(), common::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(state_.Release(common::PodUid("p1")).ok());
  EXPECT_EQ(state_.Release(common::PodUid("p1")).code(), common::StatusCode::kNotFound);

  ASSERT_TRUE(state_.Assume(Share("p2", "n1", 0, 500)).ok());
  ASSERT_TRUE(state_.Forget(common::PodUid("p2")).ok());
  EXPECT_EQ(state_.AllocationCount(), 0U);
  EXPECT_EQ(state_.AllocatedMilli(), MilliGpu{0});
}

struct RejectCase {
  std::string name;
  std::vector<Allocation> before;
  Allocation bad;
  common::StatusCode code;
  std::string reason;
};

TEST(ClusterStateRejectTest, RejectedRequestsChangeNothing) {
  const std::vector<RejectCase> cases = {
      {"more milli than free",
       {Share("a", "n1", 0, 700)},
       Share("b", "n1", 0, 400),
       common::StatusCode::kResourceExhausted,
       "has 300 milli free, needs 400"},
      {"more memory than the GPU has",
       {},
       Share("b", "n1", 0, 100, 50000),
       common::StatusCode::kResourceExhausted,
       "MiB free, needs 50000 MiB"},
      {"share on an exclusive GPU",
       {Share("a", "n1", 0, 1000, 0, true)},
       Share("b", "n1", 0, 10),
       common::StatusCode::kResourceExhausted,
       "held exclusively"},
      {"exclusive on a shared GPU",
       {Share("a", "n1", 1, 10)},
       Share("b", "n1", 1, 990, 0, true),
       common::StatusCode::kResourceExhausted,
       "exclusive share needs it idle"},
      {"unknown node", {}, Share("b", "nope", 0, 10), common::StatusCode::kNotFound, "node nope not found"},
      {"GPU index out of range",
       {},
       Share("b", "n1", 5, 10),
       common::StatusCode::kInvalidArgument,
       "GPU index 5 out of range"},
      {"empty share", {}, Share("b", "n1", 0, 0), common::StatusCode::kInvalidArgument, "positive milli or memory"},
      {"pod already placed",
       {Share("b", "n1", 0, 10)},
       Share("b", "n1", 1, 10),
       common::StatusCode::kAlreadyExists,
       "already holds"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    ClusterState state;
    ASSERT_TRUE(state.AddNode(testing::Node("n1").Gpus(2, "A100", 40960).Build()).ok());
    for (const auto& a : c.before) {
      ASSERT_TRUE(state.Assume(a).ok());
    }
    const NodeView before = *state.Find(common::NodeName("n1"));
    const auto allocated = state.AllocatedMilli();
    common::Status s = state.Assume(c.bad);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.reason));
    const NodeView& after = *state.Find(common::NodeName("n1"));
    EXPECT_EQ(after.generation, before.generation) << "a rejected Assume changed the node";
    for (size_t i = 0; i < after.gpus.size(); ++i) {
      EXPECT_EQ(after.gpus[i].free, before.gpus[i].free);
      EXPECT_EQ(after.gpus[i].holders, before.gpus[i].holders);
    }
    EXPECT_EQ(state.AllocatedMilli(), allocated);
    EXPECT_TRUE(state.CheckInvariants().ok());
  }
}

TEST(ClusterStateNodesTest, AddAndRemoveNodes) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("a").Gpus(8).Build()).ok());
  ASSERT_TRUE(state.AddNode(testing::Node("b").Gpus(2).Build()).ok());
  EXPECT_EQ(state.AddNode(testing::Node("a").Build()).code(), common::StatusCode::kAlreadyExists);
  Node bad = testing::Node("c").Gpus(2).Build();
  bad.gpus[1].index = 7;
  EXPECT_EQ(state.AddNode(bad).code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(state.CapacityMilli(), MilliGpu{10000});
  ASSERT_TRUE(state.Assume(Share("p", "a", 3, 250)).ok());
  ASSERT_TRUE(state.RemoveNode(common::NodeName("a")).ok());
  EXPECT_EQ(state.FindAllocation(common::PodUid("p")), nullptr);
  EXPECT_EQ(state.AllocatedMilli(), MilliGpu{0});
  EXPECT_EQ(state.CapacityMilli(), MilliGpu{2000});
  EXPECT_EQ(state.RemoveNode(common::NodeName("a")).code(), common::StatusCode::kNotFound);
  // The freed slot is reused with a fresh generation.
  ASSERT_TRUE(state.AddNode(testing::Node("d").Gpus(1).Build()).ok());
  EXPECT_EQ(state.SlotCount(), 2U);
  EXPECT_TRUE(state.CheckInvariants().ok());
}

TEST(ClusterStateNodesTest, TwoContainersMayShareOneGpu) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(testing::Node("n").Gpus(1).Build()).ok());
  Allocation a = Share("p", "n", 0, 400);
  a.containers.push_back(
      ContainerAllocation{.container = "side", .gpus = {GpuShare{.index = 0, .milli = MilliGpu{600}}}});
  ASSERT_TRUE(state.Assume(a).ok());
  EXPECT_EQ(state.Find(common::NodeName("n"))->gpus[0].free, MilliGpu{0});
  EXPECT_TRUE(state.CheckInvariants().ok());
}

// What the cluster shows bound is charged, always (kube-scheduler's rule): a bound pod that does not fit is
// charged past the capacity, the node says what is over, and no decision (Assume) can use what is not there.
TEST_F(ClusterStateTest, ChargeCountsABoundPodEvenPastCapacityAndSaysWhatIsOver) {
  std::string over;
  ASSERT_TRUE(state_.Charge(Share("p1", "n1", 0, 800, 30000), &over).ok());
  EXPECT_TRUE(over.empty()) << over;
  EXPECT_TRUE(state_.IsConfirmed(common::PodUid("p1")));
  EXPECT_TRUE(state_.Overcommits().empty());
  // p2 is bound too (another writer, a restart that sees more than fits): 800 + 400 milli, 30000 + 20000 MiB.
  ASSERT_TRUE(state_.Charge(Share("p2", "n1", 0, 400, 20000), &over).ok());
  EXPECT_THAT(over, HasSubstr("has 200 milli free, needs 400"));
  const NodeView* v = state_.Find(common::NodeName("n1"));
  EXPECT_EQ(v->gpus[0].free, MilliGpu{-200});
  EXPECT_EQ(state_.AllocatedMilli(), MilliGpu{1200});
  ASSERT_EQ(state_.Overcommits().size(), 1U);
  EXPECT_EQ(state_.Overcommits()[0].first.str(), "n1");
  EXPECT_EQ(state_.Overcommits()[0].second, "GPU 0 200 milli over; GPU 0 9040 MiB over");  // 50000 - 40960 MiB
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();                  // consistent, if over
  // Nothing more goes onto GPU 0 by decision; GPU 1 is untouched.
  EXPECT_EQ(state_.Assume(Share("p3", "n1", 0, 10, 10)).code(), common::StatusCode::kResourceExhausted);
  EXPECT_TRUE(state_.Assume(Share("p3", "n1", 1, 500)).ok());
  // When p1 ends, the node is within its capacity again and the strict invariant holds.
  ASSERT_TRUE(state_.Release(common::PodUid("p1")).ok());
  EXPECT_TRUE(state_.Overcommits().empty());
  EXPECT_EQ(v->gpus[0].free, MilliGpu{600});
  ASSERT_TRUE(state_.Release(common::PodUid("p2")).ok());
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(ClusterStateTest, AnExclusiveGpuChargedTwiceStaysExclusiveUntilBothHoldersAreGone) {
  ASSERT_TRUE(state_.Charge(Share("x1", "n1", 0, 1000, 0, true)).ok());
  std::string over;
  ASSERT_TRUE(state_.Charge(Share("x2", "n1", 0, 1000, 0, true), &over).ok());
  EXPECT_THAT(over, HasSubstr("is held exclusively"));
  EXPECT_THAT(state_.Overcommits()[0].second, HasSubstr("GPU 0 exclusive but held by 2 pods"));
  ASSERT_TRUE(state_.Release(common::PodUid("x1")).ok());
  // x2 still holds GPU 0 exclusively: no share may join it.
  EXPECT_TRUE(state_.Find(common::NodeName("n1"))->gpus[0].exclusive);
  EXPECT_EQ(state_.Assume(Share("s", "n1", 0, 10, 10)).code(), common::StatusCode::kResourceExhausted);
  EXPECT_TRUE(state_.Overcommits().empty());
  ASSERT_TRUE(state_.Release(common::PodUid("x2")).ok());
  EXPECT_TRUE(state_.Assume(Share("s", "n1", 0, 10, 10)).ok());
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(ClusterStateTest, ChargeRefusesOnlyWhatCannotBeChargedAtAll) {
  Allocation wrong_uuid = Share("u", "n1", 0, 100);
  wrong_uuid.containers[0].gpus[0].uuid = common::GpuUuid("GPU-elsewhere");
  const std::pair<Allocation, common::StatusCode> cases[] = {
      {Share("a", "ghost", 0, 100), common::StatusCode::kNotFound},
      {Share("b", "n1", 5, 100), common::StatusCode::kInvalidArgument},  // GPU index out of range
      {wrong_uuid, common::StatusCode::kInvalidArgument},
      {Share("c", "n1", 0, 0, 0), common::StatusCode::kInvalidArgument},  // a share of nothing
  };
  for (const auto& [a, code] : cases) {
    EXPECT_EQ(state_.Charge(a).code(), code) << a.pod.str();
  }
  EXPECT_EQ(state_.AllocationCount(), 0U);
  ASSERT_TRUE(state_.Charge(Share("d", "n1", 0, 100)).ok());
  EXPECT_EQ(state_.Charge(Share("d", "n1", 1, 100)).code(), common::StatusCode::kAlreadyExists);
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

// The node's description always wins: less GPU memory overcommits the pods already there (they stay charged), a
// GPU that is gone hands its holders back to the caller.
// Labels, taints and cordon change without touching the charges (and a view shows the new description).
TEST_F(ClusterStateTest, UpdateNodeTakesNewLabelsTaintsAndCordonKeepingCharges) {
  ASSERT_TRUE(state_.Charge(Share("p0", "n1", 0, 500, 30000)).ok());
  const uint64_t before = state_.Find(common::NodeName("n1"))->generation;
  Node relabelled = testing::Node("n1").Gpus(2, "A100", 40960).Cpu(8000).Memory(16384).Build();
  relabelled.labels = {{"zone", "b"}};
  relabelled.taints = {Taint{.key = "team", .value = "a", .effect = TaintEffect::kNoSchedule}};
  relabelled.unschedulable = true;
  auto orphaned = state_.UpdateNode(relabelled);
  ASSERT_TRUE(orphaned.ok()) << orphaned.status();
  EXPECT_TRUE(orphaned->empty());
  const NodeView* view = state_.Find(common::NodeName("n1"));
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->node->labels.at("zone"), "b");
  EXPECT_EQ(view->node->taints.size(), 1U);
  EXPECT_TRUE(view->node->unschedulable);
  EXPECT_GT(view->generation, before);
  EXPECT_EQ(state_.AllocatedMilli().value(), 500);
  EXPECT_TRUE(state_.CheckInvariants().ok());
  // The same description again changes nothing.
  const uint64_t after = view->generation;
  EXPECT_TRUE(state_.UpdateNode(relabelled).ok());
  EXPECT_EQ(state_.Find(common::NodeName("n1"))->generation, after);
}

TEST_F(ClusterStateTest, UpdateNodeKeepsBoundPodsChargedAndHandsBackThoseOnAVanishedGpu) {
  ASSERT_TRUE(state_.Charge(Share("p0", "n1", 0, 500, 30000)).ok());
  ASSERT_TRUE(state_.Charge(Share("p1", "n1", 1, 300, 4096)).ok());
  // GPU 0 now reports 16384 MiB (a MIG reconfiguration, a driver that sees less): p0 is over by 13616 MiB.
  Node smaller = testing::Node("n1").Gpus(2, "A100", 16384).Cpu(8000).Memory(16384).Build();
  auto orphaned = state_.UpdateNode(smaller);
  ASSERT_TRUE(orphaned.ok()) << orphaned.status();
  EXPECT_TRUE(orphaned->empty());
  EXPECT_EQ(state_.AllocationCount(), 2U);
  ASSERT_EQ(state_.Overcommits().size(), 1U);
  EXPECT_EQ(state_.Overcommits()[0].second, "GPU 0 13616 MiB over");
  EXPECT_TRUE(state_.CheckInvariants().ok());
  // GPU 1 disappears: p1 cannot be charged any more and comes back; p0 stays.
  Node one_gpu = testing::Node("n1").Gpus(1, "A100", 40960).Cpu(8000).Memory(16384).Build();
  orphaned = state_.UpdateNode(one_gpu);
  ASSERT_TRUE(orphaned.ok()) << orphaned.status();
  ASSERT_EQ(orphaned->size(), 1U);
  EXPECT_EQ((*orphaned)[0].pod.str(), "p1");
  EXPECT_EQ(state_.FindAllocation(common::PodUid("p1")), nullptr);
  EXPECT_EQ(state_.AllocatedMilli(), MilliGpu{500});
  EXPECT_EQ(state_.CapacityMilli(), MilliGpu{1000});
  EXPECT_TRUE(state_.Overcommits().empty());  // 40960 MiB again: p0 fits
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();
  // An inconsistent description is still refused and changes nothing.
  Node bad = one_gpu;
  bad.gpus[0].index = 3;
  EXPECT_EQ(state_.UpdateNode(bad).status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_EQ(state_.AllocationCount(), 1U);
}

// shareWithin (share_within.h): a GPU shared by one group admits no shared allocation of another; the group goes
// with the last of its holders, and a GPU charged to two groups (pods bound before the setting) is an overcommit
// that clears once one group has left.
Allocation Grouped(const std::string& pod, int32_t gpu, int64_t milli, std::string_view ns) {
  Allocation a = Share(pod, "n1", gpu, milli);
  a.share_group = ShareGroupOf(ShareWithin::kNamespace, ns, "");
  return a;
}

TEST(ShareGroupTest, KeysDependOnTheModeAndNeverCollideWithTheSentinels) {
  EXPECT_EQ(ShareGroupOf(ShareWithin::kAny, "team-a", "q"), 0U);
  EXPECT_NE(ShareGroupOf(ShareWithin::kNamespace, "team-a", ""), ShareGroupOf(ShareWithin::kNamespace, "team-b", ""));
  EXPECT_EQ(ShareGroupOf(ShareWithin::kNamespace, "team-a", "q1"),
            ShareGroupOf(ShareWithin::kNamespace, "team-a", "q2"));
  EXPECT_EQ(ShareGroupOf(ShareWithin::kQueue, "team-a", "q1"), ShareGroupOf(ShareWithin::kQueue, "team-b", "q1"));
  EXPECT_NE(ShareGroupOf(ShareWithin::kQueue, "x", ""), ShareGroupOf(ShareWithin::kNamespace, "x", ""));
  EXPECT_NE(ShareGroupOf(ShareWithin::kQueue, "", ""), 0U);  // pods without the label form one group
  EXPECT_NE(ShareGroupOf(ShareWithin::kQueue, "", ""), kMixedShareGroup);
  EXPECT_EQ(*ParseShareWithin("namespace"), ShareWithin::kNamespace);
  EXPECT_THAT(ParseShareWithin("tenant").status().message(), HasSubstr("want any, namespace or queue"));
}

TEST_F(ClusterStateTest, AGpuSharedByOneNamespaceAdmitsNoOtherNamespacesShare) {
  ASSERT_TRUE(state_.Assume(Grouped("a1", 0, 300, "team-a")).ok());
  ASSERT_TRUE(state_.Assume(Grouped("a2", 0, 300, "team-a")).ok());
  const common::Status refused = state_.Assume(Grouped("b1", 0, 300, "team-b"));
  EXPECT_EQ(refused.code(), common::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("shareWithin"));
  EXPECT_EQ(state_.FindAllocation(common::PodUid("b1")), nullptr);  // nothing changed
  const NodeView* v = state_.Find(common::NodeName("n1"));
  EXPECT_EQ(v->gpus[0].free, MilliGpu{400});
  ASSERT_TRUE(state_.Assume(Grouped("b1", 1, 300, "team-b")).ok());  // its own GPU
  Allocation any = Share("x", "n1", 0, 100);                         // no group: shares with anyone
  ASSERT_TRUE(state_.Assume(any).ok());
  ASSERT_TRUE(state_.Release(common::PodUid("x")).ok());
  ASSERT_TRUE(state_.Release(common::PodUid("a1")).ok());
  EXPECT_FALSE(state_.Assume(Grouped("b2", 0, 300, "team-b")).ok());  // a2 still holds it
  ASSERT_TRUE(state_.Release(common::PodUid("a2")).ok());
  EXPECT_EQ(v->gpus[0].share_group, 0U);
  EXPECT_TRUE(state_.Assume(Grouped("b2", 0, 300, "team-b")).ok());  // free again: anyone's
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(ClusterStateTest, AnExclusiveRequestIgnoresGroupsAndAGpuChargedToTwoGroupsIsAnOvercommit) {
  Allocation whole = Grouped("w", 1, 1000, "team-a");
  whole.containers[0].gpus[0].exclusive = true;
  ASSERT_TRUE(state_.Assume(whole).ok());
  ASSERT_TRUE(state_.Charge(Grouped("a", 0, 300, "team-a")).ok());
  std::string over;
  ASSERT_TRUE(state_.Charge(Grouped("b", 0, 300, "team-b"), &over).ok());  // bound: charged anyway
  EXPECT_THAT(over, HasSubstr("shareWithin"));
  const NodeView* v = state_.Find(common::NodeName("n1"));
  EXPECT_EQ(v->gpus[0].share_group, kMixedShareGroup);
  EXPECT_THAT(state_.OvercommitOf(common::NodeName("n1")), HasSubstr("several shareWithin groups"));
  EXPECT_FALSE(state_.Assume(Grouped("a2", 0, 100, "team-a")).ok());  // nobody with a group joins a mixed GPU
  EXPECT_TRUE(state_.CheckInvariants().ok());
  ASSERT_TRUE(state_.Release(common::PodUid("b")).ok());
  EXPECT_EQ(v->gpus[0].share_group, ShareGroupOf(ShareWithin::kNamespace, "team-a", ""));
  EXPECT_TRUE(state_.Assume(Grouped("a2", 0, 100, "team-a")).ok());
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

}  // namespace
}  // namespace gpusched::core
