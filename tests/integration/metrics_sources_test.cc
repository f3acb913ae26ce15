// The metric sources against real servers from Debian packages (scripts/install-deps.sh installs them), and the
// metrics cache over them when a server goes away mid-run:
//   * a real Prometheus 2.x started on loopback over a TSDB backfilled with `promtool tsdb create-blocks-from
//     openmetrics` (DCGM series for 3 GPUs with known values every 10 s over the last minute), read through
//     PrometheusSource: Fetch, Check, instant and range queries, a query error;
//   * the server stopped under a running MetricsCache: the cache keeps serving the last samples, Degraded() names
//     the source, the samples age out by the staleness bound; restarted: the cache recovers;
//   * a fake Prometheus (httplib) for the error paths: bad_data, a proxy's 404, 503, a slow server, nobody listening;
//   * a real InfluxDB 1.x: samples written with the agent's InfluxWriter and line protocol, read back through
//     InfluxSource, plus its errors.
// Servers run on 127.0.0.1 with free ports and temp dirs, and are stopped (SIGTERM, then SIGKILL) in TearDown.
// Without the binaries those tests skip with the reason.
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
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/influxdb/influx_source.h"
#include "gpusched/adapters/influxdb/influx_writer.h"
#include "gpusched/adapters/influxdb/line_protocol.h"
#include "gpusched/adapters/prometheus/prometheus_source.h"
#include "gpusched/extender/service.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/testing/json_builders.h"
#include "gpusched/testing/processes.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched {
namespace {

using adapters::influxdb::InfluxSource;
using adapters::influxdb::InfluxWriter;
using adapters::prometheus::PrometheusSource;
using common::GpuUuid;
using common::StatusCode;
using core::GpuMetric;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Child;
using testing::FindBinary;
using testing::FreePort;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::WaitFor;

// Sanitizers on a shared machine slow everything down: generous.
constexpr milliseconds kServerDeadline{60000};
constexpr int kGpus = 3;
constexpr int kSteps = 6;  // samples per series, 10 s apart, the newest 10 s before the test started

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Uuid(int gpu) { return "GPU-it-" + std::to_string(gpu); }

// The backfilled value of metric `m` on GPU `g` at step `k` (0 = oldest): 100m + 10g + k, e.g. power (m=3) of
// GPU 2 at the newest step (k=5) = 325.
double Value(size_t m, int g, int k) { return 100.0 * static_cast<double>(m) + 10.0 * g + k; }

class MetricsSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("gpusched-metrics-it");
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
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  Child& NewChild() {
    children_.push_back(std::make_unique<Child>());
    return *children_.back();
  }

  // Writes the OpenMetrics file and backfills it into dir_/tsdb; the samples' times are t_last_ - 10 s x (5 - k).
  // GPU 0 is shared by two pods (two series, same values), as the agent exports it; one series has no UUID.
  void Backfill(const std::string& promtool) {
    t_last_ = (NowMs() / 1000 - 10) * 1000;
    std::ostringstream om;
    for (size_t m = 0; m < core::kGpuMetricCount; ++m) {
      const std::string name(adapters::prometheus::DcgmMetricName(static_cast<GpuMetric>(m)));
      om << "# TYPE " << name << " gauge\n";
      for (int g = 0; g < kGpus; ++g) {
        std::vector<std::string> pods = {""};
        if (g == 0) {
          pods = {",pod=\"train-0\"", ",pod=\"infer\""};
        }
        for (const auto& pod : pods) {
          for (int k = 0; k < kSteps; ++k) {
            const int64_t t = t_last_ - 10000 * (kSteps - 1 - k);
            om << name << "{gpu=\"" << g << "\",UUID=\"" << Uuid(g) << "\",Hostname=\"it-node\"" << pod << "} "
               << Value(m, g, k) << " " << t / 1000 << "\n";
          }
        }
      }
      if (m == 0) {
        om << name << "{gpu=\"9\",Hostname=\"no-uuid\"} 1 " << t_last_ / 1000 << "\n";
      }
    }
    om << "# EOF\n";
    const std::string file = dir_ + "/data.om";
    std::ofstream(file) << om.str();
    const std::string cmd = promtool + " tsdb create-blocks-from openmetrics " + file + " " + dir_ + "/tsdb > " + dir_ +
                            "/promtool.log 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << ReadFile(dir_ + "/promtool.log");  // NOLINT(concurrency-mt-unsafe)
  }

