#include "gpusched/policy/topology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <set>

#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node_view.h"
#include "gpusched/policy/gpu_fit.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/topology_policy.h"

namespace gpusched::policy {
namespace {

using core::LinkKind;

// A node of n GPUs whose links come from a matrix of nvidia-smi topo -m names ("NV2", "PIX", "SYS", ...).
core::Node NodeFromMatrix(const std::vector<std::vector<std::string>>& m) {
  core::Node node{.name = common::NodeName("n")};
  for (size_t i = 0; i < m.size(); ++i) {
    core::Gpu g{.index = static_cast<int32_t>(i),
                .uuid = common::GpuUuid("GPU-" + std::to_string(i)),
                .model = "V100",
                .memory = common::MiB{32768}};
    for (size_t j = 0; j < m.size(); ++j) {
      if (i == j) {
        continue;
      }
      const std::string& t = m[i][j];
      core::GpuLink l{.peer = static_cast<int32_t>(j)};
      if (t.rfind("NV", 0) == 0) {
        l.kind = LinkKind::kNvlink;
        l.nvlinks = std::stoi(t.substr(2));
      } else if (t == "PIX") {
        l.kind = LinkKind::kPcieSwitch;
      } else if (t == "PXB") {
        l.kind = LinkKind::kPcieMultiSwitch;
      } else if (t == "PHB") {
        l.kind = LinkKind::kHostBridge;
      } else if (t == "NODE") {
        l.kind = LinkKind::kSameNuma;
      } else if (t == "SYS") {
        l.kind = LinkKind::kCrossSocket;
      }
      g.links.push_back(l);
    }
    node.gpus.push_back(g);
  }
  return node;
}

// DGX-1 with V100s: the hybrid cube-mesh.
const std::vector<std::vector<std::string>> kCubeMesh = {
    {"X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"}, {"NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"},
    {"NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"}, {"NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"},
    {"NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"}, {"SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"},
    {"SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"}, {"SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"}};
// Four GPUs as two NVLink pairs under one host bridge.
const std::vector<std::vector<std::string>> kTwoPairs = {
    {"X", "NV2", "PHB", "PHB"}, {"NV2", "X", "PHB", "PHB"}, {"PHB", "PHB", "X", "NV2"}, {"PHB", "PHB", "NV2", "X"}};

TEST(TopologyTest, PairScores) {
  const core::Node node = NodeFromMatrix({{"X", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"},
                                          {"NV4", "X", "SYS", "SYS", "SYS", "SYS", "SYS"},
                                          {"PIX", "SYS", "X", "SYS", "SYS", "SYS", "SYS"},
                                          {"PXB", "SYS", "SYS", "X", "SYS", "SYS", "SYS"},
                                          {"PHB", "SYS", "SYS", "SYS", "X", "SYS", "SYS"},
                                          {"NODE", "SYS", "SYS", "SYS", "SYS", "X", "SYS"},
                                          {"SYS", "SYS", "SYS", "SYS", "SYS", "SYS", "X"}});
  EXPECT_EQ(PairScore(node, 0, 1), 400);
  EXPECT_EQ(PairScore(node, 0, 2), 50);
  EXPECT_EQ(PairScore(node, 0, 3), 40);
  EXPECT_EQ(PairScore(node, 0, 4), 30);
  EXPECT_EQ(PairScore(node, 0, 5), 20);
  EXPECT_EQ(PairScore(node, 0, 6), 10);
  EXPECT_TRUE(NvlinkJoined(node, 0, 1));
  EXPECT_FALSE(NvlinkJoined(node, 0, 2));
  // An older inventory with nvlink_peers only.
  core::Node old{.name = common::NodeName("o")};
  old.gpus.resize(3);
  old.gpus[0].nvlink_peers = {1};
  EXPECT_EQ(PairScore(old, 0, 1), 100);
  EXPECT_EQ(PairScore(old, 1, 0), 100);
  EXPECT_EQ(PairScore(old, 1, 2), 0);
  EXPECT_TRUE(HasTopology(old));
  EXPECT_FALSE(HasTopology(core::Node{.gpus = std::vector<core::Gpu>(4)}));
}

TEST(TopologyTest, SetScoresAndGroupsOnTheCubeMesh) {
  const core::Node node = NodeFromMatrix(kCubeMesh);
  const std::vector<size_t> quad = {0, 1, 2, 3};
  // 0-1 NV1, 0-2 NV1, 0-3 NV2, 1-2 NV2, 1-3 NV1, 2-3 NV2: 100+100+200+200+100+200.
  EXPECT_EQ(SetScore(node, quad), 900);
  EXPECT_TRUE(FullyNvlinked(node, quad));
  const std::vector<size_t> mixed = {1, 2, 5, 6};  // 1-2 NV2, 5-6 NV2, 1-5 NV2, 2-6 NV1, 1-6 SYS, 2-5 SYS
  EXPECT_EQ(SetScore(node, mixed), 720);
  EXPECT_FALSE(FullyNvlinked(node, mixed));
  const std::vector<size_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(LargestNvlinkGroup(node, all), 4U);
  const std::vector<size_t> some = {0, 5, 6};  // 5-6 NV2 only
  EXPECT_EQ(LargestNvlinkGroup(node, some), 2U);
}

TEST(TopologyTest, ChoiceTable) {
  struct Case {
    std::string name;
    std::vector<std::vector<std::string>> matrix;
    std::vector<size_t> free;
    size_t count;
    std::vector<size_t> want;
  };
  const std::vector<Case> cases = {
      // Two NVLink pairs: a 2-GPU pod takes a pair (the first, on a tie).
      {"pair of pairs", kTwoPairs, {0, 1, 2, 3}, 2, {0, 1}},
      // GPU 2 is taken: a single GPU goes to 3, the broken pair's other half, and keeps the 0-1 pair whole
      // (first fit would take 0 and break it).
      {"single keeps the pair", kTwoPairs, {0, 1, 3}, 1, {3}},
      // A 2-GPU pod with GPUs 0 and 2 taken: 1 and 3 (PHB) are all there is.
      {"no pair left", kTwoPairs, {1, 3}, 2, {1, 3}},
      // Cube-mesh: a 4-GPU pod takes a fully connected quad, not the 720-point mixed set.
      {"quad", kCubeMesh, {0, 1, 2, 3, 4, 5, 6, 7}, 4, {0, 1, 2, 3}},
      // GPU 0 taken: the other quad (900) beats any set with 1, 2, 3 (720 at best).
      {"other quad", kCubeMesh, {1, 2, 3, 4, 5, 6, 7}, 4, {4, 5, 6, 7}},
      // 2-GPU pod on the empty mesh: a 2-link pair, and of those the one that leaves a quad whole: 0-3 leaves
      // 4-7, like every pair inside a quad; the first such pair is 0-3 (0-1 and 0-2 are only 1 link).
      {"two links", kCubeMesh, {0, 1, 2, 3, 4, 5, 6, 7}, 2, {0, 3}},
      // A single GPU on the empty mesh: every choice leaves a quad, then the least connectivity lost: GPU 0 has
      // 6 links like all others; the lowest index wins.
      {"single on empty mesh", kCubeMesh, {0, 1, 2, 3, 4, 5, 6, 7}, 1, {0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const core::Node node = NodeFromMatrix(c.matrix);
    EXPECT_EQ(ChooseWholeGpus(node, c.free, c.count), c.want);
  }
}

TEST(TopologyTest, WithoutTopologyTheLowestIndicesAsBefore) {
  core::Node node{.name = common::NodeName("plain")};
  node.gpus.resize(8);
  const std::vector<size_t> free = {1, 3, 4, 6};
  EXPECT_EQ(ChooseWholeGpus(node, free, 2), (std::vector<size_t>{1, 3}));
}

// An inventory with NUMA nodes and no links: a pod's GPUs stay on one NUMA node where they can, and the set left
// behind is the one on one NUMA node too.
TEST(TopologyTest, WithNumaNodesOnlyOneNumaNodeFirst) {
  core::Node node{.name = common::NodeName("numa")};
  node.gpus.resize(4);
  for (size_t i = 0; i < 4; ++i) {
    node.gpus[i].index = static_cast<int32_t>(i);
    node.gpus[i].numa_node = static_cast<int32_t>(i % 2);  // 0 and 2 on node 0, 1 and 3 on node 1
  }
  EXPECT_TRUE(HasTopology(node));
  EXPECT_EQ(PairScore(node, 0, 2), 20);
  EXPECT_EQ(PairScore(node, 0, 1), 10);
  const std::vector<size_t> all = {0, 1, 2, 3};
  EXPECT_EQ(ChooseWholeGpus(node, all, 2), (std::vector<size_t>{0, 2}));
  const std::vector<size_t> three = {1, 2, 3};
  EXPECT_EQ(ChooseWholeGpus(node, three, 2), (std::vector<size_t>{1, 3}));
  // One NUMA node for all GPUs, or none known: no topology, the lowest indices as before.
  for (auto& g : node.gpus) {
    g.numa_node = 0;
  }
  EXPECT_FALSE(HasTopology(node));
  EXPECT_EQ(ChooseWholeGpus(node, three, 2), (std::vector<size_t>{1, 2}));
}

// Random nodes and free sets: the choice is always `count` distinct free GPUs in ascending order, and in exact mode
// no other set of that size scores higher.
TEST(TopologyTest, RandomNodesNeverGetAnInfeasibleOrWorseSet) {
  std::mt19937_64 rng(7);
  const LinkKind kinds[] = {LinkKind::kCrossSocket,     LinkKind::kSameNuma,   LinkKind::kHostBridge,
                            LinkKind::kPcieMultiSwitch, LinkKind::kPcieSwitch, LinkKind::kNvlink};
  for (int round = 0; round < 300; ++round) {
    const size_t n = 2 + rng() % 9;  // 2..10 GPUs
    core::Node node{.name = common::NodeName("r")};
    node.gpus.resize(n);
    for (size_t i = 0; i < n; ++i) {
      node.gpus[i].index = static_cast<int32_t>(i);
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        const LinkKind k = kinds[rng() % 6];
        const int32_t links = k == LinkKind::kNvlink ? static_cast<int32_t>(1 + rng() % 4) : 0;
        node.gpus[i].links.push_back({.peer = static_cast<int32_t>(j), .kind = k, .nvlinks = links});
        node.gpus[j].links.push_back({.peer = static_cast<int32_t>(i), .kind = k, .nvlinks = links});
      }
    }
    std::vector<size_t> free;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 3 != 0) {
        free.push_back(i);
      }
    }
    if (free.empty()) {
      continue;
    }
    const size_t count = 1 + rng() % free.size();
    const std::vector<size_t> got = ChooseWholeGpus(node, free, count);
    ASSERT_EQ(got.size(), count);
    ASSERT_TRUE(std::is_sorted(got.begin(), got.end()));
    ASSERT_EQ(std::set<size_t>(got.begin(), got.end()).size(), count);
    for (size_t g : got) {
      ASSERT_TRUE(std::binary_search(free.begin(), free.end(), g));
    }
    // Exhaustive check of the score: every subset of `free` of that size.
    const int64_t score = SetScore(node, got);
    for (uint32_t mask = 0; mask < (1U << free.size()); ++mask) {
      if (static_cast<size_t>(__builtin_popcount(mask)) != count) {
        continue;
      }
      std::vector<size_t> other;
      for (size_t k = 0; k < free.size(); ++k) {
        if ((mask >> k) & 1U) {
          other.push_back(free[k]);
        }
      }
      ASSERT_LE(SetScore(node, other), score) << "round " << round;
    }
  }
}

// Through SelectGpusBest, which every benchmark policy uses: a 2-GPU pod lands on an NVLink pair.
TEST(TopologyTest, SelectGpusUsesTheTopology) {
  const auto node = std::make_shared<const core::Node>(NodeFromMatrix(kTwoPairs));
  core::NodeView view = core::NodeView::Empty(node);
  view.gpus[0].free = common::MilliGpu{0};  // GPU 0 fully used
  view.gpus[0].holders = 1;
  core::PodRequest pod{.uid = common::PodUid("p")};
  pod.containers.push_back(
      core::GpuRequest{.container = "main", .count = 2, .milli_per_gpu = common::MilliGpu{1000}, .exclusive = true});
  ASSERT_TRUE(FitGpus(pod, view).fits());
  const auto alloc = SelectGpusBest(pod, view);
  ASSERT_EQ(alloc.size(), 1U);
  ASSERT_EQ(alloc[0].gpus.size(), 2U);
  EXPECT_EQ(alloc[0].gpus[0].index, 2);  // the free pair, not 1 and 2
  EXPECT_EQ(alloc[0].gpus[1].index, 3);
}

// A share that opens a fully free GPU takes the one whose loss breaks the least: on two NVLink pairs with GPU 2
// busy, GPU 3 (the broken pair's other half), for every policy's choice of a fully free GPU.
TEST(TopologyTest, SharesSpareTheLinks) {
  const auto node = std::make_shared<const core::Node>(NodeFromMatrix(kTwoPairs));
  core::NodeView v = core::NodeView::Empty(node);
  v.gpus[2].free = common::MilliGpu{0};
  v.gpus[2].holders = 1;
  core::PodRequest p{.uid = common::PodUid("p")};
  p.containers.push_back(core::GpuRequest{.container = "main", .count = 1, .milli_per_gpu = common::MilliGpu{300}});
  EXPECT_EQ(SelectGpusBest(p, v)[0].gpus[0].index, 3);
  EXPECT_EQ(SelectGpusWorst(p, v)[0].gpus[0].index, 3);
  // A partly used GPU is the tightest and stays the choice; so does the lowest index without topology.
  v.gpus[1].free = common::MilliGpu{500};
  v.gpus[1].holders = 1;
  EXPECT_EQ(SelectGpusBest(p, v)[0].gpus[0].index, 1);
  core::Node flat = *node;
  for (core::Gpu& g : flat.gpus) {
    g.links.clear();
  }
  core::NodeView fv = core::NodeView::Empty(std::make_shared<const core::Node>(flat));
  fv.gpus[2].free = common::MilliGpu{0};
  fv.gpus[2].holders = 1;
  EXPECT_EQ(SelectGpusBest(p, fv)[0].gpus[0].index, 0);
}

// gpusched.io/topology: required refuses a node without enough free NVLink-joined GPUs (unresolvable when even the
// empty node has none), and then gets such GPUs; none ignores the links.
TEST(TopologyTest, RequiredAndNone) {
  const auto node = std::make_shared<const core::Node>(NodeFromMatrix(kTwoPairs));
  auto busy = [&](std::vector<size_t> used) {
    core::NodeView v = core::NodeView::Empty(node);
    for (size_t i : used) {
      v.gpus[i].free = common::MilliGpu{0};
      v.gpus[i].holders = 1;
    }
    return v;
  };
  auto pod = [](int32_t count, core::TopologyNeed need) {
    core::PodRequest p{.uid = common::PodUid("p")};
    p.containers.push_back(core::GpuRequest{
        .container = "main", .count = count, .milli_per_gpu = common::MilliGpu{1000}, .exclusive = true});
    p.topology = need;
    return p;
  };
  const core::PodRequest two_required = pod(2, core::TopologyNeed::kRequired);
  // The 2-3 pair is free.
  core::NodeView v = busy({0});
  ASSERT_TRUE(FitGpus(two_required, v).fits());
  auto a = SelectGpusBest(two_required, v);
  EXPECT_EQ(a[0].gpus[0].index, 2);
  EXPECT_EQ(a[0].gpus[1].index, 3);
  // GPUs 0 and 2 taken: 1 and 3 are free but not NVLinked.
  v = busy({0, 2});
  const Fit f = FitGpus(two_required, v);
  EXPECT_EQ(f.code, Fit::Code::kUnschedulable);
  EXPECT_EQ(f.reason,
            "container main needs 2 GPUs all NVLink-joined (gpusched.io/topology: required); its largest free "
            "NVLink-joined group is 1");
  EXPECT_TRUE(FitGpus(pod(2, core::TopologyNeed::kPreferred), v).fits());
  // 4 NVLink-joined GPUs do not exist on this node at all.
  const Fit four = FitGpus(pod(4, core::TopologyNeed::kRequired), busy({}));
  EXPECT_EQ(four.code, Fit::Code::kUnresolvable);
  EXPECT_NE(four.reason.find("the node's largest NVLink-joined group is 2"), std::string::npos) << four.reason;
  // A single GPU is always "joined"; none takes the lowest index where preferred keeps the 0-1 pair.
  v = busy({2});
  EXPECT_TRUE(FitGpus(pod(1, core::TopologyNeed::kRequired), v).fits());
  EXPECT_EQ(SelectGpusBest(pod(1, core::TopologyNeed::kNone), v)[0].gpus[0].index, 0);
  EXPECT_EQ(SelectGpusBest(pod(1, core::TopologyNeed::kPreferred), v)[0].gpus[0].index, 3);
}

// The topology policy's node score (topology_policy.h), worked by hand on two NVLink pairs (NV4: 400) joined across
// the sockets (SYS: 10).
TEST(TopologyPolicyTest, ScoresByHand) {
  const auto node = std::make_shared<const core::Node>(NodeFromMatrix({{"X", "NV4", "SYS", "SYS"},
                                                                       {"NV4", "X", "SYS", "SYS"},
                                                                       {"SYS", "SYS", "X", "NV4"},
                                                                       {"SYS", "SYS", "NV4", "X"}}));
  auto view = [&](std::vector<size_t> used) {
    core::NodeView v = core::NodeView::Empty(node);
    for (size_t i : used) {
      v.gpus[i].free = common::MilliGpu{0};
      v.gpus[i].holders = 1;
    }
    return v;
  };
  auto pod = [](int32_t count, int64_t milli) {
    core::PodRequest p{.uid = common::PodUid("p")};
    p.containers.push_back(core::GpuRequest{
        .container = "main", .count = count, .milli_per_gpu = common::MilliGpu{milli}, .exclusive = milli >= 1000});
    return p;
  };
  auto made = MakePolicy("topology", PolicyOptions{});
  ASSERT_TRUE(made.ok()) << made.status().message();
  const PlacementPolicy& topo = *made.value();
  const Snapshot none;
  // 2 GPUs: an NVLink pair is the best there is (400 of 400).
  EXPECT_EQ(topo.Score(pod(2, 1000), view({}), none), 100);
  EXPECT_EQ(topo.Score(pod(2, 1000), view({0}), none), 100);
  // GPUs 0 and 2 taken: 1 and 3 across the sockets, 10 of 400: 2.5, rounded.
  EXPECT_EQ(topo.Score(pod(2, 1000), view({0, 2}), none), 3);
  // 3 GPUs: the best on the empty node is a pair and one more (400 + 10 + 10 = 420); with GPU 1 taken only
  // 0, 2, 3 remain: the same 420.
  EXPECT_EQ(topo.Score(pod(3, 1000), view({1}), none), 100);
  // One GPU, a share, no GPU: neutral on every node.
  EXPECT_EQ(topo.Score(pod(1, 1000), view({2, 3}), none), kTopologyNeutralScore);
  EXPECT_EQ(topo.Score(pod(1, 500), view({}), none), kTopologyNeutralScore);
  core::PodRequest cpu_only{.uid = common::PodUid("c"), .cpu = common::MilliCpu{1000}};
  EXPECT_EQ(topo.Score(cpu_only, view({}), none), kTopologyNeutralScore);
  // A node without topology.
  core::Node flat = *node;
  for (core::Gpu& g : flat.gpus) {
    g.links.clear();
  }
  const core::NodeView flat_view = core::NodeView::Empty(std::make_shared<const core::Node>(flat));
  EXPECT_EQ(topo.Score(pod(2, 1000), flat_view, none), kTopologyNeutralScore);
  // Its GPU choice is SelectGpusBest's: the 2-3 pair when GPU 0 is busy.
  common::Rng rng(1);
  const auto alloc = topo.SelectGpus(pod(2, 1000), view({0}), rng);
  ASSERT_EQ(alloc.size(), 1U);
  EXPECT_EQ(alloc[0].gpus[0].index, 2);
  EXPECT_EQ(alloc[0].gpus[1].index, 3);
}

}  // namespace
}  // namespace gpusched::policy
