#include "gpusched/extender/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpusched::extender {
namespace {

TEST(ConfigTest, ParsesEveryKey) {
  auto c = ParseExtenderConfig(R"yaml(
listen: "127.0.0.1:18890"
pathPrefix: /scheduler/
tls: {certFile: /a.crt, keyFile: /a.key, clientCAFile: /ca.crt, allowedClientNames: [kube-scheduler, ks-2],
      reloadIntervalSeconds: 5}
maxConnections: 64
maxConnectionsPerPeer: 8
idleTimeoutSeconds: 7
schedulerNames: [default-scheduler, gpu-scheduler]
bindFilterWindowSeconds: 12
policy: spread
resourceNames: [gpusched.io/gpu, nvidia.com/gpu]
maxBodyBytes: 2048
threads: 4
readTimeoutSeconds: 2
kubeconfig: /k
weights: {binpack: 1, fgd: 2.5}
metrics:
  refreshSeconds: 5
  stalenessSeconds: 30
  prometheus: {url: "http://prom:9090", timeoutSeconds: 2, queries: {gpu_util: "avg_over_time(DCGM_FI_DEV_GPU_UTIL[1m])"}}
  influxdb: {url: "http://influx:8086", database: gpusched}
loadAware:
  gpuUtil: 50
  compute: 0
  models:
    - {name: H100-SXM5-80GB, aliases: [H100], memoryMib: 81920, bandwidthGBps: 3350, fp32Tflops: 67, tdpW: 700}
)yaml",
                               "x.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, 18890);
  EXPECT_EQ(c->path_prefix, "/scheduler");
  EXPECT_EQ(c->tls_cert_file, "/a.crt");
  EXPECT_EQ(c->tls_key_file, "/a.key");
  EXPECT_EQ(c->tls_client_ca_file, "/ca.crt");
  EXPECT_EQ(c->tls_allowed_client_names, (std::vector<std::string>{"kube-scheduler", "ks-2"}));
  EXPECT_EQ(c->tls_reload_interval, std::chrono::seconds(5));
  EXPECT_EQ(c->max_connections, 64u);
  EXPECT_EQ(c->max_connections_per_peer, 8u);
  EXPECT_EQ(c->idle_timeout_seconds, 7);
  EXPECT_EQ(c->scheduler_names, (std::vector<std::string>{"default-scheduler", "gpu-scheduler"}));
  EXPECT_EQ(c->bind_filter_window_seconds, 12);
  EXPECT_EQ(c->policy, "spread");
  EXPECT_EQ(c->resources.enabled.size(), 2u);
  EXPECT_TRUE(c->resources.Enabled("nvidia.com/gpu"));
  EXPECT_FALSE(c->resources.Enabled("aliyun.com/gpu-mem"));
  EXPECT_EQ(c->max_body_bytes, 2048u);
  EXPECT_EQ(c->threads, 4);
  EXPECT_EQ(c->read_timeout_seconds, 2);
  EXPECT_EQ(c->kubeconfig, "/k");
  ASSERT_EQ(c->metrics_sources.size(), 2u);
  EXPECT_EQ(c->metrics_sources[0].kind, "prometheus");
  EXPECT_EQ(c->metrics_sources[0].timeout_seconds, 2);
  EXPECT_EQ(c->metrics_sources[0].queries.at("gpu_util"), "avg_over_time(DCGM_FI_DEV_GPU_UTIL[1m])");
  EXPECT_EQ(c->metrics_sources[1].database, "gpusched");
  EXPECT_EQ(c->metrics_refresh_seconds, 5);
  EXPECT_EQ(c->metrics_staleness_seconds, 30);
  EXPECT_EQ(c->load_aware_weights.at("gpuUtil"), 50);
  EXPECT_EQ(c->load_aware_weights.at("compute"), 0);
  ASSERT_EQ(c->gpu_models.size(), 1u);
  EXPECT_EQ(c->gpu_models[0].name, "H100-SXM5-80GB");
  EXPECT_EQ(c->gpu_models[0].aliases, std::vector<std::string>{"H100"});
  EXPECT_EQ(c->gpu_models[0].bandwidth_gbps, 3350);
  EXPECT_DOUBLE_EQ(c->gpu_models[0].fp32_tflops, 67);
  ASSERT_EQ(c->weights.size(), 2u);
  EXPECT_EQ(c->weights[1].first, "fgd");
  EXPECT_DOUBLE_EQ(c->weights[1].second, 2.5);
  auto empty = ParseExtenderConfig("", "e.yaml");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->policy, "binpack");
  EXPECT_EQ(empty->resources.enabled.size(), kube::AllGpuResourceNames().size());
  // Secure defaults: loopback, plain HTTP there, only default-scheduler's pods bound.
  EXPECT_EQ(empty->host, "127.0.0.1");
  EXPECT_EQ(empty->port, 12345);
  EXPECT_EQ(empty->max_connections, 256u);
  EXPECT_EQ(empty->max_connections_per_peer, 64u);
  EXPECT_EQ(empty->idle_timeout_seconds, 30);
  EXPECT_EQ(empty->scheduler_names, std::vector<std::string>{"default-scheduler"});
  EXPECT_EQ(empty->bind_filter_window_seconds, 30);
  EXPECT_TRUE(empty->tls_client_ca_file.empty());
  EXPECT_EQ(empty->tls_reload_interval, std::chrono::seconds(30));
}

