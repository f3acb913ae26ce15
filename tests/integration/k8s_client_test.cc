// adapters/k8s against FakeApiServer over mTLS on loopback: config loading, the REST calls, watch streams and
// informers (sync, reconnect, relist with a diff), and the mapping of errors to Status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // setenv, unsetenv

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/k8s/lease_lock.h"
#include "gpusched/sched/leader_elector.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/fake_clock.h"
#include "gpusched/testing/processes.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::adapters::k8s {
namespace {

using common::StatusCode;
using nlohmann::json;
using std::chrono::milliseconds;
using testing::FakeApiServer;
using testing::FakeApiServerOptions;
using ::testing::HasSubstr;
using testing::TestPki;

constexpr milliseconds kDeadline{10000};  // generous: sanitizers and a shared 2-core machine

// Polls `pred` every 5 ms until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, milliseconds timeout = kDeadline) {
  return testing::WaitFor(pred, timeout, milliseconds(5));
}

json Node(const std::string& name) { return {{"metadata", {{"name", name}}}, {"status", {{"capacity", {}}}}}; }

json Pod(const std::string& ns, const std::string& name, const std::string& node = "",
         const std::map<std::string, std::string>& labels = {}) {
  json pod = {{"metadata", {{"name", name}, {"namespace", ns}}},
              {"spec", {{"schedulerName", "gpusched"}, {"containers", json::array()}}},
              {"status", {{"phase", "Pending"}}}};
  if (!node.empty()) {
    pod["spec"]["nodeName"] = node;
  }
  if (!labels.empty()) {
    pod["metadata"]["labels"] = labels;
  }
  return pod;
}

std::string Rv(const json& object) { return object["metadata"]["resourceVersion"].get<std::string>(); }

// Records informer events; thread-safe.
class Recorder {
 public:
  void operator()(const WatchEvent& e) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
  }
  std::vector<WatchEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  // "ADDED ns/name" lines.
  std::vector<std::string> Lines() const {
    std::vector<std::string> out;
    for (const WatchEvent& e : events()) {
      const char* type = e.type == WatchEvent::Type::kAdded      ? "ADDED"
                         : e.type == WatchEvent::Type::kModified ? "MODIFIED"
                                                                 : "DELETED";
      out.push_back(std::string(type) + " " + ObjectKey(e.object));
    }
    return out;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<WatchEvent> events_;
};

// Sets an environment variable for the scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) {
      old_ = old;
    }
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

class K8sClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir("gpusched-k8s-test"));
    ASSERT_FALSE(dir_->empty());
    auto pki = testing::MakeTestPki(*dir_ + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new TestPki(*pki);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      std::filesystem::remove_all(*dir_);
    }
    delete pki_;
    delete dir_;
    pki_ = nullptr;
    dir_ = nullptr;
  }

  void SetUp() override { StartServer({}); }

  void TearDown() override {
    informers_.clear();
    client_.reset();
    server_.reset();
  }

  void StartServer(const std::string& token, bool require_client_cert = true) {
    informers_.clear();
    client_.reset();
    server_.reset();
    server_ = std::make_unique<FakeApiServer>(FakeApiServerOptions{
        .cert_file = pki_->server_cert_file,
        .key_file = pki_->server_key_file,
        .client_ca_file = require_client_cert ? pki_->ca_file : "",
        .token = token,
        .bookmark_interval = milliseconds(100),
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  ClientConfig Config() const {
    return ClientConfig{.server = server_->url(),
                        .ca_pem = pki_->ca_pem,
                        .client_cert_pem = pki_->client_cert_pem,
                        .client_key_pem = pki_->client_key_pem,
                        .namespace_ = "default"};
  }

  ApiClient& Client() {
    if (client_ == nullptr) {
      auto created = ApiClient::Create(Config());
      EXPECT_TRUE(created.ok()) << created.status();
      client_ = std::move(created).value();
    }
    return *client_;
  }

  static std::unique_ptr<ApiClient> MakeClient(ClientConfig config) {
    auto created = ApiClient::Create(std::move(config));
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? std::move(created).value() : nullptr;
  }

  Recorder& NewRecorder() {
    recorders_.push_back(std::make_unique<Recorder>());
    return *recorders_.back();
  }

  Informer& StartInformer(InformerOptions options, Recorder& recorder) {
    return StartInformerWith(std::move(options), [&recorder](const WatchEvent& e) { recorder(e); });
  }
  Informer& StartInformerWith(InformerOptions options, Informer::Handler handler) {
    options.initial_backoff = milliseconds(20);
    options.max_backoff = milliseconds(200);
    options.seed = 1;
    informers_.push_back(std::make_unique<Informer>(Client(), std::move(options), std::move(handler)));
    Informer& informer = *informers_.back();
    informer.Start();
    EXPECT_TRUE(informer.WaitForSync(kDeadline));
    return informer;
  }

  // The informer's cache equals the server's pods: same keys, same resourceVersions.
  ::testing::AssertionResult CacheMatchesServer(const Informer& informer) const {
    std::map<std::string, std::string> want;
    for (const json& pod : server_->Pods()) {
      want[ObjectKey(pod)] = Rv(pod);
    }
    std::map<std::string, std::string> got;
    for (const json& pod : informer.List()) {
      got[ObjectKey(pod)] = Rv(pod);
    }
    if (want == got) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "cache has " << got.size() << " pods, server " << want.size();
  }

  static std::string* dir_;
  static TestPki* pki_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<ApiClient> client_;
  std::vector<std::unique_ptr<Recorder>> recorders_;  // declared first: destroyed after the informers
  std::vector<std::unique_ptr<Informer>> informers_;
};

std::string* K8sClientTest::dir_ = nullptr;
TestPki* K8sClientTest::pki_ = nullptr;

// --- configuration and TLS -------------------------------------------------------------------------------------

TEST_F(K8sClientTest, KubeconfigWithDataFieldsReachesTheServer) {
  const std::string path = testing::WriteKubeconfig(*pki_, server_->url(), *dir_ + "/kubeconfig-data");
  ASSERT_FALSE(path.empty());
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ca_pem, pki_->ca_pem);
  server_->UpsertNode(Node("n1"));
  auto client = MakeClient(*config);
  auto node = client->Get("/api/v1/nodes/n1");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["metadata"]["name"], "n1");
}

TEST_F(K8sClientTest, KubeconfigWithFilePathsRelativeToItsDirectory) {
  const std::string path = pki_->dir + "/kubeconfig-files";
  std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: files\n"
                      << "clusters:\n- name: c\n  cluster:\n    server: " << server_->url()
                      << "\n    certificate-authority: ca.crt\n"
                      << "users:\n- name: u\n  user:\n    client-certificate: client.crt\n"
                      << "    client-key: client.key\n"
                      << "contexts:\n- name: files\n  context:\n    cluster: c\n    user: u\n    namespace: gpu\n";
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->namespace_, "gpu");
  auto client = MakeClient(*config);
  EXPECT_TRUE(client->List("/api/v1/nodes").ok());
}

TEST_F(K8sClientTest, KubeconfigMissingKeysAreClearErrors) {
  const std::string path = *dir_ + "/kubeconfig-bad";
  std::ofstream(path) << "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
                      << "clusters:\n- name: c\n  cluster:\n    certificate-authority: ca.crt\n"
                      << "contexts:\n- name: x\n  context:\n    cluster: c\n";
  auto config = LoadKubeconfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr(path));
  EXPECT_THAT(config.status().message(), HasSubstr("missing key 'server'"));
}

