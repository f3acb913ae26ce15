#include "gpusched/policy/random_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;

std::unique_ptr<PlacementPolicy> MakeRandom() {
  auto p = RandomPolicy::Create(PolicyOptions{});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(RandomPolicyTest, ScoreIsFlatAndTheRunnerPicksTheNode) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want = 0;
  };
  // KSS picks the node in PreScore; Score gives every node 0 and the runner draws among the feasible ones.
  const std::vector<Case> cases = {
      // All free: 0.
      {.name = "idle node", .view = View("n1").Gpus(8).Build(), .pod = Pod("p").Share(470).Build(), .want = 0},
      // Partly used: still 0, usage does not matter.
      {.name = "used node",
       .view = View("n1").Gpus(8).Free({0, 0, 530}).CpuFree(8000).Build(),
       .pod = Pod("p").Share(470).Build(),
       .want = 0},
      // CPU-only pod: 0.
      {.name = "CPU-only pod", .view = View("c1").Build(), .pod = Pod("p").Cpu(4000).Build(), .want = 0},
  };
  const auto policy = MakeRandom();
  EXPECT_EQ(policy->Name(), "random");
  EXPECT_TRUE(policy->ChoosesNodeAtRandom());
  EXPECT_FALSE(policy->NormalizesScores());
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want);
  }
}

TEST(RandomPolicyTest, SelectGpusDrawsOnlyFittingGpusAndEachOfThem) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    std::vector<bool> want_chosen;  // per GPU: chosen at least once in 200 draws (else never)
  };
  const std::vector<Case> cases = {
      // Fitting 450: GPU 0 (1000), 2 (600), 3 (500); GPU 1 (300) cannot. Each fitting GPU has chance 1/3 per draw,
      // so missing one in 200 draws has probability (2/3)^200 < 1e-35.
      {.name = "share draws among the fitting GPUs",
       .view = View("n1").Gpus(4).Free({1000, 300, 600, 500}).Build(),
       .pod = Pod("p").Share(450).Build(),
       .want_chosen = {true, false, true, true}},
      // GPU 0 (1000) is held exclusively, GPU 1 (800) fits, GPU 2 (100) too small: only GPU 1.
      {.name = "exclusive and too small GPUs are never drawn",
       .view =
           [] {
             core::NodeView v = View("n1").Gpus(3).Free({1000, 800, 100}).Build();
             v.gpus[0].exclusive = true;
             v.gpus[0].holders = 1;
             return v;
           }(),
       .pod = Pod("p").Share(450).Build(),
       .want_chosen = {false, true, false}},
      // Whole GPUs ignore the generator: the lowest-index fully free ones, GPUs 1 and 2, every time.
      {.name = "whole GPUs always take the lowest free indices",
       .view = View("n1").Gpus(4).Free({300}).Build(),
       .pod = Pod("p").Gpus(2).Build(),
       .want_chosen = {false, true, true, false}},
  };
  const auto policy = MakeRandom();
  constexpr uint64_t kSeed = 7;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ", seed " + std::to_string(kSeed));
    ASSERT_TRUE(policy->Filter(c.pod, c.view).fits());
    common::Rng rng(kSeed);
    std::vector<bool> chosen(c.view.gpus.size(), false);
    for (int draw = 0; draw < 200; ++draw) {
      const auto allocs = policy->SelectGpus(c.pod, c.view, rng);
      ASSERT_EQ(allocs.size(), 1u);
      ASSERT_EQ(allocs[0].gpus.size(), static_cast<size_t>(c.pod.containers[0].count));
      for (const auto& g : allocs[0].gpus) {
        chosen[static_cast<size_t>(g.index)] = true;
      }
    }
    EXPECT_EQ(chosen, c.want_chosen);
  }
}

TEST(RandomPolicyTest, SelectGpusNeverStarvesALaterContainer) {
  // Filter fits with first (500) on GPU 1 (500 -> 0) and second (600) on GPU 0. A random draw of GPU 0 for first
  // (1000 -> 500) would leave 500 and 500 < 600 for second, so that draw falls back to GPU 1: every draw is {1, 0}.
  const core::NodeView view = View("n1").Gpus(2).Free({1000, 500}).Build();
  const core::PodRequest pod =
      Pod("p")
          .Container(core::GpuRequest{.container = "first", .count = 1, .milli_per_gpu = common::MilliGpu{500}})
          .Container(core::GpuRequest{.container = "second", .count = 1, .milli_per_gpu = common::MilliGpu{600}})
          .Build();
  const auto policy = MakeRandom();
  ASSERT_TRUE(policy->Filter(pod, view).fits());
  constexpr uint64_t kSeed = 11;
  common::Rng rng(kSeed);
  for (int draw = 0; draw < 200; ++draw) {
    const auto allocs = policy->SelectGpus(pod, view, rng);
    ASSERT_EQ(allocs.size(), 2u);
    EXPECT_EQ(allocs[0].gpus[0].index, 1) << "draw " << draw << ", seed " << kSeed;
    EXPECT_EQ(allocs[1].gpus[0].index, 0) << "draw " << draw << ", seed " << kSeed;
  }
}

TEST(RandomPolicyTest, SameSeedRepeatsTheSameDraws) {
  const core::NodeView view = View("n1").Gpus(8).Free({900, 800, 700, 600, 500}).Build();
  const core::PodRequest pod = Pod("p").Share(450).Build();
  const auto policy = MakeRandom();
  common::Rng a(123);
  common::Rng b(123);
  for (int draw = 0; draw < 50; ++draw) {
    EXPECT_EQ(policy->SelectGpus(pod, view, a)[0].gpus[0].index, policy->SelectGpus(pod, view, b)[0].gpus[0].index)
        << "draw " << draw << ", seed 123";
  }
}

}  // namespace
}  // namespace gpusched::policy