// Anyone who reaches the extender can bind pods (it writes Bindings with its own ServiceAccount), so off loopback
// it must know who calls: TLS with client certificates from a given CA, carrying an allowed name.
TEST(ConfigTest, ListenOffLoopbackNeedsClientCertificates) {
  const std::string full_tls =
      "tls: {certFile: /s.crt, keyFile: /s.key, clientCAFile: /ca.crt, allowedClientNames: [kube-scheduler]}";
  struct Case {
    std::string name;
    std::string yaml;
    std::string want_error;  // "" = valid
  };
  const Case cases[] = {
      {.name = "loopback, plain HTTP", .yaml = "listen: 127.0.0.1:1", .want_error = ""},
      {.name = "IPv6 loopback", .yaml = "listen: \"[::1]:1\"", .want_error = ""},
      {.name = "localhost", .yaml = "listen: localhost:1", .want_error = ""},
      {.name = "all interfaces with full TLS", .yaml = "listen: 0.0.0.0:1\n" + full_tls, .want_error = ""},
      {.name = "all interfaces, plain HTTP",
       .yaml = "listen: 0.0.0.0:1",
       .want_error = "\"listen\" address 0.0.0.0 is not loopback: only kube-scheduler may call the extender, so this "
                     "needs tls.certFile, tls.keyFile, tls.clientCAFile, tls.allowedClientNames"},
      {.name = "empty host means all interfaces", .yaml = "listen: \":1\"", .want_error = "0.0.0.0 is not loopback"},
      {.name = "a node address with server TLS only",
       .yaml = "listen: 10.0.0.5:1\ntls: {certFile: /s.crt, keyFile: /s.key}",
       .want_error = "needs tls.clientCAFile, tls.allowedClientNames"},
      {.name = "a node address without allowed names",
       .yaml = "listen: 10.0.0.5:1\ntls: {certFile: /s.crt, keyFile: /s.key, clientCAFile: /ca.crt}",
       .want_error = "needs tls.allowedClientNames"},
      {.name = "an empty allowed-names list",
       .yaml = "listen: 10.0.0.5:1\ntls: {certFile: /s.crt, keyFile: /s.key, clientCAFile: /ca.crt, "
               "allowedClientNames: []}",
       .want_error = "needs tls.allowedClientNames"},
      {.name = "client CA without a server certificate",
       .yaml = "tls: {clientCAFile: /ca.crt}",
       .want_error = "\"tls.clientCAFile\" needs tls.certFile and tls.keyFile"},
      {.name = "allowed names without a client CA",
       .yaml = "tls: {certFile: /s.crt, keyFile: /s.key, allowedClientNames: [kube-scheduler]}",
       .want_error = "\"tls.allowedClientNames\" needs tls.clientCAFile"},
      {.name = "allowed names not a list",
       .yaml = "tls: {certFile: /s.crt, keyFile: /s.key, clientCAFile: /c, allowedClientNames: kube-scheduler}",
       .want_error = "\"tls.allowedClientNames\" must be a list"},
      {.name = "an empty allowed name",
       .yaml = "tls: {certFile: /s.crt, keyFile: /s.key, clientCAFile: /c, allowedClientNames: [\"\"]}",
       .want_error = "\"tls.allowedClientNames\" has an empty name"},
      {.name = "unknown tls key", .yaml = "tls: {caFile: /c}", .want_error = "unknown key \"tls.caFile\""},
      {.name = "a reload interval of 0",
       .yaml = "tls: {certFile: /s.crt, keyFile: /s.key, reloadIntervalSeconds: 0}",
       .want_error = "\"tls.reloadIntervalSeconds\" must be 1..86400"},
      {.name = "a reload interval that is not a number",
       .yaml = "tls: {certFile: /s.crt, keyFile: /s.key, reloadIntervalSeconds: soon}",
       .want_error = "tls.reloadIntervalSeconds"},
      // The probe listener serves no verb: plain HTTP on any address is fine.
      {.name = "probes on all interfaces", .yaml = "healthListen: 0.0.0.0:10262", .want_error = ""},
      {.name = "probes on a bad address",
       .yaml = "healthListen: 10262",
       .want_error = "\"healthListen\": listen address \"10262\" is not host:port"},
      {.name = "probes on the verbs' port",
       .yaml = "listen: 127.0.0.1:12345\nhealthListen: 0.0.0.0:12345",
       .want_error = "\"healthListen\" and \"listen\" name the same port 12345"},
  };
  for (const auto& c : cases) {
    auto parsed = ParseExtenderConfig(c.yaml, "x.yaml");
    if (c.want_error.empty()) {
      EXPECT_TRUE(parsed.ok()) << c.name << ": " << parsed.status();
      continue;
    }
    ASSERT_FALSE(parsed.ok()) << c.name;
    EXPECT_NE(parsed.status().message().find(c.want_error), std::string::npos) << c.name << ": " << parsed.status();
    EXPECT_EQ(parsed.status().message().rfind("x.yaml: ", 0), 0u) << c.name << ": " << parsed.status();
  }
  // The same check after --listen overrides the file.
  ExtenderConfig config;
  EXPECT_TRUE(ValidateExtenderConfig(config, "--listen").ok());
  config.host = "192.168.1.10";
  const common::Status s = ValidateExtenderConfig(config, "--listen");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("192.168.1.10 is not loopback"), std::string::npos) << s;
}