TEST_F(K8sClientTest, InClusterConfigWithTokenAndServiceAccountCa) {
  StartServer("sa-token", /*require_client_cert=*/false);
  const std::string sa = *dir_ + "/sa";
  std::filesystem::create_directories(sa);
  std::ofstream(sa + "/token") << "sa-token\n";
  std::ofstream(sa + "/ca.crt") << pki_->ca_pem;
  std::ofstream(sa + "/namespace") << "gpu-system";
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "127.0.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", std::to_string(server_->port()));
  auto config = InClusterConfig(sa);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, server_->url());
  EXPECT_EQ(config->namespace_, "gpu-system");
  auto client = MakeClient(*config);
  EXPECT_TRUE(client->List("/api/v1/pods").ok());

  // The token file is read again by a new client: a rotated token that the server does not know is a 401.
  std::ofstream(sa + "/token") << "rotated-token\n";
  auto rotated = MakeClient(*InClusterConfig(sa));
  EXPECT_EQ(rotated->List("/api/v1/pods").status().code(), StatusCode::kUnauthenticated);
}

TEST_F(K8sClientTest, HandshakeRefusedWithoutClientCertificate) {
  ClientConfig config = Config();
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  auto no_cert = MakeClient(config)->Get("/api/v1/nodes");
  EXPECT_EQ(no_cert.status().code(), StatusCode::kUnavailable) << no_cert.status();
  EXPECT_THAT(no_cert.status().message(), HasSubstr("GET /api/v1/nodes"));
  EXPECT_EQ(server_->RequestCount("GET", "list-nodes"), 0);

  // A server certificate from another CA is rejected by the client.
  ClientConfig wrong_ca = Config();
  std::ifstream in(pki_->other_ca_file);
  wrong_ca.ca_pem.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  EXPECT_EQ(MakeClient(wrong_ca)->Get("/api/v1/nodes").status().code(), StatusCode::kUnavailable);
  // ...unless verification is off.
  wrong_ca.insecure_skip_verify = true;
  EXPECT_TRUE(MakeClient(wrong_ca)->Get("/api/v1/nodes").ok());
}

// --- list and watch --------------------------------------------------------------------------------------------

TEST_F(K8sClientTest, ListPaginatesAndFilters) {
  // 1203 pods: pages of 500, 500, 203 -> 3 requests.
  for (int i = 0; i < 1203; ++i) {
    server_->UpsertPod(Pod(i % 2 == 0 ? "a" : "b", "p" + std::to_string(i), i % 3 == 0 ? "n1" : "",
                           {{"team", i % 5 == 0 ? "ml" : "web"}}));
  }
  auto all = Client().List("/api/v1/pods");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->items.size(), 1203U);
  EXPECT_EQ(server_->RequestCount("GET", "list-pods"), 3);
  EXPECT_EQ(all->resource_version, std::to_string(server_->resource_version()));
  std::set<std::string> keys;
  for (const json& pod : all->items) {
    keys.insert(ObjectKey(pod));
  }
  EXPECT_EQ(keys.size(), 1203U);  // no duplicates across pages
  // The page size is the client's setting: 1203 pods in pages of 1000 -> 2 more requests.
  ClientConfig big_pages = Config();
  big_pages.list_page_size = 1000;
  auto again = MakeClient(big_pages)->List("/api/v1/pods");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->items.size(), 1203U);
  EXPECT_EQ(server_->RequestCount("GET", "list-pods"), 5);
  big_pages.list_page_size = 0;
  EXPECT_FALSE(ApiClient::Create(big_pages).ok());

  auto count = [this](const std::string& path, const std::string& fields, const std::string& labels) -> size_t {
    auto list = Client().List(path, fields, labels);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? list->items.size() : 0;
  };
  // i % 3 == 0 -> 401 pods on n1; of those in namespace a (i even): i % 6 == 0 -> 201.
  EXPECT_EQ(count("/api/v1/pods", "spec.nodeName=n1", ""), 401U);
  EXPECT_EQ(count("/api/v1/namespaces/a/pods", "spec.nodeName=n1", ""), 201U);
  EXPECT_EQ(count("/api/v1/pods", "spec.nodeName=,spec.schedulerName=gpusched", ""), 802U);
  // i % 5 == 0 -> 241 pods labelled ml.
  EXPECT_EQ(count("/api/v1/pods", "", "team=ml"), 241U);
  EXPECT_EQ(count("/api/v1/pods", "status.phase!=Pending", ""), 0U);
}

TEST_F(K8sClientTest, ListRestartsOnceWhenTheContinueTokenExpires) {
  for (int i = 0; i < 600; ++i) {
    server_->UpsertPod(Pod("default", "p" + std::to_string(i)));
  }
  server_->FailNext("GET", "continue=", 410, "The provided continue parameter is too old");
  auto list = Client().List("/api/v1/pods");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 600U);
  EXPECT_EQ(server_->RequestCount("GET", "list-pods"), 4);  // page 1, page 2 (410), page 1, page 2

  server_->FailNext("GET", "continue=", 410, "The provided continue parameter is too old", 2);
  auto twice = Client().List("/api/v1/pods");
  EXPECT_EQ(twice.status().code(), StatusCode::kFailedPrecondition) << twice.status();
  EXPECT_THAT(twice.status().message(), HasSubstr("too old"));
}

TEST_F(K8sClientTest, WatchDeliversEventsAndBookmarks) {
  server_->UpsertPod(Pod("default", "before"));
  auto list = Client().List("/api/v1/pods");
  ASSERT_TRUE(list.ok());

  std::mutex mu;
  std::vector<std::string> seen;  // "TYPE name"
  std::atomic<bool> stop{false};
  common::Result<WatchEnd> ended = common::Internal("not run");
  std::thread watcher([&] {
    ended = Client().Watch(
        "/api/v1/pods", list->resource_version, 60, "",
        [&](const json& event) {
          std::lock_guard<std::mutex> lock(mu);
          const std::string type = event["type"];
          seen.push_back(type == "BOOKMARK" ? type
                                            : type + " " + event["object"]["metadata"]["name"].get<std::string>());
        },
        stop);
  });
  auto has = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(seen.begin(), seen.end(), line) != seen.end();
  };
  ASSERT_TRUE(WaitFor([&] { return server_->open_watches() == 1; }));
  server_->UpsertPod(Pod("default", "p1"));
  server_->UpsertPod(Pod("default", "p1", "n1"));
  server_->DeletePod("default", "p1");
  EXPECT_TRUE(WaitFor([&] { return has("DELETED p1") && has("BOOKMARK"); }));
  const auto stop_at = std::chrono::steady_clock::now();
  stop = true;
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_at, milliseconds(1000));
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(*ended, WatchEnd::kStopped);
  std::vector<std::string> changes;
  for (const std::string& s : seen) {
    if (s != "BOOKMARK") {
      changes.push_back(s);
    }
  }
  EXPECT_EQ(changes, (std::vector<std::string>{"ADDED p1", "MODIFIED p1", "DELETED p1"}));
}

