// RunWorkload against testing::FakeApiServer (a stateful stand-in for kube-apiserver, with failure injection) and a
// scripted metrics source; the test plays scheduler and kubelet by writing the pod's status into the fake server.

#include "gpusched/monitor/runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::monitor {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Utilisation 42 and power 100 W on every GPU; the range answer has one point a step from start to end.
class ScriptedSource : public GpuMetricSource {
 public:
  std::string Describe() const override { return "scripted"; }
  common::Status Check() override { return common::Status::Ok(); }
  common::Result<std::map<std::string, double>> Latest(const MetricInfo& m,
                                                       const std::vector<std::string>& uuids) override {
    ++latest_calls;
    std::map<std::string, double> out;
    for (const auto& u : uuids) {
      out[u] = Value(m);
    }
    return out;
  }
  common::Result<std::map<std::string, Points>> Range(const MetricInfo& m, const std::vector<std::string>& uuids,
                                                      int64_t start_ms, int64_t end_ms, milliseconds step) override {
    if (fail_range) {
      return common::Unavailable("prometheus: connection refused");
    }
    std::map<std::string, Points> out;
    for (const auto& u : uuids) {
      for (int64_t t = start_ms; t <= end_ms; t += step.count()) {
        out[u].emplace_back(t, Value(m) + 1);  // +1: tells range samples from live ones
      }
    }
    return out;
  }
  common::Result<std::vector<GpuRef>> GpusOfPod(const std::string&, const std::string&) override {
    return std::vector<GpuRef>{};
  }
  static double Value(const MetricInfo& m) { return m.name == "power" ? 100 : 42; }
  std::atomic<int> latest_calls{0};
  bool fail_range = false;
};

class RunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // ctest runs each test of this suite as its own process, in parallel: each needs its own directory.
    dir_ = new std::string(testing::MakeTempDir("gpusched-monitor-runner"));
    auto pki = testing::MakeTestPki(*dir_ + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new testing::TestPki(*pki);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete pki_;
    delete dir_;
  }
  void SetUp() override {
    server_ = std::make_unique<testing::FakeApiServer>(testing::FakeApiServerOptions{
        .cert_file = pki_->server_cert_file, .key_file = pki_->server_key_file, .client_ca_file = pki_->ca_file});
    ASSERT_TRUE(server_->Start().ok());
    auto api = adapters::k8s::ApiClient::Create(adapters::k8s::ClientConfig{.server = server_->url(),
                                                                            .ca_pem = pki_->ca_pem,
                                                                            .client_cert_pem = pki_->client_cert_pem,
                                                                            .client_key_pem = pki_->client_key_pem,
                                                                            .request_timeout = milliseconds(2000)});
    ASSERT_TRUE(api.ok()) << api.status();
    api_ = std::move(api).value();
    options_.interval = milliseconds(100);
    options_.timeout = milliseconds(20000);
    options_.metrics = *ParseMetricList("util,power");
    options_.out_dir = *dir_ + "/out-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options_.status = nullptr;
  }
  void TearDown() override {
    stop_ = true;
    if (kubelet_.joinable()) {
      kubelet_.join();
    }
  }

  static Workload PodWorkload(const std::string& name) {
    auto objects = ParseManifests(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec: {containers: [{name: main, image: x}]}\n",
        name + ".yaml");
    return Workload{.name = name, .file = name + ".yaml", .objects = *objects};
  }

  // Plays scheduler and kubelet for pod `name`: bound with an allocation of GPU 1 of node n1, Running, then
  // `final_phase` after `run_for` (none when final_phase is empty).
  void Kubelet(const std::string& name, const std::string& final_phase, milliseconds run_for) {
    kubelet_ = std::thread([this, name, final_phase, run_for] {
      std::optional<std::chrono::steady_clock::time_point> started;
      while (!stop_) {
        std::this_thread::sleep_for(milliseconds(20));
        auto pod = server_->GetPod("default", name);
        if (!pod) {
          continue;
        }
        if (!started) {
          core::Allocation a{.node = common::NodeName("n1")};
          a.containers.push_back(core::ContainerAllocation{.container = "main",
                                                           .gpus = {core::GpuShare{.index = 1,
                                                                                   .uuid = common::GpuUuid("GPU-n1-1"),
                                                                                   .milli = common::MilliGpu{1000},
                                                                                   .memory = common::MiB{0}}}});
          json p = *pod;
          p["spec"]["nodeName"] = "n1";
          p["metadata"]["annotations"][std::string(kube::kAnnotationAllocation)] = kube::EncodeAllocation(a);
          p["status"] = {{"phase", "Running"}};
          server_->UpsertPod(p);
          started = std::chrono::steady_clock::now();
        } else if (!final_phase.empty() && std::chrono::steady_clock::now() - *started > run_for &&
                   pod->value("status", json::object()).value("phase", "") == "Running") {
          json p = *pod;
          p["status"]["phase"] = final_phase;
          server_->UpsertPod(p);
        }
      }
    });
  }

  static std::string* dir_;
  static testing::TestPki* pki_;
  std::unique_ptr<testing::FakeApiServer> server_;
  std::unique_ptr<adapters::k8s::ApiClient> api_;
  RunOptions options_;
  ScriptedSource source_;
  std::thread kubelet_;
  std::atomic<bool> stop_{false};
};
std::string* RunnerTest::dir_ = nullptr;
testing::TestPki* RunnerTest::pki_ = nullptr;