TEST(ConfigTest, InterferenceSection) {
  auto c = ParseExtenderConfig(
      "interference: {enabled: true, appLabel: app.kubernetes.io/name, objective: incoming, "
      "interferenceWeight: 3, packingWeight: 1, avoidPredictedOom: false, refuseHarmfulPairs: false, "
      "minSharingGain: 0.5}",
      "i.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->interference_enabled);
  EXPECT_EQ(c->resources.app_label, "app.kubernetes.io/name");
  EXPECT_EQ(c->interference_aware.objective, policy::InterferenceAwareOptions::Objective::kIncomingOnly);
  EXPECT_EQ(c->interference_aware.interference_weight, 3);
  EXPECT_EQ(c->interference_aware.packing_weight, 1);
  EXPECT_FALSE(c->interference_aware.avoid_predicted_oom);
  EXPECT_FALSE(c->interference_aware.refuse_harmful_pairs);
  EXPECT_DOUBLE_EQ(c->interference_aware.min_sharing_gain, 0.5);
  // Off by default, with the policy's defaults.
  auto d = ParseExtenderConfig("policy: binpack", "d.yaml");
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->interference_enabled);
  EXPECT_EQ(d->resources.app_label, "");
  EXPECT_EQ(d->interference_aware.objective, policy::InterferenceAwareOptions::Objective::kSum);
  EXPECT_EQ(d->interference_aware.interference_weight, 100);
  EXPECT_TRUE(d->interference_aware.avoid_predicted_oom);
  EXPECT_TRUE(d->interference_aware.refuse_harmful_pairs);
  EXPECT_EQ(d->interference_aware.packing_weight, 0);
}

TEST(ConfigTest, LeaderElection) {
  auto off = ParseExtenderConfig("policy: binpack\n", "c.yaml");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->leader_election.enabled);
  EXPECT_EQ(off->leader_election.name, "gpusched-extender");
  auto on = ParseExtenderConfig(
      "leaderElection: {enabled: true, namespace: gpusched, name: ext, leaseDurationSeconds: 6, "
      "renewDeadlineSeconds: 4, retryPeriodSeconds: 1}\n",
      "c.yaml");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->leader_election.enabled);
  EXPECT_EQ(on->leader_election.namespace_, "gpusched");
  EXPECT_EQ(on->leader_election.name, "ext");
  EXPECT_EQ(on->leader_election.lease_duration_seconds, 6);
  EXPECT_EQ(on->leader_election.renew_deadline_seconds, 4);
  EXPECT_EQ(on->leader_election.retry_period_seconds, 1);
}