  // Starts prometheus on `port` over dir_/tsdb and waits for /-/ready.
  void StartPrometheus(const std::string& prometheus, int port) {
    const std::string config = dir_ + "/prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 15s\n";
    prom_ = &NewChild();
    ASSERT_TRUE(prom_->Start({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_ + "/tsdb",
                              "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
                             dir_ + "/prometheus.log"));
    bool died = false;
    ASSERT_TRUE(WaitFor(
        [&] {
          died = !prom_->Running();
          httplib::Client client("127.0.0.1", port);
          const auto res = client.Get("/-/ready");
          return died || (res && res->status == 200);
        },
        kServerDeadline))
        << prom_->Log();
    ASSERT_FALSE(died) << "prometheus exited:\n" << prom_->Log();
  }

  int Serve(const std::string& path, httplib::Server::Handler handler) {
    server_ = std::make_unique<httplib::Server>();
    server_->Post(path, std::move(handler));
    const int port = server_->bind_to_any_port("127.0.0.1");
    server_thread_ = std::thread([this] { server_->listen_after_bind(); });
    EXPECT_TRUE(WaitFor([&] { return server_->is_running(); }, seconds(10)));
    return port;
  }

  std::string dir_;
  std::vector<std::unique_ptr<Child>> children_;
  Child* prom_ = nullptr;
  int64_t t_last_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread server_thread_;
};

// ---- Prometheus ----

TEST_F(MetricsSourcesTest, PrometheusBackfilledSeriesThroughTheSourceAndTheCache) {
  const std::string prometheus = FindBinary("prometheus");
  const std::string promtool = FindBinary("promtool");
  if (prometheus.empty() || promtool.empty()) {
    GTEST_SKIP() << "prometheus/promtool not found (Debian package prometheus; scripts/install-deps.sh installs it)";
  }
  ASSERT_NO_FATAL_FAILURE(Backfill(promtool));
  const int port = FreePort();
  ASSERT_NO_FATAL_FAILURE(StartPrometheus(prometheus, port));
  const std::string url = "http://127.0.0.1:" + std::to_string(port);

  auto created = PrometheusSource::Create({.url = url, .timeout = seconds(5)});
  ASSERT_TRUE(created.ok()) << created.status();
  PrometheusSource& source = **created;
  const common::Status checked = source.Check();
  ASSERT_TRUE(checked.ok()) << checked;

  // Fetch: every GPU, every metric, the newest backfilled value (k = 5); GPU 0's two pod series fold into one by
  // max by (UUID); the series without UUID is gone. Timestamps: the evaluation time, so within the call.
  const int64_t before = NowMs();
  auto fetched = source.Fetch();
  const int64_t after = NowMs();
  ASSERT_TRUE(fetched.ok()) << fetched.status() << "\n" << prom_->Log();
  ASSERT_EQ(fetched->size(), static_cast<size_t>(kGpus));
  for (int g = 0; g < kGpus; ++g) {
    const core::GpuMetrics& gpu = fetched->at(GpuUuid(Uuid(g)));
    for (size_t m = 0; m < core::kGpuMetricCount; ++m) {
      SCOPED_TRACE("GPU " + std::to_string(g) + " " + std::string(core::GpuMetricName(static_cast<GpuMetric>(m))));
      const auto& sample = gpu.Get(static_cast<GpuMetric>(m));
      ASSERT_TRUE(sample.has_value());
      EXPECT_EQ(sample->value, Value(m, g, kSteps - 1));
      EXPECT_GE(sample->timestamp_ms, before - 1000);
      EXPECT_LE(sample->timestamp_ms, after + 1000);
    }
  }
  const auto stats = source.last_fetch_stats();
  EXPECT_EQ(stats.queries, 7);
  // gpu_util's answer has one more series: the one without UUID, grouped under an empty label set.
  EXPECT_EQ(stats.series, 7 * kGpus + 1);
  EXPECT_EQ(stats.skipped_no_uuid, 1);
  EXPECT_GT(stats.response_bytes, 0);

  // The raw selector keeps every series and label: GPU 0 twice (one per pod), plus the one without UUID.
  auto raw = source.InstantQuery("DCGM_FI_DEV_GPU_UTIL", t_last_);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->result_type, "vector");
  EXPECT_EQ(raw->series.size(), static_cast<size_t>(kGpus + 2));
  for (const auto& s : raw->series) {
    EXPECT_EQ(s.samples.at(0).timestamp_ms, t_last_);  // evaluated at `time`
    EXPECT_NE(s.Label("Hostname"), nullptr);
  }

