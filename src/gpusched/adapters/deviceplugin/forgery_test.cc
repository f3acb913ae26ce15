// Forged allocations (handoff.h): steps 4 and 5 of a handoff, SharesFor -> ResolveShares -> CheckGpuConflicts, on
// one node with four 40000 MiB GPUs, for a container of pod "new" against the other pods bound to the node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "gpusched/adapters/deviceplugin/handoff.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kRes = "gpusched.io/gpu";
const std::set<std::string, std::less<>> kResources = {"gpusched.io/gpu", "nvidia.com/gpu", "keti.com/mpsgpu"};

std::vector<ports::GpuSample> Inventory() {
  std::vector<ports::GpuSample> gpus;
  for (int i = 0; i < 4; ++i) {
    gpus.push_back(ports::GpuSample{
        .index = i, .uuid = common::GpuUuid("GPU-" + std::to_string(i)), .memory_total = common::MiB{40000}});
  }
  return gpus;
}

// One GPU of an allocation entry; uuid "" names it by index only, "?" (the default) is "GPU-<gpu>".
struct Share {
  int gpu = 0;
  int64_t milli = 1000;
  int64_t mib = 0;
  bool exclusive = false;
  std::string uuid = "?";
};
Share Whole(int gpu) { return Share{.gpu = gpu, .exclusive = true}; }
Share Part(int gpu, int64_t milli, int64_t mib = 0) { return Share{.gpu = gpu, .milli = milli, .mib = mib}; }

struct Entry {
  std::string container = "main";
  std::vector<Share> gpus;
  bool init = false;
};

struct Pod {
  std::string name;
  std::vector<Entry> entries;
  std::string phase = "Running";
  std::string alloc_node = "n1";
  uint64_t id = 0;
  bool deleting = false;
};

std::vector<core::GpuShare> Shares(const std::vector<Share>& in) {
  std::vector<core::GpuShare> out;
  for (const Share& s : in) {
    out.push_back(core::GpuShare{.index = s.gpu,
                                 .uuid = common::GpuUuid(s.uuid == "?" ? "GPU-" + std::to_string(s.gpu) : s.uuid),
                                 .milli = common::MilliGpu{s.milli},
                                 .memory = common::MiB{s.mib},
                                 .exclusive = s.exclusive});
  }
  return out;
}

// Bound to n1; one spec container per distinct entry name, requesting as many devices as its entry names GPUs.
json PodJson(const Pod& p) {
  testing::PodJson pod(p.name);
  pod.NodeName("n1").Containers(json::array()).InitContainers(json::array()).Phase(p.phase);
  if (p.deleting) {
    pod.Deleted("2026-01-01T00:00:00Z");
  }
  core::Allocation a{.pod = common::PodUid("uid-" + p.name), .node = common::NodeName(p.alloc_node), .id = p.id};
  std::set<std::string> seen;
  for (const Entry& e : p.entries) {
    a.containers.push_back(
        core::ContainerAllocation{.container = (e.init ? "init:" : "") + e.container, .gpus = Shares(e.gpus)});
    if (seen.insert(e.container).second) {
      const json limits = {{kRes, std::to_string(e.gpus.size())}};
      if (e.init) {
        pod.InitContainer(e.container, limits);
      } else {
        pod.Container(e.container, limits);
      }
    }
  }
  return pod.Annotation("gpusched.io/allocation", kube::EncodeAllocation(a));
}

// The kubelet lists `pod`'s `container` with a device of kRes.
KubeletPod Holding(const std::string& pod, const std::string& container = "main") {
  return KubeletPod{.namespace_ = "default",
                    .name = pod,
                    .containers = {KubeletContainer{.name = container, .devices = {{kRes, {"dev-" + pod}}}}}};
}

// This plugin handed `pod`'s `container` the GPUs `gpus` of allocation entry `entry` (default: the container's).
HandoffLedger::Entry Handed(const std::string& pod, const std::vector<Share>& gpus,
                            const std::string& container = "main", const std::string& entry = "") {
  return HandoffLedger::Entry{.uid = common::PodUid("uid-" + pod),
                              .pod_key = "default/" + pod,
                              .container = container,
                              .resource = kRes,
                              .device_ids = {"dev-" + pod},
                              .entry = entry.empty() ? container : entry,
                              .gpus = Shares(gpus)};
}

