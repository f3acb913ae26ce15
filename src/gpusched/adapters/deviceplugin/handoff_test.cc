#include "gpusched/adapters/deviceplugin/handoff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/kube/annotations.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kRes = "gpusched.io/gpu";
const std::set<std::string, std::less<>> kResources = {"gpusched.io/gpu", "nvidia.com/gpu", "keti.com/mpsgpu"};

struct C {
  std::string name;
  int64_t count = 1;  // of kRes; 0 = none
  bool init = false;
};

// A pod on `node` whose containers ask for kRes; with an allocation giving each GPU container `count` GPUs
// starting at `first_gpu` (so pods get different GPUs).
struct PodSpec {
  std::string name;
  std::vector<C> containers = {{"main"}};
  int first_gpu = 0;
  std::string node = "n1";
  std::string alloc_node = "n1";
  bool annotate = true;
  std::string phase = "Pending";
};

json PodJson(const PodSpec& s) {
  testing::PodJson pod(s.name);
  pod.NodeName(s.node).Containers(json::array()).InitContainers(json::array()).Phase(s.phase);
  core::Allocation a{.pod = common::PodUid("uid-" + s.name), .node = common::NodeName(s.alloc_node), .id = 1};
  int gpu = s.first_gpu;
  for (const auto& c : s.containers) {
    const json limits = c.count > 0 ? json{{kRes, std::to_string(c.count)}} : json();
    if (c.init) {
      pod.InitContainer(c.name, limits);
    } else {
      pod.Container(c.name, limits);
    }
    if (c.count > 0) {
      core::ContainerAllocation ca{.container = c.init ? "init:" + c.name : c.name};
      for (int64_t i = 0; i < c.count; ++i, ++gpu) {
        ca.gpus.push_back(core::GpuShare{.index = gpu,
                                         .uuid = common::GpuUuid("GPU-" + std::to_string(gpu)),
                                         .milli = common::MilliGpu{500},
                                         .memory = common::MiB{1000}});
      }
      a.containers.push_back(std::move(ca));
    }
  }
  if (s.annotate) {
    pod.Annotation("gpusched.io/allocation", kube::EncodeAllocation(a));
  }
  return pod;
}

std::vector<PodView> Views(const std::vector<PodSpec>& specs) {
  std::vector<PodView> out;
  for (const auto& s : specs) {
    auto v = DecodePodView(PodJson(s), kResources);
    EXPECT_TRUE(v.ok()) << v.status();
    out.push_back(*v);
  }
  return out;
}

// The kubelet lists pod `name`; `held` names its containers that hold kRes devices.
KubeletPod Listed(const std::string& name, const std::vector<std::string>& held = {}) {
  KubeletPod p{.namespace_ = "default", .name = name};
  for (const auto& c : held) {
    p.containers.push_back(KubeletContainer{.name = c, .devices = {{kRes, {"dev-of-" + name + "-" + c}}}});
  }
  p.containers.push_back(KubeletContainer{.name = "unlisted-sidecar"});
  return p;
}

std::vector<std::string> Ids(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back("GPU-x::" + std::to_string(i));
  }
  return ids;
}

