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

}  // namespace
}  // namespace gpusched::sim
