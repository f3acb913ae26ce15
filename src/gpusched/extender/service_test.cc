#include "gpusched/extender/service.h"

#include <atomic>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpusched/kube/annotations.h"
#include "gpusched/testing/fake_clock.h"
#include "gpusched/testing/fake_metrics_source.h"
#include "gpusched/testing/fake_slowdown_model.h"
#include "gpusched/testing/json_builders.h"

namespace gpusched::extender {
namespace {

using nlohmann::json;

json Node(const std::string& name, int gpus, int64_t memory_mib = 81920) {
  return testing::GpuNodeJson(name).Gpus(gpus, "A100-SXM4-80GB", memory_mib);
}

json Pod(const std::string& name, const json& limits, int32_t priority = 0) {
  return testing::PodJson(name).Priority(priority).Limits(limits);
}

json Share(int core, int memory = 20000) { return testing::ShareLimits(core, memory); }

// A pod already bound by gpusched: node name and allocation annotation set.
json BoundPod(const std::string& name, const std::string& node, int gpu, int64_t milli, bool exclusive = false,
              int32_t priority = 0) {
  core::Allocation a{.node = common::NodeName(node), .id = 1};
  a.containers.push_back(core::ContainerAllocation{
      .container = "main",
      .gpus = {core::GpuShare{.index = gpu,
                              .uuid = common::GpuUuid("GPU-" + node + "-" + std::to_string(gpu)),
                              .milli = common::MilliGpu{milli},
                              .memory = common::MiB{exclusive ? 81920 : 20000},
                              .exclusive = exclusive}}});
  return testing::PodJson(name)
      .Priority(priority)
      .Limits(exclusive ? json{{"nvidia.com/gpu", "1"}} : Share(static_cast<int>(milli / 10)))
      .Annotation("gpusched.io/allocation", kube::EncodeAllocation(a))
      .NodeName(node);
}

std::string Args(const json& pod, const std::vector<std::string>& nodes) {
  return json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump();
}

std::string BindArgs(const json& pod, const std::string& node) {
  return json{{"PodName", pod["metadata"]["name"]},
              {"PodNamespace", "default"},
              {"PodUID", pod["metadata"]["uid"]},
              {"Node", node}}
      .dump();
}

// Marks a pod with its application class (the annotation gpusched.io/app).
json WithApp(json pod, const std::string& app) {
  pod["metadata"]["annotations"]["gpusched.io/app"] = app;
  return pod;
}

// Slowdowns from a table keyed by (incoming, resident); any other pair gets {1.5, 1.5}. Immutable, as a
// ports::SlowdownModel must be.

// vgg next to noisy: 2.0 and 1.8, cost 1 + 1.0 + 0.8 = 2.8; next to quiet: 1.1 and 1.05, cost 1.15.
std::shared_ptr<const ports::SlowdownModel> TestModel() {
  return std::make_shared<const testing::FakeSlowdownModel>(
      testing::FakeSlowdownModel()
          .Set("vgg", "noisy", {.incoming = 2.0, .resident = 1.8})
          .Set("vgg", "quiet", {.incoming = 1.1, .resident = 1.05}));
}

// Thread-safe binder that records binds and can be told to fail (with a Status) or to run a hook first.
class Binder : public ports::Binder {
 public:
  common::Status Bind(const core::PodRequest& pod, const core::Allocation& allocation) override {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      hook = hook_;
    }
    if (hook) {
      hook();
    }
    std::lock_guard lock(mu_);
    if (!fail_.ok()) {
      return fail_;
    }
    bound_.emplace_back(pod, allocation);
    return common::Status::Ok();
  }
  // Binds fail with `status` from now on; OK binds again.
  void Fail(common::Status status) {
    std::lock_guard lock(mu_);
    fail_ = std::move(status);
  }
  // Runs before every bind's outcome (on the binding thread).
  void Hook(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    hook_ = std::move(hook);
  }
  std::vector<std::pair<core::PodRequest, core::Allocation>> bound() {
    std::lock_guard lock(mu_);
    return bound_;
  }

 private:
  std::mutex mu_;
  common::Status fail_;
  std::function<void()> hook_;
  std::vector<std::pair<core::PodRequest, core::Allocation>> bound_;
};

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mirror_.OnNode(EventType::kAdded, Node("a", 2));
    mirror_.OnNode(EventType::kAdded, Node("b", 2));
    Make("binpack");
  }
  void Make(const std::string& policy, std::vector<std::pair<std::string, double>> weights = {}) {
    MakeWith(ServiceOptions{.policy = policy, .weights = std::move(weights), .seed = 7});
  }
  // Binds refuse a pod the cache lacks at once (the wait for a lagging cache has its own test).
  void MakeWith(ServiceOptions options) {
    if (options.clock == nullptr) {
      options.clock = &clock_;
    }
    options.pod_cache_wait_ms = 0;
    auto s = ExtenderService::Create(mirror_, binder_, Lookup(), std::move(options), &metrics_);
    ASSERT_TRUE(s.ok()) << s.status();
    service_ = std::move(s).value();
  }
  // The watch cache: the pods Known() put there.
  PodLookup Lookup() {
    return [this](const std::string& ns, const std::string& name) -> std::optional<json> {
      std::lock_guard lock(pods_mu_);
      auto it = pods_.find(ns + "/" + name);
      return it == pods_.end() ? std::nullopt : std::optional<json>(it->second);
    };
  }
  void Known(const json& pod) {
    std::lock_guard lock(pods_mu_);
    pods_["default/" + pod["metadata"]["name"].get<std::string>()] = pod;
  }
  int64_t Allocated() {
    auto lock = mirror_.ReadLock();
    return mirror_.state().AllocatedMilli().value();
  }

  // The pod as the watch shows it once its bind landed: nodeName and the allocation the mirror holds for it.
  json AsBound(const json& pod) {
    auto lock = mirror_.ReadLock();
    const core::Allocation* a =
        mirror_.state().FindAllocation(common::PodUid(pod["metadata"]["uid"].get<std::string>()));
    EXPECT_NE(a, nullptr);
    json p = pod;
    if (a != nullptr) {
      p["spec"]["nodeName"] = a->node.str();
      p["metadata"]["annotations"]["gpusched.io/allocation"] = kube::EncodeAllocation(*a);
    }
    return p;
  }
  bool Confirmed(const json& pod) {
    auto lock = mirror_.ReadLock();
    return mirror_.state().IsConfirmed(common::PodUid(pod["metadata"]["uid"].get<std::string>()));
  }

  testing::FakeClock clock_;
  ClusterMirror mirror_{MirrorOptions{.clock = &clock_}};
  Binder binder_;
  ExtenderMetrics metrics_;
  std::mutex pods_mu_;
  std::map<std::string, json> pods_;
  std::unique_ptr<ExtenderService> service_;
};