TEST_F(K8sClientTest, WatchEndsOnTimeoutCloseAndGone) {
  const std::atomic<bool> stop{false};
  auto ignore = [](const json&) {};
  const std::string rv = std::to_string(server_->resource_version());
  // timeoutSeconds=1: the server closes the stream.
  auto closed = Client().Watch("/api/v1/nodes", rv, 1, "", ignore, stop);
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(*closed, WatchEnd::kClosed);

  // An rv from before the compaction point: an ERROR event with code 410.
  server_->UpsertNode(Node("n1"));
  server_->UpsertNode(Node("n2"));
  server_->Compact();
  auto gone = Client().Watch("/api/v1/nodes", rv, 60, "", ignore, stop);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(*gone, WatchEnd::kGone);

  // 410 as the HTTP status.
  server_->FailNext("GET", "watch-nodes", 410, "too old resource version");
  auto http_gone = Client().Watch("/api/v1/nodes", rv, 60, "", ignore, stop);
  ASSERT_TRUE(http_gone.ok()) << http_gone.status();
  EXPECT_EQ(*http_gone, WatchEnd::kGone);

  // Other HTTP errors are errors.
  server_->FailNext("GET", "watch-nodes", 403, "nodes is forbidden");
  auto forbidden = Client().Watch("/api/v1/nodes", rv, 60, "", ignore, stop);
  EXPECT_EQ(forbidden.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(forbidden.status().message(), HasSubstr("nodes is forbidden"));
}

// --- informers ----------------------------------------------------------------------------------------------------

TEST_F(K8sClientTest, InformerSyncsAndFollowsChanges) {
  server_->UpsertNode(Node("n1"));
  server_->UpsertNode(Node("n2"));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/nodes"}, recorder);
  EXPECT_TRUE(informer.HasSynced());
  EXPECT_EQ(recorder.Lines(), (std::vector<std::string>{"ADDED n1", "ADDED n2"}));

  server_->UpsertNode(Node("n3"));
  json n1 = *server_->GetNode("n1");
  n1["metadata"]["labels"] = {{"gpu", "a100"}};
  server_->UpsertNode(n1);
  server_->DeleteNode("n2");
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 5; })) << recorder.size();
  EXPECT_EQ(recorder.Lines(),
            (std::vector<std::string>{"ADDED n1", "ADDED n2", "ADDED n3", "MODIFIED n1", "DELETED n2"}));
  EXPECT_EQ(informer.Get("n1")->at("metadata").at("labels").at("gpu"), "a100");
  EXPECT_FALSE(informer.Get("n2").has_value());
  EXPECT_EQ(informer.List().size(), 2U);
  // Bookmarks move the rv to the server's.
  EXPECT_TRUE(WaitFor([&] { return informer.resource_version() == std::to_string(server_->resource_version()); }));
  EXPECT_EQ(informer.relists(), 0U);
}

// A handler that throws on one object (a shape no check foresaw) neither ends the process nor silences the
// informer: the failure is counted, the informer lists again, and later changes still arrive.
TEST_F(K8sClientTest, AnExceptionInTheHandlerRestartsTheWatchInsteadOfEndingTheProcess) {
  server_->UpsertNode(Node("n1"));
  Recorder& recorder = NewRecorder();
  std::atomic<int> thrown{0};
  Informer& informer = StartInformerWith({.path = "/api/v1/nodes"}, [&](const WatchEvent& e) {
    if (ObjectKey(e.object) == "bad" && thrown.fetch_add(1) == 0) {
      throw std::runtime_error("type must be string, but is number");  // what nlohmann::json throws
    }
    recorder(e);
  });
  server_->UpsertNode(Node("bad"));
  ASSERT_TRUE(WaitFor([&] { return informer.handler_failures() == 1U; }));
  server_->UpsertNode(Node("n2"));
  ASSERT_TRUE(WaitFor([&] { return informer.Get("n2").has_value() && recorder.size() >= 3; })) << recorder.size();
  const std::vector<std::string> lines = recorder.Lines();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "ADDED bad"), lines.end()) << "the relist delivers it again";
  EXPECT_NE(std::find(lines.begin(), lines.end(), "ADDED n2"), lines.end());
  EXPECT_GE(informer.relists(), 1U);
}

TEST_F(K8sClientTest, InformerWithSelectorsSeesPodsEnterAndLeave) {
  server_->UpsertPod(Pod("default", "bound", "n1"));
  server_->UpsertPod(Pod("default", "pending"));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods", .field_selector = "spec.nodeName=n1"}, recorder);
  EXPECT_EQ(recorder.Lines(), (std::vector<std::string>{"ADDED default/bound"}));
  server_->UpsertPod(Pod("default", "pending", "n1"));  // starts matching -> ADDED
  server_->UpsertPod(Pod("default", "bound", "n2"));    // stops matching -> DELETED
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 3; }));
  EXPECT_EQ(recorder.Lines(),
            (std::vector<std::string>{"ADDED default/bound", "ADDED default/pending", "DELETED default/bound"}));
  EXPECT_TRUE(informer.Get("default/pending").has_value());
  EXPECT_FALSE(informer.Get("default/bound").has_value());
}

TEST_F(K8sClientTest, InformerReconnectsAfterClosedWatchesWithoutLosingOrDuplicatingEvents) {
  for (int i = 0; i < 20; ++i) {
    server_->UpsertPod(Pod("default", "p" + std::to_string(i)));
  }
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods"}, recorder);
  ASSERT_EQ(recorder.size(), 20U);
  // Change pods while the streams are being closed again and again: every change arrives exactly once.
  ASSERT_TRUE(WaitFor([&] { return server_->open_watches() == 1; }));
  // Counted by started streams, not by requests: a request counted but not yet registered would be missed by
  // CloseWatches and stay open.
  for (int round = 0; round < 5; ++round) {
    const int watches = server_->watches_started();
    server_->CloseWatches();
    for (int i = 0; i < 4; ++i) {
      server_->UpsertPod(Pod("default", "p" + std::to_string(round * 4 + i), "n" + std::to_string(round)));
    }
    ASSERT_TRUE(WaitFor([&] { return server_->watches_started() > watches; }));
  }
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 40; })) << recorder.size();
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesServer(informer); }));
  std::map<std::string, int> modified;
  for (const WatchEvent& e : recorder.events()) {
    if (e.type == WatchEvent::Type::kModified) {
      ++modified[ObjectKey(e.object)];
    }
  }
  EXPECT_EQ(modified.size(), 20U);
  for (const auto& [key, count] : modified) {
    EXPECT_EQ(count, 1) << key;
  }
  EXPECT_GE(informer.reconnects(), 1U);
  EXPECT_EQ(informer.relists(), 0U);
}

TEST_F(K8sClientTest, InformerRelistsAfterCompactionAndDeliversTheDiff) {
  server_->UpsertPod(Pod("default", "stays"));
  server_->UpsertPod(Pod("default", "goes"));
  server_->UpsertPod(Pod("default", "changes"));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods"}, recorder);
  ASSERT_EQ(recorder.size(), 3U);

  // Disconnect the informer: its watches fail until ClearFailures.
  server_->FailNext("GET", "watch-pods", 503, "apiserver is restarting", /*count=*/-1);
  const int watches = server_->RequestCount("GET", "watch-pods");
  server_->CloseWatches();
  ASSERT_TRUE(WaitFor([&] { return server_->RequestCount("GET", "watch-pods") > watches; }));
  // Meanwhile: one pod deleted, one changed, one added; then history is compacted.
  server_->DeletePod("default", "goes");
  server_->UpsertPod(Pod("default", "changes", "n1"));
  server_->UpsertPod(Pod("default", "new"));
  server_->Compact();
  server_->ClearFailures();

  ASSERT_TRUE(WaitFor([&] { return informer.relists() == 1 && recorder.size() == 6; })) << recorder.size();
  const std::vector<std::string> lines = recorder.Lines();
  EXPECT_EQ(std::vector<std::string>(lines.begin() + 3, lines.end()),
            (std::vector<std::string>{"DELETED default/goes", "MODIFIED default/changes", "ADDED default/new"}));
  EXPECT_TRUE(CacheMatchesServer(informer));
  EXPECT_THAT(informer.last_error(), HasSubstr("apiserver is restarting"));
  // And it keeps following after the relist.
  server_->DeletePod("default", "stays");
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 7; }));
  EXPECT_EQ(recorder.Lines().back(), "DELETED default/stays");
}