  // A range query over the backfilled minute: GPU 1's utilisation, every 10 s, at the samples' own times.
  auto range =
      source.RangeQuery("DCGM_FI_DEV_GPU_UTIL{UUID=\"" + Uuid(1) + "\"}", t_last_ - 50000, t_last_, seconds(10));
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->series.size(), 1u);
  ASSERT_EQ(range->series[0].samples.size(), static_cast<size_t>(kSteps));
  for (int k = 0; k < kSteps; ++k) {
    EXPECT_EQ(range->series[0].samples[static_cast<size_t>(k)].timestamp_ms, t_last_ - 10000 * (kSteps - 1 - k));
    EXPECT_EQ(range->series[0].samples[static_cast<size_t>(k)].value, Value(0, 1, k));
  }

  // A query that does not parse: Check names the metric, the query and Prometheus's message.
  adapters::prometheus::PrometheusSourceOptions bad_options{.url = url};
  bad_options.queries[static_cast<size_t>(GpuMetric::kPowerW)] = "max by (UUID) (DCGM_FI_DEV_POWER_USAGE";
  auto bad = PrometheusSource::Create(bad_options);
  ASSERT_TRUE(bad.ok());
  const common::Status bad_check = (*bad)->Check();
  EXPECT_EQ(bad_check.code(), StatusCode::kInvalidArgument) << bad_check;
  EXPECT_THAT(bad_check.message(), HasSubstr("metric power_w, query `max by (UUID) (DCGM_FI_DEV_POWER_USAGE`"));
  EXPECT_THAT(bad_check.message(), HasSubstr("bad_data"));
  EXPECT_THAT(bad_check.message(), HasSubstr("parse error"));
  EXPECT_EQ((*bad)->Fetch().status().code(), StatusCode::kInvalidArgument);

  // ---- the server goes away under a running cache, then comes back ----
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  sources.push_back(std::move(created).value());
  sched::MetricsCache cache(std::move(sources), {.interval = milliseconds(200)});
  ASSERT_TRUE(cache.Start().ok());
  ASSERT_TRUE(cache.WaitForRefreshes(1, kServerDeadline));
  EXPECT_EQ(cache.Degraded(), "");
  EXPECT_EQ(cache.Current()->size(), static_cast<size_t>(kGpus));

  // ---- the extender places a pod away from the busier GPU because of these metrics ----
  // One node, GPU 0 is Uuid(2) (25 % busy), GPU 1 is Uuid(0) (5 %); without metrics the tightest-fit rule takes
  // GPU 0, with them load-aware takes GPU 1.
  {
    const nlohmann::json node = testing::GpuNodeJson("it-node").Gpu(Uuid(2)).Gpu(Uuid(0)).Cpu("8").Memory("64Gi");
    auto place = [&](const sched::MetricsCache* metrics, const std::string& name) -> int {
      extender::ClusterMirror mirror;
      mirror.OnNode(extender::EventType::kAdded, node);
      struct Binder : ports::Binder {
        common::Status Bind(const core::PodRequest&, const core::Allocation& a) override {
          index = a.containers.at(0).gpus.at(0).index;
          return common::Status::Ok();
        }
        int index = -1;
      } binder;
      const nlohmann::json pod =
          testing::PodJson(name).Limits({{"gpusched.io/gpu-core", "30"}, {"gpusched.io/gpu-memory", "1000"}});
      auto service = extender::ExtenderService::Create(
          mirror, binder, [&](const std::string&, const std::string&) { return std::optional<nlohmann::json>(pod); },
          extender::ServiceOptions{.policy = "load-aware", .seed = 1, .metrics = metrics});
      EXPECT_TRUE(service.ok()) << service.status();
      // kube-scheduler's order: bind takes only a node that passed filter for the pod.
      (void)(*service)->Filter(nlohmann::json{{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", {"it-node"}}}.dump());
      const auto reply = (*service)->Bind(nlohmann::json{
          {"PodName", name},
          {"PodNamespace", "default"},
          {"PodUID", "uid-" + name},
          {"Node", "it-node"}}.dump());
      EXPECT_EQ(reply.status, 200) << reply.body;
      return binder.index;
    };
    EXPECT_EQ(place(nullptr, "static"), 0);
    EXPECT_EQ(place(&cache, "live"), 1);
  }

  prom_->Stop();
  ASSERT_TRUE(WaitFor([&] { return !cache.Degraded().empty(); }, kServerDeadline));
  const std::string degraded = cache.Degraded();
  EXPECT_THAT(degraded, HasSubstr("metrics source prometheus " + url +
                                  ": metric gpu_util, query `max by (UUID) (DCGM_FI_DEV_GPU_UTIL)`: "));
  EXPECT_THAT(degraded, HasSubstr("since"));
  // Still serving the last samples, which age out by the reader's staleness bound (60 s).
  const auto kept = cache.Current();
  ASSERT_EQ(kept->size(), static_cast<size_t>(kGpus));
  const core::GpuMetrics& gpu2 = kept->at(GpuUuid(Uuid(2)));
  const int64_t sampled = gpu2.Get(GpuMetric::kGpuUtil)->timestamp_ms;
  EXPECT_EQ(gpu2.Fresh(GpuMetric::kGpuUtil, sampled + 30000, 60000), Value(0, 2, kSteps - 1));
  EXPECT_FALSE(gpu2.Fresh(GpuMetric::kGpuUtil, sampled + 61000, 60000).has_value());
  const auto health = cache.Health();
  EXPECT_FALSE(health[0].ok);
  EXPECT_GE(health[0].consecutive_failures, 1);
  EXPECT_EQ(health[0].source, "prometheus " + url);

  // Back on the same port and TSDB: the cache recovers on its own.
  ASSERT_NO_FATAL_FAILURE(StartPrometheus(prometheus, port));
  ASSERT_TRUE(WaitFor([&] { return cache.Degraded().empty(); }, kServerDeadline)) << cache.Degraded();
  EXPECT_TRUE(cache.Health()[0].ok);
  EXPECT_GT(cache.Current()->at(GpuUuid(Uuid(2))).Get(GpuMetric::kGpuUtil)->timestamp_ms, sampled);
  cache.Stop();
}

TEST_F(MetricsSourcesTest, PrometheusErrorsNameTheMetricQueryAndServerMessage) {
  // Nothing listening.
  const int closed = FreePort();
  auto nobody = PrometheusSource::Create({.url = "http://127.0.0.1:" + std::to_string(closed)});
  ASSERT_TRUE(nobody.ok());
  const auto refused = (*nobody)->Fetch();
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("prometheus http://127.0.0.1:" + std::to_string(closed) +
                                                    ": metric gpu_util, query `max by (UUID) (DCGM_FI_DEV_GPU_UTIL)`"));

  std::atomic<int> mode{0};
  const int port = Serve("/api/v1/query", [&](const httplib::Request& req, httplib::Response& res) {
    EXPECT_FALSE(req.get_param_value("query").empty());
    EXPECT_EQ(req.get_param_value("timeout"), "0.500");
    switch (mode.load()) {
      case 0:
        res.status = 400;
        res.set_content(R"({"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected"})",
                        "application/json");
        break;
      case 1:
        res.status = 404;
        res.set_content("404 page not found\n", "text/plain");
        break;
      case 2:
        res.status = 503;
        res.set_content("Service Unavailable", "text/plain");
        break;
      case 3:
        res.set_content(R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"UUID":"GPU-x"},)"
                        R"("value":[1700000000.5,"NaN"]},{"metric":{"UUID":"GPU-y"},"value":[1700000000.5,"42"]}]}})",
                        "application/json");
        break;
      case 4:
        res.set_content(R"({"status":"success","data":{"resultType":"scalar","result":[1,"1"]}})", "application/json");
        break;
      default:
        std::this_thread::sleep_for(milliseconds(1500));  // simulates a slow server (not a wait for a result)
        res.set_content("{}", "application/json");
    }
  });
  adapters::prometheus::PrometheusSourceOptions options{.url = "http://127.0.0.1:" + std::to_string(port),
                                                        .timeout = milliseconds(500)};
  options.queries = {};
  options.queries[static_cast<size_t>(GpuMetric::kTemperatureC)] = "DCGM_FI_DEV_GPU_TEMP";
  auto created = PrometheusSource::Create(options);
  ASSERT_TRUE(created.ok()) << created.status();
  PrometheusSource& source = **created;

  const auto bad_data = source.Fetch();
  EXPECT_EQ(bad_data.status().code(), StatusCode::kInvalidArgument) << bad_data.status();
  EXPECT_THAT(bad_data.status().message(),
              HasSubstr("metric temperature_c, query `DCGM_FI_DEV_GPU_TEMP`: Prometheus bad_data: 1:5: parse error"));
  mode = 1;
  const auto not_found = source.Fetch();
  EXPECT_EQ(not_found.status().code(), StatusCode::kNotFound) << not_found.status();
  EXPECT_THAT(not_found.status().message(), HasSubstr("HTTP 404 404 page not found"));
  mode = 2;
  EXPECT_EQ(source.Fetch().status().code(), StatusCode::kUnavailable);
  mode = 3;
  const auto partial = source.Fetch();
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ(partial->size(), 1u);  // NaN left out
  EXPECT_EQ(partial->at(GpuUuid("GPU-y")).Get(GpuMetric::kTemperatureC)->value, 42);
  EXPECT_EQ(source.last_fetch_stats().skipped_not_finite, 1);
  mode = 4;
  const common::Status scalar = source.Check();
  EXPECT_EQ(scalar.code(), StatusCode::kInvalidArgument) << scalar;
  EXPECT_THAT(scalar.message(), HasSubstr("not an instant vector"));
  mode = 5;
  const auto slow = source.Fetch();
  EXPECT_EQ(slow.status().code(), StatusCode::kDeadlineExceeded) << slow.status();
}

