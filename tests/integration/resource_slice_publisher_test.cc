// The agent's ResourceSlice publisher (adapters/k8s/resource_slice_publisher.h) against FakeApiServer over mTLS,
// and the fake's resource.k8s.io/v1 rules themselves (testing/fake_dra_store.h): what is written, when nothing is,
// generations, splitting, foreign slices, conflicts and 5xx with backoff, garbage collection with the Node.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/resource_slice_publisher.h"
#include "gpusched/kube/dra_slices.h"
#include "gpusched/kube/gpu_pool.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/processes.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::adapters::k8s {
namespace {

using common::StatusCode;
using nlohmann::json;
using std::chrono::milliseconds;
using testing::FakeApiServer;
using testing::FakeApiServerOptions;
using testing::TestPki;

constexpr char kDriver[] = "gpu.gpusched.io";

std::vector<core::dra::Device> Devices(int n, std::vector<int> unhealthy = {}) {
  std::vector<kube::PoolGpu> gpus;
  for (int i = 0; i < n; ++i) {
    kube::PoolGpu g;
    g.gpu.index = i;
    g.gpu.uuid = common::GpuUuid("GPU-" + std::to_string(i));
    g.gpu.model = "A100-SXM4-80GB";
    g.gpu.memory = common::MiB(81920);
    g.gpu.healthy = std::find(unhealthy.begin(), unhealthy.end(), i) == unhealthy.end();
    g.last_xid = g.gpu.healthy ? 0 : 79;
    gpus.push_back(g);
  }
  return kube::GpuDevicePool(common::NodeName("n1"), gpus, {.driver_version = "550.54.15"}).devices;
}

class ResourceSlicePublisherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir("gpusched-slices-test"));
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

  void SetUp() override {
    server_ = std::make_unique<FakeApiServer>(FakeApiServerOptions{
        .cert_file = pki_->server_cert_file, .key_file = pki_->server_key_file, .client_ca_file = pki_->ca_file});
    ASSERT_TRUE(server_->Start().ok());
    auto created = ApiClient::Create(ClientConfig{.server = server_->url(),
                                                  .ca_pem = pki_->ca_pem,
                                                  .client_cert_pem = pki_->client_cert_pem,
                                                  .client_key_pem = pki_->client_key_pem,
                                                  .namespace_ = "default"});
    ASSERT_TRUE(created.ok()) << created.status();
    client_ = std::move(created).value();
    node_uid_ = server_->UpsertNode({{"metadata", {{"name", "n1"}}}})["metadata"]["uid"].get<std::string>();
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  std::unique_ptr<ResourceSlicePublisher> Publisher(milliseconds backoff = milliseconds(20)) {
    return std::make_unique<ResourceSlicePublisher>(
        *client_,
        ResourceSlicePublisherOptions{
            .node = "n1", .initial_backoff = backoff, .max_backoff = backoff * 4, .log = [](const std::string&) {}});
  }

  // The slices of driver gpu.gpusched.io, by name.
  std::map<std::string, json> Slices() const {
    std::map<std::string, json> out;
    for (json& s : server_->dra().Slices()) {
      out.emplace(s["metadata"]["name"].get<std::string>(), std::move(s));
    }
    return out;
  }

  int Writes() const {
    return server_->RequestCount("POST", "create-resourceslice") +
           server_->RequestCount("PUT", "update-resourceslice") +
           server_->RequestCount("DELETE", "delete-resourceslice");
  }

  static std::string* dir_;
  static TestPki* pki_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<ApiClient> client_;
  std::string node_uid_;
};

std::string* ResourceSlicePublisherTest::dir_ = nullptr;
TestPki* ResourceSlicePublisherTest::pki_ = nullptr;