// A pod deleted and re-created under the same name while the informer was away is another object: the handler
// gets the old one's DELETED (so whatever it held is released) before the new one's ADDED, never one MODIFIED.
TEST_F(K8sClientTest, InformerMatchesObjectsByUidNotByName) {
  const std::string old_uid = server_->UpsertPod(Pod("default", "web-0", "n1"))["metadata"]["uid"];
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods"}, recorder);
  ASSERT_EQ(recorder.size(), 1U);

  server_->FailNext("GET", "watch-pods", 503, "apiserver is restarting", /*count=*/-1);
  const int watches = server_->RequestCount("GET", "watch-pods");
  server_->CloseWatches();
  ASSERT_TRUE(WaitFor([&] { return server_->RequestCount("GET", "watch-pods") > watches; }));
  server_->DeletePod("default", "web-0");
  const std::string new_uid = server_->UpsertPod(Pod("default", "web-0", "n2"))["metadata"]["uid"];
  ASSERT_NE(new_uid, old_uid);
  server_->Compact();
  server_->ClearFailures();

  ASSERT_TRUE(WaitFor([&] { return informer.relists() == 1 && recorder.size() == 3; })) << recorder.size();
  const std::vector<WatchEvent> events = recorder.events();
  EXPECT_EQ(events[1].type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(events[1].object["metadata"]["uid"], old_uid);
  EXPECT_EQ(events[2].type, WatchEvent::Type::kAdded);
  EXPECT_EQ(events[2].object["metadata"]["uid"], new_uid);
  EXPECT_TRUE(CacheMatchesServer(informer));

  // The same on a live watch: an event for a cached name with another uid (its DELETED never came; the fake
  // server stores the uid it is given, so the stream carries a MODIFIED with a new uid).
  json again = Pod("default", "web-0", "n3");
  again["metadata"]["uid"] = "recreated-uid";
  server_->UpsertPod(again);
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 5; })) << recorder.size();
  const std::vector<WatchEvent> live = recorder.events();
  EXPECT_EQ(live[3].type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(live[3].object["metadata"]["uid"], new_uid);
  EXPECT_EQ(live[4].type, WatchEvent::Type::kAdded);
  EXPECT_EQ(live[4].object["metadata"]["uid"], "recreated-uid");
  EXPECT_EQ(informer.Get("default/web-0")->at("metadata").at("uid"), "recreated-uid");
}

// The caches keep what scheduling reads and drop what makes Kubernetes objects big (managedFields alone is often
// half a pod): listed and watched objects alike.
TEST_F(K8sClientTest, InformerCachesOnlyWhatSchedulingReads) {
  auto fat = [](json pod) {
    pod["metadata"]["managedFields"] =
        json::array({{{"manager", "kubectl"}, {"fieldsV1", {{"f:spec", json::object()}}}}});
    pod["metadata"]["annotations"] = {{"kubectl.kubernetes.io/last-applied-configuration", std::string(4096, 'x')},
                                      {"gpusched.io/allocation", R"({"node":"n1"})"}};
    pod["spec"]["priority"] = 7;
    pod["spec"]["volumes"] = json::array({{{"name", "data"}}});
    pod["spec"]["containers"] = json::array({{{"name", "main"},
                                              {"env", json::array({{{"name", "A"}, {"value", "1"}}})},
                                              {"command", json::array({"run"})},
                                              {"resources", {{"limits", {{"gpusched.io/gpu", "1"}}}}}}});
    pod["status"]["containerStatuses"] = json::array({{{"name", "main"}}});
    return pod;
  };
  server_->UpsertPod(fat(Pod("default", "listed", "n1")));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods", .prune = &SchedulingPrune()}, recorder);
  server_->UpsertPod(fat(Pod("default", "watched", "n1")));
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 2; }));
  for (const WatchEvent& e : recorder.events()) {
    const json& pod = e.object;
    const std::string name = pod["metadata"]["name"];
    EXPECT_FALSE(pod["metadata"].contains("managedFields")) << name;
    EXPECT_EQ(pod["metadata"]["annotations"].size(), 1U) << name;
    EXPECT_EQ(pod["metadata"]["annotations"]["gpusched.io/allocation"], R"({"node":"n1"})") << name;
    EXPECT_FALSE(pod["spec"].contains("volumes")) << name;
    EXPECT_FALSE(pod["spec"]["containers"][0].contains("env")) << name;
    EXPECT_FALSE(pod["spec"]["containers"][0].contains("command")) << name;
    EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["gpusched.io/gpu"], "1") << name;
    EXPECT_EQ(pod["spec"]["priority"], 7) << name;
    EXPECT_EQ(pod["spec"]["nodeName"], "n1") << name;
    EXPECT_EQ(pod["status"]["phase"], "Pending") << name;
    EXPECT_FALSE(pod["status"].contains("containerStatuses")) << name;
    EXPECT_FALSE(pod["metadata"]["uid"].get<std::string>().empty()) << name;
    EXPECT_FALSE(pod["metadata"]["resourceVersion"].get<std::string>().empty()) << name;
    EXPECT_LT(pod.dump().size(), 700U) << pod.dump();
  }
  EXPECT_FALSE(informer.Get("default/watched")->at("metadata").contains("managedFields"));
  EXPECT_TRUE(CacheMatchesServer(informer));  // same keys and resourceVersions as the server
}

// metadata.managedFields is dropped while the response or the watch event is parsed, whatever the prune rule; a
// label or an annotation of that name is not.
TEST_F(K8sClientTest, ManagedFieldsAreDroppedWhileParsingButNotLabelsOfThatName) {
  auto managed = [](json pod) {
    pod["metadata"]["managedFields"] = json::array({{{"manager", "kubectl"}}});
    pod["metadata"]["labels"]["managedFields"] = "label";
    pod["metadata"]["annotations"]["managedFields"] = "annotation";
    return pod;
  };
  server_->UpsertPod(managed(Pod("default", "listed", "n1")));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods"}, recorder);
  server_->UpsertPod(managed(Pod("default", "watched", "n1")));
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 2; }));
  for (const WatchEvent& e : recorder.events()) {
    const json& metadata = e.object["metadata"];
    EXPECT_FALSE(metadata.contains("managedFields")) << metadata.dump();
    EXPECT_EQ(metadata["labels"]["managedFields"], "label") << metadata.dump();
    EXPECT_EQ(metadata["annotations"]["managedFields"], "annotation") << metadata.dump();
  }
  const json got = *Client().Get("/api/v1/namespaces/default/pods/watched");
  EXPECT_FALSE(got["metadata"].contains("managedFields"));
  EXPECT_EQ(got["metadata"]["labels"]["managedFields"], "label");
  (void)informer;
}

