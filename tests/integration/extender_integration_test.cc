// The extender end to end in one process, against FakeApiServer over mTLS on loopback: the real informers feed
// the mirror, the real HTTP server answers kube-scheduler's verbs, and binds go through PodBinder to the fake
// API server. Checks that binds land with the right annotation, that a restarted extender rebuilds the same
// state from the annotations, that concurrent binds never overcommit (also run under TSan), that failed binds
// change nothing, and how bad input is answered.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gpusched/adapters/influxdb/influx_source.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/k8s/pod_binder.h"
#include "gpusched/adapters/prometheus/prometheus_source.h"
#include "gpusched/common/log.h"
#include "gpusched/extender/server.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/json_builders.h"
#include "gpusched/testing/processes.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched {
namespace {

namespace ext = extender;
namespace k8s = adapters::k8s;
using nlohmann::json;
using std::chrono::milliseconds;

// Polls `pred` every 5 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, milliseconds timeout = milliseconds(15000)) {
  return testing::WaitFor(pred, timeout, milliseconds(5));
}

json Node(const std::string& name, int gpus) { return testing::GpuNodeJson(name).Gpus(gpus); }

// As kube-scheduler's user would create it: no uid yet (the fake API server assigns one).
json Pod(const std::string& name, const json& limits) {
  return testing::PodJson(name).NoUid().SchedulerName("default-scheduler").Limits(limits).Phase("Pending");
}

json Share(int core) { return testing::ShareLimits(core, 20000); }

// One extender process worth of objects: client, informers, mirror, service, server.
struct Extender {
  std::unique_ptr<k8s::ApiClient> client;
  ext::ClusterMirror mirror;
  std::unique_ptr<k8s::Informer> nodes;
  std::unique_ptr<k8s::Informer> pods;
  std::unique_ptr<k8s::PodBinder> binder;
  ext::ExtenderMetrics metrics;
  std::unique_ptr<ext::ExtenderService> service;
  std::unique_ptr<ext::ExtenderServer> server;
  std::function<std::string()> degraded;  // handed to the server before it starts, when set

  static ext::EventType Type(k8s::WatchEvent::Type t) {
    return t == k8s::WatchEvent::Type::kAdded      ? ext::EventType::kAdded
           : t == k8s::WatchEvent::Type::kModified ? ext::EventType::kModified
                                                   : ext::EventType::kDeleted;
  }

  void Start(const std::string& kubeconfig, const ext::ExtenderConfig& config, bool start_informers = true) {
    auto cfg = k8s::LoadKubeconfig(kubeconfig);
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    auto c = k8s::ApiClient::Create(*cfg);
    ASSERT_TRUE(c.ok()) << c.status();
    client = std::move(c).value();
    nodes =
        std::make_unique<k8s::Informer>(*client, k8s::InformerOptions{.path = "/api/v1/nodes"},
                                        [this](const k8s::WatchEvent& e) { mirror.OnNode(Type(e.type), e.object); });
    pods = std::make_unique<k8s::Informer>(*client, k8s::InformerOptions{.path = "/api/v1/pods"},
                                           [this](const k8s::WatchEvent& e) { mirror.OnPod(Type(e.type), e.object); });
    binder = std::make_unique<k8s::PodBinder>(*client);
    // The sync gate as `gpusched extender` wires it: the verbs wait for both informers' first list.
    ext::ServiceOptions options{.policy = config.policy, .seed = 3};
    options.sync_gate = [this] { return Waiting(); };
    auto s = ext::ExtenderService::Create(
        mirror, *binder, [this](const std::string& ns, const std::string& name) { return pods->Get(ns + "/" + name); },
        std::move(options), &metrics);
    ASSERT_TRUE(s.ok()) << s.status();
    service = std::move(s).value();
    server = std::make_unique<ext::ExtenderServer>(*service, mirror, metrics, config, [this]() -> std::string {
      const std::string w = Waiting();
      return w.empty() ? "" : "not synced: waiting for " + w;
    });
    if (degraded) {
      server->SetDegraded(degraded);
    }
    ASSERT_TRUE(server->Start().ok());
    if (start_informers) {
      StartInformers();
    }
  }
  std::string Waiting() const {
    std::string w = pods->HasSynced() ? "" : "pods";
    if (!nodes->HasSynced()) {
      w += (w.empty() ? "" : ", ") + std::string("nodes");
    }
    return w;
  }
  void StartInformers() {
    StartNodes();
    StartPods();
  }
  void StartNodes() {
    nodes->Start();
    ASSERT_TRUE(nodes->WaitForSync(milliseconds(15000)));
  }
  void StartPods() {
    pods->Start();
    ASSERT_TRUE(pods->WaitForSync(milliseconds(15000)));
  }
  void Stop() {
    if (server) server->Stop();
    if (pods) pods->Stop();
    if (nodes) nodes->Stop();
  }
  ~Extender() { Stop(); }
};

class ExtenderIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpusched-extender-it");
    auto pki = testing::MakeTestPki(dir_ + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
    api_ = std::make_unique<testing::FakeApiServer>(testing::FakeApiServerOptions{
        .cert_file = pki_.server_cert_file, .key_file = pki_.server_key_file, .client_ca_file = pki_.ca_file});
    ASSERT_TRUE(api_->Start().ok());
    kubeconfig_ = testing::WriteKubeconfig(pki_, api_->url(), dir_ + "/kubeconfig");
    ASSERT_FALSE(kubeconfig_.empty());
    config_.host = "127.0.0.1";
    config_.port = 0;
    config_.read_timeout_seconds = 1;
    config_.max_body_bytes = 1 << 20;
  }
  void TearDown() override {
    api_->Stop();
    std::filesystem::remove_all(dir_);
  }

  httplib::Client Client(const Extender& e) {
    httplib::Client c("127.0.0.1", e.server->port());
    c.set_read_timeout(10, 0);
    return c;
  }

  // kube-scheduler's cycle for one pod: filter, prioritize, then bind to the best-scored passing node.
  // Returns the bind Error ("" on success) or a description of what failed before bind.
  std::string Schedule(Extender& e, const json& pod, const std::vector<std::string>& nodes) {
    return ScheduleOn(e.server->port(), pod, nodes);
  }
  std::string ScheduleOn(int port, const json& pod, const std::vector<std::string>& nodes) {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(10, 0);
    const std::string args = json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}}.dump();
    auto f = c.Post("/scheduler/filter", args, "application/json");
    if (!f) return "filter failed: " + httplib::to_string(f.error());
    if (f->status != 200) return "filter failed: HTTP " + std::to_string(f->status) + " " + f->body;
    const json fr = json::parse(f->body);
    if (fr["NodeNames"].empty()) return "no node fits: " + fr["FailedNodes"].dump();
    auto p = c.Post("/scheduler/prioritize",
                    json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", fr["NodeNames"]}}.dump(), "application/json");
    if (!p || p->status != 200) return "prioritize failed";
    std::string best;
    int64_t best_score = -1;
    for (const auto& h : json::parse(p->body)) {
      if (h["Score"].get<int64_t>() > best_score) {
        best_score = h["Score"];
        best = h["Host"];
      }
    }
    auto b = c.Post("/scheduler/bind",
                    json{{"PodName", pod["metadata"]["name"]},
                         {"PodNamespace", "default"},
                         {"PodUID", pod["metadata"]["uid"]},
                         {"Node", best}}
                        .dump(),
                    "application/json");
    if (!b) return "bind transport failed";
    const std::string error = json::parse(b->body)["Error"].get<std::string>();
    return b->status == 200 || !error.empty() ? error : "bind failed: HTTP " + std::to_string(b->status);
  }

  // Σ milli and MiB per GPU uuid over every bound pod's annotation, as the API server holds them.
  std::map<std::string, std::pair<int64_t, int64_t>> UsageFromAnnotations() {
    std::map<std::string, std::pair<int64_t, int64_t>> use;
    for (const auto& p : api_->Pods()) {
      const auto& md = p["metadata"];
      if (!md.contains("annotations") || !md["annotations"].contains("gpusched.io/allocation")) continue;
      auto a = kube::DecodeAllocation(md["annotations"]["gpusched.io/allocation"].get<std::string>(),
                                      common::PodUid(md["uid"].get<std::string>()));
      EXPECT_TRUE(a.ok()) << a.status();
      EXPECT_EQ(a->node.str(), p["spec"].value("nodeName", "")) << p.dump();
      for (const auto& c : a->containers) {
        for (const auto& g : c.gpus) {
          use[g.uuid.str()].first += g.milli.value();
          use[g.uuid.str()].second += g.memory.value();
        }
      }
    }
    return use;
  }

  std::string dir_;
  testing::TestPki pki_;
  std::unique_ptr<testing::FakeApiServer> api_;
  std::string kubeconfig_;
  ext::ExtenderConfig config_;
};

TEST_F(ExtenderIntegrationTest, BindsLandWithTheRightAnnotationAndTheWatchConfirmsThem) {
  api_->UpsertNode(Node("n1", 2));
  api_->UpsertNode(Node("n2", 2));
  Extender e;
  e.Start(kubeconfig_, config_);
  for (int i = 0; i < 4; ++i) {
    const json pod = api_->UpsertPod(Pod("share-" + std::to_string(i), Share(30)));
    ASSERT_TRUE(WaitFor([&] { return e.pods->Get("default/share-" + std::to_string(i)).has_value(); }));
    EXPECT_EQ(Schedule(e, pod, {"n1", "n2"}), "") << i;
  }
  for (int i = 0; i < 4; ++i) {
    auto pod = api_->GetPod("default", "share-" + std::to_string(i));
    ASSERT_TRUE(pod.has_value());
    const std::string node = (*pod)["spec"].value("nodeName", "");
    ASSERT_FALSE(node.empty()) << "pod not bound";
    auto a = kube::DecodeAllocation((*pod)["metadata"]["annotations"]["gpusched.io/allocation"].get<std::string>(),
                                    common::PodUid((*pod)["metadata"]["uid"].get<std::string>()));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->node.str(), node);
    ASSERT_EQ(a->containers.size(), 1u);
    EXPECT_EQ(a->containers[0].container, "main");
    ASSERT_EQ(a->containers[0].gpus.size(), 1u);
    const auto& g = a->containers[0].gpus[0];
    EXPECT_EQ(g.uuid.str(), "GPU-" + node + "-" + std::to_string(g.index));
    EXPECT_EQ(g.milli.value(), 300);
    EXPECT_EQ(g.memory.value(), 20000);
    EXPECT_FALSE(g.exclusive);
  }
  // binpack put all four on one node, on one GPU until it was full (3 x 300), then the next.
  EXPECT_EQ(api_->RequestCount("POST", "binding"), 4);
  EXPECT_EQ(api_->RequestCount("PATCH", "patch-pod"), 0);  // the allocation rides in the Binding: one write
  ASSERT_TRUE(WaitFor([&] {
    auto lock = e.mirror.ReadLock();
    for (int i = 0; i < 4; ++i) {
      auto pod = api_->GetPod("default", "share-" + std::to_string(i));
      if (!e.mirror.state().IsConfirmed(common::PodUid((*pod)["metadata"]["uid"].get<std::string>()))) return false;
    }
    return true;
  }));
  auto lock = e.mirror.ReadLock();
  EXPECT_EQ(e.mirror.state().AllocatedMilli().value(), 1200);
  EXPECT_EQ(e.mirror.stats().rebuilt_allocations, 0u);  // all four were this extender's own binds
}

