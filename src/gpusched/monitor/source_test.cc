// GpuMetricSource over Prometheus against a scripted Prometheus HTTP API (httplib): the PromQL it sends and how it
// reads the answers. The same source against a real Prometheus is in tests/e2e/test_monitor.py.

#include "gpusched/monitor/source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <mutex>
#include <thread>

namespace gpusched::monitor {
namespace {

using ::testing::HasSubstr;

class FakePrometheus {
 public:
  FakePrometheus() {
    auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      const std::string q = req.get_param_value("query");
      {
        std::lock_guard lock(mu_);
        queries_.push_back(req.path + " " + q);
      }
      std::string result;
      if (req.path == "/api/v1/query_range") {
        result = R"({"resultType":"matrix","result":[{"metric":{"UUID":"GPU-a"},"values":[[1700000000,"37"],)"
                 R"([1700000001,"38"]]}]})";
      } else if (q.find("pod=") != std::string::npos) {
        // dcgm-exporter's attribution: the pod's GPUs carry pod/namespace/container, the host as Hostname.
        result = R"({"resultType":"vector","result":[)"
                 R"({"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"3","UUID":"GPU-c","Hostname":"n7",)"
                 R"("container":"main","namespace":"ml","pod":"train"},"value":[1700000000,"50"]},)"
                 R"({"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"5","UUID":"GPU-d","hostname":"n7",)"
                 R"("container":"main","namespace":"ml","pod":"train"},"value":[1700000000,"60"]}]})";
      } else {
        result = R"({"resultType":"vector","result":[{"metric":{"UUID":"GPU-a"},"value":[1700000000,"37"]},)"
                 R"({"metric":{"UUID":"GPU-b"},"value":[1700000000,"71"]}]})";
      }
      res.set_content(R"({"status":"success","data":)" + result + "}", "application/json");
    };
    server_.Post("/api/v1/query", answer);
    server_.Post("/api/v1/query_range", answer);
    server_.Get("/api/v1/query", answer);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ~FakePrometheus() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> queries() {
    std::lock_guard lock(mu_);
    return queries_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> queries_;
};

TEST(SourceTest, PrometheusQueriesByUuidAndReadsPodAttribution) {
  FakePrometheus prom;
  auto source = MakeSource(SourceOptions{.prometheus_url = prom.url()});
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_TRUE((*source)->Check().ok());
  const MetricInfo util = (*ParseMetricList("util"))[0];

  auto latest = (*source)->Latest(util, {"GPU-a", "GPU-b"});
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->at("GPU-a"), 37);
  EXPECT_EQ(latest->at("GPU-b"), 71);

  auto range = (*source)->Range(util, {"GPU-a"}, 1700000000000, 1700000001000, std::chrono::milliseconds(1000));
  ASSERT_TRUE(range.ok()) << range.status();
  ASSERT_EQ(range->at("GPU-a").size(), 2U);
  EXPECT_EQ(range->at("GPU-a")[1], (std::pair<int64_t, double>{1700000001000, 38}));

  auto gpus = (*source)->GpusOfPod("ml", "train");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2U);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-c");
  EXPECT_EQ((*gpus)[0].index, 3);
  EXPECT_EQ((*gpus)[0].node, "n7");
  EXPECT_EQ((*gpus)[0].container, "main");
  EXPECT_EQ((*gpus)[1].node, "n7");  // the newer label name

  const auto sent = prom.queries();
  ASSERT_EQ(sent.size(), 4U);
  EXPECT_EQ(sent[0], "/api/v1/query vector(1)");
  EXPECT_EQ(sent[1], "/api/v1/query max by (UUID) (DCGM_FI_DEV_GPU_UTIL{UUID=~\"GPU-a|GPU-b\"})");
  EXPECT_EQ(sent[2], "/api/v1/query_range max by (UUID) (DCGM_FI_DEV_GPU_UTIL{UUID=~\"GPU-a\"})");
  EXPECT_EQ(sent[3], "/api/v1/query DCGM_FI_DEV_GPU_UTIL{pod=\"train\",namespace=\"ml\"}");
}

TEST(SourceTest, ExactlyOneSourceAndAnUnreachableOneFailsItsCheck) {
  EXPECT_THAT(MakeSource(SourceOptions{}).status().message(), HasSubstr("give one metrics source"));
  EXPECT_FALSE(MakeSource(SourceOptions{.prometheus_url = "http://a:9090", .influxdb_url = "http://b:8086"}).ok());
  EXPECT_FALSE(MakeSource(SourceOptions{.prometheus_url = "ftp://nope"}).ok());
  // Nothing listens on port 1.
  auto source =
      MakeSource(SourceOptions{.prometheus_url = "http://127.0.0.1:1", .timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(source.ok());
  EXPECT_FALSE((*source)->Check().ok());
  auto influx =
      MakeSource(SourceOptions{.influxdb_url = "http://127.0.0.1:1", .timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(influx.ok());
  EXPECT_FALSE((*influx)->Check().ok());
  // A metric outside the agent's InfluxDB schema is refused by name.
  auto raw = ParseMetricList("DCGM_FI_PROF_SM_ACTIVE");
  ASSERT_TRUE(raw.ok());
  EXPECT_THAT((*influx)->Latest((*raw)[0], {"GPU-a"}).status().message(), HasSubstr("not in the agent's InfluxDB"));
}

}  // namespace
}  // namespace gpusched::monitor
