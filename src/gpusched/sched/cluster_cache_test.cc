// sched::ClusterCache over decoded events (the accounting alone; kube/ decodes and extender/'s
// service_test feeds it JSON through ClusterMirror): what is bound is charged, unknown nodes make allocations wait,
// a deleted node keeps its pods' allocations, assumptions expire, and charge_every_pod charges requests.

#include "gpusched/sched/cluster_cache.h"

#include <gtest/gtest.h>

#include "gpusched/testing/builders.h"
#include "gpusched/testing/fake_clock.h"

namespace gpusched::sched {
namespace {

core::Allocation OneGpu(const std::string& pod, const std::string& node, int64_t milli, uint64_t id = 7) {
  core::Allocation a{.pod = common::PodUid(pod), .node = common::NodeName(node), .id = id};
  a.containers.push_back(core::ContainerAllocation{
      .container = "main",
      .gpus = {core::GpuShare{.index = 0, .milli = common::MilliGpu(milli), .memory = common::MiB(1000)}}});
  return a;
}

core::PodUpdate Bound(const std::string& uid, const std::string& node, std::optional<core::Allocation> allocation) {
  core::PodUpdate u{.uid = common::PodUid(uid), .key = "default/" + uid, .node_name = node, .priority = 3};
  u.annotated = allocation.has_value();
  u.allocation = std::move(allocation);
  return u;
}

class ClusterCacheTest : public ::testing::Test {
 protected:
  size_t Held(const std::string& node) {
    auto lock = cache_.ReadLock();
    const core::NodeView* v = cache_.state().Find(common::NodeName(node));
    return v == nullptr ? 0 : static_cast<size_t>(v->gpus[0].holders);
  }
  testing::FakeClock clock_;
  ClusterCache cache_{CacheOptions{.clock = &clock_, .id_nonce = 1}};
};

TEST_F(ClusterCacheTest, BoundPodsAreChargedAndWaitForTheirNode) {
  cache_.ApplyPod(EventType::kAdded, Bound("p", "n1", OneGpu("p", "n1", 500, 42)));
  EXPECT_EQ(cache_.PendingAllocations(), 1U) << "its node is not known yet";
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  EXPECT_EQ(cache_.PendingAllocations(), 0U);
  EXPECT_EQ(Held("n1"), 1U);
  {
    auto lock = cache_.ReadLock();
    EXPECT_TRUE(cache_.state().IsConfirmed(common::PodUid("p")));
    EXPECT_EQ(cache_.PriorityOf(common::PodUid("p")), 3);
  }
  EXPECT_GT(cache_.NextAllocationId(), 42U) << "ids stay above every id seen";
  // The Node object goes and comes back: the pod's allocation waits meanwhile and is charged again.
  cache_.ApplyNodeDeleted(common::NodeName("n1"));
  EXPECT_EQ(cache_.PendingAllocations(), 1U);
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  EXPECT_EQ(Held("n1"), 1U);
  EXPECT_EQ(cache_.stats().held_for_node_return, 1U);
  // Terminal or deleted: free again.
  core::PodUpdate done = Bound("p", "n1", std::nullopt);
  done.terminal = true;
  cache_.ApplyPod(EventType::kModified, done);
  EXPECT_EQ(Held("n1"), 0U);
}

TEST_F(ClusterCacheTest, WhatIsBoundIsChargedEvenPastCapacity) {
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  cache_.ApplyPod(EventType::kAdded, Bound("a", "n1", OneGpu("a", "n1", 700, 1)));
  cache_.ApplyPod(EventType::kAdded, Bound("b", "n1", OneGpu("b", "n1", 700, 2)));
  EXPECT_EQ(Held("n1"), 2U);
  EXPECT_EQ(cache_.stats().overcommitted_charges, 1U);
}

TEST_F(ClusterCacheTest, UnreadableEventsAreCountedAndChangeNothing) {
  cache_.ApplyNode(common::InvalidArgument("node x: bad gpusched.io/gpus"));
  cache_.ApplyPod(EventType::kAdded, common::InvalidArgument("pod without uid"));
  core::PodUpdate bad = Bound("c", "n1", std::nullopt);
  bad.annotated = true;
  bad.allocation_error = "not JSON";
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  cache_.ApplyPod(EventType::kAdded, bad);
  EXPECT_EQ(cache_.stats().rejected_events, 3U);
  EXPECT_EQ(Held("n1"), 0U);
  auto lock = cache_.ReadLock();
  EXPECT_EQ(cache_.state().AllocationCount(), 0U);
}

TEST_F(ClusterCacheTest, AssumptionsExpireUnlessTheWatchConfirmsThem) {
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  {
    auto lock = cache_.WriteLock();
    ASSERT_TRUE(cache_.state().Assume(OneGpu("x", "n1", 300)).ok());
    ASSERT_TRUE(cache_.state().Assume(OneGpu("y", "n1", 300)).ok());
    cache_.ExpireAssumedAfter(common::PodUid("x"), 1000);
    cache_.ExpireAssumedAfter(common::PodUid("y"), 1000);
  }
  cache_.ApplyPod(EventType::kModified, Bound("y", "n1", OneGpu("y", "n1", 300)));  // y's bind landed
  clock_.AdvanceMs(1001);
  EXPECT_EQ(cache_.ExpireAssumed(), 1U);
  EXPECT_EQ(Held("n1"), 1U);
  auto lock = cache_.ReadLock();
  EXPECT_EQ(cache_.state().FindAllocation(common::PodUid("x")), nullptr);
  EXPECT_TRUE(cache_.state().IsConfirmed(common::PodUid("y")));
}

// The bind protocol both front ends follow: BindState before, BindStarting with the allocation assumed, FinishBind
// with the outcome (bound: confirmed; unknown: assumed for the TTL, resent by a retry; failed: forgotten).
TEST_F(ClusterCacheTest, TheBindProtocolConfirmsKeepsOrForgetsByOutcome) {
  cache_.ApplyNode(testing::Node("n1").Gpus(1).Build());
  const common::NodeName n1("n1");
  auto state_of = [&](const std::string& uid) {
    auto lock = cache_.ReadLock();
    return cache_.BindState(common::PodUid(uid));
  };
  auto start = [&](const std::string& uid, int32_t priority) {
    auto lock = cache_.WriteLock();
    ASSERT_TRUE(cache_.state().Assume(OneGpu(uid, "n1", 200)).ok());
    cache_.BindStarting(core::PodRequest{.uid = common::PodUid(uid), .priority = priority, .app = "bert"}, 5000);
  };
  EXPECT_EQ(state_of("ok"), ClusterCache::HeldForBind::kNothing);
  start("ok", 4);
  EXPECT_EQ(state_of("ok"), ClusterCache::HeldForBind::kInFlight) << "its bind runs";
  {
    auto lock = cache_.ReadLock();
    EXPECT_EQ(cache_.PriorityOf(common::PodUid("ok")), 4);
    EXPECT_EQ(cache_.AppOf(common::PodUid("ok")), "bert");
    EXPECT_EQ(cache_.TrackedAssumptions(), 1U);
  }
  EXPECT_EQ(cache_.FinishBind(common::PodUid("ok"), n1, common::Status::Ok(), 1000), ClusterCache::BindEnd::kBound);
  EXPECT_EQ(state_of("ok"), ClusterCache::HeldForBind::kBound);

  start("lost", 1);
  EXPECT_EQ(cache_.FinishBind(common::PodUid("lost"), n1, common::Unavailable("timeout"), 1000),
            ClusterCache::BindEnd::kUnknown);
  EXPECT_EQ(state_of("lost"), ClusterCache::HeldForBind::kResend) << "a retry sends the same allocation";

  start("no", 1);
  // A failure for another node (the watch moved the pod meanwhile) forgets nothing on this one.
  EXPECT_EQ(cache_.FinishBind(common::PodUid("no"), common::NodeName("n2"), common::NotFound("no pod"), 1000),
            ClusterCache::BindEnd::kFailed);
  EXPECT_NE(state_of("no"), ClusterCache::HeldForBind::kNothing) << "still assumed on n1";
  EXPECT_EQ(cache_.FinishBind(common::PodUid("no"), n1, common::NotFound("no pod"), 1000),
            ClusterCache::BindEnd::kFailed);
  EXPECT_EQ(state_of("no"), ClusterCache::HeldForBind::kNothing) << "a failed bind gives its GPUs back";
  EXPECT_EQ(Held("n1"), 2U);  // ok (bound) and lost (outcome unknown)
  // The unknown outcome's TTL runs out without the watch showing the pod: forgotten.
  clock_.AdvanceMs(1001);
  EXPECT_EQ(cache_.ExpireAssumed(), 1U);
  EXPECT_EQ(state_of("lost"), ClusterCache::HeldForBind::kNothing);
  EXPECT_EQ(Held("n1"), 1U);
}

TEST(ClusterCacheChargeEveryPodTest, PodsWithoutAnAllocationAreChargedTheirRequests) {
  ClusterCache cache(CacheOptions{.charge_every_pod = true});
  cache.ApplyNode(testing::Node("n1").Gpus(1).Cpu(4000).Build());
  core::PodUpdate web = Bound("web", "n1", std::nullopt);
  web.requests = core::Allocation{.cpu = common::MilliCpu(1500), .memory = common::MiB(512)};
  cache.ApplyPod(EventType::kAdded, web);
  core::PodUpdate unread = Bound("unread", "n1", std::nullopt);
  unread.requests_error = "bad quantity";
  cache.ApplyPod(EventType::kAdded, unread);
  auto lock = cache.ReadLock();
  const core::NodeView* v = cache.state().Find(common::NodeName("n1"));
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->cpu_free.value(), 2500);
  EXPECT_EQ(v->pods, 2) << "both hold a pod slot";
  EXPECT_EQ(cache.stats().rejected_events, 1U) << "the unreadable requests are counted";
}

}  // namespace
}  // namespace gpusched::sched