TEST_F(ExtenderIntegrationTest, ARestartedExtenderRebuildsTheSameStateAndKeepsCapacity) {
  api_->UpsertNode(Node("n1", 2));
  std::map<std::string, std::pair<int64_t, int64_t>> before;
  {
    Extender e;
    e.Start(kubeconfig_, config_);
    for (int i = 0; i < 6; ++i) {  // 6 x 30 % on 2 GPUs: 3 per GPU, 90 % each
      const json pod = api_->UpsertPod(Pod("r" + std::to_string(i), Share(30)));
      ASSERT_TRUE(WaitFor([&] { return e.pods->Get("default/r" + std::to_string(i)).has_value(); }));
      ASSERT_EQ(Schedule(e, pod, {"n1"}), "") << i;
    }
    before = UsageFromAnnotations();
  }
  Extender again;
  again.Start(kubeconfig_, config_);
  {
    auto lock = again.mirror.ReadLock();
    const core::NodeView* v = again.mirror.state().Find(common::NodeName("n1"));
    ASSERT_NE(v, nullptr);
    for (size_t g = 0; g < v->gpus.size(); ++g) {
      const auto& use = before["GPU-n1-" + std::to_string(g)];
      EXPECT_EQ(v->gpus[g].free.value(), 1000 - use.first) << g;
      EXPECT_EQ(v->gpus[g].memory_free.value(), 81920 - use.second) << g;
    }
    EXPECT_EQ(again.mirror.stats().rebuilt_allocations, 6u);
  }
  // A 30 % pod would overcommit if the state were lost: it must not fit; a 10 % one must.
  const json big = api_->UpsertPod(Pod("big", Share(30)));
  const json small = api_->UpsertPod(Pod("small", Share(10)));
  ASSERT_TRUE(WaitFor([&] { return again.pods->Get("default/small").has_value(); }));
  EXPECT_NE(Schedule(again, big, {"n1"}).find("no node fits"), std::string::npos);
  EXPECT_EQ(Schedule(again, small, {"n1"}), "");
  for (const auto& [uuid, use] : UsageFromAnnotations()) {
    EXPECT_LE(use.first, 1000) << uuid;
    EXPECT_LE(use.second, 81920) << uuid;
  }
}