// cache_identity_only: the handler gets whole objects, the cache keeps identities, and a relist still finds what
// was deleted and re-created meanwhile (the diff needs nothing else).
TEST_F(K8sClientTest, InformerCanCacheIdentitiesOnly) {
  server_->UpsertPod(Pod("default", "stays", "n1"));
  server_->UpsertPod(Pod("default", "goes", "n1"));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods", .cache_identity_only = true}, recorder);
  ASSERT_EQ(recorder.size(), 2U);
  EXPECT_EQ(recorder.events()[0].object["spec"]["nodeName"], "n1") << "the handler sees the whole pod";
  const json cached = *informer.Get("default/stays");
  EXPECT_EQ(cached["metadata"].size(), 4U) << cached.dump();
  EXPECT_FALSE(cached.contains("spec"));
  EXPECT_TRUE(CacheMatchesServer(informer));

  server_->FailNext("GET", "watch-pods", 503, "apiserver is restarting", /*count=*/-1);
  const int watches = server_->RequestCount("GET", "watch-pods");
  server_->CloseWatches();
  ASSERT_TRUE(WaitFor([&] { return server_->RequestCount("GET", "watch-pods") > watches; }));
  server_->DeletePod("default", "goes");
  server_->UpsertPod(Pod("default", "stays", "n2"));
  server_->Compact();
  server_->ClearFailures();
  ASSERT_TRUE(WaitFor([&] { return informer.relists() == 1 && recorder.size() == 4; })) << recorder.size();
  const std::vector<WatchEvent> events = recorder.events();
  EXPECT_EQ(events[2].type, WatchEvent::Type::kDeleted);
  EXPECT_EQ(events[2].object["metadata"]["name"], "goes");
  EXPECT_FALSE(events[2].object["metadata"]["uid"].get<std::string>().empty()) << "enough to release what it held";
  EXPECT_EQ(events[3].type, WatchEvent::Type::kModified);
  EXPECT_EQ(events[3].object["spec"]["nodeName"], "n2");
  EXPECT_TRUE(CacheMatchesServer(informer));
}

// A watch that goes silent (a dead load balancer, a hung apiserver: no events, no bookmarks, no end) is cut off a
// grace period after its timeout and watched again; while nothing is heard the informer says so (readiness), and
// nothing that happened meanwhile is lost.
TEST_F(K8sClientTest, InformerCutsOffAStalledWatchAndReportsTheSilence) {
  server_->UpsertPod(Pod("default", "before"));
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer(
      {.path = "/api/v1/pods", .watch_timeout_seconds = 1, .watch_grace_seconds = 1, .stale_after = milliseconds(2500)},
      recorder);
  EXPECT_EQ(informer.Staleness(), "");
  server_->StallWatches(true);
  server_->UpsertPod(Pod("default", "during"));  // written, but no watch delivers it while stalled
  ASSERT_TRUE(WaitFor([&] { return informer.stalls() >= 1; })) << informer.last_error();
  ASSERT_TRUE(WaitFor([&] { return !informer.Staleness().empty(); }));
  EXPECT_THAT(informer.Staleness(), HasSubstr("watch of /api/v1/pods silent for"));
  EXPECT_EQ(recorder.size(), 1U);
  server_->StallWatches(false);
  ASSERT_TRUE(WaitFor([&] { return recorder.size() == 2; })) << recorder.size();
  EXPECT_EQ(recorder.Lines().back(), "ADDED default/during");
  EXPECT_TRUE(WaitFor([&] { return informer.Staleness().empty(); }));
  EXPECT_TRUE(CacheMatchesServer(informer));
  EXPECT_EQ(informer.relists(), 0U);
}

TEST_F(K8sClientTest, InformerStopsPromptly) {
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/nodes"}, recorder);
  ASSERT_TRUE(WaitFor([&] { return server_->open_watches() == 1; }));
  const auto start = std::chrono::steady_clock::now();
  informer.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  informer.Stop();  // idempotent
}

// --- writes ---------------------------------------------------------------------------------------------------------

TEST_F(K8sClientTest, BindPod) {
  const json pod = server_->UpsertPod(Pod("default", "p"));
  const std::string uid = pod["metadata"]["uid"];
  ASSERT_TRUE(Client().BindPod("default", "p", uid, "n1", {{"gpusched.io/allocation", R"({"node":"n1"})"}}).ok());
  EXPECT_EQ(server_->GetPod("default", "p")->at("spec").at("nodeName"), "n1");
  // The Binding's annotations reach the pod in the same write.
  EXPECT_EQ(server_->GetPod("default", "p")->at("metadata").at("annotations").at("gpusched.io/allocation"),
            R"({"node":"n1"})");

  const common::Status again = Client().BindPod("default", "p", uid, "n2");
  EXPECT_EQ(again.code(), StatusCode::kAborted);
  EXPECT_THAT(again.message(), HasSubstr("POST /api/v1/namespaces/default/pods/p/binding: HTTP 409"));
  EXPECT_THAT(again.message(), HasSubstr("already assigned to node \"n1\""));

  server_->UpsertPod(Pod("default", "q"));
  EXPECT_EQ(Client().BindPod("default", "q", "some-other-uid", "n1").code(), StatusCode::kAborted);
  EXPECT_EQ(Client().BindPod("default", "missing", "", "n1").code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->RequestCount("POST", "binding"), 4);
}

