// The agent's metrics against real servers from Debian packages (scripts/install-deps.sh installs them):
//   * `promtool check metrics` accepts the /metrics page;
//   * a real Prometheus scrapes a loopback /metrics served from Collector::RenderMetrics over a FakeInventory of
//     8 GPUs with scripted values; the test reads the values back through Prometheus's HTTP API;
//   * a real InfluxDB 1.x receives the samples pushed by InfluxWriter; the test reads them back with InfluxQL.
// Servers run on 127.0.0.1 with free ports and temp dirs, and are stopped (SIGTERM, then SIGKILL) in TearDown.
// Without the binaries those tests skip with the reason. The InfluxWriter error paths use a local httplib server.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/influxdb/influx_writer.h"
#include "gpusched/adapters/influxdb/line_protocol.h"
#include "gpusched/adapters/nvml/fake_inventory.h"
#include "gpusched/agent/collector.h"
#include "gpusched/testing/processes.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::agent {
namespace {

using adapters::influxdb::InfluxWriter;
using adapters::nvml::FakeInventory;
using common::GpuUuid;
using common::MiB;
using common::MilliGpu;
using common::StatusCode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Child;
using testing::FindBinary;
using testing::FreePort;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::WaitFor;

// Prometheus 2.42 holds back its first scrape about 5 s after start (the discovery manager's throttle), and
// sanitizers on a shared machine slow everything down: generous.
constexpr milliseconds kServerDeadline{90000};

// 8 A100s with scripted values: GPU i at 10i+5 % utilisation and 1000(i+1) MiB used; GPU 3 had a critical XID;
// GPU 0 is shared by two pods, GPU 1 held by one; GPUs 0 and 1 carry allocations.
struct ScriptedNode {
  FakeInventory* fake = nullptr;
  std::unique_ptr<Collector> collector;
  PodAttribution pods = {{GpuUuid("GPU-fake-it-node-0"), {{"team-a", "train-0", "main"}, {"team-b", "infer", "srv"}}},
                         {GpuUuid("GPU-fake-it-node-1"), {{"team-a", "train-1", "main"}}}};
  AllocationMap allocations = {{GpuUuid("GPU-fake-it-node-0"), {MilliGpu(700), MiB(30000)}},
                               {GpuUuid("GPU-fake-it-node-1"), {MilliGpu(1000), MiB(81920)}}};

  static std::unique_ptr<ScriptedNode> Make(milliseconds interval) {
    auto node = std::make_unique<ScriptedNode>();
    auto inv = FakeInventory::Create("8xA100-80GB", {.node_name = "it-node", .seed = 3});
    EXPECT_TRUE(inv.ok()) << inv.status();
    node->fake = inv->get();
    for (int32_t i = 0; i < 8; ++i) {
      EXPECT_TRUE(node->fake->SetUtilization(i, 10.0 * i + 5).ok());
      EXPECT_TRUE(node->fake->SetMemoryUsed(i, MiB(1000 * (i + 1))).ok());
    }
    EXPECT_TRUE(node->fake->InjectXid(3, 79).ok());
    node->collector = std::make_unique<Collector>(std::move(inv).value(), CollectorOptions{.interval = interval});
    return node;
  }
  std::string Page() const { return collector->RenderMetrics(pods, allocations, "it-node"); }
};

class AgentMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpusched-agent-it");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    for (auto& c : children_) {
      c->Stop();
    }
    if (server_ != nullptr) {
      server_->stop();
    }
    if (server_thread_.joinable()) {
      server_thread_.join();
    }
    if (node_ != nullptr) {
      node_->collector->Stop();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Child& NewChild() {
    children_.push_back(std::make_unique<Child>());
    return *children_.back();
  }

  // Serves `handler` on a loopback port; returns the port.
  int Serve(const std::string& path, httplib::Server::Handler handler, bool post = false) {
    server_ = std::make_unique<httplib::Server>();
    if (post) {
      server_->Post(path, std::move(handler));
    } else {
      server_->Get(path, std::move(handler));
    }
    const int port = server_->bind_to_any_port("127.0.0.1");
    server_thread_ = std::thread([this] { server_->listen_after_bind(); });
    EXPECT_TRUE(WaitFor([&] { return server_->is_running(); }, seconds(10)));
    return port;
  }

  std::string dir_;
  std::vector<std::unique_ptr<Child>> children_;
  std::unique_ptr<httplib::Server> server_;
  std::thread server_thread_;
  std::unique_ptr<ScriptedNode> node_;
};

// ---- promtool ----