TEST_F(ResourceSlicePublisherTest, PublishesOneSliceOwnedByTheNode) {
  auto publisher = Publisher();
  const auto devices = Devices(2);
  ASSERT_TRUE(publisher->Sync(devices).ok()) << publisher->last_error();
  const auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  const json& slice = slices.at("n1-gpu.gpusched.io-0");
  EXPECT_EQ(slice["spec"]["driver"], kDriver);
  EXPECT_EQ(slice["spec"]["nodeName"], "n1");
  EXPECT_EQ(slice["spec"]["pool"], (json{{"name", "n1"}, {"generation", 1}, {"resourceSliceCount", 1}}));
  EXPECT_EQ(slice["metadata"]["ownerReferences"],
            (json{{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", "n1"}, {"uid", node_uid_}, {"controller", true}}}));
  auto info = kube::DecodeResourceSlice(slice);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pool.devices, devices);
  EXPECT_EQ(publisher->generation(), 1);
  EXPECT_EQ(publisher->writes(), 1u);
  // The list asked the server for this node's and driver's slices only.
  EXPECT_EQ(server_->RequestCount("GET", "list-resourceslices"), 1);
}

TEST_F(ResourceSlicePublisherTest, TheSameDevicesWriteNothingAgainNorAfterARestart) {
  const auto devices = Devices(2, {1});  // with a taint, whose timeAdded the server sets
  ASSERT_TRUE(Publisher()->Sync(devices).ok());
  const int writes = Writes();
  const std::string time_added =
      Slices().at("n1-gpu.gpusched.io-0")["spec"]["devices"][1]["taints"][0]["timeAdded"].get<std::string>();
  EXPECT_FALSE(time_added.empty());
  auto publisher = Publisher();  // a restarted agent
  ASSERT_TRUE(publisher->Sync(devices).ok());
  ASSERT_TRUE(publisher->Sync(devices).ok());
  EXPECT_EQ(Writes(), writes);
  EXPECT_EQ(publisher->writes(), 0u);
  EXPECT_EQ(publisher->generation(), 1);
}

TEST_F(ResourceSlicePublisherTest, AChangeBumpsTheGenerationAndUpdatesInPlace) {
  auto publisher = Publisher();
  ASSERT_TRUE(publisher->Sync(Devices(2)).ok());
  const std::string uid = Slices().at("n1-gpu.gpusched.io-0")["metadata"]["uid"];
  // GPU 1 has an XID: tainted NoSchedule, healthy false.
  ASSERT_TRUE(publisher->Sync(Devices(2, {1})).ok()) << publisher->last_error();
  const auto slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  const json& slice = slices.at("n1-gpu.gpusched.io-0");
  EXPECT_EQ(slice["metadata"]["uid"], uid) << "updated, not replaced";
  EXPECT_EQ(slice["spec"]["pool"]["generation"], 2);
  const json& taint = slice["spec"]["devices"][1]["taints"][0];
  EXPECT_EQ(taint["key"], "gpu.gpusched.io/unhealthy");
  EXPECT_EQ(taint["effect"], "NoSchedule");
  EXPECT_EQ(taint["value"], "xid-79");
  EXPECT_EQ(slice["spec"]["devices"][1]["attributes"]["healthy"], (json{{"bool", false}}));
  EXPECT_EQ(publisher->generation(), 2);
}

TEST_F(ResourceSlicePublisherTest, APoolOverTheLimitIsSplitAndShrinksBack) {
  auto publisher = Publisher();
  // 130 healthy GPUs (more than any node has, but the API's limit is what is tested): 128 + 2.
  ASSERT_TRUE(publisher->Sync(Devices(130)).ok()) << publisher->last_error();
  auto slices = Slices();
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices.at("n1-gpu.gpusched.io-0")["spec"]["devices"].size(), 128u);
  EXPECT_EQ(slices.at("n1-gpu.gpusched.io-1")["spec"]["devices"].size(), 2u);
  for (const auto& [name, s] : slices) {
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 2) << name;
    EXPECT_EQ(s["spec"]["pool"]["generation"], 1) << name;
  }
  ASSERT_TRUE(publisher->Sync(Devices(2)).ok()) << publisher->last_error();
  slices = Slices();
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices.at("n1-gpu.gpusched.io-0")["spec"]["pool"],
            (json{{"name", "n1"}, {"generation", 2}, {"resourceSliceCount", 1}}));
}