// The leadership fence: with no budget a write is not sent at all (reads and the Lease still are, so the replica
// can renew); with a little budget the write's timeout is that budget, not the client's request timeout.
TEST_F(K8sClientTest, WritesAreFencedByLeadership) {
  server_->UpsertPod(Pod("default", "p"));
  auto client = MakeClient(Config());
  ASSERT_GT(client->config().request_timeout, milliseconds(2000));
  std::atomic<int64_t> budget{0};
  client->SetWriteFence([&budget] { return budget.load(); });
  const common::Status fenced = client->BindPod("default", "p", "", "n1");
  EXPECT_EQ(fenced.code(), StatusCode::kFailedPrecondition) << fenced;
  EXPECT_THAT(fenced.message(), HasSubstr("POST /api/v1/namespaces/default/pods/p/binding not sent"));
  EXPECT_EQ(server_->RequestCount("POST", "binding"), 0);
  EXPECT_FALSE(server_->GetPod("default", "p")->at("spec").contains("nodeName"));
  EXPECT_EQ(client->PatchPodAnnotations("default", "p", {{"a", "b"}}).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(client->Get("/api/v1/namespaces/default/pods/p").ok());
  const json lease = {{"metadata", {{"name", "fenced"}}}, {"spec", {{"holderIdentity", "a"}}}};
  EXPECT_TRUE(client->CreateLease("kube-system", lease).ok()) << "a lease call is never fenced";

  // 300 ms of budget against a server that takes 2 s: the Binding gives up at the budget (the client's own timeout
  // would have waited for the answer).
  budget = 300;
  server_->SetDelay(milliseconds(2000));
  const common::Status late = client->BindPod("default", "p", "", "n1");
  server_->SetDelay(milliseconds(0));
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late;

  budget = 60000;
  server_->UpsertPod(Pod("default", "q"));
  EXPECT_TRUE(client->BindPod("default", "q", "", "n1").ok());
  client->SetWriteFence(nullptr);
  server_->UpsertPod(Pod("default", "r"));
  budget = 0;
  EXPECT_TRUE(client->BindPod("default", "r", "", "n1").ok()) << "no fence, no refusal";
}

TEST_F(K8sClientTest, PatchAnnotations) {
  const json pod = server_->UpsertPod(Pod("default", "p"));
  ASSERT_TRUE(Client().PatchPodAnnotations("default", "p", {{"gpu/idx", "0,1"}, {"gpu/mem", "4096"}}).ok());
  json stored = *server_->GetPod("default", "p");
  EXPECT_EQ(stored["metadata"]["annotations"], (json{{"gpu/idx", "0,1"}, {"gpu/mem", "4096"}}));
  EXPECT_EQ(stored["metadata"]["uid"], pod["metadata"]["uid"]);

  // null deletes; the current rv as precondition passes.
  ASSERT_TRUE(Client().PatchPodAnnotations("default", "p", {{"gpu/idx", std::nullopt}}, Rv(stored)).ok());
  stored = *server_->GetPod("default", "p");
  EXPECT_EQ(stored["metadata"]["annotations"], (json{{"gpu/mem", "4096"}}));

  // A stale rv is a conflict.
  const common::Status stale = Client().PatchPodAnnotations("default", "p", {{"x", "y"}}, Rv(pod));
  EXPECT_EQ(stale.code(), StatusCode::kAborted);
  EXPECT_THAT(stale.message(), HasSubstr("the object has been modified"));
  EXPECT_FALSE(server_->GetPod("default", "p")->at("metadata").at("annotations").contains("x"));

  server_->UpsertNode(Node("n1"));
  ASSERT_TRUE(Client().PatchNodeAnnotations("n1", {{"gpusched/lock", "pod-a"}}).ok());
  EXPECT_EQ(server_->GetNode("n1")->at("metadata").at("annotations").at("gpusched/lock"), "pod-a");
  EXPECT_EQ(Client().PatchNodeAnnotations("n2", {{"a", "b"}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->RequestCount("PATCH", "patch-pod"), 3);
  EXPECT_EQ(server_->RequestCount("PATCH", "patch-node"), 2);

  // The generic call: a strategic-merge patch of the status subresource.
  auto patched = Client().Request("PATCH", "/api/v1/namespaces/default/pods/p/status",
                                  R"({"status":{"conditions":[{"type":"PodScheduled","status":"False"}]}})",
                                  "application/strategic-merge-patch+json");
  ASSERT_TRUE(patched.ok()) << patched.status();
  EXPECT_EQ((*patched)["status"]["conditions"][0]["type"], "PodScheduled");
}

ports::PodEvent Failed(const std::string& pod, const std::string& message) {
  return ports::PodEvent{.namespace_ = "ml",
                         .name = pod,
                         .uid = "uid-" + pod,
                         .type = "Warning",
                         .reason = "FailedScheduling",
                         .message = message};
}

// The fake API server admits pods as kube-apiserver's Priority admission plugin does: spec.priority from the named
// class (0 without one, what label-based priorities must be read past), and a spec.priority that disagrees refused
// with 403, storing nothing.
TEST_F(K8sClientTest, PodCreatesGetThePriorityAdmissionDefaults) {
  auto created = Client().Request("POST", "/api/v1/namespaces/default/pods", Pod("default", "plain").dump());
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["spec"]["priority"], 0);
  json critical = Pod("default", "critical");
  critical["spec"]["priorityClassName"] = "system-node-critical";
  auto made = Client().Request("POST", "/api/v1/namespaces/default/pods", critical.dump());
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)["spec"]["priority"], 2000001000);
  json forged = Pod("default", "forged");
  forged["spec"]["priority"] = 1000000;
  auto refused = Client().Request("POST", "/api/v1/namespaces/default/pods", forged.dump());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("must not be provided in pod spec"));
  json unknown = Pod("default", "unknown");
  unknown["spec"]["priorityClassName"] = "nonesuch";
  auto missing = Client().Request("POST", "/api/v1/namespaces/default/pods", unknown.dump());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no PriorityClass with name nonesuch"));
  EXPECT_FALSE(server_->GetPod("default", "forged").has_value());
  EXPECT_FALSE(server_->GetPod("default", "unknown").has_value());
}

TEST_F(K8sClientTest, EventWriterAggregatesRepeatsIntoTheFirstEventsCount) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{}, &clock);
  writer.Record(Failed("p", "0/3 nodes are available"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 1; }));
  // The first repeat is patched at once.
  writer.Record(Failed("p", "0/3 nodes are available"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().patched == 1; }));
  // Within the patch interval: counted, not written.
  writer.Record(Failed("p", "0/3 nodes are available"));
  writer.Record(Failed("p", "0/3 nodes are available"));
  EXPECT_EQ(writer.stats().patched, 1U);
  // Past it, the next repeat writes the whole count.
  clock.AdvanceMs(10000);
  writer.Record(Failed("p", "0/3 nodes are available"));
  // Another message for the same pod is an Event of its own.
  writer.Record(Failed("p", "0/4 nodes are available"));
  writer.Stop();
  const EventWriter::Stats st = writer.stats();
  EXPECT_EQ(st.written, 2U);
  EXPECT_EQ(st.aggregated, 4U);
  EXPECT_GE(st.patched, 2U);  // a third when the writer's own look at the due counts came first
  EXPECT_LE(st.patched, 3U);
  EXPECT_EQ(st.failed, 0U);
  const std::vector<json> events = server_->Events();
  ASSERT_EQ(events.size(), 2U);
  EXPECT_EQ(events[0]["message"], "0/3 nodes are available");
  EXPECT_EQ(events[0]["count"], 5);
  EXPECT_EQ(events[0]["source"]["component"], "gpusched-test");
  EXPECT_EQ(events[1]["message"], "0/4 nodes are available");
  EXPECT_EQ(events[1]["count"], 1);
  EXPECT_THAT(writer.RenderMetrics("gpusched_x_events_total"),
              HasSubstr("gpusched_x_events_total{result=\"aggregated\"} 4\n"));
}

// Repeats inside the patch interval are not lost: the writer writes their count once the interval has passed,
// without another repeat to carry it, and whatever is left at Stop.
TEST_F(K8sClientTest, EventWriterWritesHeldBackCountsWhenDueAndAtStop) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{}, &clock);
  auto count_of = [&](const std::string& message) {
    for (const json& e : server_->Events()) {
      if (e["message"] == message) {
        return e["count"].get<int64_t>();
      }
    }
    return int64_t{0};
  };
  writer.Record(Failed("p", "a"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 1; }));
  writer.Record(Failed("p", "a"));  // patched at once: 2
  ASSERT_TRUE(WaitFor([&] { return count_of("a") == 2; }));
  writer.Record(Failed("p", "a"));
  writer.Record(Failed("p", "a"));  // held back: the interval has not passed
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_EQ(count_of("a"), 2);
  clock.AdvanceMs(10000);  // now it is due: written with no further repeat
  EXPECT_TRUE(WaitFor([&] { return count_of("a") == 4; }));

  writer.Record(Failed("q", "b"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 2; }));
  writer.Record(Failed("q", "b"));
  ASSERT_TRUE(WaitFor([&] { return count_of("b") == 2; }));
  writer.Record(Failed("q", "b"));  // held back, then Stop writes it
  writer.Stop();
  EXPECT_EQ(count_of("b"), 3);
  EXPECT_EQ(writer.stats().failed, 0U);
}