TEST(ForgeryTest, ConflictTable) {
  struct Case {
    const char* name;
    std::vector<Pod> pods;  // "new" among them: the pod whose container is checked
    std::string container = "main";
    ConflictStage stage = ConflictStage::kAllocate;
    std::vector<KubeletPod> kubelet;
    std::vector<HandoffLedger::Entry> ledger;
    std::vector<std::string> want_error;  // substrings; none = the container gets its GPUs
  };
  const Case cases[] = {
      // ---- happy cases
      {.name = "alone on an idle GPU", .pods = {{.name = "new", .entries = {{.gpus = {Whole(0)}}}}}},
      // 600 + 400 = 1000 <= 1000 milli; 20000 + 20000 = 40000 <= 40000 MiB: exactly full is not over
      {.name = "two shared pods that fit exactly",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 600, 20000)}}}},
                {.name = "new", .entries = {{.gpus = {Part(1, 400, 20000)}}}}},
       .kubelet = {Holding("victim")}},
      {.name = "a Succeeded pod's exclusive GPU is reused",
       .pods = {{.name = "old", .entries = {{.gpus = {Whole(0)}}}, .phase = "Succeeded"},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .kubelet = {Holding("old")}},
      {.name = "a Failed pod's GPU is reused (a rejected forgery, too)",
       .pods = {{.name = "forger", .entries = {{.gpus = {Whole(0)}}}, .phase = "Failed"},
                {.name = "new", .entries = {{.gpus = {Part(0, 500)}}}}}},
      {.name = "pods on other GPUs do not matter",
       .pods = {{.name = "a", .entries = {{.gpus = {Whole(0), Whole(1)}}}},
                {.name = "b", .entries = {{.gpus = {Part(2, 900)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(3)}}}}},
       .kubelet = {Holding("a"), Holding("b")}},
      {.name = "an allocation for another node claims nothing here",
       .pods = {{.name = "elsewhere", .entries = {{.gpus = {Whole(0)}}}, .alloc_node = "n2"},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}}},
      {.name = "an allocation naming a GPU the node lacks claims nothing here",
       .pods = {{.name = "odd", .entries = {{.gpus = {Share{.gpu = 0, .exclusive = true, .uuid = "GPU-9"}}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}}},
      {.name = "the pod's own containers share a GPU",
       .pods = {{.name = "new", .entries = {{.gpus = {Part(0, 500)}}, {.container = "side", .gpus = {Part(0, 500)}}}}}},
      // victim 300 + new 300 = 600: a copy that fits takes nothing anyone holds
      {.name = "a copied shared allocation that still fits",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 300)}}}, .id = 7},
                {.name = "new", .entries = {{.gpus = {Part(1, 300)}}}, .id = 7}},
       .kubelet = {Holding("victim")}},
      {.name = "at PreStartContainer a pod bound later without devices is the newcomer, not this one",
       .pods = {{.name = "forger", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .stage = ConflictStage::kPreStart,
       .ledger = {Handed("new", {Whole(0)})}},
      {.name = "at PreStartContainer a handed-out container outranks a holder this plugin never checked",
       .pods = {{.name = "forger", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .stage = ConflictStage::kPreStart,
       .kubelet = {Holding("forger"), Holding("new")},
       .ledger = {Handed("new", {Whole(0)})}},

      // ---- refusals: exclusivity
      {.name = "an exclusive entry on a GPU another pod holds exclusively",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"pod default/new container main: its allocation asks for GPU 0 (GPU-0) exclusively, but it is "
                      "allocated to pod default/victim (1000 milli-GPU, 0 MiB, exclusive; holds its devices)",
                      "Forged allocations"}},
      {.name = "a shared entry on a GPU another pod holds exclusively",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Part(0, 100, 1000)}}}}},
       .ledger = {Handed("victim", {Whole(0)})},
       .want_error =
           {"GPU 0 (GPU-0) is held exclusively by pod default/victim (1000 milli-GPU, 0 MiB, exclusive; holds "
            "its devices)"}},
      {.name = "an exclusive entry on a GPU another pod shares",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 300, 2000)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(1)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"asks for GPU 1 (GPU-1) exclusively",
                      "pod default/victim (300 milli-GPU, 2000 MiB; holds its "
                      "devices)"}},
      {.name = "neither holds devices yet: the one being allocated now is refused",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Part(0, 500)}}}}},
       .want_error = {"GPU 0 (GPU-0) is claimed exclusively by pod default/victim (1000 milli-GPU, 0 MiB, exclusive; "
                      "bound, holds no devices yet)"}},
      {.name = "a pod being deleted may still run: it counts",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(0)}}}, .deleting = true},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"pod default/victim"}},
      {.name = "a GPU named by index only is the same GPU",
       .pods = {{.name = "victim", .entries = {{.gpus = {Share{.gpu = 2, .exclusive = true, .uuid = ""}}}}},
                {.name = "new", .entries = {{.gpus = {Whole(2)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"GPU 2 (GPU-2)", "pod default/victim"}},
      {.name = "an init container's entry counts",
       .pods = {{.name = "victim", .entries = {{.container = "setup", .gpus = {Whole(3)}, .init = true}}},
                {.name = "new", .entries = {{.gpus = {Part(3, 100)}}}}},
       .ledger = {Handed("victim", {Whole(3)}, "setup", "init:setup")},
       .want_error = {"GPU 3 (GPU-3) is held exclusively by pod default/victim"}},
      // victim was handed GPU 0 (ledger); its annotation now says GPU 3: what runs is what was handed out
      {.name = "the ledger's record outranks an annotation changed after the handoff",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(3)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .ledger = {Handed("victim", {Whole(0)})},
       .want_error = {"GPU 0 (GPU-0) exclusively", "pod default/victim"}},

      // ---- refusals: overcommit
      // 600 + 500 = 1100 > 1000
      {.name = "compute overcommitted",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 600, 1000)}}}},
                {.name = "new", .entries = {{.gpus = {Part(1, 500, 1000)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"pod default/new container main: GPU 1 (GPU-1) would be overcommitted: pod default/new asks 500 "
                      "milli-GPU, 1000 MiB of it, and it is allocated to pod default/victim (600 milli-GPU, 1000 MiB; "
                      "holds its devices); together 1100 milli-GPU > 1000"}},
      // 30000 + 20000 = 50000 > 40000
      {.name = "memory overcommitted",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 300, 30000)}}}},
                {.name = "new", .entries = {{.gpus = {Part(1, 300, 20000)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"together 50000 MiB > 40000 MiB (the GPU's memory)"}},
      // 400 + 400 + 300 = 1100
      {.name = "several pods together",
       .pods = {{.name = "a", .entries = {{.gpus = {Part(2, 400)}}}},
                {.name = "b", .entries = {{.gpus = {Part(2, 400)}}}},
                {.name = "new", .entries = {{.gpus = {Part(2, 300)}}}}},
       .kubelet = {Holding("a")},
       .want_error = {"pod default/a (400 milli-GPU, 0 MiB; holds its devices), pod default/b (400 milli-GPU, 0 MiB; "
                      "bound, holds no devices yet); together 1100 milli-GPU > 1000"}},
      // main 500 + side 300 = 800 of the pod, + 300 = 1100
      {.name = "the pod's containers together with another pod",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(0, 300)}}}},
                {.name = "new", .entries = {{.gpus = {Part(0, 500)}}, {.container = "side", .gpus = {Part(0, 300)}}}}},
       .kubelet = {Holding("victim")},
       .want_error = {"pod default/new asks 800 milli-GPU", "together 1100 milli-GPU"}},
      // 600 + 600 = 1200
      {.name = "a copied allocation that overcommits is pointed out",
       .pods = {{.name = "victim", .entries = {{.gpus = {Part(1, 600)}}}, .id = 7},
                {.name = "new", .entries = {{.gpus = {Part(1, 600)}}}, .id = 7}},
       .kubelet = {Holding("victim")},
       .want_error = {"together 1200 milli-GPU > 1000 (allocation id 7 is pod default/victim's too: a copied "
                      "annotation?)"}},
      {.name = "at PreStartContainer a holder outranks a container this plugin did not hand out",
       .pods = {{.name = "victim", .entries = {{.gpus = {Whole(0)}}}},
                {.name = "new", .entries = {{.gpus = {Whole(0)}}}}},
       .stage = ConflictStage::kPreStart,
       .kubelet = {Holding("victim"), Holding("new")},
       .want_error = {"GPU 0 (GPU-0) exclusively",
                      "pod default/victim (1000 milli-GPU, 0 MiB, exclusive; holds its "
                      "devices)"}},

      // ---- refusals: the entry itself
      {.name = "a GPU named twice in one entry",
       .pods = {{.name = "new", .entries = {{.gpus = {Part(0, 300), Part(0, 300)}}}}},
       .want_error = {"pod default/new container main: its allocation entry \"main\" names GPU 0 (GPU-0) twice"}},
      {.name = "a GPU named twice, once by UUID and once by index",
       .pods = {{.name = "new", .entries = {{.gpus = {Part(1, 300), Share{.gpu = 1, .milli = 300, .uuid = ""}}}}}},
       .want_error = {"names GPU 1 (GPU-1) twice"}},
      {.name = "a GPU this node does not have",
       .pods = {{.name = "new", .entries = {{.gpus = {Share{.gpu = 0, .exclusive = true, .uuid = "GPU-9"}}}}}},
       .want_error = {"pod default/new container main: the allocation names GPU GPU-9, which node n1 does not have"}},
      {.name = "a share of nothing",
       .pods = {{.name = "new", .entries = {{.gpus = {Part(0, 0, 0)}}}}},
       .want_error = {"gives it nothing of GPU 0 (GPU-0)"}},
      {.name = "an entry named twice",
       .pods = {{.name = "new", .entries = {{.gpus = {Part(0, 100)}}, {.gpus = {Part(1, 100)}}}}},
       .want_error = {"its allocation names container entry \"main\" twice"}},
      {.name = "an exclusive GPU named twice by one pod",
       .pods = {{.name = "new", .entries = {{.gpus = {Whole(0)}}, {.container = "side", .gpus = {Part(0, 100)}}}}},
       .want_error = {"its pod's allocation names GPU 0 (GPU-0) 2 times with an exclusive share"}},
  };
  const std::vector<ports::GpuSample> gpus = Inventory();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<PodView> views;
    for (const Pod& p : c.pods) {
      auto v = DecodePodView(PodJson(p), kResources);
      ASSERT_TRUE(v.ok()) << v.status();
      views.push_back(std::move(v).value());
    }
    HandoffLedger ledger;
    for (const auto& e : c.ledger) {
      ledger.Record(e);
    }
    const auto pod = std::find_if(views.begin(), views.end(), [](const PodView& v) { return v.meta.name == "new"; });
    ASSERT_NE(pod, views.end());
    const auto container = std::find_if(pod->containers.begin(), pod->containers.end(),
                                        [&](const ContainerView& v) { return v.name == c.container; });
    ASSERT_NE(container, pod->containers.end());
    const std::vector<std::string> ids(static_cast<size_t>(container->devices.at(kRes)), "dev");
    const HandoffRequest request{.node = "n1", .resource = kRes, .device_ids = ids};
    common::Status status = [&]() -> common::Status {
      GPUSCHED_ASSIGN_OR_RETURN(named, SharesFor(request, *pod, *container));
      GPUSCHED_ASSIGN_OR_RETURN(shares, ResolveShares("n1", *pod, *container, std::move(named), gpus));
      return CheckGpuConflicts(
          ConflictCheck{.node = "n1", .stage = c.stage, .pod = &*pod, .container = &*container, .shares = &shares},
          views, c.kubelet, ledger, gpus);
    }();
    if (c.want_error.empty()) {
      EXPECT_TRUE(status.ok()) << status;
      continue;
    }
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), common::StatusCode::kFailedPrecondition) << status;
    for (const auto& want : c.want_error) {
      EXPECT_THAT(status.message(), HasSubstr(want));
    }
  }
}