TEST_F(ResourceSlicePublisherTest, OtherNodesAndDriversAreLeftAloneForeignSlicesOfThePoolAreRemoved) {
  auto other = [](const std::string& name, const std::string& node, const std::string& driver,
                  const std::string& pool) {
    return json{{"metadata", {{"name", name}}},
                {"spec",
                 {{"driver", driver},
                  {"pool", {{"name", pool}, {"generation", 9}, {"resourceSliceCount", 1}}},
                  {"nodeName", node},
                  {"devices", json::array()}}}};
  };
  ASSERT_EQ(server_->dra().CreateSlice(other("n2-gpu", "n2", kDriver, "n2")).code, 201);
  ASSERT_EQ(server_->dra().CreateSlice(other("n1-nic", "n1", "nic.example.com", "n1")).code, 201);
  // Ours by node and driver, but of another pool (an older agent's layout): it goes.
  ASSERT_EQ(server_->dra().CreateSlice(other("n1-old", "n1", kDriver, "n1-old")).code, 201);
  auto publisher = Publisher();
  ASSERT_TRUE(publisher->Sync(Devices(1)).ok()) << publisher->last_error();
  const auto slices = Slices();
  EXPECT_TRUE(slices.contains("n2-gpu"));
  EXPECT_TRUE(slices.contains("n1-nic"));
  EXPECT_FALSE(slices.contains("n1-old"));
  ASSERT_TRUE(slices.contains("n1-gpu.gpusched.io-0"));
  // The foreign slice's generation does not count: it is another pool.
  EXPECT_EQ(slices.at("n1-gpu.gpusched.io-0")["spec"]["pool"]["generation"], 1);
}

TEST_F(ResourceSlicePublisherTest, FailuresAreReportedAndTheNextSyncRepairs) {
  auto publisher = Publisher();
  // No Node yet: nothing can own the slices, nothing is written.
  ASSERT_TRUE(server_->DeleteNode("n1"));
  common::Status s = publisher->Sync(Devices(2));
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s;
  EXPECT_EQ(Writes(), 0);
  node_uid_ = server_->UpsertNode({{"metadata", {{"name", "n1"}}}})["metadata"]["uid"].get<std::string>();

  server_->FailNext("POST", "create-resourceslice", 503, "etcd is slow");
  s = publisher->Sync(Devices(2));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
  ASSERT_TRUE(publisher->Sync(Devices(2)).ok()) << publisher->last_error();

  server_->FailNext("PUT", "update-resourceslice", 409, "the object has been modified");
  s = publisher->Sync(Devices(2, {0}));
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s;
  ASSERT_TRUE(publisher->Sync(Devices(2, {0})).ok()) << publisher->last_error();
  EXPECT_EQ(Slices().at("n1-gpu.gpusched.io-0")["spec"]["devices"][0]["taints"][0]["effect"], "NoSchedule");

  // Devices the API would refuse are refused here, before any request is sent.
  auto bad = Devices(1);
  bad[0].attributes["gpu.gpusched.io/driverVersion"] = core::dra::AttributeValue::Version("535.104.05");
  const int before = Writes();
  s = publisher->Sync(bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("semantic version"), std::string::npos) << s;
  EXPECT_EQ(Writes(), before);
}

TEST_F(ResourceSlicePublisherTest, TheBackgroundThreadRetriesWithBackoffAndRepublishesChanges) {
  auto publisher = Publisher(milliseconds(40));
  server_->FailNext("GET", "list-resourceslices", 503, "down", -1);
  publisher->Start();
  publisher->Update(Devices(2));
  // Retries: 40, 80, 160, 160 ... ms apart. In 600 ms at most about 6 attempts, never a hot loop.
  std::this_thread::sleep_for(milliseconds(600));
  const int attempts = server_->RequestCount("GET", "list-resourceslices");
  EXPECT_GE(attempts, 2);
  EXPECT_LE(attempts, 8);
  EXPECT_FALSE(publisher->synced());
  EXPECT_EQ(publisher->last_error().code(), StatusCode::kUnavailable);
  server_->ClearFailures();
  ASSERT_TRUE(testing::WaitFor([&] { return publisher->synced(); }, milliseconds(10000), milliseconds(5)));
  EXPECT_EQ(Slices().size(), 1u);
  // A GPU lost: republished without waiting for the resync.
  publisher->Update(Devices(2, {1}));
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const auto slices = Slices();
        return slices.size() == 1 && slices.begin()->second["spec"]["devices"][1].contains("taints");
      },
      milliseconds(10000), milliseconds(5)));
  // The same devices again wake nothing.
  ASSERT_TRUE(testing::WaitFor([&] { return publisher->synced(); }, milliseconds(10000), milliseconds(5)));
  const int writes = Writes();
  publisher->Update(Devices(2, {1}));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(Writes(), writes);
  publisher->Stop();
}