// A count written late carries the time of the repeat it counts, not the time it was written: a pod's newest reason
// stays its newest Event in `kubectl describe` (which orders by lastTimestamp), whatever a held-back count does.
TEST_F(K8sClientTest, EventWriterAHeldBackCountNeverDatesAnOldReasonAfterANewerOne) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{}, &clock);
  auto event_of = [&](const std::string& message) {
    for (const json& e : server_->Events()) {
      if (e["message"] == message) {
        return e;
      }
    }
    return json();
  };
  writer.Record(Failed("p", "old reason"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 1; }));
  writer.Record(Failed("p", "old reason"));  // patched at once: 2
  ASSERT_TRUE(WaitFor([&] { return event_of("old reason").value("count", 0) == 2; }));
  writer.Record(Failed("p", "old reason"));         // held back: the interval has not passed
  std::this_thread::sleep_for(milliseconds(1100));  // timestamps have whole seconds
  writer.Record(Failed("p", "new reason"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 2; }));
  clock.AdvanceMs(10000);  // the held-back count is due now, after the newer Event
  ASSERT_TRUE(WaitFor([&] { return event_of("old reason").value("count", 0) == 3; }));
  const std::string old_last = event_of("old reason")["lastTimestamp"];
  const std::string new_last = event_of("new reason")["lastTimestamp"];
  EXPECT_LT(old_last, new_last) << "RFC 3339 UTC strings order as times";
  writer.Stop();
}

TEST_F(K8sClientTest, EventWriterRepeatsAfterTheWindowAreNewEvents) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{.repeat_window = std::chrono::minutes(10)}, &clock);
  writer.Record(Failed("p", "same"));
  ASSERT_TRUE(WaitFor([&] { return writer.stats().written == 1; }));
  clock.AdvanceMs(10 * 60 * 1000);
  writer.Record(Failed("p", "same"));
  writer.Stop();
  EXPECT_EQ(writer.stats().written, 2U);
  EXPECT_EQ(writer.stats().aggregated, 0U);
  EXPECT_EQ(server_->Events().size(), 2U);
}

TEST_F(K8sClientTest, EventWriterRateLimitsNewEventsPerPod) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{.burst = 2, .refill = std::chrono::minutes(1)},
                     &clock);
  for (int i = 0; i < 5; ++i) {
    writer.Record(Failed("noisy", "message " + std::to_string(i)));
  }
  writer.Record(Failed("quiet", "message"));  // another pod has its own bucket
  clock.AdvanceMs(60 * 1000);                 // one token back
  writer.Record(Failed("noisy", "message 5"));
  writer.Record(Failed("noisy", "message 6"));
  writer.Stop();
  const EventWriter::Stats st = writer.stats();
  EXPECT_EQ(st.written, 4U);  // noisy 0, 1, 5 and quiet
  EXPECT_EQ(st.rate_limited, 4U);
  std::vector<std::string> messages;
  for (const json& e : server_->Events()) {
    messages.push_back(e["involvedObject"]["name"].get<std::string>() + ": " + e["message"].get<std::string>());
  }
  EXPECT_EQ(messages,
            (std::vector<std::string>{"noisy: message 0", "noisy: message 1", "quiet: message", "noisy: message 5"}));
}

TEST_F(K8sClientTest, EventWriterDropsPastItsQueueAndAfterStop) {
  testing::FakeClock clock;
  EventWriter writer(Client(), "gpusched-test", EventWriterOptions{.max_queued = 1}, &clock);
  for (int i = 0; i < 200; ++i) {
    writer.Record(Failed("p" + std::to_string(i), "m"));
  }
  writer.Stop();
  writer.Record(Failed("late", "m"));
  const EventWriter::Stats st = writer.stats();
  EXPECT_GT(st.dropped, 0U);
  EXPECT_EQ(st.written + st.dropped, 201U);
  EXPECT_EQ(server_->Events().size(), st.written);
}

TEST_F(K8sClientTest, CreateEvent) {
  ASSERT_TRUE(Client()
                  .CreateEvent({.namespace_ = "ml",
                                .pod_name = "train-0",
                                .pod_uid = "uid-1",
                                .reason = "FailedScheduling",
                                .message = "0/3 nodes are available",
                                .type = "Warning",
                                .component = "gpusched"})
                  .ok());
  ASSERT_TRUE(Client().CreateEvent({.pod_name = "p", .reason = "Scheduled", .component = "gpusched"}).ok());
  const std::vector<json> events = server_->Events();
  ASSERT_EQ(events.size(), 2U);
  const json& e = events[0];
  EXPECT_EQ(e["metadata"]["namespace"], "ml");
  EXPECT_THAT(e["metadata"]["name"].get<std::string>(), ::testing::StartsWith("train-0."));
  EXPECT_EQ(e["involvedObject"],
            (json{{"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", "ml"}, {"name", "train-0"}, {"uid", "uid-1"}}));
  EXPECT_EQ(e["reason"], "FailedScheduling");
  EXPECT_EQ(e["type"], "Warning");
  EXPECT_EQ(e["source"]["component"], "gpusched");
  EXPECT_THAT(e["firstTimestamp"].get<std::string>(), ::testing::MatchesRegex("....-..-..T..:..:..Z"));
  EXPECT_EQ(events[1]["metadata"]["namespace"], "default");  // the config's namespace
  EXPECT_EQ(events[1]["type"], "Normal");
  auto listed = Client().List("/api/v1/namespaces/ml/events");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->items.size(), 1U);
}

TEST_F(K8sClientTest, Leases) {
  auto missing = Client().GetLease("kube-system", "gpusched");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  const json lease = {{"metadata", {{"name", "gpusched"}}},
                      {"spec", {{"holderIdentity", "a"}, {"leaseDurationSeconds", 15}}}};
  auto created = Client().CreateLease("kube-system", lease);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["metadata"]["namespace"], "kube-system");
  auto again = Client().CreateLease("kube-system", lease);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status();

  json mine = *Client().GetLease("kube-system", "gpusched");
  mine["spec"]["holderIdentity"] = "b";
  auto updated = Client().UpdateLease("kube-system", mine);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(server_->GetLease("kube-system", "gpusched")->at("spec").at("holderIdentity"), "b");

  // Another replica still holding the old rv loses.
  mine["spec"]["holderIdentity"] = "c";
  auto conflict = Client().UpdateLease("kube-system", mine);
  EXPECT_EQ(conflict.status().code(), StatusCode::kAborted) << conflict.status();
  EXPECT_EQ(server_->GetLease("kube-system", "gpusched")->at("spec").at("holderIdentity"), "b");
  EXPECT_EQ(Client().UpdateLease("kube-system", json{{"spec", {}}}).status().code(), StatusCode::kInvalidArgument);
}