TEST_F(ServiceTest, FilterPassesNodesThatFitAndNamesTheGpuAndNumbersForTheOthers) {
  mirror_.OnPod(EventType::kAdded, BoundPod("f1", "a", 0, 800));
  mirror_.OnPod(EventType::kAdded, BoundPod("f2", "a", 1, 800));
  Reply r = service_->Filter(Args(Pod("p", Share(30)), {"a", "b", "ghost"}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body);
  EXPECT_EQ(out["NodeNames"], json::array({"b"}));
  EXPECT_TRUE(out["Nodes"].is_null());
  const std::string reason = out["FailedNodes"]["a"];
  EXPECT_NE(reason.find("needs 300 milli and 20000 MiB"), std::string::npos) << reason;
  EXPECT_NE(reason.find("GPU 0 (A100-SXM4-80GB) with 200 milli"), std::string::npos) << reason;
  EXPECT_NE(out["FailedNodes"]["ghost"].get<std::string>().find("not in gpusched's node cache"), std::string::npos);
  EXPECT_TRUE(out["FailedAndUnresolvableNodes"].empty());
  EXPECT_EQ(out["Error"], "");
  const std::string metrics = metrics_.Serialize(mirror_);
  EXPECT_NE(metrics.find("gpusched_extender_filter_rejections_total{reason=\"gpu_capacity\"} 1"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpusched_node_gpu_milli_allocated{node=\"a\"} 1600"), std::string::npos) << metrics;
}

TEST_F(ServiceTest, ImpossibleRequestsFailEveryNodeAsUnresolvable) {
  for (const auto& [limits, expect] : std::vector<std::pair<json, std::string>>{
           {Share(150), "gpusched.io/gpu-core 150 is above 100"},
           {Share(30, 100000), "asks for 100000 MiB per GPU; the largest GPU in the cluster has 81920 MiB"},
           {{{"nvidia.com/gpu", "3"}}, "needs 3 GPU(s)"}}) {
    Reply r = service_->Filter(Args(Pod("p", limits), {"a", "b"}));
    ASSERT_EQ(r.status, 200);
    const json out = json::parse(r.body);
    EXPECT_TRUE(out["NodeNames"].empty()) << r.body;
    for (const char* n : {"a", "b"}) {
      EXPECT_NE(out["FailedAndUnresolvableNodes"][n].get<std::string>().find(expect), std::string::npos) << r.body;
      EXPECT_EQ(out["FailedNodes"][n], out["FailedAndUnresolvableNodes"][n]);  // 1.20 reads only FailedNodes
    }
  }
}

TEST_F(ServiceTest, FullNodeObjectsComeBackForThePassingNodes) {
  mirror_.OnPod(EventType::kAdded, BoundPod("f1", "a", 0, 1000, true));
  mirror_.OnPod(EventType::kAdded, BoundPod("f2", "a", 1, 1000, true));
  const json body = {{"Pod", Pod("p", {{"nvidia.com/gpu", "1"}})},
                     {"Nodes", {{"metadata", json::object()}, {"items", {Node("a", 2), Node("b", 2)}}}},
                     {"NodeNames", nullptr}};
  Reply r = service_->Filter(body.dump());
  const json out = json::parse(r.body);
  ASSERT_EQ(out["Nodes"]["items"].size(), 1u) << r.body;
  EXPECT_EQ(out["Nodes"]["items"][0], Node("b", 2));
  EXPECT_TRUE(out["NodeNames"].is_null());
  EXPECT_NE(out["FailedNodes"]["a"].get<std::string>().find("fully free GPU(s), 0 of 2 free"), std::string::npos);
}

TEST_F(ServiceTest, PrioritizeScoresZeroToTenWithThePolicy) {
  mirror_.OnPod(EventType::kAdded, BoundPod("f1", "a", 0, 500));
  Reply r = service_->Prioritize(Args(Pod("p", Share(30)), {"b", "a", "ghost"}));
  ASSERT_EQ(r.status, 200);
  const json out = json::parse(r.body);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0]["Host"], "b");
  EXPECT_EQ(out[1]["Host"], "a");
  EXPECT_EQ(out[2]["Host"], "ghost");
  // binpack: the node that is already in use scores higher; everything is within 0..10.
  EXPECT_GT(out[1]["Score"].get<int>(), out[0]["Score"].get<int>());
  for (const auto& h : out) {
    EXPECT_GE(h["Score"].get<int>(), 0);
    EXPECT_LE(h["Score"].get<int>(), 10);
  }
  EXPECT_EQ(out[2]["Score"], 0);

  Make("spread");
  const json spread = json::parse(service_->Prioritize(Args(Pod("p", Share(30)), {"b", "a"})).body);
  EXPECT_GT(spread[0]["Score"].get<int>(), spread[1]["Score"].get<int>());
  // Per-pod override.
  json pod = Pod("q", Share(30));
  pod["metadata"]["annotations"] = {{"gpusched.io/policy", "binpack"}};
  const json over = json::parse(service_->Prioritize(Args(pod, {"b", "a"})).body);
  EXPECT_GT(over[1]["Score"].get<int>(), over[0]["Score"].get<int>());
  pod["metadata"]["annotations"] = {{"gpusched.io/policy", "nope"}};
  const json bad = json::parse(service_->Filter(Args(pod, {"b", "a"})).body);
  EXPECT_NE(bad["FailedNodes"]["a"].get<std::string>().find("unknown policy \"nope\""), std::string::npos);
}

TEST_F(ServiceTest, WeightsMixPoliciesInPrioritize) {
  mirror_.OnPod(EventType::kAdded, BoundPod("f1", "a", 0, 500));
  auto scores = [&] {
    const json out = json::parse(service_->Prioritize(Args(Pod("p", Share(30)), {"b", "a"})).body);
    return std::make_pair(out[0]["Score"].get<int>(), out[1]["Score"].get<int>());
  };
  Make("binpack", {{"binpack", 1}});
  const auto binpack = scores();
  Make("binpack", {{"spread", 1}});
  const auto spread = scores();
  Make("binpack", {{"binpack", 1}, {"spread", 1}});
  const auto even = scores();
  Make("binpack", {{"binpack", 3}, {"spread", 1}});
  const auto mostly_binpack = scores();
  // Each mixed score is the weighted mean of the single-policy scores (on the 0..100 scale, then rounded to 0..10).
  EXPECT_GT(binpack.second, binpack.first);
  EXPECT_GT(spread.first, spread.second);
  EXPECT_NEAR(even.first, (binpack.first + spread.first) / 2.0, 1.0);
  EXPECT_NEAR(even.second, (binpack.second + spread.second) / 2.0, 1.0);
  EXPECT_GE(mostly_binpack.second, mostly_binpack.first);
  EXPECT_FALSE(ExtenderService::Create(mirror_, binder_, nullptr, ServiceOptions{.weights = {{"nope", 1}}}).ok());
}

TEST_F(ServiceTest, InterferenceAwarePrefersTheQuieterNeighbour) {
  // GPU 0 of a holds a noisy pod, GPU 0 of b a quiet one; both GPU 1s are held whole, so vgg must share.
  mirror_.OnPod(EventType::kAdded, WithApp(BoundPod("n1", "a", 0, 300), "noisy"));
  mirror_.OnPod(EventType::kAdded, WithApp(BoundPod("q1", "b", 0, 300), "quiet"));
  mirror_.OnPod(EventType::kAdded, BoundPod("w1", "a", 1, 1000, /*exclusive=*/true));
  mirror_.OnPod(EventType::kAdded, BoundPod("w2", "b", 1, 1000, /*exclusive=*/true));
  const json pod = WithApp(Pod("p", Share(30)), "vgg");
  auto prioritize = [&] {
    const json out = json::parse(service_->Prioritize(Args(pod, {"a", "b"})).body);
    return std::make_pair(out[0]["Score"].get<int>(), out[1]["Score"].get<int>());
  };

  // By default, sharing with noisy is predicted to gain too little (refuseHarmfulPairs, minSharingGain 0.25): a
  // fails in filter with the reason, and scores 0.
  MakeWith(ServiceOptions{.policy = "interference-aware", .seed = 7, .slowdown_model = TestModel()});
  const json refused = json::parse(service_->Filter(Args(pod, {"a", "b"})).body);
  EXPECT_EQ(refused["NodeNames"], json::array({"b"}));
  EXPECT_NE(refused["FailedNodes"]["a"].get<std::string>().find("slower shared than its residents taking turns"),
            std::string::npos)
      << refused.dump();
  EXPECT_EQ(prioritize(), std::make_pair(0, 9));

  // Allowed to share anyway, a scores by its cost.
  // a: 100 / 2.8 = 35.7 -> 36 -> (360 + 50) / 100 = 4;  b: 100 / 1.15 = 87.0 -> 87 -> 9.
  const policy::InterferenceAwareOptions share_anyway{.refuse_harmful_pairs = false};
  MakeWith(ServiceOptions{
      .policy = "interference-aware", .seed = 7, .interference_aware = share_anyway, .slowdown_model = TestModel()});
  EXPECT_EQ(prioritize(), std::make_pair(4, 9));
  const json filtered = json::parse(service_->Filter(Args(pod, {"a", "b"})).body);
  EXPECT_EQ(filtered["NodeNames"], json::array({"a", "b"})) << "sharing allowed: a passes filter";
  // Asked again (the runner's cache is warm): the same scores.
  EXPECT_EQ(prioritize(), std::make_pair(4, 9));

  // The next pod is another application: its own forecast, not the cached scores of vgg. quiet is the prior's
  // {1.5, 1.5} for it as for noisy: cost 2.0 -> 50 -> 5 on both nodes.
  const json other = WithApp(Pod("o", Share(30)), "bert");
  const json out = json::parse(service_->Prioritize(Args(other, {"a", "b"})).body);
  EXPECT_EQ(out[0]["Score"], 5);
  EXPECT_EQ(out[1]["Score"], 5);

  // Kubernetes' own weights: the configured mix forecasts too when interference-aware is in it.
  MakeWith(ServiceOptions{.policy = "binpack",
                          .weights = {{"interference-aware", 1}},
                          .seed = 7,
                          .interference_aware = share_anyway,
                          .slowdown_model = TestModel()});
  EXPECT_EQ(prioritize(), std::make_pair(4, 9));

  // Without a model every GPU counts as empty: 100 -> 10 on both.
  MakeWith(ServiceOptions{.policy = "interference-aware", .seed = 7});
  EXPECT_EQ(prioritize(), std::make_pair(10, 10));
}

