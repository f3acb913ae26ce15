#include "gpusched/sim/tenants.h"

#include <gtest/gtest.h>

#include "gpusched/policy/placement_policy.h"
#include "gpusched/testing/builders.h"

namespace gpusched::sim {
namespace {

TenantQueue Queue(std::string name, int64_t guaranteed, int64_t offset_s = 0) {
  TenantQueue q;
  q.spec.name = std::move(name);
  q.spec.guaranteed = {guaranteed, guaranteed * 1000, core::GpuAmount::kUnlimited};
  q.offset_s = offset_s;
  return q;
}

TenantPod WholeGpu(const std::string& name, size_t queue, int64_t created, int64_t deleted) {
  return TenantPod{.pod = testing::Pod(name).Cpu(1000).Memory(1024).Gpus(1).Build(),
                   .creation_s = created,
                   .deletion_s = deleted,
                   .queue = queue};
}

// A cluster of one node of `gpus` whole GPUs, and a workload that only names itself (binpack needs no target).
Cluster OneNode(int32_t gpus) {
  return Cluster{.name = "one", .nodes = {testing::Node("n0").Gpus(gpus).Cpu(64000).Memory(262144).Build()}};
}

Workload EmptyWorkload() {
  Workload w{.name = "w"};
  w.target = std::make_shared<const policy::TargetWorkload>();
  return w;
}

// One node of 4 GPUs. "borrow" (no guarantee) fills it at t=0 with four pods of 100 s; "owner" (2 guaranteed) asks
// for two GPUs at t=10: it reclaims two of borrow's pods at once (bound at its arrival's event time); the evicted
// pods wait and run when owner's end (t=30).
TEST(TenantsTest, AGuaranteeIsReclaimedAtOnceAndTheBorrowerRunsLater) {
  const Cluster cluster = OneNode(4);
  const Workload workload = EmptyWorkload();
  std::vector<TenantPod> pods;
  for (int i = 0; i < 4; ++i) pods.push_back(WholeGpu("b" + std::to_string(i), 1, 0, 100));
  for (int i = 0; i < 2; ++i) pods.push_back(WholeGpu("o" + std::to_string(i), 0, 10, 30));
  TenantSpec spec{.queues = {Queue("owner", 2), Queue("borrow", 0)}, .policy = "binpack"};
  auto out = SimulateTenants(cluster, workload, pods, spec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const TenantQueueReport& owner = out->queues[0];
  const TenantQueueReport& borrow = out->queues[1];
  EXPECT_EQ(owner.bound, 2);
  EXPECT_EQ(owner.reclaims, 2);
  EXPECT_EQ(owner.within_guarantee, 2);
  EXPECT_EQ(owner.met_at_once, 2);
  EXPECT_DOUBLE_EQ(owner.mean_wait_s, 0);
  EXPECT_EQ(borrow.evicted, 2);
  EXPECT_EQ(borrow.bound, 4);  // each bound once at t=0 (the evicted ones again at t=30)
  // Shares: borrow holds the whole node at t=0, half from t=10 (owner the other half), all again from t=30.
  ASSERT_GE(out->times_s.size(), 3U);
  EXPECT_DOUBLE_EQ(out->times_s[0], 0);
  EXPECT_DOUBLE_EQ(out->shares[1][0], 1.0);
  EXPECT_DOUBLE_EQ(out->times_s[1], 10);
  EXPECT_DOUBLE_EQ(out->shares[0][1], 0.5);
  EXPECT_DOUBLE_EQ(out->shares[1][1], 0.5);
  EXPECT_DOUBLE_EQ(out->times_s[2], 30);
  EXPECT_DOUBLE_EQ(out->shares[0][2], 0);
  EXPECT_DOUBLE_EQ(out->shares[1][2], 1.0);
}

TEST(TenantsTest, WithoutAGuaranteeNothingIsReclaimedAndPodsWait) {
  const Cluster cluster = OneNode(2);
  const Workload workload = EmptyWorkload();
  std::vector<TenantPod> pods = {WholeGpu("b0", 1, 0, 100), WholeGpu("b1", 1, 0, 100), WholeGpu("o0", 0, 10, 20)};
  TenantSpec spec{.queues = {Queue("other", 0), Queue("borrow", 0)}, .policy = "binpack"};
  auto out = SimulateTenants(cluster, workload, pods, spec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->queues[0].reclaims, 0);
  EXPECT_EQ(out->queues[1].evicted, 0);
  EXPECT_DOUBLE_EQ(out->queues[0].mean_wait_s, 90);  // waits for a GPU to free at t=100
  EXPECT_EQ(out->queues[0].within_guarantee, 0);
}

TEST(TenantsTest, InflationDealsClonesUntilTheTarget) {
  std::vector<TenantPod> pods = {WholeGpu("a", 0, 0, 10), WholeGpu("b", 1, 5, 10)};
  InflateStreams(pods, 5000, 2, 7);
  EXPECT_EQ(pods.size(), 5U);
  EXPECT_EQ(pods[2].queue, 0U);
  EXPECT_EQ(pods[3].queue, 1U);
  EXPECT_NE(pods[2].pod.name.find("-clone-"), std::string::npos);
}

TenantPod Gpus(const std::string& name, int32_t gpus, size_t queue, int64_t created, int64_t deleted) {
  TenantPod p = WholeGpu(name, queue, created, deleted);
  p.pod = testing::Pod(name).Cpu(1000).Memory(1024).Gpus(gpus).Build();
  return p;
}

TenantPod Member(const std::string& name, const std::string& gang, int32_t size, int32_t gpus, size_t queue,
                 int64_t created, int64_t deleted) {
  TenantPod p = Gpus(name, gpus, queue, created, deleted);
  p.pod.pod_group = gang;
  p.pod.min_available = size;
  return p;
}

// Multi-GPU pods of each queue, in order of creation, become gangs; single-GPU pods and a short last group stay
// single; members take the first one's arrival and the longest lifetime.
TEST(TenantsTest, MultiGpuPodsAreGroupedIntoGangsPerQueue) {
  std::vector<TenantPod> pods = {Gpus("a", 2, 0, 30, 40),  Gpus("b", 4, 0, 10, 100), Gpus("one", 1, 0, 0, 5),
                                 Gpus("c", 8, 0, 50, 51),  Gpus("d", 2, 0, 60, 70),  Gpus("e", 2, 0, 80, 90),
                                 Gpus("other", 2, 1, 0, 9)};
  EXPECT_EQ(GroupIntoGangs(pods, 2, 2, 1), 2U);
  EXPECT_EQ(pods[1].pod.pod_group, "gang-0");  // b (t=10) and a (t=30)
  EXPECT_EQ(pods[0].pod.pod_group, "gang-0");
  EXPECT_EQ(pods[0].pod.min_available, 2);
  EXPECT_EQ(pods[0].creation_s, 10);
  EXPECT_EQ(pods[0].deletion_s, 100);          // b's lifetime, 90 s, the longer
  EXPECT_EQ(pods[3].pod.pod_group, "gang-1");  // c and d
  EXPECT_EQ(pods[4].pod.pod_group, "gang-1");
  EXPECT_EQ(pods[4].creation_s, 50);
  EXPECT_EQ(pods[4].deletion_s, 60);
  EXPECT_TRUE(pods[5].pod.pod_group.empty()) << "a last group smaller than the minimum stays single";
  EXPECT_TRUE(pods[2].pod.pod_group.empty()) << "one GPU";
  EXPECT_TRUE(pods[6].pod.pod_group.empty()) << "alone in its queue";
  EXPECT_EQ(GroupIntoGangs(pods, 1, 4, 1), 0U) << "a gang has at least two members";
}

// One node of 8 GPUs: a gang of 3 x 4 GPUs never fits and never holds a GPU; a gang of 2 x 4 GPUs runs whole.
TEST(TenantsTest, AGangRunsWholeOrNotAtAll) {
  const Cluster cluster = OneNode(8);
  const Workload workload = EmptyWorkload();
  std::vector<TenantPod> pods;
  for (int i = 0; i < 3; ++i) pods.push_back(Member("big" + std::to_string(i), "big", 3, 4, 0, 0, 100));
  for (int i = 0; i < 2; ++i) pods.push_back(Member("fit" + std::to_string(i), "fit", 2, 4, 1, 5, 50));
  TenantSpec spec{.queues = {Queue("a", 0), Queue("b", 0)}, .policy = "binpack"};
  auto out = SimulateTenants(cluster, workload, pods, spec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->queues[0].gangs, 1);
  EXPECT_EQ(out->queues[0].gangs_bound, 0);
  EXPECT_EQ(out->queues[0].bound, 0) << "no member of the impossible gang ever ran";
  EXPECT_EQ(out->queues[1].gangs_bound, 1);
  EXPECT_EQ(out->queues[1].bound, 2);
  EXPECT_DOUBLE_EQ(out->queues[1].mean_gang_wait_s, 0);
  EXPECT_EQ(out->partial_gang_events, 0);
  EXPECT_DOUBLE_EQ(out->shares[1][1], 1.0) << "at t=5 the gang holds the whole node";
}

// A borrower gang (2 x 2 GPUs) holds a 4-GPU node; a queue with a guarantee of 2 reclaims for a 2-GPU pod: the whole
// gang goes down (both members evicted), the pod runs at once, and the gang runs again, whole, when it ends.
TEST(TenantsTest, AReclaimTakesDownTheWholeGang) {
  const Cluster cluster = OneNode(4);
  const Workload workload = EmptyWorkload();
  std::vector<TenantPod> pods = {Member("g0", "g", 2, 2, 1, 0, 100), Member("g1", "g", 2, 2, 1, 0, 100),
                                 Gpus("o", 2, 0, 10, 30)};
  TenantSpec spec{.queues = {Queue("owner", 2), Queue("borrow", 0)}, .policy = "binpack"};
  auto out = SimulateTenants(cluster, workload, pods, spec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->queues[0].reclaims, 2);
  EXPECT_EQ(out->queues[0].met_at_once, 1);
  EXPECT_EQ(out->queues[1].evicted, 2);
  EXPECT_EQ(out->partial_gang_events, 0);
  ASSERT_GE(out->times_s.size(), 3U);
  EXPECT_DOUBLE_EQ(out->times_s[1], 10);
  EXPECT_DOUBLE_EQ(out->shares[1][1], 0) << "no member left running beside the owner's pod";
  EXPECT_DOUBLE_EQ(out->times_s[2], 30);
  EXPECT_DOUBLE_EQ(out->shares[1][2], 1.0) << "the gang runs again, whole";
}

// Two nodes of 2 GPUs: borrow's pods fill one, keep's (within its guarantee) the other. A gang of 2 x 2 GPUs within
// its guarantee could reclaim room for one member only: it evicts nobody and waits.
TEST(TenantsTest, AGangThatCannotFitWholeReclaimsNothing) {
  const Cluster cluster{.name = "two",
                        .nodes = {testing::Node("n0").Gpus(2).Cpu(64000).Memory(262144).Build(),
                                  testing::Node("n1").Gpus(2).Cpu(64000).Memory(262144).Build()}};
  const Workload workload = EmptyWorkload();
  std::vector<TenantPod> pods = {Gpus("k", 2, 2, 0, 100), Gpus("b", 2, 1, 1, 100), Member("g0", "g", 2, 2, 0, 10, 20),
                                 Member("g1", "g", 2, 2, 0, 10, 20)};
  TenantSpec spec{.queues = {Queue("owner", 4), Queue("borrow", 0), Queue("keep", 2)}, .policy = "binpack"};
  auto out = SimulateTenants(cluster, workload, pods, spec);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->queues[0].reclaims, 0);
  EXPECT_EQ(out->queues[1].evicted, 0) << "taken off for one member, put back when the other found no room";
  EXPECT_DOUBLE_EQ(out->queues[0].mean_gang_wait_s, 90) << "runs when both end at t=100";
  EXPECT_EQ(out->partial_gang_events, 0);
}

// A cluster or queues the scheduler cannot take are named before any pod runs: two nodes of one name, a queue that
// breaks the rules (a negative guarantee), a pod naming a queue that is not there.
TEST(TenantsTest, BadClustersAndQueuesAreNamed) {
  const Workload workload = EmptyWorkload();
  const std::vector<TenantPod> pods = {WholeGpu("a", 0, 0, 10)};
  const Cluster twins{.name = "twins",
                      .nodes = {testing::Node("n0").Gpus(1).Build(), testing::Node("n0").Gpus(2).Build()}};
  auto dup = SimulateTenants(twins, workload, pods, TenantSpec{.queues = {Queue("q", 0)}, .policy = "binpack"});
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("two of one name"), std::string::npos) << dup.status().message();

  TenantQueue negative = Queue("bad", 0);
  negative.spec.guaranteed.gpus = -1;
  auto bad = SimulateTenants(OneNode(2), workload, pods, TenantSpec{.queues = {negative}, .policy = "binpack"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("queue bad"), std::string::npos) << bad.status().message();

  const std::vector<TenantPod> stray = {WholeGpu("a", 3, 0, 10)};
  auto missing =
      SimulateTenants(OneNode(2), workload, stray, TenantSpec{.queues = {Queue("q", 0)}, .policy = "binpack"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("names queue 3"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace gpusched::sim