// Two replicas' electors over LeaseLocks on the fake API server: one leads, the Lease shows it in the API's form,
// the other takes over after the lease runs out (fake clocks: no sleeping), a stale writer is refused.
TEST_F(K8sClientTest, LeaseLockElectsOneLeader) {
  testing::FakeClock clock_a, clock_b;
  LeaseLock lock_a(Client(), "kube-system", "gpusched-extender");
  auto other = ApiClient::Create(Config());
  ASSERT_TRUE(other.ok()) << other.status();
  LeaseLock lock_b(**other, "kube-system", "gpusched-extender");
  const int64_t wall = 1'795'000'000'000;
  sched::LeaderElectionOptions opts{.identity = "a"};
  sched::LeaderElector a(
      lock_a, clock_a, [&] { return wall + clock_a.NowMs(); }, opts);
  opts.identity = "b";
  sched::LeaderElector b(
      lock_b, clock_b, [&] { return wall + clock_b.NowMs(); }, opts);

  ASSERT_TRUE(a.Tick()) << a.LastError();
  EXPECT_FALSE(b.Tick()) << b.LastError();
  EXPECT_EQ(b.Holder(), "a");
  const json lease = *server_->GetLease("kube-system", "gpusched-extender");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "a");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 15);
  EXPECT_EQ(*ParseMicroTime(lease["spec"]["renewTime"].get<std::string>()), wall + clock_a.NowMs());

  clock_a.AdvanceMs(2000);
  clock_b.AdvanceMs(2000);
  ASSERT_TRUE(a.Tick()) << a.LastError();  // a renewal: a new resourceVersion
  EXPECT_FALSE(b.Tick());
  // a stops (crash): b takes over once 15 s passed since it last saw the lease change.
  clock_b.AdvanceMs(14000);
  EXPECT_FALSE(b.Tick());
  clock_b.AdvanceMs(1500);
  ASSERT_TRUE(b.Tick()) << b.LastError();
  EXPECT_EQ(server_->GetLease("kube-system", "gpusched-extender")->at("spec").at("holderIdentity"), "b");
  EXPECT_EQ(server_->GetLease("kube-system", "gpusched-extender")->at("spec").at("leaseTransitions"), 1);
  // a's write with its old resourceVersion is refused; it learns it lost.
  ports::LeaderRecord stale{.holder = "a", .lease_duration_ms = 15000};
  EXPECT_EQ(lock_a.Update(stale).code(), StatusCode::kAborted);
  EXPECT_FALSE(a.Tick());
  EXPECT_EQ(a.Holder(), "b");
  // b releases on shutdown; a takes it at its next attempt.
  b.Release();
  EXPECT_EQ(server_->GetLease("kube-system", "gpusched-extender")->at("spec").at("holderIdentity"), "");
  clock_a.AdvanceMs(2000);
  EXPECT_TRUE(a.Tick()) << a.LastError();
}

// --- errors ---------------------------------------------------------------------------------------------------------

TEST_F(K8sClientTest, ErrorMapping) {
  // 404 with the server's message.
  auto missing = Client().Get("/api/v1/namespaces/default/pods/nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("GET /api/v1/namespaces/default/pods/nope: HTTP 404 Not Found: pods \"nope\" not found"));

  // Injected 500 -> Unavailable, with method, path, code and message.
  server_->FailNext("GET", "list-nodes", 500, "etcdserver: request timed out");
  auto failed = Client().List("/api/v1/nodes");
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("GET /api/v1/nodes: HTTP 500 Internal Server Error: etcdserver: request timed out"));
  EXPECT_TRUE(Client().List("/api/v1/nodes").ok());  // count=1: the next one passes

  server_->FailNext("PATCH", "patch-node", 403, "nodes \"n1\" is forbidden");
  EXPECT_EQ(Client().PatchNodeAnnotations("n1", {{"a", "b"}}).code(), StatusCode::kPermissionDenied);
  server_->FailNext("POST", "binding", 422, "Binding is invalid");
  EXPECT_EQ(Client().BindPod("default", "p", "", "n1").code(), StatusCode::kInvalidArgument);
  server_->FailNext("GET", "get-node", 429, "too many requests");
  EXPECT_EQ(Client().Get("/api/v1/nodes/n1").status().code(), StatusCode::kUnavailable);

  // The server is slower than the request timeout.
  ClientConfig quick = Config();
  quick.request_timeout = milliseconds(200);
  server_->SetDelay(milliseconds(2000));
  auto slow = MakeClient(quick)->Get("/api/v1/nodes");
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded) << slow.status();
  EXPECT_THAT(slow.status().message(), HasSubstr("GET /api/v1/nodes"));
  server_->SetDelay(milliseconds(0));
}

TEST_F(K8sClientTest, WrongTokenIsUnauthenticated) {
  StartServer("right-token");
  ClientConfig config = Config();
  config.token = "wrong-token";
  auto wrong = MakeClient(config)->Get("/api/v1/nodes");
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(wrong.status().message(), HasSubstr("HTTP 401"));
  config.token = "right-token";
  EXPECT_TRUE(MakeClient(config)->Get("/api/v1/nodes").ok());
}

// A kubeconfig exec plugin (as EKS, GKE and AKS use): its token authenticates; it runs once while the token is
// good, and again after a 401 (here its first token is one the server does not accept).
TEST_F(K8sClientTest, ExecPluginTokensAuthenticateAndAreRenewedAfterA401) {
  StartServer("right-token");
  const std::string runs = *dir_ + "/exec-runs";
  const std::string plugin = *dir_ + "/exec-plugin";
  std::ofstream(plugin) << "#!/bin/sh\n"
                           "echo run >> '"
                        << runs
                        << "'\n"
                           "n=$(wc -l < '"
                        << runs
                        << "')\n"
                           "if [ \"$n\" -eq 1 ]; then t=stale-token; else t=right-token; fi\n"
                           "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
                           "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}' \"$t\"\n";
  std::filesystem::permissions(plugin, std::filesystem::perms::owner_all);
  ClientConfig config = Config();
  config.exec = ExecPluginConfig{.api_version = "client.authentication.k8s.io/v1",
                                 .command = plugin,
                                 .source = "test kubeconfig: users[name=u].user.exec"};
  auto client = MakeClient(config);
  auto first = client->Get("/api/v1/nodes");
  EXPECT_EQ(first.status().code(), StatusCode::kUnauthenticated) << first.status();
  EXPECT_TRUE(client->Get("/api/v1/nodes").ok());
  EXPECT_TRUE(client->Get("/api/v1/nodes").ok());
  std::ifstream in(runs);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
  }
  EXPECT_EQ(n, 2) << "the plugin runs once per token, not per request";
}

TEST_F(K8sClientTest, ConnectionRefusedIsUnavailable) {
  ClientConfig config = Config();
  server_->Stop();
  auto refused = MakeClient(config)->Get("/api/v1/nodes");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
}

TEST_F(K8sClientTest, ConcurrentCallersShareOneClient) {
  for (int i = 0; i < 8; ++i) {
    server_->UpsertPod(Pod("default", "p" + std::to_string(i)));
  }
  Recorder& recorder = NewRecorder();  // owned by the fixture: it outlives the informer threads
  Informer& informer = StartInformer({.path = "/api/v1/pods"}, recorder);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::string name = "p" + std::to_string(t);
      for (int i = 0; i < 10; ++i) {
        if (!Client().PatchPodAnnotations("default", name, {{"round", std::to_string(i)}}).ok()) {
          ++failures;
        }
        if (!Client().Get("/api/v1/namespaces/default/pods/" + name).ok()) {
          ++failures;
        }
        (void)informer.List();  // readers never wait on the network
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(WaitFor([&] { return CacheMatchesServer(informer); }));
  EXPECT_EQ(informer.Get("default/p3")->at("metadata").at("annotations").at("round"), "9");
}

}  // namespace
}  // namespace gpusched::adapters::k8s
