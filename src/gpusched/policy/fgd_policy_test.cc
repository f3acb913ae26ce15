#include "gpusched/policy/fgd_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using gpusched::testing::View;
using ::testing::HasSubstr;

// A small target workload, by hand:
//   A: 2000 CPU, one share of 250 milli, p = 0.75
//   B: 1000 CPU, no GPU,                 p = 0.25  (always strands the node's idle milli)
// so F_n = 0.75 x frag_A + 0.25 x idle, with frag_A = Σ free of the GPUs below 250 when some GPU has >= 250 and
// the node has >= 2000 CPU free, else idle.
std::shared_ptr<const TargetWorkload> SmallWorkload() {
  auto m = std::make_shared<TargetWorkload>();
  m->classes = {
      TaskClass{
          .cpu = common::MilliCpu{2000}, .gpu_count = 1, .gpu_milli = common::MilliGpu{250}, .pods = 3, .weight = 0.75},
      TaskClass{.cpu = common::MilliCpu{1000}, .pods = 1, .weight = 0.25},
  };
  m->distinct_classes = 2;
  m->total_pods = 4;
  m->covered_pods = 4;
  return m;
}

std::unique_ptr<PlacementPolicy> MakeFgd() {
  auto p = FgdPolicy::Create(PolicyOptions{.target_workload = SmallWorkload()});
  EXPECT_TRUE(p.ok()) << p.status();
  return std::move(p).value();
}