TEST_F(RunnerTest, SucceededPodIsRecordedFromTheRangeAndDeleted) {
  Kubelet("train", "Succeeded", milliseconds(600));
  const RunResult r = RunWorkload(PodWorkload("train"), *api_, source_, options_);
  EXPECT_EQ(r.report.facts.outcome, "succeeded");
  EXPECT_TRUE(r.report.facts.succeeded);
  ASSERT_EQ(r.report.gpus.size(), 1u);
  EXPECT_EQ(r.report.gpus[0].uuid, "GPU-n1-1");
  EXPECT_EQ(r.report.gpus[0].index, 1);
  EXPECT_EQ(r.report.gpus[0].node, "n1");
  const auto& util = r.report.samples.at("util").at("GPU-n1-1");
  ASSERT_GE(util.size(), 4u);
  for (const Sample& s : util) {
    EXPECT_EQ(s.value, 43);  // from the range query, not the live samples
  }
  EXPECT_EQ(util.front().t, 0);
  EXPECT_GT(source_.latest_calls.load(), 0);
  EXPECT_TRUE(r.remaining.empty());
  EXPECT_FALSE(server_->GetPod("default", "train").has_value());
  EXPECT_TRUE(r.write_status.ok()) << r.write_status;
  EXPECT_TRUE(std::filesystem::exists(r.dir + "/metrics.csv"));
  // The created pod carried the run label.
  EXPECT_THAT(r.report.facts.run_id, HasSubstr("gm-"));
  EXPECT_EQ(server_->RequestCount("DELETE", "delete-pod"), 1);
}

TEST_F(RunnerTest, ApiServerErrorsMidRunAreRetried) {
  Kubelet("flaky", "Succeeded", milliseconds(800));
  std::thread breaker([this] {
    std::this_thread::sleep_for(milliseconds(300));
    server_->FailNext("GET", "/pods/flaky", 503, "etcd leader changed", 3);
    server_->FailNext("GET", "list-pods", 503, "etcd leader changed", 3);
  });
  const RunResult r = RunWorkload(PodWorkload("flaky"), *api_, source_, options_);
  breaker.join();
  EXPECT_EQ(r.report.facts.outcome, "succeeded");
  EXPECT_TRUE(r.remaining.empty());
  EXPECT_FALSE(server_->GetPod("default", "flaky").has_value());
}