// promtool lints as well as parses. dcgm-exporter's labels `modelName`, `UUID` and `Hostname` are not snake_case,
// which the linter flags; on the DCGM_* series those names are the compatibility contract, so that one problem is
// accepted there. Any problem on gpusched's own series, any other problem, or a parse error fails the test.
TEST_F(AgentMetricsTest, PromtoolAcceptsTheExposition) {
  const std::string promtool = FindBinary("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not found (Debian package prometheus; scripts/install-deps.sh installs it)";
  }
  node_ = ScriptedNode::Make(seconds(1));
  ASSERT_TRUE(node_->collector->SampleOnce().ok());
  node_->pods[GpuUuid("GPU-fake-it-node-2")] = {{"ns", "we\"ird\\pod", "c"}};  // escaping must parse too
  const std::string page = node_->Page();
  const std::string file = dir_ + "/metrics.txt";
  std::ofstream(file) << page;
  const std::string out = dir_ + "/promtool.out";
  const std::string cmd = promtool + " check metrics < " + file + " > " + out + " 2>&1";
  const int rc = std::system(cmd.c_str());  // NOLINT(concurrency-mt-unsafe)
  ASSERT_NE(rc, -1);
  const int exit_code = WEXITSTATUS(rc);
  const std::string report = ReadFile(out);
  SCOPED_TRACE("promtool exit " + std::to_string(exit_code) + ":\n" + report);
  if (exit_code == 0) {
    return;
  }
  ASSERT_EQ(exit_code, 3) << "not a lint result: the exposition does not parse";
  std::istringstream lines(report);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) {
      continue;
    }
    EXPECT_THAT(line, HasSubstr("label names should be written in 'snake_case' not 'camelCase'"))
        << "unexpected lint problem";
    EXPECT_EQ(line.rfind("DCGM_FI_DEV_", 0), 0U) << "only the DCGM_* series keep dcgm-exporter's label names";
  }
}

// ---- Prometheus ----

json PromQuery(int port, const std::string& query) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  const auto res = client.Get("/api/v1/query", {{"query", query}}, httplib::Headers{});
  if (!res || res->status != 200) {
    return json();
  }
  const json body = json::parse(res->body, nullptr, false);
  if (body.is_discarded() || body.value("status", "") != "success") {
    return json();
  }
  return body["data"]["result"];
}

// label value of `key` -> sample value, over the series of an instant vector.
std::map<std::string, double> ByLabel(const json& result, const std::string& key) {
  std::map<std::string, double> out;
  if (!result.is_array()) {
    return out;
  }
  for (const auto& series : result) {
    out[series["metric"].value(key, "")] = std::stod(series["value"][1].get<std::string>());
  }
  return out;
}