TEST_F(ServiceTest, InterferenceAwareBindTakesTheQuieterGpu) {
  // a: GPU 0 holds noisy (700 milli free, the tightest fit), GPU 1 holds quiet (800 free).
  mirror_.OnPod(EventType::kAdded, WithApp(BoundPod("n1", "a", 0, 300), "noisy"));
  mirror_.OnPod(EventType::kAdded, WithApp(BoundPod("q1", "a", 1, 200), "quiet"));
  MakeWith(ServiceOptions{.policy = "interference-aware", .seed = 7, .slowdown_model = TestModel()});
  const json pod = WithApp(Pod("p", Share(30)), "vgg");
  Known(pod);
  ASSERT_EQ(service_->Filter(Args(pod, {"a"})).status, 200);
  Reply r = service_->Bind(BindArgs(pod, "a"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["Error"], "");
  auto bound = binder_.bound();
  ASSERT_EQ(bound.size(), 1u);
  ASSERT_EQ(bound[0].second.containers.at(0).gpus.size(), 1u);
  EXPECT_EQ(bound[0].second.containers[0].gpus[0].index, 1) << "the tightest fit would be GPU 0, next to noisy";
  // The mirror remembers the class of the pod it bound: a later pod sees vgg as a resident of GPU 1.
  auto lock = mirror_.ReadLock();
  EXPECT_EQ(mirror_.AppOf(common::PodUid("uid-p")), "vgg");
  EXPECT_EQ(mirror_.AppOf(common::PodUid("uid-n1")), "noisy");
}

TEST(ClusterMirrorTest, AppClassFromTheConfiguredLabelAndForgottenWithThePod) {
  ClusterMirror mirror("app.kubernetes.io/name");
  mirror.OnNode(EventType::kAdded, Node("a", 1));
  json labelled = BoundPod("l1", "a", 0, 300);
  labelled["metadata"]["labels"] = {{"app.kubernetes.io/name", "bert"}};
  mirror.OnPod(EventType::kAdded, labelled);
  mirror.OnPod(EventType::kAdded, WithApp(BoundPod("l2", "a", 0, 300), "lstm"));
  {
    auto lock = mirror.ReadLock();
    EXPECT_EQ(mirror.AppOf(common::PodUid("uid-l1")), "bert");
    EXPECT_EQ(mirror.AppOf(common::PodUid("uid-l2")), "lstm");
  }
  mirror.OnPod(EventType::kDeleted, labelled);
  auto lock = mirror.ReadLock();
  EXPECT_EQ(mirror.AppOf(common::PodUid("uid-l1")), "");
}

TEST_F(ServiceTest, LoadAwareScoresFollowLiveMetricsAndDegradeWhenTheSourceFails) {
  // Node a's GPUs are busy, b's idle (the same A100s otherwise); the samples are fresh.
  auto source = std::make_unique<testing::FakeMetricsSource>("prometheus fake");
  testing::FakeMetricsSource* fake = source.get();
  const int64_t now =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  for (int g = 0; g < 2; ++g) {
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kGpuUtil, 95, now);
    fake->Set("GPU-a-" + std::to_string(g), core::GpuMetric::kMemoryUsedMib, 70000, now);
    fake->Set("GPU-b-" + std::to_string(g), core::GpuMetric::kGpuUtil, 2, now);
    fake->Set("GPU-b-" + std::to_string(g), core::GpuMetric::kMemoryUsedMib, 1000, now);
  }
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  sources.push_back(std::move(source));
  sched::MetricsCache cache(std::move(sources), sched::MetricsCacheOptions{.interval = std::chrono::hours(1)});
  cache.RefreshOnce();
  auto s = ExtenderService::Create(mirror_, binder_, Lookup(),
                                   ServiceOptions{.policy = "load-aware", .seed = 7, .metrics = &cache}, &metrics_);
  ASSERT_TRUE(s.ok()) << s.status();
  const json out = json::parse((*s)->Prioritize(Args(Pod("p", Share(30)), {"a", "b"})).body);
  EXPECT_GT(out[1]["Score"].get<int>(), out[0]["Score"].get<int>()) << out;  // b, idle, wins
  // Bind picks the least-loaded GPU: on b, GPU 1 once GPU 0 turns busy.
  fake->Set("GPU-b-0", core::GpuMetric::kGpuUtil, 99, now);
  cache.RefreshOnce();
  const json pod = Pod("lb", Share(30));
  Known(pod);
  ASSERT_EQ(json::parse((*s)->Filter(Args(pod, {"b"})).body)["NodeNames"], json::array({"b"}));
  ASSERT_EQ(json::parse((*s)->Bind(BindArgs(pod, "b")).body)["Error"], "");
  EXPECT_EQ(binder_.bound().back().second.containers[0].gpus[0].index, 1);
  // The source goes down: its last samples still count until they are stale, and Degraded() says why.
  fake->Fail(common::Unavailable("connection refused"));
  cache.RefreshOnce();
  EXPECT_NE(cache.Degraded().find("connection refused"), std::string::npos) << cache.Degraded();
  const json still = json::parse((*s)->Prioritize(Args(Pod("q", Share(30)), {"a", "b"})).body);
  EXPECT_EQ(still.size(), 2u);
  EXPECT_NE(metrics_.Serialize(mirror_).find("gpusched_extender_binds_total"), std::string::npos);
}

TEST_F(ServiceTest, BindAssumesBindsAndConfirms) {
  const json pod = Pod("p", Share(30));
  Known(pod);
  ASSERT_EQ(service_->Filter(Args(pod, {"a", "b"})).status, 200);
  Reply r = service_->Bind(BindArgs(pod, "b"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["Error"], "");
  auto bound = binder_.bound();
  ASSERT_EQ(bound.size(), 1u);
  const core::Allocation& a = bound[0].second;
  EXPECT_EQ(a.node.str(), "b");
  EXPECT_EQ(bound[0].first.name, "default/p");
  ASSERT_EQ(a.containers.size(), 1u);
  EXPECT_EQ(a.containers[0].container, "main");
  ASSERT_EQ(a.containers[0].gpus.size(), 1u);
  EXPECT_EQ(a.containers[0].gpus[0].milli.value(), 300);
  EXPECT_EQ(a.containers[0].gpus[0].memory.value(), 20000);
  EXPECT_EQ(a.containers[0].gpus[0].uuid.str(), "GPU-b-" + std::to_string(a.containers[0].gpus[0].index));
  EXPECT_GT(a.id, 0u);
  auto lock = mirror_.ReadLock();
  EXPECT_TRUE(mirror_.state().IsConfirmed(common::PodUid("uid-p")));
  EXPECT_EQ(mirror_.state().AllocatedMilli().value(), 300);
}

class RecordedEvents final : public ports::EventRecorder {
 public:
  void Record(ports::PodEvent e) override {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
  }
  std::vector<ports::PodEvent> Take() {
    std::lock_guard lock(mu_);
    return std::exchange(events_, {});
  }

 private:
  std::mutex mu_;
  std::vector<ports::PodEvent> events_;
};

// The pod hears what happened to its bind: which GPUs on which node, or why the bind was refused or failed. A bind
// for a pod gpusched cannot identify tells nobody (there is no pod to tell, or it is not the one named).
TEST_F(ServiceTest, BindsTellThePodWhichGpusOrWhyNot) {
  RecordedEvents events;
  MakeWith(ServiceOptions{.policy = "binpack", .seed = 7, .events = &events});
  const json pod = Pod("p", Share(30));
  Known(pod);

  // Never filtered on a: refused, and the pod is told.
  EXPECT_EQ(service_->Bind(BindArgs(pod, "a")).status, 403);
  auto got = events.Take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].namespace_, "default");
  EXPECT_EQ(got[0].name, "p");
  EXPECT_EQ(got[0].uid, "uid-p");
  EXPECT_EQ(got[0].type, "Warning");
  EXPECT_EQ(got[0].reason, "GPUBindRefused");
  EXPECT_THAT(got[0].message, ::testing::HasSubstr("did not pass gpusched's filter"));

  // The API server refuses the Binding: GPUBindFailed with its answer.
  ASSERT_EQ(service_->Filter(Args(pod, {"a", "b"})).status, 200);
  binder_.Fail(common::PermissionDenied("apiserver said no"));
  EXPECT_EQ(service_->Bind(BindArgs(pod, "b")).status, 200);
  got = events.Take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].reason, "GPUBindFailed");
  EXPECT_THAT(got[0].message, ::testing::HasSubstr("apiserver said no"));
  binder_.Fail(common::Status::Ok());

  // Bound: which GPU, how much of it, where.
  ASSERT_EQ(json::parse(service_->Bind(BindArgs(pod, "b")).body)["Error"], "");
  got = events.Take();
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].type, "Normal");
  EXPECT_EQ(got[0].reason, "GPUsAssigned");
  const core::Allocation a = binder_.bound().at(0).second;
  EXPECT_EQ(got[0].message, "gpusched assigned GPU " + std::to_string(a.containers[0].gpus[0].index) +
                                " (30%) on node b (allocation " + std::to_string(a.id) + ")");

  // Nobody to tell: no uid, another pod's uid, a pod not in the cache.
  EXPECT_EQ(service_->Bind(R"({"PodName":"p","PodNamespace":"default","Node":"a"})").status, 400);
  EXPECT_EQ(service_->Bind(R"({"PodName":"p","PodNamespace":"default","PodUID":"uid-q","Node":"a"})").status, 409);
  EXPECT_EQ(service_->Bind(R"({"PodName":"ghost","PodNamespace":"default","PodUID":"x","Node":"a"})").status, 404);
  EXPECT_TRUE(events.Take().empty());
}