TEST_F(RunnerTest, FailedPodAndRangeFailureFallBackToLiveSamples) {
  source_.fail_range = true;
  Kubelet("broken", "Failed", milliseconds(500));
  const RunResult r = RunWorkload(PodWorkload("broken"), *api_, source_, options_);
  EXPECT_FALSE(r.report.facts.succeeded);
  EXPECT_THAT(r.report.facts.outcome, HasSubstr("failed"));
  ASSERT_FALSE(r.report.facts.notes.empty());
  EXPECT_THAT(r.report.facts.notes[0], HasSubstr("range query failed"));
  for (const Sample& s : r.report.samples.at("util").at("GPU-n1-1")) {
    EXPECT_EQ(s.value, 42);  // live samples
  }
  EXPECT_FALSE(server_->GetPod("default", "broken").has_value());
}

TEST_F(RunnerTest, CleanupThatFailsSaysWhatRemains) {
  Kubelet("stuck", "Succeeded", milliseconds(300));
  server_->FailNext("DELETE", "delete-pod", 403, "pods \"stuck\" is forbidden: no delete for you", -1);
  const RunResult r = RunWorkload(PodWorkload("stuck"), *api_, source_, options_);
  EXPECT_EQ(r.report.facts.outcome, "succeeded");
  ASSERT_EQ(r.remaining.size(), 1u);
  EXPECT_THAT(r.remaining[0], HasSubstr("Pod default/stuck"));
  EXPECT_THAT(r.remaining[0], HasSubstr("forbidden"));
  EXPECT_TRUE(server_->GetPod("default", "stuck").has_value());
  server_->ClearFailures();
}

TEST_F(RunnerTest, TimeoutGivesTheSchedulersReasonAndInterruptEndsTheRun) {
  std::thread scheduler([this] {
    while (!stop_) {
      std::this_thread::sleep_for(milliseconds(20));
      if (auto pod = server_->GetPod("default", "huge"); pod && !pod->contains("status")) {
        json p = *pod;
        p["status"] = json::parse(R"({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
            "reason":"Unschedulable","message":"0/3 nodes are available: 3 Insufficient GPU."}]})");
        server_->UpsertPod(p);
      }
    }
  });
  options_.timeout = milliseconds(700);
  const RunResult r = RunWorkload(PodWorkload("huge"), *api_, source_, options_);
  EXPECT_FALSE(r.report.facts.succeeded);
  EXPECT_EQ(r.report.facts.outcome,
            "timed out after 0.7 s (not scheduled: Unschedulable: 0/3 nodes are available: 3 Insufficient GPU.)");
  EXPECT_FALSE(r.report.facts.wait_s.has_value());
  EXPECT_FALSE(server_->GetPod("default", "huge").has_value());
  stop_ = true;
  scheduler.join();

  std::atomic<bool> interrupted{false};
  options_.interrupted = &interrupted;
  options_.timeout = milliseconds(20000);
  std::thread ctrl_c([&] {
    std::this_thread::sleep_for(milliseconds(400));
    interrupted = true;
  });
  const RunResult i = RunWorkload(PodWorkload("pending"), *api_, source_, options_);
  ctrl_c.join();
  EXPECT_EQ(i.report.facts.outcome, "interrupted");
  EXPECT_FALSE(server_->GetPod("default", "pending").has_value());
}

TEST_F(RunnerTest, AKindTheServerDoesNotServeIsASetUpError) {
  ResourceResolver resolver(*api_);
  Workload w = PodWorkload("ok");
  EXPECT_TRUE(CheckWorkload(w, resolver, options_).ok());
  auto odd = ParseManifests("apiVersion: v1\nkind: Gadget\nmetadata: {name: g}\n", "g.yaml");
  w.objects = *odd;
  options_.duration = milliseconds(1000);
  const common::Status s = CheckWorkload(w, resolver, options_);
  EXPECT_EQ(s.code(), common::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("g.yaml:1: the API server serves no kind Gadget in v1"));
  auto deploy = ParseManifests("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "d.yaml");
  w.objects = *deploy;
  EXPECT_THAT(CheckWorkload(w, resolver, options_).message(), HasSubstr("apiVersion apps/v1"));
}

}  // namespace
}  // namespace gpusched::monitor