TEST_F(AgentMetricsTest, PrometheusScrapesTheScriptedValues) {
  const std::string prometheus = FindBinary("prometheus");
  if (prometheus.empty()) {
    GTEST_SKIP() << "prometheus not found (Debian package prometheus; scripts/install-deps.sh installs it)";
  }
  node_ = ScriptedNode::Make(milliseconds(100));
  ASSERT_TRUE(node_->collector->Start().ok());
  const int target = Serve("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(node_->Page(), "text/plain; version=0.0.4; charset=utf-8");
  });
  ASSERT_GT(target, 0);
  const int web = FreePort();
  const std::string config = dir_ + "/prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n"
                           "scrape_configs:\n  - job_name: gpusched-agent\n    static_configs:\n"
                           "      - targets: ['127.0.0.1:"
                        << target << "']\n";
  Child& prom = NewChild();
  ASSERT_TRUE(prom.Start({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/tsdb",
                          "--web.listen-address=127.0.0.1:" + std::to_string(web), "--log.level=warn"},
                         dir_ + "/prometheus.log"));

  // Every GPU's utilisation: 8 GPUs, GPU 0 once per pod -> 9 series.
  json util;
  bool died = false;
  ASSERT_TRUE(WaitFor(
      [&] {
        died = !prom.Running();
        util = PromQuery(web, "DCGM_FI_DEV_GPU_UTIL");
        return died || (util.is_array() && util.size() == 9);
      },
      kServerDeadline))
      << "Prometheus never returned the 9 series; its log:\n"
      << prom.Log();
  ASSERT_FALSE(died) << "prometheus exited:\n" << prom.Log();
  const auto by_gpu = ByLabel(util, "gpu");
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(by_gpu.at(std::to_string(i)), 10.0 * i + 5) << "GPU " << i;
  }
  for (const auto& series : util) {
    const json& m = series["metric"];
    EXPECT_EQ(m.value("Hostname", ""), "it-node");
    EXPECT_EQ(m.value("hostname", ""), "it-node");
    EXPECT_EQ(m.value("modelName", ""), "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(m.value("device", ""), "nvidia" + m.value("gpu", ""));
    EXPECT_EQ(m.value("UUID", ""), "GPU-fake-it-node-" + m.value("gpu", ""));
    EXPECT_EQ(m.value("job", ""), "gpusched-agent");
  }
  // The shared GPU: one series per pod.
  const auto gpu0 = ByLabel(PromQuery(web, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"}"), "pod");
  EXPECT_EQ(gpu0, (std::map<std::string, double>{{"infer", 5}, {"train-0", 5}}));
  // Memory in MiB as scripted; health after the critical XID; allocations per GPU.
  EXPECT_EQ(ByLabel(PromQuery(web, "DCGM_FI_DEV_FB_USED{pod=\"\"}"), "gpu").at("2"), 3000);
  EXPECT_EQ(ByLabel(PromQuery(web, "DCGM_FI_DEV_FB_FREE{gpu=\"7\"}"), "gpu").at("7"), 81920 - 8000);
  EXPECT_EQ(ByLabel(PromQuery(web, "DCGM_FI_DEV_XID_ERRORS{gpu=\"3\"}"), "gpu").at("3"), 79);
  const auto healthy = ByLabel(PromQuery(web, "gpusched_gpu_healthy"), "gpu");
  EXPECT_EQ(healthy.at("3"), 0);
  EXPECT_EQ(healthy.at("4"), 1);
  const auto milli = ByLabel(PromQuery(web, "gpusched_gpu_allocated_milli"), "gpu");
  for (const auto& series : PromQuery(web, "gpusched_gpu_allocated_milli")) {
    EXPECT_EQ(series["metric"].value("uuid", ""), "GPU-fake-it-node-" + series["metric"].value("gpu", ""));
    EXPECT_EQ(series["metric"].value("model_name", ""), "NVIDIA A100-SXM4-80GB");
    EXPECT_FALSE(series["metric"].contains("modelName"));
  }
  EXPECT_EQ(milli.at("0"), 700);
  EXPECT_EQ(milli.at("1"), 1000);
  EXPECT_EQ(milli.at("5"), 0);
  // Power follows utilisation: A100 60 W idle, 400 W at full load: GPU 4 at 45 % -> 60 + 340 x 0.45 = 213 W.
  EXPECT_EQ(ByLabel(PromQuery(web, "DCGM_FI_DEV_POWER_USAGE{gpu=\"4\"}"), "gpu").at("4"), 213);

  // A change on the node reaches Prometheus at a later scrape.
  ASSERT_TRUE(node_->fake->SetUtilization(6, 99).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto v = ByLabel(PromQuery(web, "DCGM_FI_DEV_GPU_UTIL{gpu=\"6\"}"), "gpu");
        return v.count("6") == 1 && v.at("6") == 99;
      },
      kServerDeadline))
      << prom.Log();
}

// ---- InfluxDB ----

json InfluxQuery(int port, const std::string& q) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  const auto res = client.Get("/query", {{"db", "gpusched"}, {"q", q}, {"epoch", "ms"}}, httplib::Headers{});
  if (!res || res->status != 200) {
    return json();
  }
  return json::parse(res->body, nullptr, false);
}