TEST(FgdPolicyTest, ScoreAndSelectGpus) {
  struct Case {
    std::string name;
    core::NodeView view;
    core::PodRequest pod;
    int64_t want_score = 0;
    std::vector<int32_t> want_gpus;  // SelectGpus, in the order taken
  };
  // score = floor(100 x sigmoid((F_n - F_n') / 1000)); sigmoid(0.04) = 0.50999, sigmoid(0.1) = 0.52498,
  // sigmoid(0.5) = 0.62246, sigmoid(-0.485) = 0.38107, sigmoid(-0.885) = 0.29214.
  const std::vector<Case> cases = {
      // F = 0.75 x 0 + 0.25 x (480 + 700) = 295.
      // GPU 0 -> 80:  A sees 80 < 250 stranded: 0.75 x 80 + 0.25 x 780 = 255, delta 40  -> 50.
      // GPU 1 -> 300: both still host A:        0.75 x 0  + 0.25 x 780 = 195, delta 100 -> 52.
      // FGD takes GPU 1; best fit would take the tighter GPU 0.
      {.name = "sharing pod picks the GPU that leaves a usable remainder",
       .view = View("n1").Gpus(2).Free({480, 700}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(400).Build(),
       .want_score = 52,
       .want_gpus = {1}},
      // GPU 0 (300) < 400 is no candidate. F = 0.25 x 1480 = 370.
      // GPU 1 -> 80: 0.75 x 80 + 0.25 x 1080 = 330, delta 40 -> 50; GPU 2 -> 300: 0.25 x 1080 = 270, delta 100 -> 52.
      {.name = "GPU too small for the pod is no candidate",
       .view = View("n1").Gpus(3).Free({300, 480, 700}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(400).Build(),
       .want_score = 52,
       .want_gpus = {2}},
      // F = 0.25 x 1880 = 470. GPU 0 -> 80: 0.75 x 80 + 0.25 x 1480 = 430, delta 40 -> 50.
      // GPU 1 or 2 -> 300: 0.25 x 1480 = 370, delta 100 -> 52; equal GPUs tie, the first (GPU 1) wins.
      {.name = "equal GPUs tie to the lowest index",
       .view = View("n1").Gpus(3).Free({480, 700, 700}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(400).Build(),
       .want_score = 52,
       .want_gpus = {1}},
      // F = 0.25 x 2000 = 500. Either GPU -> 600: A still fits, 0.25 x 1600 = 400, delta 100 -> 52; GPU 0 first.
      {.name = "sharing pod on an idle node takes GPU 0",
       .view = View("n1").Gpus(2).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Share(400).Build(),
       .want_score = 52,
       .want_gpus = {0}},
      // F = 295 as in the first case. After the pod 1000 CPU < 2000 is left: A strands all idle milli whichever GPU.
      // GPU 0 or 1: idle 780 -> 0.75 x 780 + 0.25 x 780 = 780, delta -485 -> 38; tie -> GPU 0.
      {.name = "CPU exhaustion makes every GPU equal",
       .view = View("n1").Gpus(2).Free({480, 700}).CpuFree(5000).Build(),
       .pod = Pod("p").Cpu(4000).Share(400).Build(),
       .want_score = 38,
       .want_gpus = {0}},
      // F = 0.75 x 0 + 0.25 x 2480 = 620 (GPU 3 at 0 strands nothing). The pod takes fully free GPUs 1 and 2:
      // idle 480, A fits GPU 0 -> 0.25 x 480 = 120, delta 500 -> 62. Whole GPUs: the lowest-index free ones.
      {.name = "whole-GPU pod",
       .view = View("n1").Gpus(4).Free({480, 1000, 1000, 0}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(8000).Gpus(2).Build(),
       .want_score = 62,
       .want_gpus = {1, 2}},
      // F = 295. A CPU pod leaves 1000 < 2000 CPU: A strands idle 1180 -> 0.75 x 1180 + 0.25 x 1180 = 1180,
      // delta -885 -> 29. No GPUs to choose.
      {.name = "CPU-only pod that starves the GPU class",
       .view = View("n1").Gpus(2).Free({480, 700}).CpuFree(5000).Build(),
       .pod = Pod("p").Cpu(4000).Build(),
       .want_score = 29,
       .want_gpus = {}},
      // F = 295; the CPU pod leaves 28000 CPU: nothing changes, delta 0 -> floor(50) = 50.
      {.name = "CPU-only pod that changes nothing",
       .view = View("n1").Gpus(2).Free({480, 700}).CpuFree(32000).Build(),
       .pod = Pod("p").Cpu(4000).Build(),
       .want_score = 50,
       .want_gpus = {}},
  };
  const auto policy = MakeFgd();
  EXPECT_EQ(policy->Name(), "fgd");
  EXPECT_FALSE(policy->NormalizesScores());
  common::Rng rng(1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_TRUE(policy->Filter(c.pod, c.view).fits());
    EXPECT_EQ(policy->Score(c.pod, c.view, Snapshot{}), c.want_score);
    std::vector<int32_t> got;
    for (const auto& alloc : policy->SelectGpus(c.pod, c.view, rng)) {
      for (const auto& g : alloc.gpus) {
        got.push_back(g.index);
      }
    }
    EXPECT_EQ(got, c.want_gpus);
  }
}

TEST(FgdPolicyTest, CreateNeedsATargetWorkload) {
  struct Case {
    std::string name;
    PolicyOptions options;
    bool want_ok = false;
  };
  const std::vector<Case> cases = {
      {.name = "no target workload", .options = {}, .want_ok = false},
      {.name = "empty target workload", .options = {.target_workload = std::make_shared<TargetWorkload>()}},
      {.name = "small target workload", .options = {.target_workload = SmallWorkload()}, .want_ok = true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto p = FgdPolicy::Create(c.options);
    EXPECT_EQ(p.ok(), c.want_ok);
    if (!c.want_ok) {
      EXPECT_EQ(p.status().code(), common::StatusCode::kInvalidArgument);
      EXPECT_THAT(p.status().message(), HasSubstr("target workload"));
    }
  }
}

// A workload with model-tied classes, and a cluster of 6 G2, 2 T4 and 2 V100 GPUs:
//   A: any model, one whole GPU,     p = 0.5   -> 500 milli per pod of M
//   B: T4 only,   one whole GPU,     p = 0.25  -> 250
//   C: V100 or T4 (T4 named twice, A100 absent from the cluster), a 500-milli share, p = 0.25 -> 125
// demand = 875. need(T4) = 250 + 125 x 2/4 = 312.5, need(V100) = 125 x 2/4 = 62.5.
// reserved(T4) = min(1, (312.5/875) / (2/10)) = min(1, 1.786) = 1; reserved(V100) = (62.5/875) / 0.2 = 0.357143;
// reserved(G2) = 0.
std::shared_ptr<const TargetWorkload> TiedWorkload() {
  auto m = std::make_shared<TargetWorkload>();
  m->classes = {
      TaskClass{
          .cpu = common::MilliCpu{1000}, .gpu_count = 1, .gpu_milli = common::MilliGpu{1000}, .pods = 2, .weight = 0.5},
      TaskClass{.cpu = common::MilliCpu{1000},
                .gpu_count = 1,
                .gpu_milli = common::MilliGpu{1000},
                .models = {"T4"},
                .pods = 1,
                .weight = 0.25},
      TaskClass{.cpu = common::MilliCpu{1000},
                .gpu_count = 1,
                .gpu_milli = common::MilliGpu{500},
                .models = {"V100", "T4", "T4", "A100"},
                .pods = 1,
                .weight = 0.25},
  };
  m->distinct_classes = 3;
  m->total_pods = 4;
  m->covered_pods = 4;
  return m;
}

const std::map<std::string, int64_t> kTiedCluster = {{"G2", 6}, {"T4", 2}, {"V100", 2}};

TEST(ModelScarcityTest, ReservedShareOfEachModel) {
  const ModelScarcity s = ComputeModelScarcity(*TiedWorkload(), kTiedCluster);
  ASSERT_EQ(s.reserved.size(), 3u);  // A100 is not in the cluster
  EXPECT_DOUBLE_EQ(s.Reserved("T4"), 1.0);
  EXPECT_NEAR(s.Reserved("V100"), 0.357142857, 1e-9);
  EXPECT_DOUBLE_EQ(s.Reserved("G2"), 0.0);
  EXPECT_DOUBLE_EQ(s.Reserved("A100"), 0.0);
  // No model-tied class, or no GPUs: nothing is reserved.
  EXPECT_TRUE(ComputeModelScarcity(*SmallWorkload(), kTiedCluster).reserved.size() == 3);
  for (const auto& [model, r] : ComputeModelScarcity(*SmallWorkload(), kTiedCluster).reserved) {
    EXPECT_EQ(r, 0.0) << model;
  }
  EXPECT_TRUE(ComputeModelScarcity(*TiedWorkload(), {}).reserved.empty());
}

TEST(FgdScarcityTest, PodsThatMayUseAnyModelKeepOffReservedModels) {
  const PolicyOptions options{.target_workload = TiedWorkload(), .gpus_by_model = kTiedCluster};
  auto fgd = FgdPolicy::Create(options);
  auto scarce = FgdPolicy::CreateScarcity(options);
  ASSERT_TRUE(fgd.ok() && scarce.ok());
  EXPECT_EQ((*scarce)->Name(), "fgd-scarcity");
  struct Case {
    std::string name;
    std::string node_model;
    core::PodRequest pod;
    int64_t want_penalty;
  };
  const std::vector<Case> cases = {
      // reserved(T4) 1 - least reserved of any model (G2, 0) = 1 -> 20 of fgd's points (x kFineScale).
      {"any model on T4", "T4", Pod("p").Cpu(1000).Gpus(1).Build(), 200000},
      {"any model on G2", "G2", Pod("p").Cpu(1000).Gpus(1).Build(), 0},
      // 20 x 0.35714 = 7.1428... -> 71429 fine points.
      {"any model on V100", "V100", Pod("p").Cpu(1000).Gpus(1).Build(), 71429},
      // The pod can only go to T4: nothing cheaper to keep it from.
      {"T4-tied pod on T4", "T4", Pod("p").Cpu(1000).Gpus(1).Models({"T4"}).Build(), 0},
      // V100 or T4: T4 costs 20 x (1 - 0.35714) = 12.857... -> 128571 more than V100.
      {"V100-or-T4 share on T4", "T4", Pod("p").Cpu(1000).Share(500).Models({"V100", "T4"}).Build(), 128571},
      {"V100-or-T4 share on V100", "V100", Pod("p").Cpu(1000).Share(500).Models({"V100", "T4"}).Build(), 0},
      {"CPU-only pod on T4", "T4", Pod("p").Cpu(1000).Build(), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto view = View("n").Gpus(2, c.node_model).Free({1000, 1000}).CpuFree(32000).Build();
    ASSERT_TRUE((*scarce)->Filter(c.pod, view).fits());
    // fgd-scarcity's unpenalised score is fgd's at kFineScale points per point.
    const int64_t fine = (*scarce)->Score(c.pod, view, Snapshot{}) + c.want_penalty;
    EXPECT_EQ(fine / FgdPolicy::kFineScale, (*fgd)->Score(c.pod, view, Snapshot{}));
    ASSERT_GE(fine, 20 * FgdPolicy::kFineScale);
    common::Rng a(1);
    common::Rng b(1);
    EXPECT_EQ(gpusched::testing::GpuIndices((*scarce)->SelectGpus(c.pod, view, a)),
              gpusched::testing::GpuIndices((*fgd)->SelectGpus(c.pod, view, b)));
  }
  // Without the cluster's GPU counts nothing is scarce: fgd-scarcity scores as fgd.
  auto blind = FgdPolicy::CreateScarcity(PolicyOptions{.target_workload = TiedWorkload()});
  ASSERT_TRUE(blind.ok());
  const auto t4 = View("n").Gpus(2, "T4").Free({1000, 1000}).CpuFree(32000).Build();
  const auto pod = Pod("p").Cpu(1000).Gpus(1).Build();
  EXPECT_EQ((*blind)->Score(pod, t4, Snapshot{}) / FgdPolicy::kFineScale, (*fgd)->Score(pod, t4, Snapshot{}));
  // It needs a target workload, as fgd does.
  auto none = FgdPolicy::CreateScarcity(PolicyOptions{});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("fgd-scarcity needs a target workload"));
}

// fgd's and fgd-scarcity's scores of pods on one node, both made from the same target workload.
struct StrandedCase {
  std::string name;
  core::PodRequest pod;
  int64_t want_fgd;
  int64_t want_scarcity;
};
void ExpectStrandedScores(std::shared_ptr<const TargetWorkload> m, const core::NodeView& view,
                          const std::vector<StrandedCase>& cases) {
  const PolicyOptions options{.target_workload = std::move(m), .gpus_by_model = {{"A100", 2}}};
  auto fgd = FgdPolicy::Create(options);
  auto scarce = FgdPolicy::CreateScarcity(options);
  ASSERT_TRUE(fgd.ok() && scarce.ok());
  for (const StrandedCase& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ((*fgd)->Score(c.pod, view, Snapshot{}), c.want_fgd);
    EXPECT_EQ((*scarce)->Score(c.pod, view, Snapshot{}), c.want_scarcity);
  }
}

// The GPUs the CPU cannot feed. SmallWorkload's GPU class asks 2000 CPU per 250 milli: c = 0.75 x 2000 / (0.75 x
// 250) = 8 CPU milli per GPU milli. Node: GPUs {1000, 1000} free, 20000 CPU (feeds 2500 milli: none stranded).
// F = 0.75 x 0 (A fits, nothing below 250) + 0.25 x 2000 (B: idle) = 500. fgd scores floor(100 sigmoid(delta /
// 1000)), fgd-scarcity floor(10^6 sigmoid(delta / 1000)) (kFineScale).
//   whole-GPU pod, 14000 CPU: free {0, 1000}, 6000 CPU. F' = 0 + 0.25 x 1000 = 250; stranded 1000 - 6000/8 = 250.
//     fgd: delta 250 -> 56 (sigmoid(0.25) = 0.5621765); fgd-scarcity: delta 500 - 500 = 0 -> 500000.
//   CPU-only pod, 14000 CPU: free {1000, 1000}, 6000 CPU. F' = 500; stranded 2000 - 750 = 1250.
//     fgd: delta 0 -> 50; fgd-scarcity: delta -1250 -> 222700 (sigmoid(-1.25) = 0.2227001).
//   whole-GPU pod, 4000 CPU: 16000 CPU feeds 2000 >= 1000 idle: nothing stranded: 56 and 562176.
TEST(FgdScarcityTest, GpusTheCpuCannotFeedCountAsFragmented) {
  EXPECT_DOUBLE_EQ(FeedPerGpuMilli(*SmallWorkload()).cpu_per_milli, 8.0);
  EXPECT_DOUBLE_EQ(FeedPerGpuMilli(*SmallWorkload()).memory_per_milli, 0.0);  // its classes carry no memory
  EXPECT_DOUBLE_EQ(FeedPerGpuMilli(TargetWorkload{}).cpu_per_milli, 0.0);
  ExpectStrandedScores(SmallWorkload(), View("n").Gpus(2).Free({1000, 1000}).CpuFree(20000).Build(),
                       {
                           {"whole GPU that leaves a GPU without CPU", Pod("p").Cpu(14000).Gpus(1).Build(), 56, 500000},
                           {"CPU-only pod that leaves both GPUs short of CPU", Pod("p").Cpu(14000).Build(), 50, 222700},
                           {"whole GPU that leaves enough CPU", Pod("p").Cpu(4000).Gpus(1).Build(), 56, 562176},
                       });
}

// The same with memory. SmallWorkload with 4000 MiB on its GPU class: c_mem = 0.75 x 4000 / (0.75 x 250) = 16 MiB
// per GPU milli (c_cpu stays 8). Node: GPUs {1000, 1000} free, 20000 CPU and 40000 MiB (each feeds 2500 milli), F =
// 500 as above (memory is not part of F).
//   whole-GPU pod, 4000 CPU, 24000 MiB: 16000 MiB feeds 1000 = idle: nothing stranded; delta 250: 56 and 562176.
//   whole-GPU pod, 4000 CPU, 32000 MiB: 8000 MiB feeds 500 of the 1000 idle: delta 500 - (250 + 500) = -250
//     -> 437823 (sigmoid(-0.25) = 0.4378235); fgd 56.
//   CPU-only pod, 1000 CPU, 30000 MiB: 10000 MiB feeds 625 of 2000 idle: delta 500 - (500 + 1375) = -1375
//     -> 201813 (sigmoid(-1.375) = 0.2018133); fgd 50.
TEST(FgdScarcityTest, GpusTheMemoryCannotFeedCountAsFragmented) {
  auto m = std::make_shared<TargetWorkload>(*SmallWorkload());
  m->classes[0].memory = common::MiB{4000};
  EXPECT_DOUBLE_EQ(FeedPerGpuMilli(*m).cpu_per_milli, 8.0);
  EXPECT_DOUBLE_EQ(FeedPerGpuMilli(*m).memory_per_milli, 16.0);
  ExpectStrandedScores(
      m, View("n").Gpus(2).Free({1000, 1000}).CpuFree(20000).MemoryFree(40000).Build(),
      {
          {"whole GPU that leaves enough memory", Pod("p").Cpu(4000).Memory(24000).Gpus(1).Build(), 56, 562176},
          {"whole GPU that leaves half a GPU without memory", Pod("p").Cpu(4000).Memory(32000).Gpus(1).Build(), 56,
           437823},
          {"CPU-only pod that takes the memory", Pod("p").Cpu(1000).Memory(30000).Build(), 50, 201813},
      });
}

// fgd's integer score ties placements whose delta differs by up to hundreds of milli (one point per ~220 milli at
// |delta| = 3000) and gives 0 to every placement that grows F by more than 4.6 GPUs; the node order then picks.
// fgd-scarcity still orders them. SmallWorkload (c = 8 CPU milli per GPU milli), GPUs {1000, 1000, 1000, 1000}
// free, 32000 CPU (feeds all 4000): F = 0.25 x 4000 = 1000, nothing stranded.
//   CPU-only pod leaving 0 CPU:    A no longer fits: F' = 0.75 x 4000 + 0.25 x 4000 = 4000, stranded 4000:
//                                  delta 1000 - 8000 = -7000 -> floor(10^6 sigmoid(-7)) = 911;
//   CPU-only pod leaving 1000 CPU: the same F', stranded 4000 - 1000/8 = 3875: delta -6875 -> 1032.
// fgd (delta -3000 for both: it does not see stranding) scores both floor(100 sigmoid(-3)) = 4. The runner's node
// choice compares the fine scores; a score mix and the extender get score / ScoreScale() (cycle_runner_test).
TEST(FgdScarcityTest, PlacementsFgdTiesAreStillOrdered) {
  const PolicyOptions options{.target_workload = SmallWorkload(), .gpus_by_model = {{"A100", 4}}};
  auto fgd = FgdPolicy::Create(options);
  auto scarce = FgdPolicy::CreateScarcity(options);
  ASSERT_TRUE(fgd.ok() && scarce.ok());
  EXPECT_EQ((*fgd)->ScoreScale(), 1);
  EXPECT_EQ((*scarce)->ScoreScale(), FgdPolicy::kFineScale);
  const auto view = View("n").Gpus(4).Free({1000, 1000, 1000, 1000}).CpuFree(32000).Build();
  const auto all_cpu = Pod("p").Cpu(32000).Build();
  const auto most_cpu = Pod("p").Cpu(31000).Build();
  EXPECT_EQ((*scarce)->Score(all_cpu, view, Snapshot{}), 911);
  EXPECT_EQ((*scarce)->Score(most_cpu, view, Snapshot{}), 1032);
  EXPECT_EQ((*fgd)->Score(all_cpu, view, Snapshot{}), 4);
  EXPECT_EQ((*fgd)->Score(most_cpu, view, Snapshot{}), 4);
}

// A share that leaves a room its GPU's plan never fills pays kOffPlanWeight per milli of it. M: whole GPU 0.5,
// shares 470 (0.3), 320 (0.15), 650 (0.05), no CPU; the plan pairs 470s and puts 320s into 650s' rooms or three to a
// GPU (share_plan_test). A 320 on GPUs {530 (a 470 on it), 1000} free:
//   before: F = 0.5 x 530 (whole: GPU 0 is below 1000) + 0.05 x 530 (650 likewise) = 291.5;
//   GPU 0 -> 210: every class strands 210: F' = 210, delta 81.5: fgd 52 (sigmoid(0.0815) = 0.5203637);
//   GPU 1 -> 680: whole fits nowhere: 0.5 x 1210, 650 fits on GPU 1 only: 0.05 x 530: F' = 631.5, delta -340: fgd 41
//                 (sigmoid(-0.34) = 0.4158095).
// fgd puts the 320 next to the 470. fgd-scarcity charges GPU 0 8 x 210 = 1680 (470 + 320 is in no combination):
// delta -1598.5 -> 168191 (sigmoid(-1.5985) = 0.1681914), and takes the free GPU: 415809. On GPUs {350 (a 650 on
// it), 1000} the 320 follows the plan on GPU 0 and both policies score alike.
TEST(FgdScarcityTest, SharesOffThePlanPayForTheRoomTheyLeave) {
  auto m = std::make_shared<TargetWorkload>();
  auto share = [](int64_t milli, double weight) {
    return TaskClass{.gpu_count = 1, .gpu_milli = common::MilliGpu{milli}, .pods = 1, .weight = weight};
  };
  m->classes = {TaskClass{.gpu_count = 1, .gpu_milli = common::MilliGpu{1000}, .pods = 1, .weight = 0.5},
                share(470, 0.3), share(320, 0.15), share(650, 0.05)};
  const PolicyOptions options{.target_workload = m, .gpus_by_model = {{"A100", 2}}};
  auto fgd = FgdPolicy::Create(options);
  auto scarce = FgdPolicy::CreateScarcity(options);
  ASSERT_TRUE(fgd.ok() && scarce.ok());
  const auto pod = Pod("p").Share(320).Build();
  const auto next_to_470 = View("n").Gpus(2).Free({530, 1000}).CpuFree(32000).Build();
  common::Rng rng(1);
  EXPECT_EQ((*fgd)->Score(pod, next_to_470, Snapshot{}), 52);
  EXPECT_EQ(testing::GpuIndices((*fgd)->SelectGpus(pod, next_to_470, rng)), std::vector<int32_t>{0});
  EXPECT_EQ((*scarce)->Score(pod, next_to_470, Snapshot{}), 415809);
  EXPECT_EQ(testing::GpuIndices((*scarce)->SelectGpus(pod, next_to_470, rng)), std::vector<int32_t>{1});

  // Before: whole, 470 and 650 fit on GPU 1 only: (0.5 + 0.3 + 0.05) x 350 = 297.5; GPU 0 -> 30: F' = 30, delta
  // 267.5 (sigmoid(0.2675) = 0.5664791); GPU 1 -> 680 would give delta -340.
  const auto next_to_650 = View("n").Gpus(2).Free({350, 1000}).CpuFree(32000).Build();
  EXPECT_EQ((*fgd)->Score(pod, next_to_650, Snapshot{}), 56);
  EXPECT_EQ((*scarce)->Score(pod, next_to_650, Snapshot{}), 566479);
  EXPECT_EQ(testing::GpuIndices((*scarce)->SelectGpus(pod, next_to_650, rng)), std::vector<int32_t>{0});
}

}  // namespace
}  // namespace gpusched::policy