// Under leader election a standby refuses binds (503, naming the leader) before anything happens: no assumption,
// no API call; the same bind goes through once the gate opens.
TEST_F(ServiceTest, AStandbyRefusesBindsAndChangesNothing) {
  std::string gate = "this replica is a standby (leader: other-replica_1234abcd)";
  ServiceOptions o{.policy = "binpack", .seed = 7};
  o.bind_gate = [&gate] { return gate; };
  MakeWith(std::move(o));
  const json pod = Pod("p", Share(30));
  Known(pod);
  ASSERT_EQ(service_->Filter(Args(pod, {"a", "b"})).status, 200);
  Reply r = service_->Bind(BindArgs(pod, "b"));
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("leader: other-replica_1234abcd"), std::string::npos)
      << r.body;
  EXPECT_TRUE(binder_.bound().empty());
  EXPECT_EQ(Allocated(), 0);
  EXPECT_NE(metrics_.Serialize(mirror_).find("gpusched_extender_bind_refusals_total{reason=\"not_leader\"} 1"),
            std::string::npos);
  gate.clear();  // became leader
  r = service_->Bind(BindArgs(pod, "b"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(binder_.bound().size(), 1U);
  EXPECT_EQ(Allocated(), 300);
}

// Until the pod and node caches synced, the mirror may lack pods that hold GPUs: every verb answers 503 (an error
// to kube-scheduler, which fails the cycle and retries the pod), never an empty success, and nothing changes.
TEST_F(ServiceTest, BeforeTheCachesSyncEveryVerbRefusesAndChangesNothing) {
  std::string waiting = "pods, nodes";
  ServiceOptions o{.policy = "binpack", .seed = 7};
  o.sync_gate = [&waiting] { return waiting; };
  MakeWith(std::move(o));
  const json pod = Pod("p", Share(30));
  Known(pod);
  const std::string preempt = json{{"Pod", Pod("hi", {{"nvidia.com/gpu", "1"}}, 100)},
                                   {"NodeNameToMetaVictims", {{"a", {{"Pods", json::array()}}}}}}
                                  .dump();
  const std::pair<const char*, std::function<Reply()>> verbs[] = {
      {"filter",
       [&] {
         return service_->Filter(Args(pod, {"a", "b"}));
       }},
      {"prioritize",
       [&] {
         return service_->Prioritize(Args(pod, {"a", "b"}));
       }},
      {"bind", [&] { return service_->Bind(BindArgs(pod, "a")); }},
      {"preempt", [&] { return service_->Preempt(preempt); }},
  };
  for (const auto& [verb, call] : verbs) {
    for (const char* still : {"pods, nodes", "nodes"}) {
      waiting = still;
      const Reply r = call();
      EXPECT_EQ(r.status, 503) << verb << ": " << r.body;
      const json body = json::parse(r.body);
      EXPECT_EQ(body["Error"].get<std::string>().find(std::string(verb) + " refused: not synced: waiting for " + still),
                0U)
          << r.body;
      if (std::string_view(verb) == "filter") {  // not an empty success: no node passes, none is listed as failing
        EXPECT_TRUE(body["NodeNames"].empty()) << r.body;
        EXPECT_TRUE(body["FailedNodes"].empty()) << r.body;
      }
    }
  }
  EXPECT_TRUE(binder_.bound().empty());
  EXPECT_EQ(Allocated(), 0);
  const std::string metrics = metrics_.Serialize(mirror_);
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    EXPECT_NE(metrics.find(std::string("gpusched_extender_unsynced_refusals_total{verb=\"") + verb + "\"} 2"),
              std::string::npos)
        << verb << "\n"
        << metrics;
  }
  EXPECT_NE(metrics.find("gpusched_extender_bind_refusals_total{reason=\"not_synced\"} 2"), std::string::npos);

  // The caches synced: the pod list brought a bound pod holding GPU a/0. A filter before the sync left no record,
  // so a bind without a new filter is still refused; after a filter the pod binds beside what the list showed.
  mirror_.OnPod(EventType::kAdded, BoundPod("resident", "a", 0, 800));
  waiting.clear();
  Reply r = service_->Bind(BindArgs(pod, "a"));
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_NE(r.body.find("filter"), std::string::npos) << r.body;
  EXPECT_TRUE(binder_.bound().empty());
  r = service_->Filter(Args(pod, {"a", "b"}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["NodeNames"], json::array({"a", "b"}));
  EXPECT_EQ(service_->Prioritize(Args(pod, {"a", "b"})).status, 200);
  EXPECT_EQ(service_->Preempt(preempt).status, 200);
  r = service_->Bind(BindArgs(pod, "a"));
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(binder_.bound().size(), 1U);
  // 800 milli on GPU a/0 leave 200: the 300-milli share goes to a/1.
  EXPECT_EQ(binder_.bound()[0].second.containers[0].gpus[0].index, 1);
  EXPECT_EQ(Allocated(), 1100);
  auto lock = mirror_.ReadLock();
  EXPECT_TRUE(mirror_.state().CheckInvariants().ok());
}

TEST_F(ServiceTest, FailedOrRejectedBindsChangeNothing) {
  const json pod = Pod("p", Share(30));
  Known(pod);
  ASSERT_EQ(json::parse(service_->Filter(Args(pod, {"a", "ghost-node"})).body)["NodeNames"], json::array({"a"}));
  // A bind the API server definitely refused (403: nothing written) gives the GPUs back at once.
  binder_.Fail(common::PermissionDenied("apiserver said no"));
  Reply r = service_->Bind(BindArgs(pod, "a"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(json::parse(r.body)["Error"].get<std::string>().find("apiserver said no"), std::string::npos);
  EXPECT_EQ(Allocated(), 0);
  binder_.Fail(common::Status::Ok());

  const std::pair<std::string, int> rejected[] = {
      {R"({"PodName":"ghost","PodNamespace":"default","PodUID":"x","Node":"a"})", 404},
      {BindArgs(pod, "ghost-node"), 403},  // not in the mirror, so it never passed filter
      {R"({"PodName":"p","PodNamespace":"default","PodUID":"other-uid","Node":"a"})", 409},
      {"{not json", 400},
      {R"({"PodName":"p"})", 400},
  };
  for (const auto& [body, status] : rejected) {
    Reply rr = service_->Bind(body);
    EXPECT_EQ(rr.status, status) << body << " -> " << rr.body;
    EXPECT_FALSE(json::parse(rr.body)["Error"].get<std::string>().empty());
    EXPECT_EQ(Allocated(), 0) << body;
  }
  // Then the real bind works (a failed bind keeps the filter record: kube-scheduler may retry), and a second bind
  // of the same pod is refused: the record is consumed, and filtered again it still holds its allocation.
  ASSERT_EQ(json::parse(service_->Bind(BindArgs(pod, "a")).body)["Error"], "");
  EXPECT_EQ(service_->Bind(BindArgs(pod, "a")).status, 403);
  ASSERT_EQ(service_->Filter(Args(pod, {"a", "b"})).status, 200);
  EXPECT_EQ(service_->Bind(BindArgs(pod, "b")).status, 409);
  EXPECT_EQ(Allocated(), 300);
  EXPECT_EQ(service_->Filter("{").status, 400);
  EXPECT_EQ(service_->Prioritize(R"({"Pod":7})").status, 400);
  EXPECT_EQ(service_->Preempt("[]").status, 400);
  EXPECT_EQ(Allocated(), 300);
}

// Bind writes to the cluster with gpusched's own credentials: each case is one way a caller could try to make it
// bind what kube-scheduler did not decide. Every refusal names pod, node and reason, and changes nothing.
TEST_F(ServiceTest, BindRefusesWhatKubeSchedulerWouldNeverAsk) {
  struct Case {
    std::string name;
    std::function<void(json&)> edit_pod;  // the pod in the watch cache (Pod("p", Share(30)) before the edit)
    bool in_cache = true;
    std::vector<std::string> filtered_nodes = {"a", "b"};  // filter of p before the bind; empty = no filter
    std::string filter_other_pod;                          // instead, filter this other pod on a and b
    int64_t advance_ms = 0;                                // between filter and bind
    std::string body;                                      // the bind; "" = BindArgs(p, "a")
    int want_status = 200;
    std::string want_error;  // "" = bound
    std::string want_reason;
  };
  const std::string no_uid = R"({"PodName":"p","PodNamespace":"default","Node":"a"})";
  const std::string other_uid = R"({"PodName":"p","PodNamespace":"default","PodUID":"uid-q","Node":"a"})";
  const Case cases[] = {
      {.name = "happy path: filtered on a moment ago, bound to a"},
      {.name = "still within the window", .advance_ms = 30000},
      {.name = "no PodUID (the original exploit)",
       .body = no_uid,
       .want_status = 400,
       .want_error = "PodUID is required",
       .want_reason = "no_uid"},
      {.name = "PodUID of another pod",
       .body = other_uid,
       .want_status = 409,
       .want_error = "PodUID uid-q is not the uid of the pod of that name",
       .want_reason = "uid_mismatch"},
      {.name = "a pod only the caller knows (filter body is not a pod source)",
       .in_cache = false,
       .want_status = 404,
       .want_error = "not in gpusched's pod cache",
       .want_reason = "unknown_pod"},
      {.name = "already bound",
       .edit_pod = [](json& p) { p["spec"]["nodeName"] = "b"; },
       .want_status = 409,
       .want_error = "already bound to node b",
       .want_reason = "already_bound"},
      {.name = "terminating",
       .edit_pod = [](json& p) { p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"; },
       .want_status = 409,
       .want_error = "terminating",
       .want_reason = "terminating"},
      {.name = "another scheduler's pod",
       .edit_pod = [](json& p) { p["spec"]["schedulerName"] = "volcano"; },
       .want_status = 403,
       .want_error = "schedulerName is volcano, not one gpusched binds for (default-scheduler)",
       .want_reason = "other_scheduler"},
      {.name = "never filtered",
       .filtered_nodes = {},
       .want_status = 403,
       .want_error = "node a did not pass gpusched's filter for this pod (no filter for this pod within the last 30s)",
       .want_reason = "not_filtered"},
      {.name = "filtered, but not on that node",
       .filtered_nodes = {"b"},
       .want_status = 403,
       .want_error = "node a did not pass gpusched's filter for this pod (1 other node(s) did)",
       .want_reason = "node_not_filtered"},
      {.name = "filtered too long ago",
       .advance_ms = 30001,
       .want_status = 403,
       .want_error = "its last filter was 30s ago, over the 30s window",
       .want_reason = "filter_expired"},
      {.name = "only another pod (another uid) was filtered",
       .filtered_nodes = {},
       .filter_other_pod = "q",
       .want_status = 403,
       .want_error = "no filter for this pod",
       .want_reason = "not_filtered"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // A fresh extender per case.
    ClusterMirror mirror;
    mirror.OnNode(EventType::kAdded, Node("a", 2));
    mirror.OnNode(EventType::kAdded, Node("b", 2));
    Binder binder;
    ExtenderMetrics metrics;
    testing::FakeClock clock;
    json pod = Pod("p", Share(30));
    if (c.edit_pod) {
      c.edit_pod(pod);
    }
    auto made = ExtenderService::Create(
        mirror, binder,
        [&](const std::string& ns, const std::string& name) -> std::optional<json> {
          if (c.in_cache && ns == "default" && name == "p") {
            return pod;
          }
          return std::nullopt;
        },
        ServiceOptions{.seed = 7, .clock = &clock, .pod_cache_wait_ms = 0}, &metrics);
    ASSERT_TRUE(made.ok()) << made.status();
    ExtenderService& service = **made;
    if (!c.filtered_nodes.empty()) {
      // kube-scheduler sends the pod as it has it: unbound and current.
      ASSERT_EQ(service.Filter(Args(Pod("p", Share(30)), c.filtered_nodes)).status, 200);
    }
    if (!c.filter_other_pod.empty()) {
      ASSERT_EQ(service.Filter(Args(Pod(c.filter_other_pod, Share(30)), {"a", "b"})).status, 200);
    }
    clock.AdvanceMs(c.advance_ms);
    const Reply r = service.Bind(c.body.empty() ? BindArgs(pod, "a") : c.body);
    EXPECT_EQ(r.status, c.want_status) << r.body;
    const std::string error = json::parse(r.body)["Error"];
    auto allocated = [&] {
      auto lock = mirror.ReadLock();
      return mirror.state().AllocatedMilli().value();
    };
    if (c.want_error.empty()) {
      EXPECT_EQ(error, "");
      ASSERT_EQ(binder.bound().size(), 1u);
      EXPECT_EQ(binder.bound()[0].second.node.str(), "a");
      EXPECT_EQ(allocated(), 300);
      continue;
    }
    EXPECT_NE(error.find(c.want_error), std::string::npos) << error;
    EXPECT_EQ(error.rfind("bind of pod default/p to node a refused: ", 0), 0u) << error;
    EXPECT_TRUE(binder.bound().empty()) << "no API call";
    EXPECT_EQ(allocated(), 0) << "nothing assumed";
    const std::string text = metrics.Serialize(mirror);
    EXPECT_NE(text.find("gpusched_extender_bind_refusals_total{reason=\"" + c.want_reason + "\"} 1"), std::string::npos)
        << text;
  }
}

TEST_F(ServiceTest, FilterRecordsAreReplacedConsumedAndBounded) {
  const json p = Pod("p", Share(30));
  Known(p);
  // A later filter of the same pod replaces the earlier one.
  ASSERT_EQ(service_->Filter(Args(p, {"a"})).status, 200);
  ASSERT_EQ(service_->Filter(Args(p, {"b"})).status, 200);
  EXPECT_EQ(service_->Bind(BindArgs(p, "a")).status, 403);
  ASSERT_EQ(json::parse(service_->Bind(BindArgs(p, "b")).body)["Error"], "");

  // Two records at most (and 3 node names): the oldest goes first.
  MakeWith(ServiceOptions{.seed = 7, .max_filter_records = 2, .max_filter_record_nodes = 3});
  std::vector<json> pods;
  for (const char* name : {"r1", "r2", "r3"}) {
    pods.push_back(Pod(name, Share(30)));
    Known(pods.back());
    ASSERT_EQ(service_->Filter(Args(pods.back(), {"a"})).status, 200);
  }
  EXPECT_EQ(service_->Bind(BindArgs(pods[0], "a")).status, 403) << "r1's record made room for r3's";
  EXPECT_EQ(json::parse(service_->Bind(BindArgs(pods[2], "a")).body)["Error"], "");
  // r2 (1 name) + r4 (2 names) = 3 fit; r5 (2 more) pushes r2 and r4 out.
  json r4 = Pod("r4", Share(30));
  json r5 = Pod("r5", Share(30));
  Known(r4);
  Known(r5);
  ASSERT_EQ(service_->Filter(Args(r4, {"a", "b"})).status, 200);
  ASSERT_EQ(service_->Filter(Args(r5, {"a", "b"})).status, 200);
  EXPECT_EQ(service_->Bind(BindArgs(pods[1], "a")).status, 403);
  EXPECT_EQ(service_->Bind(BindArgs(r4, "a")).status, 403);
  EXPECT_EQ(json::parse(service_->Bind(BindArgs(r5, "b")).body)["Error"], "");

  // Records expire with the window even when nobody binds: filtered long ago, the node does not count.
  MakeWith(ServiceOptions{.seed = 7, .bind_filter_window_ms = 1000});
  json late = Pod("late", Share(30));
  Known(late);
  ASSERT_EQ(service_->Filter(Args(late, {"a"})).status, 200);
  clock_.AdvanceMs(1001);
  EXPECT_EQ(service_->Bind(BindArgs(late, "a")).status, 403);

  EXPECT_FALSE(ExtenderService::Create(mirror_, binder_, nullptr, ServiceOptions{.scheduler_names = {}}).ok());
  MakeWith(ServiceOptions{.seed = 7, .scheduler_names = {"gpu-scheduler"}});
  json mine = Pod("mine", Share(30));
  mine["spec"]["schedulerName"] = "gpu-scheduler";
  Known(mine);
  ASSERT_EQ(service_->Filter(Args(mine, {"a"})).status, 200);
  EXPECT_EQ(json::parse(service_->Bind(BindArgs(mine, "a")).body)["Error"], "");
  json theirs = Pod("theirs", Share(30));  // default-scheduler's, which this extender does not serve
  Known(theirs);
  ASSERT_EQ(service_->Filter(Args(theirs, {"a"})).status, 200);
  EXPECT_EQ(service_->Bind(BindArgs(theirs, "a")).status, 403);
}

TEST_F(ServiceTest, ConcurrentBindsNeverOvercommit) {
  // 4 GPUs; 30 % each: 3 pods per GPU by compute, 12 in all. 40 pods race for them on 8 threads.
  constexpr int kPods = 40;
  std::vector<json> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(Pod("c" + std::to_string(i), Share(30)));
    Known(pods.back());
  }
  std::atomic<int> next{0};
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < kPods; i = next++) {
        const std::string node = i % 2 == 0 ? "a" : "b";
        (void)service_->Filter(Args(pods[static_cast<size_t>(i)], {"a", "b"}));
        Reply r = service_->Bind(BindArgs(pods[static_cast<size_t>(i)], node));
        if (r.status == 200 && json::parse(r.body)["Error"] == "") {
          ++ok;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(ok.load(), 12);
  auto lock = mirror_.ReadLock();
  EXPECT_TRUE(mirror_.state().CheckInvariants().ok());
  EXPECT_EQ(mirror_.state().AllocatedMilli().value(), 12 * 300);
}

TEST_F(ServiceTest, ARestartedMirrorRebuildsTheSameStateFromAnnotations) {
  for (int i = 0; i < 5; ++i) {
    const json pod = Pod("r" + std::to_string(i), i % 2 == 0 ? Share(30) : json{{"nvidia.com/gpu", "1"}});
    Known(pod);
    ASSERT_EQ(service_->Filter(Args(pod, {"a", "b"})).status, 200);
    ASSERT_EQ(json::parse(service_->Bind(BindArgs(pod, i < 3 ? "a" : "b")).body)["Error"], "");
  }
  ClusterMirror restarted;
  // Pods first, nodes later: allocations wait for their node.
  for (const auto& [pod, allocation] : binder_.bound()) {
    json p = pods_[pod.name];
    p["spec"]["nodeName"] = allocation.node.str();
    p["metadata"]["annotations"] = {{"gpusched.io/allocation", kube::EncodeAllocation(allocation)}};
    restarted.OnPod(EventType::kAdded, p);
  }
  EXPECT_EQ(restarted.PendingAllocations(), 5u);
  restarted.OnNode(EventType::kAdded, Node("a", 2));
  restarted.OnNode(EventType::kAdded, Node("b", 2));
  EXPECT_EQ(restarted.PendingAllocations(), 0u);
  auto l1 = mirror_.ReadLock();
  auto l2 = restarted.ReadLock();
  for (const char* n : {"a", "b"}) {
    const core::NodeView* x = mirror_.state().Find(common::NodeName(n));
    const core::NodeView* y = restarted.state().Find(common::NodeName(n));
    ASSERT_NE(y, nullptr);
    ASSERT_EQ(x->gpus.size(), y->gpus.size());
    for (size_t g = 0; g < x->gpus.size(); ++g) {
      EXPECT_EQ(x->gpus[g].free, y->gpus[g].free) << n << g;
      EXPECT_EQ(x->gpus[g].memory_free, y->gpus[g].memory_free) << n << g;
      EXPECT_EQ(x->gpus[g].exclusive, y->gpus[g].exclusive) << n << g;
    }
  }
  EXPECT_EQ(restarted.stats().rebuilt_allocations, 5u);
  EXPECT_GT(restarted.NextAllocationId(), binder_.bound().back().second.id);  // ids go on above every id seen
}

TEST_F(ServiceTest, PodsThatEndReleaseTheirGpus) {
  json p = BoundPod("d", "a", 0, 500);
  mirror_.OnPod(EventType::kAdded, p);
  EXPECT_EQ(Allocated(), 500);
  p["status"]["phase"] = "Succeeded";
  mirror_.OnPod(EventType::kModified, p);
  EXPECT_EQ(Allocated(), 0);
  mirror_.OnPod(EventType::kAdded, BoundPod("e", "a", 1, 400));
  mirror_.OnPod(EventType::kDeleted, BoundPod("e", "a", 1, 400));
  EXPECT_EQ(Allocated(), 0);
  // An annotation for another node than the pod is bound to is not charged.
  json wrong = BoundPod("w", "a", 0, 400);
  wrong["spec"]["nodeName"] = "b";
  mirror_.OnPod(EventType::kAdded, wrong);
  EXPECT_EQ(Allocated(), 0);
  mirror_.OnNode(EventType::kDeleted, Node("a", 2));
  auto lock = mirror_.ReadLock();
  EXPECT_EQ(mirror_.state().Find(common::NodeName("a")), nullptr);
}

// A timeout, a 5xx or a 409 may follow a Binding the API server wrote: the GPUs stay assumed until the watch says
// what happened, or the TTL (120 s by default: longer than a stalled watch takes to detect) runs out. Only a definite
// refusal gives them back at once.
TEST_F(ServiceTest, ABindWhoseOutcomeIsUnknownStaysAssumedUntilTheWatchOrItsTtl) {
  const json p = Pod("p", Share(30));
  const json q = Pod("q", Share(30));
  const json r = Pod("r", Share(30));
  for (const json& pod : {p, q, r}) {
    Known(pod);
  }
  ASSERT_EQ(service_->Filter(Args(p, {"a"})).status, 200);
  ASSERT_EQ(service_->Filter(Args(q, {"a"})).status, 200);
  // p: the request timed out, but the Binding had landed; the watch shows it and confirms.
  binder_.Fail(common::DeadlineExceeded("POST .../pods/p/binding: timed out"));
  const std::string error = json::parse(service_->Bind(BindArgs(p, "a")).body)["Error"];
  EXPECT_NE(error.find("outcome unknown"), std::string::npos) << error;
  EXPECT_EQ(Allocated(), 300);
  EXPECT_FALSE(Confirmed(p));
  mirror_.OnPod(EventType::kModified, AsBound(p));
  EXPECT_TRUE(Confirmed(p));
  // q: a 503, and the watch never shows q bound: the assumption expires after the TTL, not before.
  binder_.Fail(common::Unavailable("POST .../pods/q/binding: HTTP 503"));
  (void)service_->Bind(BindArgs(q, "a"));
  EXPECT_EQ(Allocated(), 600);
  clock_.AdvanceMs(119000);
  EXPECT_EQ(mirror_.ExpireAssumed(), 0u);
  EXPECT_EQ(Allocated(), 600);
  clock_.AdvanceMs(2000);
  EXPECT_EQ(mirror_.ExpireAssumed(), 1u);
  EXPECT_EQ(Allocated(), 300);  // p's confirmed allocation is untouched by any expiry
  // r: a 409, and the watch shows r bound by someone else, without gpusched's allocation: its GPUs are free again.
  binder_.Fail(common::Aborted("POST .../pods/r/binding: HTTP 409"));
  ASSERT_EQ(service_->Filter(Args(r, {"a"})).status, 200);
  (void)service_->Bind(BindArgs(r, "a"));
  EXPECT_EQ(Allocated(), 600);
  json elsewhere = r;
  elsewhere["spec"]["nodeName"] = "b";
  mirror_.OnPod(EventType::kModified, elsewhere);
  EXPECT_EQ(Allocated(), 300);
  {
    auto lock = mirror_.ReadLock();
    EXPECT_EQ(mirror_.TrackedAssumptions(), 0u);
    EXPECT_TRUE(mirror_.state().CheckInvariants().ok());
  }
  const std::string metrics = metrics_.Serialize(mirror_);
  EXPECT_NE(metrics.find("gpusched_extender_binds_total{result=\"unknown\"} 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpusched_extender_expired_assumptions_total 1"), std::string::npos) << metrics;
}

// Every assumption carries a deadline from the moment it is made: a bind stuck past bind_in_flight_ms cannot hold
// GPUs forever, and when it does land later the watch charges the pod from its annotation.
TEST_F(ServiceTest, NoAssumptionOutlivesItsDeadlineEvenWhileItsBindHangs) {
  const json pod = Pod("p", Share(30));
  Known(pod);
  ASSERT_EQ(service_->Filter(Args(pod, {"a"})).status, 200);
  json landed;
  binder_.Hook([&] {
    landed = AsBound(pod);  // what the API server will show once this bind lands
    clock_.AdvanceMs(299000);
    EXPECT_EQ(mirror_.ExpireAssumed(), 0u);
    clock_.AdvanceMs(2000);
    EXPECT_EQ(mirror_.ExpireAssumed(), 1u);  // 301 s in flight: gone
    EXPECT_EQ(Allocated(), 0);
  });
  EXPECT_EQ(json::parse(service_->Bind(BindArgs(pod, "a")).body)["Error"], "");
  EXPECT_EQ(Allocated(), 0);  // nothing left to confirm
  mirror_.OnPod(EventType::kModified, landed);
  EXPECT_EQ(Allocated(), 300);
  EXPECT_TRUE(Confirmed(pod));
}

// A Node object can be deleted and created again under running pods (a node re-registering, an operator's
// mistake): the pods' GPUs stay theirs, and are charged again the moment the node is back.
TEST_F(ServiceTest, ADeletedNodeKeepsItsPodsAllocationsUntilTheNodeReturnsOrThePodsEnd) {
  mirror_.OnPod(EventType::kAdded, BoundPod("k1", "a", 0, 500));
  mirror_.OnPod(EventType::kAdded, BoundPod("k2", "a", 1, 400));
  EXPECT_EQ(Allocated(), 900);
  mirror_.OnNode(EventType::kDeleted, Node("a", 2));
  EXPECT_EQ(Allocated(), 0);
  EXPECT_EQ(mirror_.PendingAllocations(), 2u);
  EXPECT_EQ(mirror_.stats().held_for_node_return, 2u);
  mirror_.OnPod(EventType::kDeleted, BoundPod("k2", "a", 1, 400));  // k2 ends while the node is away
  EXPECT_EQ(mirror_.PendingAllocations(), 1u);
  mirror_.OnNode(EventType::kAdded, Node("a", 2));
  EXPECT_EQ(Allocated(), 500);
  EXPECT_EQ(mirror_.PendingAllocations(), 0u);
  // The returned node is not free where k1 runs: a pod that needs all of GPU 0 does not fit there.
  const json big = Pod("big", Share(60));
  Known(big);
  ASSERT_EQ(service_->Filter(Args(big, {"a"})).status, 200);
  ASSERT_EQ(json::parse(service_->Bind(BindArgs(big, "a")).body)["Error"], "");
  auto lock = mirror_.ReadLock();
  EXPECT_EQ(mirror_.state().FindAllocation(common::PodUid("uid-big"))->containers[0].gpus[0].index, 1);
  EXPECT_TRUE(mirror_.state().CheckInvariants().ok());
}

// What the cluster shows bound is charged, always: a bound pod that does not fit overcommits its node (visible in
// metrics and the log), and a node update that no longer covers its pods is applied, never refused forever.
TEST_F(ServiceTest, BoundPodsAreChargedEvenPastCapacityAndTheOvercommitIsVisible) {
  mirror_.OnPod(EventType::kAdded, BoundPod("x1", "a", 0, 1000, /*exclusive=*/true));
  mirror_.OnPod(EventType::kAdded, BoundPod("s1", "a", 0, 300));  // bound onto x1's exclusive GPU by someone
  EXPECT_EQ(Allocated(), 1300);
  std::string metrics = metrics_.Serialize(mirror_);
  EXPECT_NE(metrics.find("gpusched_node_overcommitted{node=\"a\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpusched_extender_overcommitted_charges_total 1"), std::string::npos) << metrics;
  EXPECT_EQ(mirror_.stats().rejected_events, 0u);
  // Nothing is placed on GPU 0 while it is over; GPU 1 still takes work.
  const json pod = Pod("p", Share(30));
  Known(pod);
  ASSERT_EQ(service_->Filter(Args(pod, {"a"})).status, 200);
  ASSERT_EQ(json::parse(service_->Bind(BindArgs(pod, "a")).body)["Error"], "");
  {
    auto lock = mirror_.ReadLock();
    EXPECT_EQ(mirror_.state().FindAllocation(common::PodUid("uid-p"))->containers[0].gpus[0].index, 1);
  }
  // The node's GPUs shrink to 16384 MiB: applied (p's and s1's 20000 MiB are now over), not refused.
  mirror_.OnNode(EventType::kModified, Node("a", 2, 16384));
  {
    auto lock = mirror_.ReadLock();
    EXPECT_EQ(mirror_.state().Find(common::NodeName("a"))->node->gpus[1].memory.value(), 16384);
    EXPECT_EQ(mirror_.state().AllocationCount(), 3u);
  }
  EXPECT_EQ(Allocated(), 1600);
  // GPU 1 vanishes: p's allocation waits for it, and comes back with it.
  mirror_.OnPod(EventType::kModified, AsBound(pod));
  mirror_.OnNode(EventType::kModified, Node("a", 1));
  EXPECT_EQ(Allocated(), 1300);
  EXPECT_EQ(mirror_.PendingAllocations(), 1u);
  mirror_.OnNode(EventType::kModified, Node("a", 2));
  EXPECT_EQ(Allocated(), 1600);
  EXPECT_EQ(mirror_.PendingAllocations(), 0u);
  // The pods end: the node is whole again.
  for (const char* name : {"x1", "s1"}) {
    mirror_.OnPod(EventType::kDeleted, BoundPod(name, "a", 0, 300));
  }
  metrics = metrics_.Serialize(mirror_);
  EXPECT_EQ(metrics.find("gpusched_node_overcommitted{"), std::string::npos) << metrics;
  auto lock = mirror_.ReadLock();
  EXPECT_TRUE(mirror_.state().CheckInvariants().ok());
}

// kube-scheduler's watch can be a few milliseconds ahead of the extender's: a bind for a pod the cache does not
// show yet (or shows as the old pod of that name) waits for the cache, up to pod_cache_wait_ms, then refuses.
TEST_F(ServiceTest, BindWaitsBrieflyForAPodCacheThatLagsBehindKubeScheduler) {
  const json pod = Pod("late", Share(30));
  json old = pod;
  old["metadata"]["uid"] = "uid-of-the-deleted-late";
  std::atomic<int> calls{0};
  auto lagging = [&](const std::string&, const std::string&) -> std::optional<json> {
    const int n = calls++;
    if (n < 2) {
      return std::nullopt;  // not seen yet
    }
    return n < 4 ? old : pod;  // then the previous pod of that name, then this one
  };
  auto made = ExtenderService::Create(mirror_, binder_, lagging,
                                      ServiceOptions{.seed = 7, .clock = &clock_, .pod_cache_wait_ms = 2000});
  ASSERT_TRUE(made.ok());
  ASSERT_EQ((*made)->Filter(Args(pod, {"a"})).status, 200);
  EXPECT_EQ(json::parse((*made)->Bind(BindArgs(pod, "a")).body)["Error"], "");
  EXPECT_EQ(calls.load(), 5);
  // A pod that never shows up is refused once the wait is over.
  auto never = ExtenderService::Create(
      mirror_, binder_, [](const std::string&, const std::string&) { return std::optional<json>(); },
      ServiceOptions{.seed = 7, .clock = &clock_, .pod_cache_wait_ms = 50});
  ASSERT_TRUE(never.ok());
  const json ghost = Pod("ghost", Share(30));
  ASSERT_EQ((*never)->Filter(Args(ghost, {"a"})).status, 200);
  EXPECT_EQ((*never)->Bind(BindArgs(ghost, "a")).status, 404);
}

// The device plugin and operators tell allocations apart by id: a restarted extender, or a second replica, must
// never hand out an id another one used.
TEST(ClusterMirrorTest, AllocationIdsAreUniqueAcrossRestartsAndReplicas) {
  int64_t wall = 1'700'000'000'000;
  auto clock = [&wall] { return wall; };
  ClusterMirror first(MirrorOptions{.wall_ms = clock, .id_nonce = 1});
  std::set<uint64_t> ids;
  uint64_t last = 0;
  for (int i = 0; i < 100; ++i) {  // a burst within one millisecond
    const uint64_t id = first.NextAllocationId();
    EXPECT_GT(id, last);
    EXPECT_LT(id, uint64_t{1} << 63);  // fits the annotation's int64
    last = id;
    ids.insert(id);
  }
  ClusterMirror replica(MirrorOptions{.wall_ms = clock, .id_nonce = 2});  // same millisecond, another process
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(ids.insert(replica.NextAllocationId()).second);
  }
  // A restart (even with the same per-process number) a second later, before the watch delivered any pod.
  wall += 1000;
  ClusterMirror restarted(MirrorOptions{.wall_ms = clock, .id_nonce = 1});
  const uint64_t after = restarted.NextAllocationId();
  EXPECT_GT(after, last);
  EXPECT_TRUE(ids.insert(after).second);
  // An id seen in an annotation, ahead of the clock, raises the floor.
  json pod = BoundPod("seen", "a", 0, 100);
  core::Allocation a = *kube::DecodeAllocation(
      pod["metadata"]["annotations"]["gpusched.io/allocation"].get<std::string>(), common::PodUid("uid-seen"));
  a.id = after + (uint64_t{5000} << 16);
  pod["metadata"]["annotations"]["gpusched.io/allocation"] = kube::EncodeAllocation(a);
  restarted.OnPod(EventType::kAdded, pod);
  EXPECT_GT(restarted.NextAllocationId(), a.id);
}

TEST_F(ServiceTest, PreemptPicksLowestPriorityGpuHoldersAndOnlyAsManyAsNeeded) {
  mirror_.OnPod(EventType::kAdded, BoundPod("low", "a", 0, 1000, true, 1));
  mirror_.OnPod(EventType::kAdded, BoundPod("mid", "a", 1, 1000, true, 5));
  mirror_.OnPod(EventType::kAdded, BoundPod("b0", "b", 0, 1000, true, 200));
  mirror_.OnPod(EventType::kAdded, BoundPod("b1", "b", 1, 1000, true, 1));
  const json preemptor = Pod("hi", {{"nvidia.com/gpu", "1"}}, 100);
  const json body = {{"Pod", preemptor},
                     {"NodeNameToVictims", nullptr},
                     {"NodeNameToMetaVictims",
                      {{"a", {{"Pods", json::array()}, {"NumPDBViolations", 0}}},
                       {"b", {{"Pods", json::array()}, {"NumPDBViolations", 2}}}}}};
  Reply r = service_->Preempt(body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json out = json::parse(r.body)["NodeNameToMetaVictims"];
  // a: one GPU is enough, and "low" (1) goes before "mid" (5).
  EXPECT_EQ(out["a"]["Pods"], json::array({{{"UID", "uid-low"}}}));
  // b: "b0" has a higher priority than the preemptor; "b1" is the only candidate.
  EXPECT_EQ(out["b"]["Pods"], json::array({{{"UID", "uid-b1"}}}));
  EXPECT_EQ(out["b"]["NumPDBViolations"], 2);

  // Two GPUs needed on a: both go (listed most important first, as kube-scheduler lists victims). On b only one
  // is evictable: b is dropped.
  const json two = {{"Pod", Pod("hi2", {{"nvidia.com/gpu", "2"}}, 100)},
                    {"NodeNameToMetaVictims", {{"a", {{"Pods", json::array()}}}, {"b", {{"Pods", json::array()}}}}}};
  const json out2 = json::parse(service_->Preempt(two.dump()).body)["NodeNameToMetaVictims"];
  EXPECT_EQ(out2["a"]["Pods"], json::array({{{"UID", "uid-mid"}}, {{"UID", "uid-low"}}}));
  EXPECT_FALSE(out2.contains("b"));
  // The scheduler's own victims count first: with "mid" proposed, nothing more is needed for one GPU.
  const json given = {{"Pod", preemptor}, {"NodeNameToMetaVictims", {{"a", {{"Pods", {{{"UID", "uid-mid"}}}}}}}}};
  const json out3 = json::parse(service_->Preempt(given.dump()).body)["NodeNameToMetaVictims"];
  EXPECT_EQ(out3["a"]["Pods"], json::array({{{"UID", "uid-mid"}}}));
  EXPECT_EQ(Allocated(), 4000);  // preempt changes nothing
}

// /preempt plans its GPU victims as the scheduler's preemption does (sched::CollectVictims): a pod whose bind is still
// in flight (assumed, not yet shown bound by the watch) is never named, even at the lowest priority; once the watch
// shows it bound it may be.
TEST_F(ServiceTest, PreemptNeverNamesAPodWhoseBindIsInFlight) {
  mirror_.OnPod(EventType::kAdded, BoundPod("low", "a", 0, 1000, true, 5));
  const json flying = BoundPod("flying", "a", 1, 1000, true, 1);
  core::Allocation a = *kube::DecodeAllocation(
      flying["metadata"]["annotations"]["gpusched.io/allocation"].get<std::string>(), common::PodUid("uid-flying"));
  a.id = 2;
  {
    auto lock = mirror_.WriteLock();
    ASSERT_TRUE(mirror_.state().Assume(a).ok());
    mirror_.BindStarting(core::PodRequest{.uid = a.pod, .priority = 1}, 60000);
  }
  const json body = {{"Pod", Pod("hi", {{"nvidia.com/gpu", "1"}}, 100)},
                     {"NodeNameToMetaVictims", {{"a", {{"Pods", json::array()}, {"NumPDBViolations", 0}}}}}};
  const json out = json::parse(service_->Preempt(body.dump()).body)["NodeNameToMetaVictims"];
  EXPECT_EQ(out["a"]["Pods"], json::array({{{"UID", "uid-low"}}})) << "not uid-flying, whose bind runs";
  mirror_.OnPod(EventType::kAdded, flying);  // the watch shows it bound
  const json after = json::parse(service_->Preempt(body.dump()).body)["NodeNameToMetaVictims"];
  EXPECT_EQ(after["a"]["Pods"], json::array({{{"UID", "uid-flying"}}}));
}

// shareWithin: namespace, in the extender: /filter turns a node down when every GPU with room is shared by another
// namespace (naming shareWithin), and /bind puts a pod on the GPU its own namespace shares, not another's.
TEST(ExtenderShareWithinTest, FilterAndBindKeepNamespacesOffEachOthersGpus) {
  testing::FakeClock clock;
  ClusterMirror mirror{MirrorOptions{.clock = &clock, .share_within = core::ShareWithin::kNamespace}};
  mirror.OnNode(EventType::kAdded, Node("a", 2));
  mirror.OnPod(EventType::kAdded, BoundPod("f1", "a", 1, 300));  // default holds 300 milli of GPU 1
  json g1 = BoundPod("g1", "a", 0, 300);
  g1["metadata"]["namespace"] = "team-b";  // team-b, 300 of GPU 0 (the one a tie would pick)
  mirror.OnPod(EventType::kAdded, g1);
  Binder binder;
  ExtenderMetrics metrics;
  ServiceOptions options{.policy = "binpack", .seed = 7};
  options.resources.share_within = core::ShareWithin::kNamespace;
  options.clock = &clock;
  options.pod_cache_wait_ms = 0;
  std::map<std::string, json> pods;
  auto made = ExtenderService::Create(
      mirror, binder,
      [&pods](const std::string& ns, const std::string& name) -> std::optional<json> {
        auto it = pods.find(ns + "/" + name);
        return it == pods.end() ? std::nullopt : std::optional<json>(it->second);
      },
      std::move(options), &metrics);
  ASSERT_TRUE(made.ok()) << made.status();
  ExtenderService& service = **made;

  json stranger = Pod("c1", Share(30));
  stranger["metadata"]["namespace"] = "team-c";
  const Reply refused = service.Filter(Args(stranger, {"a"}));
  ASSERT_EQ(refused.status, 200) << refused.body;
  const json out = json::parse(refused.body);
  EXPECT_TRUE(out["NodeNames"].empty());
  EXPECT_THAT(out["FailedNodes"]["a"].get<std::string>(), ::testing::HasSubstr("shareWithin"));

  const json mine = Pod("p", Share(30));
  pods["default/p"] = mine;
  const Reply passed = service.Filter(Args(mine, {"a"}));
  EXPECT_EQ(json::parse(passed.body)["NodeNames"], json::array({"a"})) << passed.body;
  const Reply bound = service.Bind(BindArgs(mine, "a"));
  ASSERT_EQ(bound.status, 200) << bound.body;
  ASSERT_EQ(binder.bound().size(), 1U);
  EXPECT_EQ(binder.bound()[0].second.containers[0].gpus[0].index, 1) << "its own namespace's GPU";
  auto lock = mirror.ReadLock();
  EXPECT_TRUE(mirror.state().CheckInvariants().ok());
}

}  // namespace
}  // namespace gpusched::extender