TEST_F(AgentMetricsTest, InfluxDbReceivesThePushedSamples) {
  const std::string influxd = FindBinary("influxd");
  if (influxd.empty()) {
    GTEST_SKIP() << "influxd not found (Debian package influxdb; scripts/install-deps.sh installs it)";
  }
  std::string influx_error;
  Child& influx = NewChild();
  const int http = StartInfluxd(influx, influxd, dir_, kServerDeadline, &influx_error);
  ASSERT_GT(http, 0) << influx_error;

  auto writer = InfluxWriter::Create(
      {.url = "http://127.0.0.1:" + std::to_string(http) + "/", .database = "gpusched", .timeout = seconds(5)});
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_EQ((*writer)->write_url(), "http://127.0.0.1:" + std::to_string(http) + "/write?db=gpusched&precision=ms");
  // Before the database exists: 404 -> NotFound, with the server's message.
  node_ = ScriptedNode::Make(seconds(1));
  ASSERT_TRUE(node_->collector->SampleOnce().ok());
  const auto snap = node_->collector->Latest();
  const int64_t t0 = 1700000000000;
  const std::string lines = adapters::influxdb::GpuSampleLines(snap->samples, {.hostname = "it-node"}, t0);
  const common::Status missing_db = (*writer)->Write(lines);
  EXPECT_EQ(missing_db.code(), StatusCode::kNotFound) << missing_db;
  EXPECT_THAT(missing_db.message(), HasSubstr("database not found"));

  const common::Status created = (*writer)->CreateDatabase();
  ASSERT_TRUE(created.ok()) << created;
  // The agent's contract is "log and write again next interval"; a first write right after CREATE DATABASE failed
  // once in ~50 runs on a loaded machine, so the test retries the same way and prints what it saw.
  common::Status written = (*writer)->Write(lines);
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!written.ok()) {
          std::printf("transient InfluxDB write error (retrying): %s\n", written.ToString().c_str());
          written = (*writer)->Write(lines);
        }
        return written.ok();
      },
      seconds(20)))
      << written << "\n"
      << influx.Log();
  // A second interval, one second later, with GPU 5 changed.
  ASSERT_TRUE(node_->fake->SetUtilization(5, 100).ok());
  ASSERT_TRUE(node_->collector->SampleOnce().ok());
  ASSERT_TRUE((*writer)
                  ->Write(adapters::influxdb::GpuSampleLines(node_->collector->Latest()->samples,
                                                             {.hostname = "it-node"}, t0 + 1000))
                  .ok());

  const json got = InfluxQuery(http,
                               "SELECT gpu_util, fb_used_mib, healthy, power_w FROM gpu WHERE host='it-node' AND "
                               "time = " +
                                   std::to_string(t0) + "ms GROUP BY gpu");
  ASSERT_TRUE(got.is_object()) << got.dump();
  const json& series = got["results"][0]["series"];
  ASSERT_TRUE(series.is_array()) << got.dump();
  ASSERT_EQ(series.size(), 8u) << got.dump();
  for (const auto& s : series) {
    const int gpu = std::stoi(s["tags"]["gpu"].get<std::string>());
    SCOPED_TRACE("GPU " + std::to_string(gpu));
    ASSERT_EQ(s["columns"], json({"time", "gpu_util", "fb_used_mib", "healthy", "power_w"}));
    const json& row = s["values"][0];
    EXPECT_EQ(row[0].get<int64_t>(), t0);
    EXPECT_EQ(row[1].get<double>(), 10.0 * gpu + 5);
    EXPECT_EQ(row[2].get<int64_t>(), 1000 * (gpu + 1));
    EXPECT_EQ(row[3].get<bool>(), gpu != 3);
    EXPECT_DOUBLE_EQ(row[4].get<double>(), 60 + 340 * (10.0 * gpu + 5) / 100);
  }
  const json latest = InfluxQuery(http, "SELECT last(gpu_util) FROM gpu WHERE gpu='5'");
  EXPECT_EQ(latest["results"][0]["series"][0]["values"][0][1].get<double>(), 100) << latest.dump();
  const json count = InfluxQuery(http, "SELECT count(gpu_util) FROM gpu");
  EXPECT_EQ(count["results"][0]["series"][0]["values"][0][1].get<int64_t>(), 16) << count.dump();

  // A malformed line: 400 -> InvalidArgument with the parser's message.
  const common::Status bad = (*writer)->Write("gpu,host=x gpu_util=notanumber 1\n");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("HTTP 400"));
}

TEST_F(AgentMetricsTest, InfluxWriterErrors) {
  // Nothing listening.
  const int closed = FreePort();
  auto nobody = InfluxWriter::Create({.url = "http://127.0.0.1:" + std::to_string(closed), .database = "d"});
  ASSERT_TRUE(nobody.ok());
  const common::Status refused = (*nobody)->Write("m v=1 1\n");
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("127.0.0.1:" + std::to_string(closed)));

  // A server that answers 500, then one that is too slow for the timeout.
  std::atomic<int> mode{0};
  const int port = Serve(
      "/write",
      [&](const httplib::Request& req, httplib::Response& res) {
        EXPECT_EQ(req.get_param_value("db"), "d b");
        EXPECT_EQ(req.get_param_value("precision"), "ms");
        EXPECT_EQ(req.get_param_value("rp"), "week");
        if (mode == 0) {
          res.status = 500;
          res.set_content("{\"error\":\"timeout\"}", "application/json");
        } else {
          std::this_thread::sleep_for(milliseconds(1500));  // simulates a slow server (not a wait for a result)
          res.status = 204;
        }
      },
      /*post=*/true);
  auto writer = InfluxWriter::Create({.url = "http://127.0.0.1:" + std::to_string(port),
                                      .database = "d b",
                                      .retention_policy = "week",
                                      .timeout = milliseconds(300)});
  ASSERT_TRUE(writer.ok());
  const common::Status s500 = (*writer)->Write("m v=1 1\n");
  EXPECT_EQ(s500.code(), StatusCode::kUnavailable) << s500;
  EXPECT_THAT(s500.message(), HasSubstr("HTTP 500 {\"error\":\"timeout\"}"));
  mode = 1;
  const common::Status slow = (*writer)->Write("m v=1 1\n");
  EXPECT_EQ(slow.code(), StatusCode::kDeadlineExceeded) << slow;

  EXPECT_EQ(InfluxWriter::Create({.url = "127.0.0.1:8086", .database = "d"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(InfluxWriter::Create({.url = "http://x"}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpusched::agent
