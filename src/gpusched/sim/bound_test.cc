#include "gpusched/sim/bound.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "gpusched/policy/target_workload.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::sim {
namespace {

int next_pod = 0;  // unique names: the simulator keys allocations by pod

core::PodRequest Share(int64_t milli) {
  return ToPodRequest(
      TracePod{.name = "s" + std::to_string(next_pod++), .cpu_milli = 1000, .num_gpu = 1, .gpu_milli = milli});
}
core::PodRequest Whole(int32_t n) {
  return ToPodRequest(
      TracePod{.name = "w" + std::to_string(next_pod++), .cpu_milli = 1000, .num_gpu = n, .gpu_milli = 1000});
}

std::vector<const core::PodRequest*> Pointers(const std::vector<core::PodRequest>& pods) {
  std::vector<const core::PodRequest*> ptrs;
  for (const auto& p : pods) {
    ptrs.push_back(&p);
  }
  return ptrs;
}

PackingBound Of(const std::vector<core::PodRequest>& pods, int64_t gpus) {
  return GpuPackingBound(Pointers(pods), gpus * 1000);
}

// Worked by hand.
TEST(PackingBoundTest, ByHand) {
  // 4 GPUs, four 810s and a 760: D = 4000. Each 810 leaves 190 that nothing fits (the 760 is big too): keeping
  // all four 810s allocates at most 4000 − 760 = 3240 by the demand... and by the space, 4000 − 4·190 − 240 = 3000
  // (the 760's leftover counts too). Dropping the 760 (the smallest big item): demand 3240, space 4000 − 760 = 3240.
  // The bound is 3240: four 810s, one a GPU, as a packing indeed does.
  const PackingBound a = Of({Share(810), Share(810), Share(810), Share(810), Share(760)}, 4);
  EXPECT_EQ(a.demand_milli, 4000);
  EXPECT_EQ(a.big_items, 5);
  EXPECT_EQ(a.fill_milli, 0);
  EXPECT_EQ(a.bound_milli, 3240);
  EXPECT_EQ(a.dropped_big, 1);
  // Small items that fit the leftovers fill them: two 810s and two 190s on 2 GPUs pack perfectly.
  const PackingBound b = Of({Share(810), Share(810), Share(190), Share(190)}, 2);
  EXPECT_EQ(b.fill_milli, 380);
  EXPECT_EQ(b.bound_milli, 2000);
  // A 200 does not fit a 190 leftover: 810 + 200 on 2 GPUs allocates at most 2000 − 190 = 1810 > D = 1010: D binds.
  const PackingBound c = Of({Share(810), Share(200)}, 2);
  EXPECT_EQ(c.fill_milli, 0);
  EXPECT_EQ(c.bound_milli, 1010);
  // Whole GPUs leave nothing: 3 on 3 GPUs is 3000; on 2 GPUs the capacity binds.
  EXPECT_EQ(Of({Whole(2), Whole(1)}, 3).bound_milli, 3000);
  EXPECT_EQ(Of({Whole(2), Whole(1)}, 2).bound_milli, 2000);
}

// The bound is never below what a run allocated: every run of the simulator is a packing of its arrived pods.
TEST(PackingBoundTest, NeverBelowARun) {
  Cluster cluster{.name = "c"};
  for (int i = 0; i < 6; ++i) {
    cluster.nodes.push_back(ToNode(TraceNode{
        .name = "n" + std::to_string(i), .cpu_milli = 64000, .memory_mib = 262144, .gpus = 4, .model = "T4"}));
  }
  Workload w{.name = "w"};
  for (int64_t m : {810, 470, 320, 650, 230, 160, 1000}) {
    for (int k = 0; k < 3; ++k) {
      w.pods.push_back(Share(m));
    }
  }
  w.pods.push_back(Whole(2));
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto run = RunOne(cluster, w, RunSpec{.policy = "fgd", .seed = seed});
    ASSERT_TRUE(run.ok()) << run.status().message();
    const PackingBound b = BoundAtArrived(w, 24000, seed, 1.3);
    // The run's allocation after the last pod within 100 % arrived.
    int64_t allocated = 0;
    for (const Event& e : run->events) {
      if (e.arrived_milli <= 24000) {
        allocated = e.allocated_milli;
      }
    }
    EXPECT_GE(b.bound_milli, allocated) << "seed " << seed;
    EXPECT_LE(b.bound_milli, 24000);
    // The offline packing is a packing of the same items in the same relaxation: never above the bound.
    EXPECT_LE(b.offline_packed_milli, b.bound_milli) << "seed " << seed;
    EXPECT_GT(b.offline_packed_milli, 0) << "seed " << seed;
  }
}

int64_t Packed(const std::vector<core::PodRequest>& pods, int64_t gpus) {
  return OfflineBestFitDecreasing(Pointers(pods), gpus * 1000);
}

// Worked by hand.
TEST(OfflinePackingTest, ByHand) {
  // Largest first, tightest room: three 600s open three GPUs, the three 400s fill their rooms exactly.
  EXPECT_EQ(Packed({Share(400), Share(600), Share(400), Share(600), Share(400), Share(600)}, 3), 3000);
  // 810, 810, 190, 190 on 2 GPUs: perfect. A 200 fits no 190 room: 810 + 200 take 2 GPUs, 1010 packed.
  EXPECT_EQ(Packed({Share(190), Share(810), Share(190), Share(810)}, 2), 2000);
  EXPECT_EQ(Packed({Share(810), Share(200)}, 2), 1010);
  // Whole GPUs first: on 1 GPU the whole GPU is placed and the 500 left out.
  EXPECT_EQ(Packed({Share(500), Whole(1)}, 1), 1000);
  // No room for the third 810 on 2 GPUs (left out); the 150 takes one of the two rooms of 190: 1770.
  EXPECT_EQ(Packed({Share(810), Share(810), Share(810), Share(150)}, 2), 1770);
  // Rooms of 200 (after the 800) and 300 (after the 700): the 300 and the 200 each fill one exactly.
  EXPECT_EQ(Packed({Share(800), Share(700), Share(300), Share(200)}, 2), 2000);
}

}  // namespace
}  // namespace gpusched::sim