TEST_F(ResourceSlicePublisherTest, SlicesGoWithTheirNode) {
  ASSERT_TRUE(Publisher()->Sync(Devices(2)).ok());
  ASSERT_EQ(Slices().size(), 1u);
  ASSERT_TRUE(server_->DeleteNode("n1"));
  EXPECT_TRUE(Slices().empty()) << "garbage-collected through the ownerReference";
}

// The fake answers as kube-apiserver does where a driver would notice.
TEST_F(ResourceSlicePublisherTest, TheFakeValidatesAndVersionsSlicesAsTheApiServer) {
  const std::string path(kube::kResourceSlicesPath);
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", {{"generateName", "n1-gpu.gpusched.io-"}}},
                {"spec",
                 {{"driver", kDriver},
                  {"pool", {{"name", "n1"}, {"generation", 0}, {"resourceSliceCount", 0}}},
                  {"nodeName", "n1"}}}};
  auto created = client_->Request("POST", path, slice.dump());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);  // 422
  EXPECT_NE(created.status().message().find("spec.pool.resourceSliceCount: must be greater than zero"),
            std::string::npos)
      << created.status();

  slice["spec"]["pool"]["resourceSliceCount"] = 1;
  created = client_->Request("POST", path, slice.dump());
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string name = (*created)["metadata"]["name"];
  EXPECT_TRUE(name.starts_with("n1-gpu.gpusched.io-")) << name;
  EXPECT_EQ(name.size(), std::string("n1-gpu.gpusched.io-").size() + 5);
  EXPECT_EQ((*created)["metadata"]["generation"], 1);

  // A stale resourceVersion is a conflict; an immutable field cannot change; the right version updates.
  json update = *created;
  update["metadata"]["resourceVersion"] = "1";
  auto r = client_->Request("PUT", path + "/" + name, update.dump());
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status();
  update = *created;
  update["spec"]["nodeName"] = "n2";
  r = client_->Request("PUT", path + "/" + name, update.dump());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("spec.nodeName: Invalid value: field is immutable"), std::string::npos);
  update = *created;
  update["spec"]["pool"]["generation"] = 1;
  r = client_->Request("PUT", path + "/" + name, update.dump());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["metadata"]["generation"], 2);

  // The server indexes spec.nodeName, spec.driver, spec.pool.name and metadata.name for field selectors, no more.
  auto listed = client_->List(path, "spec.nodeName=n1,spec.driver=gpu.gpusched.io");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->items.size(), 1u);
  listed = client_->List(path, "spec.nodeName=n2");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->items.empty());
  listed = client_->List(path, "spec.pool.generation=1");
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().message().find("field label not supported: spec.pool.generation"), std::string::npos)
      << listed.status();

  // Delete with a stale precondition is a conflict; without, it goes; twice is 404.
  r = client_->Request("DELETE", path + "/" + name, json{{"preconditions", {{"resourceVersion", "1"}}}}.dump());
  EXPECT_EQ(r.status().code(), StatusCode::kAborted) << r.status();
  r = client_->Request("DELETE", path + "/" + name);
  EXPECT_TRUE(r.ok()) << r.status();
  r = client_->Request("DELETE", path + "/" + name);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status();

  // DeviceClasses: get and list.
  server_->dra().UpsertDeviceClass(
      {{"metadata", {{"name", "gpu.gpusched.io"}}},
       {"spec", {{"selectors", {{{"cel", {{"expression", "device.driver == \"gpu.gpusched.io\""}}}}}}}}});
  auto got = client_->Get(std::string(kube::kDeviceClassesPath) + "/gpu.gpusched.io");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)["kind"], "DeviceClass");
  auto classes = client_->List(std::string(kube::kDeviceClassesPath));
  ASSERT_TRUE(classes.ok()) << classes.status();
  EXPECT_EQ(classes->items.size(), 1u);
  EXPECT_EQ(client_->Get(std::string(kube::kDeviceClassesPath) + "/nope").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpusched::adapters::k8s