TEST_F(ExtenderIntegrationTest, ConcurrentBindsNeverOvercommit) {
  api_->UpsertNode(Node("n1", 2));
  api_->UpsertNode(Node("n2", 2));
  Extender e;
  e.Start(kubeconfig_, config_);
  constexpr int kPods = 24;  // capacity: 4 GPUs x 3 pods of 30 % = 12
  std::vector<json> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(api_->UpsertPod(Pod("c" + std::to_string(i), Share(30))));
  }
  ASSERT_TRUE(WaitFor([&] { return e.pods->Get("default/c" + std::to_string(kPods - 1)).has_value(); }));
  std::atomic<int> next{0};
  std::atomic<int> bound{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = next++; i < kPods; i = next++) {
        if (Schedule(e, pods[static_cast<size_t>(i)], {"n1", "n2"}).empty()) {
          ++bound;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(bound.load(), 12);
  for (const auto& [uuid, use] : UsageFromAnnotations()) {
    EXPECT_LE(use.first, 1000) << uuid;
    EXPECT_LE(use.second, 81920) << uuid;
  }
  int with_node = 0;
  for (const auto& p : api_->Pods()) {
    with_node += p["spec"].value("nodeName", "").empty() ? 0 : 1;
  }
  EXPECT_EQ(with_node, 12);
  auto lock = e.mirror.ReadLock();
  EXPECT_TRUE(e.mirror.state().CheckInvariants().ok());
  EXPECT_EQ(e.mirror.state().AllocatedMilli().value(), 12 * 300);
}

// One POST of the Binding carries the allocation: a bind that fails leaves no annotation behind. A 500 may follow
// a Binding that was written, so the GPUs stay assumed and kube-scheduler's retry sends the same allocation again;
// a 403 wrote nothing, so they are free at once.
TEST_F(ExtenderIntegrationTest, AFailedBindLeavesNoAnnotationAndAnUnknownOutcomeKeepsTheGpus) {
  api_->UpsertNode(Node("n1", 1));
  Extender e;
  e.Start(kubeconfig_, config_);
  const json pod = api_->UpsertPod(Pod("f", Share(50)));
  ASSERT_TRUE(WaitFor([&] { return e.pods->Get("default/f").has_value(); }));
  api_->FailNext("POST", "binding", 500, "etcd is having a bad day");
  const std::string error = Schedule(e, pod, {"n1"});
  EXPECT_NE(error.find("etcd is having a bad day"), std::string::npos) << error;
  EXPECT_NE(error.find("outcome unknown"), std::string::npos) << error;
  auto stored = api_->GetPod("default", "f");
  EXPECT_FALSE((*stored)["metadata"].contains("annotations") &&
               (*stored)["metadata"]["annotations"].contains("gpusched.io/allocation"))
      << stored->dump();
  uint64_t first_id = 0;
  {
    auto lock = e.mirror.ReadLock();
    EXPECT_EQ(e.mirror.state().AllocatedMilli().value(), 500);
    first_id = e.mirror.state().FindAllocation(common::PodUid(pod["metadata"]["uid"].get<std::string>()))->id;
  }
  EXPECT_EQ(Schedule(e, pod, {"n1"}), "");  // kube-scheduler's retry: the same allocation, now bound
  stored = api_->GetPod("default", "f");
  auto landed =
      kube::DecodeAllocation((*stored)["metadata"]["annotations"]["gpusched.io/allocation"].get<std::string>(),
                             common::PodUid(pod["metadata"]["uid"].get<std::string>()));
  ASSERT_TRUE(landed.ok()) << landed.status();
  EXPECT_EQ(landed->id, first_id);
  EXPECT_EQ(api_->RequestCount("PATCH", "patch-pod"), 0);  // the annotation came with the Binding
  ASSERT_TRUE(WaitFor([&] {
    auto lock = e.mirror.ReadLock();
    return e.mirror.state().IsConfirmed(common::PodUid(pod["metadata"]["uid"].get<std::string>()));
  }));
  // A definite refusal (403: nothing written) gives the GPUs back at once.
  const json g = api_->UpsertPod(Pod("g", Share(50)));
  ASSERT_TRUE(WaitFor([&] { return e.pods->Get("default/g").has_value(); }));
  api_->FailNext("POST", "binding", 403, "not allowed today");
  EXPECT_NE(Schedule(e, g, {"n1"}).find("not allowed today"), std::string::npos);
  {
    auto lock = e.mirror.ReadLock();
    EXPECT_EQ(e.mirror.state().AllocatedMilli().value(), 500);
  }
  // The pod ends: its GPUs come back.
  api_->DeletePod("default", "f");
  ASSERT_TRUE(WaitFor([&] {
    auto lock = e.mirror.ReadLock();
    return e.mirror.state().AllocatedMilli().value() == 0;
  }));
}

TEST_F(ExtenderIntegrationTest, BadInputGetsA4xxWithAMessageAndChangesNothing) {
  api_->UpsertNode(Node("n1", 1));
  Extender e;
  e.Start(kubeconfig_, config_, /*start_informers=*/false);
  auto c = Client(e);
  auto not_ready = c.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  EXPECT_NE(not_ready->body.find("not synced"), std::string::npos);
  e.StartInformers();
  EXPECT_EQ(c.Get("/readyz")->status, 200);
  EXPECT_EQ(c.Get("/healthz")->status, 200);

  const std::pair<std::string, std::string> bodies[] = {
      {"/scheduler/filter", "{\"Pod\":"},                     // truncated
      {"/scheduler/filter", "not json at all"},               // malformed
      {"/scheduler/prioritize", "{\"NodeNames\":[\"n1\"]}"},  // missing Pod
      {"/scheduler/bind", "{\"PodName\":\"x\"}"},             // missing Node
      {"/scheduler/preempt", "{\"Pod\":{}}"},                 // no victims map
  };
  for (const auto& [path, body] : bodies) {
    auto r = c.Post(path, body, "application/json");
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 400) << path << " " << body;
    EXPECT_FALSE(json::parse(r->body)["Error"].get<std::string>().empty()) << r->body;
  }
  auto no_uid =
      c.Post("/scheduler/bind", R"({"PodName":"ghost","PodNamespace":"default","Node":"n1"})", "application/json");
  EXPECT_EQ(no_uid->status, 400);
  EXPECT_NE(no_uid->body.find("PodUID is required"), std::string::npos) << no_uid->body;
  auto unknown = c.Post("/scheduler/bind", R"({"PodName":"ghost","PodNamespace":"default","PodUID":"u1","Node":"n1"})",
                        "application/json");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_NE(unknown->body.find("ghost"), std::string::npos);
  auto big = c.Post("/scheduler/filter", std::string(2 << 20, ' '), "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_NE(big->body.find("request body is larger than"), std::string::npos) << big->body;
  EXPECT_EQ(c.Post("/scheduler/nope", "{}", "application/json")->status, 404);

  // A slow client: headers promise a body that never comes. The server cuts it off after readTimeoutSeconds
  // and keeps serving others.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(e.server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string head = "POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"Pod\"";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  char buf[256];
  const auto start = std::chrono::steady_clock::now();
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);  // the server closes (or answers an error) after the timeout
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(waited, 5.0);
  EXPECT_GE(n, 0);
  ::close(fd);

  auto lock = e.mirror.ReadLock();
  EXPECT_EQ(e.mirror.state().AllocationCount(), 0u);
  const std::string metrics = e.metrics.Serialize(e.mirror);
  EXPECT_NE(metrics.find("gpusched_extender_requests_total{code=\"400\",verb=\"filter\"} 2"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("gpusched_extender_request_duration_seconds_bucket"), std::string::npos);
  EXPECT_NE(metrics.find("gpusched_node_gpu_milli_capacity{node=\"n1\"} 1000"), std::string::npos);
}

TEST_F(ExtenderIntegrationTest, ServesHttpsWhenTheConfigHasACertificate) {
  api_->UpsertNode(Node("n1", 1));
  config_.tls_cert_file = pki_.server_cert_file;
  config_.tls_key_file = pki_.server_key_file;
  Extender e;
  e.Start(kubeconfig_, config_);
  httplib::SSLClient c("127.0.0.1", e.server->port());
  c.set_ca_cert_path(pki_.ca_file.c_str());
  c.enable_server_certificate_verification(true);
  const json pod = Pod("tls", Share(20));
  auto r = c.Post("/scheduler/filter", json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}}.dump(),
                  "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["NodeNames"], json::array({"n1"}));
  // Plain HTTP to the HTTPS port gets nowhere.
  httplib::Client plain("127.0.0.1", e.server->port());
  plain.set_read_timeout(2, 0);
  auto p = plain.Get("/healthz");
  EXPECT_TRUE(!p || p->status != 200);
  // A bad certificate path is a clear error at start.
  config_.tls_cert_file = dir_ + "/missing.crt";
  ext::ExtenderServer bad(*e.service, e.mirror, e.metrics, config_, nullptr);
  const common::Status s = bad.Start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("missing.crt"), std::string::npos) << s;
}