TEST(ConfigTest, ShareWithinIsAResourceSetting) {
  EXPECT_EQ(ParseExtenderConfig("", "c.yaml")->resources.share_within, core::ShareWithin::kAny);
  auto c = ParseExtenderConfig("shareWithin: namespace", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->resources.share_within, core::ShareWithin::kNamespace);
  EXPECT_EQ(c->resources.keti_share_percent, 10);
  EXPECT_EQ(ParseExtenderConfig("ketiSharePercent: 25", "c.yaml")->resources.keti_share_percent, 25);
  EXPECT_THAT(ParseExtenderConfig("ketiSharePercent: 0", "c.yaml").status().message(), ::testing::HasSubstr("1..100"));
}

TEST(ConfigTest, ErrorsNameTheFileAndTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"polcy: binpack", "unknown key \"polcy\""},
      {"shareWithin: tenant", "shareWithin \"tenant\": want any, namespace or queue"},
      {"listen: nowhere", "not host:port"},
      {"listen: \"h:99999\"", "bad port"},
      {"threads: many", "\"threads\" has the wrong type"},
      {"threads: 0", "1..1024"},
      {"tls: {certFile: /a}", "both certFile and keyFile"},
      {"resourceNames: [gpusched.io/gpus]", "unknown resource name \"gpusched.io/gpus\""},
      {"[1, 2]", "mapping"},
      {"a: [", "not valid YAML"},
      {"pathPrefix: x", "must start with /"},
      {"weights: {binpack: -1}", "positive"},
      {"weights: [binpack]", "must map policy names"},
      {"metrics: {prometheus: {timeoutSeconds: 2}}", "\"metrics.prometheus.url\" is required"},
      {"metrics: {influxdb: {url: x}}", "\"metrics.influxdb.database\" is required"},
      {"metrics: {prometheus: {url: x, queries: {gpu_utl: q}}}", "unknown metric"},
      {"metrics: {graphite: {}}", "unknown key \"metrics.graphite\""},
      {"loadAware: {gpu: 1}", "unknown key \"loadAware.gpu\""},
      {"loadAware: {gpuUtil: -1}", "0..1000000"},
      {"loadAware: {models: [{memoryMib: 1}]}", "an entry has no name"},
      {"loadAware: {models: [{name: X, speed: 1}]}", "unknown key \"loadAware.models.speed\""},
      {"interference: true", "\"interference\" must be a mapping"},
      {"interference: {enabled: maybe}", "\"interference.enabled\" has the wrong type"},
      {"interference: {objective: greedy}", "must be sum or incoming"},
      {"interference: {minSharingGain: 2}", "\"interference.minSharingGain\" must be within 0..1"},
      {"interference: {refuseHarmfulPairs: often}", "\"interference.refuseHarmfulPairs\" has the wrong type"},
      {"interference: {packingWeight: -1}", "\"interference.packingWeight\" must be 0..1000000"},
      {"interference: {interferenceWeight: 0}", "are both 0"},
      {"interference: {model: /m.json}", "unknown key \"interference.model\""},
      {"maxConnections: 0", "\"maxConnections\" must be 1..1000000"},
      {"maxConnectionsPerPeer: 0", "\"maxConnectionsPerPeer\" must be 1..1000000"},
      {"idleTimeoutSeconds: 0", "\"idleTimeoutSeconds\" must be 1..3600"},
      {"bindFilterWindowSeconds: 86400", "\"bindFilterWindowSeconds\" must be 1..3600"},
      {"bindFilterWindowSeconds: soon", "\"bindFilterWindowSeconds\" has the wrong type"},
      {"schedulerNames: []", "\"schedulerNames\" must name at least one scheduler"},
      {"schedulerNames: default-scheduler", "\"schedulerNames\" must be a list"},
      {"schedulerNames: [\"\"]", "\"schedulerNames\" has an empty name"},
      {"leaderElection: true", "\"leaderElection\" must be a mapping"},
      {"leaderElection: {enabled: yes please}", "\"leaderElection.enabled\" has the wrong type"},
      {"leaderElection: {lease: x}", "unknown key \"leaderElection.lease\""},
      {"leaderElection: {name: \"\"}", "\"leaderElection.name\" is empty"},
      {"leaderElection: {leaseDurationSeconds: 0}", "\"leaderElection.leaseDurationSeconds\" must be 1..3600"},
      {"leaderElection: {renewDeadlineSeconds: 15}",
       "retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds"},
  };
  for (const auto& [yaml, expect] : cases) {
    auto c = ParseExtenderConfig(yaml, "bad.yaml");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_NE(c.status().message().find(expect), std::string::npos) << yaml << " -> " << c.status();
    EXPECT_EQ(c.status().message().rfind("bad.yaml: ", 0), 0u) << c.status();
  }
  EXPECT_EQ(LoadExtenderConfig("/nonexistent/x.yaml").status().code(), common::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpusched::extender