TEST(ForgeryTest, ResolveSharesTakesUuidAndIndexFromTheNode) {
  // The annotation's index is wrong for the UUID: the node's inventory decides (UUID first).
  const Pod p{.name = "new",
              .entries = {{.gpus = {Share{.gpu = 3, .milli = 200, .uuid = "GPU-1"},
                                    Share{.gpu = 2, .milli = 200, .uuid = ""}}}}};
  auto view = DecodePodView(PodJson(p), kResources);
  ASSERT_TRUE(view.ok()) << view.status();
  const std::vector<std::string> ids = {"d0", "d1"};
  auto named = SharesFor(HandoffRequest{.node = "n1", .resource = kRes, .device_ids = ids}, *view, view->containers[0]);
  ASSERT_TRUE(named.ok()) << named.status();
  auto shares = ResolveShares("n1", *view, view->containers[0], *named, Inventory());
  ASSERT_TRUE(shares.ok()) << shares.status();
  ASSERT_EQ(shares->gpus.size(), 2u);
  EXPECT_EQ(shares->gpus[0].index, 1);
  EXPECT_EQ(shares->gpus[0].uuid.str(), "GPU-1");
  EXPECT_EQ(shares->gpus[1].index, 2);
  EXPECT_EQ(shares->gpus[1].uuid.str(), "GPU-2");
  EXPECT_EQ(shares->gpus[0].numa_node, -1);  // the node does not know
  // The NUMA node comes from the node's inventory too, whatever the annotation recorded.
  auto gpus = Inventory();
  gpus[1].numa_node = 1;
  gpus[2].numa_node = 0;
  auto with_numa = ResolveShares("n1", *view, view->containers[0], *named, gpus);
  ASSERT_TRUE(with_numa.ok()) << with_numa.status();
  EXPECT_EQ(with_numa->gpus[0].numa_node, 1);
  EXPECT_EQ(with_numa->gpus[1].numa_node, 0);
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