// With a client CA and allowed names, only kube-scheduler's certificate reaches any endpoint; a certificate from
// another CA, none, or an allowed CA's certificate with another name never reaches the service.
TEST_F(ExtenderIntegrationTest, OnlyAllowedClientCertificatesReachTheVerbs) {
  api_->UpsertNode(Node("n1", 1));
  config_.tls_cert_file = pki_.server_cert_file;
  config_.tls_key_file = pki_.server_key_file;
  config_.tls_client_ca_file = pki_.ca_file;
  config_.tls_allowed_client_names = {"gpusched"};  // the CN of pki_.client_cert_file
  Extender e;
  e.Start(kubeconfig_, config_);
  const std::string body = json{{"Pod", Pod("mtls", Share(20))}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}}.dump();
  auto post = [&](const std::string& cert, const std::string& key) {
    httplib::SSLClient c("127.0.0.1", e.server->port(), cert, key);
    c.set_ca_cert_path(pki_.ca_file.c_str());
    c.enable_server_certificate_verification(true);
    c.set_read_timeout(3, 0);
    return c.Post("/scheduler/filter", body, "application/json");
  };
  auto ok = post(pki_.client_cert_file, pki_.client_key_file);
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  auto none = post("", "");
  EXPECT_TRUE(!none || none->status != 200);
  auto other = post(pki_.other_client_cert_file, pki_.other_client_key_file);
  EXPECT_TRUE(!other || other->status != 200);
  e.Stop();
  config_.tls_allowed_client_names = {"kube-scheduler"};
  Extender named;
  named.Start(kubeconfig_, config_);
  httplib::SSLClient c("127.0.0.1", named.server->port(), pki_.client_cert_file, pki_.client_key_file);
  c.set_ca_cert_path(pki_.ca_file.c_str());
  auto denied = c.Post("/scheduler/filter", body, "application/json");
  ASSERT_TRUE(denied) << httplib::to_string(denied.error());
  EXPECT_EQ(denied->status, 403);
  EXPECT_NE(denied->body.find("gpusched"), std::string::npos) << denied->body;
  EXPECT_EQ(named.server->http()->stats().requests, 0U);
}