TEST(HandoffTest, DecisionTable) {
  struct Case {
    const char* name;
    std::vector<PodSpec> pods;
    std::vector<KubeletPod> kubelet;
    std::vector<HandoffLedger::Entry> ledger;
    int devices = 1;
    // want: pod/container and rule, or an error code and a substring
    std::string want_pod, want_container;
    HandoffRule want_rule = HandoffRule::kOnlyWaitingPod;
    common::StatusCode want_code = common::StatusCode::kOk;
    std::string want_error;
  };
  const Case cases[] = {
      {.name = "no pods: nothing waits",
       .want_code = common::StatusCode::kNotFound,
       .want_error = "no pod bound to node n1 waits for gpusched.io/gpu"},
      {.name = "a pod that requests no GPU is never chosen",
       .pods = {{.name = "cpu-only", .containers = {{"main", 0}}}},
       .want_code = common::StatusCode::kNotFound,
       .want_error = "GPU-x::0"},
      {.name = "the only waiting pod", .pods = {{.name = "a"}}, .want_pod = "default/a", .want_container = "main"},
      {.name = "a pod whose container holds devices (kubelet) is done; the other one waits",
       .pods = {{.name = "a"}, {.name = "b", .first_gpu = 1}},
       .kubelet = {Listed("a", {"main"})},
       .want_pod = "default/b",
       .want_container = "main"},
      {.name = "a pod handed out already (ledger) is done",
       .pods = {{.name = "a"}, {.name = "b", .first_gpu = 1}},
       .ledger = {{.uid = common::PodUid("uid-a"), .container = "main", .resource = kRes}},
       .want_pod = "default/b",
       .want_container = "main"},
      {.name = "second container after the first holds its devices",
       .pods = {{.name = "a", .containers = {{"first"}, {"second"}}}},
       .kubelet = {Listed("a", {"first"})},
       .want_pod = "default/a",
       .want_container = "second"},
      {.name = "init container first, then app container once the ledger has the init one",
       .pods = {{.name = "a", .containers = {{"setup", 1, true}, {"main"}}}},
       .ledger = {{.uid = common::PodUid("uid-a"), .container = "setup", .resource = kRes}},
       .want_pod = "default/a",
       .want_container = "main"},
      {.name = "init container is allocated first",
       .pods = {{.name = "a", .containers = {{"setup", 1, true}, {"main"}}}},
       .want_pod = "default/a",
       .want_container = "setup"},
      {.name = "containers before one that holds devices are done (agent restarted after the init container)",
       .pods = {{.name = "a", .containers = {{"setup", 1, true}, {"main"}, {"side"}}}},
       .kubelet = {Listed("a", {"main"})},
       .want_pod = "default/a",
       .want_container = "side"},
      {.name = "terminal pods never wait",
       .pods = {{.name = "done", .phase = "Failed"}, {.name = "b", .first_gpu = 1}},
       .want_pod = "default/b",
       .want_container = "main"},
      {.name = "pods on other nodes are ignored",
       .pods = {{.name = "elsewhere", .node = "n2"}, {.name = "b", .first_gpu = 1}},
       .want_pod = "default/b",
       .want_container = "main"},
      // a asks 1, b asks 2; the kubelet passed 2 -> only b can be under admission
      {.name = "several wait: the device count tells them apart",
       .pods = {{.name = "a"}, {.name = "b", .containers = {{"main", 2}}, .first_gpu = 1}},
       .devices = 2,
       .want_pod = "default/b",
       .want_container = "main",
       .want_rule = HandoffRule::kOnlyCountMatch},
      {.name = "several wait with the same count: the one the kubelet lists is under admission",
       .pods = {{.name = "a"}, {.name = "b", .first_gpu = 1}, {.name = "c", .first_gpu = 2}},
       .kubelet = {Listed("b")},
       .want_pod = "default/b",
       .want_container = "main",
       .want_rule = HandoffRule::kKubeletAdmitting},
      {.name = "several wait, the kubelet lists none: ambiguous, no guess",
       .pods = {{.name = "a"}, {.name = "b", .first_gpu = 1}},
       .want_code = common::StatusCode::kAborted,
       .want_error = "ambiguous"},
      {.name = "several wait, the kubelet lists two: ambiguous, no guess",
       .pods = {{.name = "a"}, {.name = "b", .first_gpu = 1}},
       .kubelet = {Listed("a"), Listed("b")},
       .want_code = common::StatusCode::kAborted,
       .want_error = "default/a (container main, 1, listed by the kubelet)"},
      {.name = "the only waiting pod asks for another count",
       .pods = {{.name = "a", .containers = {{"main", 2}}}},
       .want_code = common::StatusCode::kFailedPrecondition,
       .want_error = "container main of pod default/a requests 2"},
      {.name = "several wait, none with the count",
       .pods = {{.name = "a", .containers = {{"main", 2}}}, {.name = "b", .containers = {{"main", 3}}}},
       .want_code = common::StatusCode::kFailedPrecondition,
       .want_error = "no waiting pod asks for 1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const auto pods = Views(c.pods);
    HandoffLedger ledger;
    for (const auto& e : c.ledger) {
      ledger.Record(e);
    }
    const auto ids = Ids(c.devices);
    const HandoffRequest request{.node = "n1", .resource = kRes, .device_ids = ids};
    auto target = FindTarget(request, pods, c.kubelet, ledger);
    if (c.want_code != common::StatusCode::kOk) {
      ASSERT_FALSE(target.ok());
      EXPECT_EQ(target.status().code(), c.want_code) << target.status();
      EXPECT_THAT(target.status().message(), HasSubstr(c.want_error));
      continue;
    }
    ASSERT_TRUE(target.ok()) << target.status();
    EXPECT_EQ(target->pod->meta.Key(), c.want_pod);
    EXPECT_EQ(target->pod->containers[target->container].name, c.want_container);
    EXPECT_EQ(target->rule, c.want_rule);
  }
}

TEST(HandoffTest, SharesForTable) {
  struct Case {
    const char* name;
    PodSpec pod;
    std::string container;
    int devices = 1;
    std::vector<std::string> want_uuids;
    std::string want_error;
  };
  const Case cases[] = {
      {.name = "app container gets its own entry",
       .pod = {.name = "a", .containers = {{"main", 2}}, .first_gpu = 4},
       .container = "main",
       .devices = 2,
       .want_uuids = {"GPU-4", "GPU-5"}},
      {.name = "init container with its own entry",
       .pod = {.name = "a", .containers = {{"setup", 1, true}, {"main", 2}}},
       .container = "setup",
       .want_uuids = {"GPU-0"}},
      {.name = "no annotation: not scheduled by gpusched",
       .pod = {.name = "a", .annotate = false},
       .container = "main",
       .want_error = "has no gpusched.io/allocation annotation"},
      {.name = "allocation for another node",
       .pod = {.name = "a", .alloc_node = "n2"},
       .container = "main",
       .want_error = "its allocation is for node n2, this is node n1"},
      {.name = "device count differs from the allocation",
       .pod = {.name = "a", .containers = {{"main", 2}}},
       .container = "main",
       .devices = 1,
       .want_error = "kubelet passed 1 device(s) [GPU-x::0] but the allocation names 2 GPU(s) [GPU-0, GPU-1]"},
      {.name = "container not in the allocation",
       .pod = {.name = "a", .containers = {{"main", 1}, {"other", 0}}},
       .container = "other",
       .want_error = "the allocation names no GPUs for it"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto view = DecodePodView(PodJson(c.pod), kResources);
    ASSERT_TRUE(view.ok()) << view.status();
    const ContainerView* container = nullptr;
    for (const auto& cv : view->containers) {
      if (cv.name == c.container) {
        container = &cv;
      }
    }
    ASSERT_NE(container, nullptr);
    const auto ids = Ids(c.devices);
    auto shares = SharesFor(HandoffRequest{.node = "n1", .resource = kRes, .device_ids = ids}, *view, *container);
    if (!c.want_error.empty()) {
      ASSERT_FALSE(shares.ok());
      EXPECT_THAT(shares.status().message(), HasSubstr(c.want_error));
      continue;
    }
    ASSERT_TRUE(shares.ok()) << shares.status();
    std::vector<std::string> uuids;
    for (const auto& s : shares->gpus) {
      uuids.push_back(s.uuid.str());
    }
    EXPECT_EQ(uuids, c.want_uuids);
  }
}

TEST(HandoffTest, InitContainerWithoutEntryUsesTheCoveringAppContainer) {
  // gpusched gives a covered init container no entry: it runs on the app container's GPUs.
  json pod = PodJson({.name = "a", .containers = {{"main", 2}}, .first_gpu = 6});
  pod["spec"]["initContainers"].push_back(
      {{"name", "warmup"}, {"resources", {{"limits", {{"gpusched.io/gpu", "1"}}}}}});
  auto view = DecodePodView(pod, kResources);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->containers[0].name, "warmup");
  ASSERT_TRUE(view->containers[0].init);
  const auto ids = Ids(1);
  auto shares =
      SharesFor(HandoffRequest{.node = "n1", .resource = kRes, .device_ids = ids}, *view, view->containers[0]);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(shares->entry, "main");
  ASSERT_EQ(shares->gpus.size(), 1u);
  EXPECT_EQ(shares->gpus[0].uuid.str(), "GPU-6");
}

TEST(HandoffTest, DecodePodViewReadsLimitsThenRequests) {
  json pod = {{"metadata", {{"name", "p"}, {"uid", "u"}}},
              {"spec",
               {{"nodeName", "n1"},
                {"containers",
                 {{{"name", "a"}, {"resources", {{"limits", {{"nvidia.com/gpu", "2"}, {"cpu", "1"}}}}}},
                  {{"name", "b"}, {"resources", {{"requests", {{"keti.com/mpsgpu", 1}}}}}},
                  {{"name", "c"}}}}}}};
  auto view = DecodePodView(pod, kResources);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->containers.size(), 3u);
  EXPECT_EQ(view->containers[0].devices.at("nvidia.com/gpu"), 2);
  EXPECT_FALSE(view->containers[0].devices.contains("cpu"));
  EXPECT_EQ(view->containers[1].devices.at("keti.com/mpsgpu"), 1);
  EXPECT_TRUE(view->containers[2].devices.empty());
  EXPECT_EQ(view->meta.Key(), "default/p");

  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "two";
  auto bad = DecodePodView(pod, kResources);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("pod default/p container a: nvidia.com/gpu"));
}

TEST(HandoffTest, LedgerFindsByDeviceSetAndForgetsGonePods) {
  HandoffLedger ledger;
  ledger.Record(
      {.uid = common::PodUid("u1"), .pod_key = "ns/a", .container = "c", .resource = kRes, .device_ids = {"d2", "d1"}});
  ledger.Record(
      {.uid = common::PodUid("u2"), .pod_key = "ns/b", .container = "c", .resource = kRes, .device_ids = {"d3"}});
  const std::vector<std::string> q = {"d1", "d2"};
  auto e = ledger.FindByDevices(kRes, q);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->pod_key, "ns/a");
  EXPECT_FALSE(ledger.FindByDevices("nvidia.com/gpu", q).has_value());
  EXPECT_TRUE(ledger.Holds(common::PodUid("u2"), "c", kRes));
  ledger.Retain({common::PodUid("u1")});
  EXPECT_FALSE(ledger.Holds(common::PodUid("u2"), "c", kRes));
  EXPECT_EQ(ledger.size(), 1u);
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