// ---- InfluxDB ----

TEST_F(MetricsSourcesTest, InfluxDbSamplesWrittenByTheAgentReadBackThroughTheSource) {
  const std::string influxd = FindBinary("influxd");
  if (influxd.empty()) {
    GTEST_SKIP() << "influxd not found (Debian package influxdb; scripts/install-deps.sh installs it)";
  }
  std::string influx_error;
  Child& influx = NewChild();
  const int http = StartInfluxd(influx, influxd, dir_, kServerDeadline, &influx_error);
  ASSERT_GT(http, 0) << influx_error;
  const std::string url = "http://127.0.0.1:" + std::to_string(http);

  // Before the database exists: NotFound, naming the metric.
  auto created = InfluxSource::Create({.url = url, .database = "gpusched", .timeout = seconds(5)});
  ASSERT_TRUE(created.ok()) << created.status();
  InfluxSource& source = **created;
  const auto missing = source.Fetch();
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("database not found"));

  auto writer = InfluxWriter::Create({.url = url, .database = "gpusched", .timeout = seconds(5)});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->CreateDatabase().ok());
  // Two intervals, 20 s apart, within the default 300 s window: GPU g at 10g + 5 % then 10g + 7 %.
  const int64_t t1 = (NowMs() / 1000 - 10) * 1000;
  const int64_t t0 = t1 - 20000;
  auto samples = [](double bump) {
    std::vector<ports::GpuSample> out;
    for (int g = 0; g < kGpus; ++g) {
      ports::GpuSample s;
      s.index = g;
      s.uuid = GpuUuid(Uuid(g));
      s.model = "A100-SXM4-80GB";
      s.memory_total = common::MiB(81920);
      s.memory_used = common::MiB(1000 * (g + 1));
      s.gpu_utilization = 10.0 * g + bump;
      s.memory_utilization = 2.0 * g;
      s.temperature_c = 40 + g;
      s.power_w = 100.5 + g;
      out.push_back(s);
    }
    return out;
  };
  common::Status written = (*writer)->Write(adapters::influxdb::GpuSampleLines(samples(5), {.hostname = "n1"}, t0));
  // A first write right after CREATE DATABASE can fail on a loaded machine (see agent_metrics_test): retry.
  ASSERT_TRUE(WaitFor(
      [&] {
        if (!written.ok()) {
          written = (*writer)->Write(adapters::influxdb::GpuSampleLines(samples(5), {.hostname = "n1"}, t0));
        }
        return written.ok();
      },
      seconds(20)))
      << written;
  ASSERT_TRUE((*writer)->Write(adapters::influxdb::GpuSampleLines(samples(7), {.hostname = "n1"}, t1)).ok());

  const common::Status checked = source.Check();
  ASSERT_TRUE(checked.ok()) << checked;
  auto fetched = source.Fetch();
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  ASSERT_EQ(fetched->size(), static_cast<size_t>(kGpus));
  for (int g = 0; g < kGpus; ++g) {
    SCOPED_TRACE("GPU " + std::to_string(g));
    const core::GpuMetrics& gpu = fetched->at(GpuUuid(Uuid(g)));
    // The newest point (t1), at its own time.
    EXPECT_EQ(gpu.Get(GpuMetric::kGpuUtil)->value, 10.0 * g + 7);
    EXPECT_EQ(gpu.Get(GpuMetric::kGpuUtil)->timestamp_ms, t1);
    EXPECT_EQ(gpu.Get(GpuMetric::kMemoryUsedMib)->value, 1000 * (g + 1));
    EXPECT_EQ(gpu.Get(GpuMetric::kMemoryCopyUtil)->value, 2.0 * g);
    EXPECT_EQ(gpu.Get(GpuMetric::kPowerW)->value, 100.5 + g);
    EXPECT_EQ(gpu.Get(GpuMetric::kTemperatureC)->value, 40 + g);
    EXPECT_FALSE(gpu.Get(GpuMetric::kEncoderUtil).has_value());
  }

  // A statement InfluxDB rejects: the metric and the statement are named.
  adapters::influxdb::InfluxSourceOptions bad_options{.url = url, .database = "gpusched"};
  bad_options.queries[static_cast<size_t>(GpuMetric::kPowerW)] =
      "SELECT lastt(\"power_w\") FROM \"gpu\" GROUP BY \"uuid\"";
  auto bad = InfluxSource::Create(bad_options);
  ASSERT_TRUE(bad.ok());
  const common::Status bad_check = (*bad)->Check();
  EXPECT_FALSE(bad_check.ok());
  EXPECT_THAT(bad_check.message(), HasSubstr("lastt"));

  // The server goes away: Unavailable naming it.
  influx.Stop();
  const auto gone = source.Fetch();
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable) << gone.status();
  EXPECT_THAT(gone.status().message(), HasSubstr("influxdb " + url + " db=gpusched"));
}

}  // namespace
}  // namespace gpusched