// kube-scheduler keeps calling while the extender restarts: 4 threads stream filter, prioritize and bind for 40
// pods against whatever listens on the extender's port. Mid-stream the extender stops (binds in flight finish or
// are cut off) and a new one starts on the same port against the same API server, whose pods carry the
// allocations written so far; it serves before its caches synced, as a container restarted under load does.
// Until they synced every verb must refuse (503), and from then on it must place beside what the annotations
// say: no GPU ever holds more than 1000 milli or its 81920 MiB, and no pod is bound twice.
TEST_F(ExtenderIntegrationTest, ARestartUnderAStreamOfFilterAndBindCallsNeverDoubleAllocates) {
  api_->UpsertNode(Node("n1", 2));
  api_->UpsertNode(Node("n2", 2));
  // 30 % + 20000 MiB and 20 % + 30000 MiB, alternating: compute and memory both run out on some GPUs.
  constexpr int kPods = 40;
  std::vector<json> pods;
  for (int i = 0; i < kPods; ++i) {
    pods.push_back(api_->UpsertPod(
        Pod("s" + std::to_string(i), i % 2 == 0 ? testing::ShareLimits(30, 20000) : testing::ShareLimits(20, 30000))));
  }
  auto first = std::make_unique<Extender>();
  first->Start(kubeconfig_, config_);
  ASSERT_TRUE(WaitFor([&] { return first->pods->Get("default/s" + std::to_string(kPods - 1)).has_value(); }));
  const int port = first->server->port();

  std::mutex mu;
  std::map<std::string, int> successes;  // bind answered "" (GUARDED_BY(mu))
  std::set<std::string> unfit;           // no node fits, said by the synced second extender (GUARDED_BY(mu))
  std::set<std::string> busy;            // a thread is scheduling it now (GUARDED_BY(mu))
  std::atomic<bool> second_synced{false};
  std::atomic<bool> done{false};
  // The pods kube-scheduler has seen so far: 8 before the restart (so that the first extender cannot bind them all
  // before it is stopped), all 40 after.
  std::atomic<size_t> released{8};
  auto bound_in_api = [&](const std::string& name) {
    auto p = api_->GetPod("default", name);
    return p.has_value() && !(*p)["spec"].value("nodeName", "").empty();
  };
  auto resolved = [&](const std::string& name) {  // holds mu
    return successes.contains(name) || unfit.contains(name) || bound_in_api(name);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      size_t idle = 0;  // pods passed over in a row
      for (size_t round = static_cast<size_t>(t); !done; ++round) {
        const size_t seen = released;
        const json& pod = pods[round % seen];
        const std::string name = pod["metadata"]["name"];
        {
          std::lock_guard lock(mu);
          if (busy.contains(name) || resolved(name)) {
            if (++idle >= seen) {  // nothing to do this pass: let the others finish
              idle = 0;
              std::this_thread::sleep_for(milliseconds(1));
            }
            continue;
          }
          busy.insert(name);
          idle = 0;
        }
        const bool synced_before = second_synced;
        const std::string outcome = ScheduleOn(port, pod, {"n1", "n2"});
        std::lock_guard lock(mu);
        busy.erase(name);
        if (outcome.empty()) {
          ++successes[name];
        } else if (synced_before && outcome.starts_with("no node fits")) {
          unfit.insert(name);
        } else if (outcome.starts_with("filter failed")) {
          // The extender is gone or not synced: kube-scheduler backs off before it retries the pod.
          std::this_thread::sleep_for(milliseconds(2));
        }
      }
    });
  }
  auto count_successes = [&] {
    std::lock_guard lock(mu);
    return successes.size();
  };
  ASSERT_TRUE(WaitFor([&] { return count_successes() >= 4; }));
  first->Stop();  // binds in flight finish; the streamers' next calls find nobody listening
  first.reset();
  const size_t before_restart = count_successes();

  config_.port = port;  // the restarted container listens where kube-scheduler calls
  Extender second;
  second.Start(kubeconfig_, config_, /*start_informers=*/false);
  // Deterministically, next to the streamers: before any list every verb refuses and names what it waits for.
  const json probe = pods[1];
  httplib::Client c("127.0.0.1", port);
  const std::string args = json{{"Pod", probe}, {"Nodes", nullptr}, {"NodeNames", {"n1", "n2"}}}.dump();
  auto f = c.Post("/scheduler/filter", args, "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 503);
  EXPECT_NE(json::parse(f->body)["Error"].get<std::string>().find("not synced: waiting for pods, nodes"),
            std::string::npos)
      << f->body;
  auto ready = c.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 503);
  EXPECT_NE(ready->body.find("not synced: waiting for pods, nodes"), std::string::npos) << ready->body;
  // Nodes first: the mirror knows every GPU and none of the allocations. An answer now would place on GPUs that
  // bound pods hold.
  second.StartNodes();
  f = c.Post("/scheduler/filter", args, "application/json");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, 503) << f->body;
  EXPECT_NE(f->body.find("waiting for pods"), std::string::npos) << f->body;
  auto b = c.Post(
      "/scheduler/bind",
      json{{"PodName", "s1"}, {"PodNamespace", "default"}, {"PodUID", probe["metadata"]["uid"]}, {"Node", "n1"}}.dump(),
      "application/json");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 503) << b->body;
  {
    auto lock = second.mirror.ReadLock();
    EXPECT_EQ(second.mirror.state().AllocationCount(), 0U);
  }
  second.StartPods();
  second_synced = true;
  released = pods.size();
  // Every pod ends bound, or refused by the synced extender because nothing fits any more.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return std::all_of(pods.begin(), pods.end(),
                           [&](const json& p) { return resolved(p["metadata"]["name"].get<std::string>()); });
      },
      milliseconds(60000)));
  done = true;
  for (auto& t : threads) {
    t.join();
  }

  std::lock_guard lock(mu);
  EXPECT_GT(successes.size(), before_restart) << "the second extender bound nothing";
  for (const auto& [name, n] : successes) {
    EXPECT_EQ(n, 1) << name << " was bound " << n << " times";
    EXPECT_TRUE(bound_in_api(name)) << name << ": bind said yes but the pod is not bound";
  }
  int bound = 0;
  for (const auto& p : api_->Pods()) {
    bound += p["spec"].value("nodeName", "").empty() ? 0 : 1;
  }
  // A bind cut off by the stop may have landed without its answer arriving: at most one per streamer.
  EXPECT_GE(bound, static_cast<int>(successes.size()));
  EXPECT_LE(bound, static_cast<int>(successes.size()) + 4);
  int64_t milli = 0;
  for (const auto& [uuid, use] : UsageFromAnnotations()) {
    EXPECT_LE(use.first, 1000) << uuid;
    EXPECT_LE(use.second, 81920) << uuid;
    milli += use.first;
  }
  ASSERT_TRUE(WaitFor([&] {
    auto l = second.mirror.ReadLock();
    return second.mirror.state().AllocatedMilli().value() == milli;
  })) << "the second extender's state differs from the annotations";
  auto l = second.mirror.ReadLock();
  EXPECT_TRUE(second.mirror.state().CheckInvariants().ok());
  const std::string metrics = second.metrics.Serialize(second.mirror);
  EXPECT_NE(metrics.find("gpusched_extender_unsynced_refusals_total{verb=\"bind\"}"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("gpusched_extender_unsynced_refusals_total{verb=\"filter\"}"), std::string::npos);
}

// cert-manager (or a Secret volume update) replaces the serving certificate on disk: after the next check the same
// port presents the new one, the verbs answer over it, and a half-written pair (new certificate, old key) is never
// served.
TEST_F(ExtenderIntegrationTest, ARenewedCertificateIsServedOnTheSamePortAfterTheNextCheck) {
  api_->UpsertNode(Node("n1", 1));
  auto renewed = testing::MakeTestPki(dir_ + "/pki-b");  // another CA: B's certificate does not verify against A's
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  const std::string cert = dir_ + "/tls.crt";
  const std::string key = dir_ + "/tls.key";
  auto put = [](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  };
  put(pki_.server_cert_file, cert);
  put(pki_.server_key_file, key);
  config_.tls_cert_file = cert;
  config_.tls_key_file = key;
  config_.tls_reload_interval = milliseconds(20);
  Extender e;
  e.Start(kubeconfig_, config_);
  const int port = e.server->port();
  const std::string body = json{{"Pod", Pod("tls", Share(20))}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}}.dump();
  // A filter over a connection that verified the server against `ca`: its status, or 0 when the handshake failed.
  auto filter_trusting = [&](const std::string& ca) {
    httplib::SSLClient c("127.0.0.1", port);
    c.set_ca_cert_path(ca.c_str());
    c.enable_server_certificate_verification(true);
    c.set_connection_timeout(5, 0);
    c.set_read_timeout(5, 0);
    auto r = c.Post("/scheduler/filter", body, "application/json");
    return r ? r->status : 0;
  };
  EXPECT_EQ(filter_trusting(pki_.ca_file), 200);
  EXPECT_EQ(filter_trusting(renewed->ca_file), 0);

  put(renewed->server_cert_file, cert);  // half a renewal: B's certificate, A's key
  ASSERT_TRUE(WaitFor([&] { return e.server->tls_reload_failures() >= 2; }));
  EXPECT_EQ(e.server->tls_reloads(), 0U);
  EXPECT_EQ(filter_trusting(pki_.ca_file), 200) << "a pair that does not load must leave the old one serving";

  put(renewed->server_key_file, key);
  ASSERT_TRUE(WaitFor([&] { return e.server->tls_reloads() == 1; }));
  EXPECT_EQ(e.server->port(), port);
  EXPECT_EQ(filter_trusting(renewed->ca_file), 200);
  EXPECT_EQ(filter_trusting(pki_.ca_file), 0) << "the old certificate is still presented";
  // The HTTP counters go on across the listeners: 3 filters answered, each a request.
  EXPECT_GE(e.server->stats().requests, 3U);
  httplib::SSLClient m("127.0.0.1", port);
  m.set_ca_cert_path(renewed->ca_file.c_str());
  m.enable_server_certificate_verification(true);
  auto scraped = m.Get("/metrics");
  ASSERT_TRUE(scraped) << httplib::to_string(scraped.error());
  EXPECT_NE(scraped->body.find("gpusched_extender_requests_total{code=\"200\",verb=\"filter\"} 3"), std::string::npos)
      << scraped->body;
}

// A metrics source may carry its credentials in its URL (userinfo, or InfluxDB 1.x's u and p parameters, or a
// token). They must never show: not in /readyz when the source is down, not in the /metrics labels, not in a log
// line.
TEST_F(ExtenderIntegrationTest, CredentialsInAMetricsSourceUrlNeverReachReadyzMetricsOrLogs) {
  api_->UpsertNode(Node("n1", 1));
  // Refuses everyone, as an authenticating proxy in front of Prometheus or InfluxDB does when the secret is wrong.
  httplib::Server refuser;
  auto refuse = [](const httplib::Request&, httplib::Response& res) {
    res.status = 401;
    res.set_content("unauthorized", "text/plain");
  };
  refuser.set_keep_alive_max_count(1);  // one request per connection: stop() need not wait out idle keep-alives
  refuser.Get(".*", refuse);
  refuser.Post(".*", refuse);
  const int refuser_port = refuser.bind_to_any_port("127.0.0.1");
  ASSERT_GT(refuser_port, 0);
  std::thread serving([&] { refuser.listen_after_bind(); });
  const std::string at = "127.0.0.1:" + std::to_string(refuser_port);
  const std::vector<std::string> secrets = {"metrics-user", "hunter2", "tok-123", "influx-reader-7", "pw-456"};

  std::mutex log_mu;
  std::string logs;
  common::SetLogSink([&](common::LogLevel, std::string_view line) {
    std::lock_guard lock(log_mu);
    logs.append(line).append("\n");
  });
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  auto prom = adapters::prometheus::PrometheusSource::Create(
      {.url = "http://metrics-user:hunter2@" + at + "/prom?token=tok-123", .timeout = std::chrono::seconds(5)});
  ASSERT_TRUE(prom.ok()) << prom.status();
  sources.push_back(std::move(prom).value());
  auto influx = adapters::influxdb::InfluxSource::Create(
      {.url = "http://" + at + "/?u=influx-reader-7&p=pw-456", .database = "gpu", .timeout = std::chrono::seconds(5)});
  ASSERT_TRUE(influx.ok()) << influx.status();
  sources.push_back(std::move(influx).value());
  sched::MetricsCache cache(std::move(sources), sched::MetricsCacheOptions{.interval = std::chrono::hours(1)});
  cache.RefreshOnce();  // both fail: 401

  Extender e;
  e.metrics.SetMetricsCache(&cache);
  e.degraded = [&cache] { return cache.Degraded(); };
  e.Start(kubeconfig_, config_);
  auto c = Client(e);
  auto ready = c.Get("/readyz");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  auto scraped = c.Get("/metrics");
  ASSERT_TRUE(scraped);
  e.Stop();  // no thread logs any more: the sink can go back to stderr
  common::SetLogSink([](common::LogLevel, std::string_view line) {
    std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  });
  refuser.stop();
  serving.join();

  // Host, port and path stay, so that an operator can tell which server is meant.
  EXPECT_NE(ready->body.find("degraded: metrics source prometheus http://***@" + at + "/prom?token=***"),
            std::string::npos)
      << ready->body;
  EXPECT_NE(ready->body.find("influxdb http://" + at + "/?u=***&p=***"), std::string::npos) << ready->body;
  EXPECT_NE(ready->body.find("401"), std::string::npos) << ready->body;
  EXPECT_NE(
      scraped->body.find("gpusched_metrics_source_up{source=\"prometheus http://***@" + at + "/prom?token=***\"} 0"),
      std::string::npos)
      << scraped->body;
  EXPECT_NE(logs.find("is down"), std::string::npos) << logs;
  for (const std::string& secret : secrets) {
    EXPECT_EQ(ready->body.find(secret), std::string::npos) << secret << " in /readyz: " << ready->body;
    EXPECT_EQ(scraped->body.find(secret), std::string::npos) << secret << " in /metrics";
    EXPECT_EQ(logs.find(secret), std::string::npos) << secret << " in the log: " << logs;
  }
}

}  // namespace
// healthListen: the kubelet's probes and Prometheus reach /healthz, /readyz and /metrics over plain HTTP while the
// verbs stay behind client certificates; no verb answers there, whatever the method.
TEST_F(ExtenderIntegrationTest, TheProbeListenerServesHealthAndMetricsButNoVerb) {
  api_->UpsertNode(Node("n1", 1));
  config_.tls_cert_file = pki_.server_cert_file;
  config_.tls_key_file = pki_.server_key_file;
  config_.tls_client_ca_file = pki_.ca_file;
  config_.tls_allowed_client_names = {"gpusched"};
  config_.health_host = "127.0.0.1";
  config_.health_port = 0;
  Extender e;
  e.Start(kubeconfig_, config_);
  ASSERT_GT(e.server->health_port(), 0);
  ASSERT_NE(e.server->health_port(), e.server->port());
  httplib::Client probe("127.0.0.1", e.server->health_port());
  probe.set_read_timeout(3, 0);
  for (const char* path : {"/healthz", "/readyz"}) {
    auto r = probe.Get(path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
  }
  auto m = probe.Get("/metrics");
  ASSERT_TRUE(m) << httplib::to_string(m.error());
  EXPECT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("gpusched_extender_"), std::string::npos);
  const std::string body = json{{"Pod", Pod("probe", Share(20))}, {"Nodes", nullptr}, {"NodeNames", {"n1"}}}.dump();
  for (const char* verb : {"filter", "prioritize", "bind", "preempt"}) {
    auto r = probe.Post(std::string("/scheduler/") + verb, body, "application/json");
    ASSERT_TRUE(r) << verb << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 404) << verb << ": " << r->body;
  }
  EXPECT_EQ(e.server->http()->stats().requests, 0U) << "nothing reached the verbs' listener";
  // A busy port is a clear error at start, naming the key.
  config_.health_port = e.server->health_port();
  ext::ExtenderServer clash(*e.service, e.mirror, e.metrics, config_, nullptr);
  const common::Status s = clash.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("healthListen 127.0.0.1:" + std::to_string(config_.health_port)), std::string::npos) << s;
}

}  // namespace gpusched
