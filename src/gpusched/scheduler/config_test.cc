#include "gpusched/scheduler/config.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpusched::scheduler {
namespace {

using ::testing::HasSubstr;

TEST(SchedulerConfigTest, DefaultsAreKubeSchedulersTimings) {
  auto c = ParseSchedulerConfig("", "empty");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->scheduler_names, std::vector<std::string>{"gpusched"});
  EXPECT_TRUE(c->leader_election.enabled);
  EXPECT_EQ(c->leader_election.lease_duration_seconds, 15);
  EXPECT_EQ(c->leader_election.renew_deadline_seconds, 10);
  EXPECT_EQ(c->leader_election.retry_period_seconds, 2);
  EXPECT_EQ(c->initial_backoff_seconds, 1);
  EXPECT_EQ(c->max_backoff_seconds, 10);
  EXPECT_EQ(c->bind_workers, 16);
  EXPECT_EQ(c->port, 10261);
  EXPECT_TRUE(c->preemption);
  EXPECT_FALSE(c->eviction_grace_period_seconds.has_value());
}

TEST(SchedulerConfigTest, ReadsEveryKey) {
  auto c = ParseSchedulerConfig(R"(
schedulerNames: [gpusched, gpu-scheduler, genius-scheduler]
policy: fgd
weights: {fgd: 2, binpack: 0.5}
listen: "127.0.0.1:9999"
kubeconfig: /etc/kube.conf
bindWorkers: 8
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
assumedPodTtlSeconds: 100
leaderElection: {enabled: false, namespace: gpu, name: sched, leaseDurationSeconds: 4, renewDeadlineSeconds: 3,
                 retryPeriodSeconds: 1}
gpushareMemoryUnit: MiB
geniusLabels: false
shareWithin: queue
preemption: {enabled: false, evictionGracePeriodSeconds: 0}
)",
                                "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->scheduler_names.size(), 3U);
  EXPECT_EQ(c->policy, "fgd");
  ASSERT_EQ(c->weights.size(), 2U);
  EXPECT_EQ(c->weights[0], (std::pair<std::string, double>{"fgd", 2.0}));
  EXPECT_EQ(c->weights[1], (std::pair<std::string, double>{"binpack", 0.5}));
  EXPECT_EQ(c->host, "127.0.0.1");
  EXPECT_EQ(c->port, 9999);
  EXPECT_EQ(c->kubeconfig, "/etc/kube.conf");
  EXPECT_EQ(c->bind_workers, 8);
  EXPECT_EQ(c->initial_backoff_seconds, 2);
  EXPECT_EQ(c->max_backoff_seconds, 20);
  EXPECT_EQ(c->assumed_ttl_seconds, 100);
  EXPECT_FALSE(c->leader_election.enabled);
  EXPECT_EQ(c->leader_election.namespace_, "gpu");
  EXPECT_EQ(c->leader_election.name, "sched");
  EXPECT_EQ(c->leader_election.lease_duration_seconds, 4);
  EXPECT_EQ(c->resources.gpushare_memory_unit_mib, 1);
  EXPECT_FALSE(c->resources.genius_labels);
  EXPECT_EQ(c->resources.share_within, core::ShareWithin::kQueue);
  EXPECT_FALSE(c->preemption);
  EXPECT_EQ(c->eviction_grace_period_seconds, 0);
}

// load-aware and interference-aware run in the scheduler with their inputs, read as the extender reads them.
TEST(SchedulerConfigTest, SnapshotReadingPoliciesWithTheirInputs) {
  auto c = ParseSchedulerConfig(R"(
policy: load-aware
weights: {load-aware: 2, interference-aware: 1}
metrics:
  refreshSeconds: 5
  stalenessSeconds: 20
  prometheus: {url: "http://127.0.0.1:9090"}
  influxdb: {url: "http://127.0.0.1:8086", database: gpus}
loadAware: {gpuUtil: 3}
interference: {enabled: true, appLabel: app, objective: incoming}
)",
                                "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->policy, "load-aware");
  ASSERT_EQ(c->metrics_sources.size(), 2U);
  EXPECT_EQ(c->metrics_sources[0].kind, "prometheus");
  EXPECT_EQ(c->metrics_sources[1].database, "gpus");
  EXPECT_EQ(c->metrics_refresh_seconds, 5);
  EXPECT_EQ(c->metrics_staleness_seconds, 20);
  EXPECT_EQ(c->load_aware_weights.at("gpuUtil"), 3);
  EXPECT_TRUE(c->interference_enabled);
  EXPECT_EQ(c->resources.app_label, "app");
  const auto names = SchedulerPolicyNames();
  EXPECT_NE(std::find(names.begin(), names.end(), "interference-aware"), names.end());
}

TEST(SchedulerConfigTest, MistakesAreErrorsNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"schedulerNames: []", "schedulerNames"},
      // Shorter than a stalled watch takes to detect (60 s + 2 x 15 s): GPUs could be freed under a Binding.
      {"assumedPodTtlSeconds: 30", "\"assumedPodTtlSeconds\" must be 90..3600"},
      {"schedulerNames: [\"\"]", "empty name"},
      {"policy: best-guess", "unknown policy \"best-guess\""},
      {"policy: load-aware", "\"policy\": load-aware reads live GPU metrics: configure metrics.prometheus"},
      {"weights: {fgd: 0}", "\"weights.fgd\" must be a positive number"},
      {"weights: {fgd: lots}", "weights.fgd"},
      {"weights: {load-aware: 1}", "\"weights.load-aware\": load-aware reads live GPU metrics"},
      {"weights: {nonesuch: 1}", "\"weights.nonesuch\": not a policy"},
      {"metrics: {prometheus: {timeoutSeconds: 2}}", "\"metrics.prometheus.url\" is required"},
      {"weights: [fgd]", "\"weights\" must map"},
      {"policy: interference-aware", "reads an interference forecast: set interference.enabled"},
      {"listen: nowhere", "not host:port"},
      {"bindWorkers: 0", "bindWorkers"},
      {"bindWorkers: many", "bindWorkers"},
      {"podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2", "podMaxBackoffSeconds"},
      {"leaderElection: {leaseDurationSeconds: 0}", "leaderElection.leaseDurationSeconds"},
      {"leaderElection: {nmae: x}", "unknown key \"leaderElection.nmae\""},
      {"leaderElection: yes", "mapping"},
      {"leaderElection: {leaseDurationSeconds: 5, renewDeadlineSeconds: 6}",
       "retryPeriodSeconds < renewDeadlineSeconds"},
      {"schedulerName: gpusched", "unknown key \"schedulerName\""},
      {"[1, 2]", "top level"},
      {"policy: [binpack]", "policy"},
      {"gpushareMemoryUnit: KiB", "GiB or MiB"},
      {"geniusLabels: maybe", "geniusLabels"},
      {"shareWithin: tenant", "shareWithin \"tenant\": want any, namespace or queue"},
      {"preemption: on", "\"preemption\" must be a mapping"},
      {"preemption: {evictionGracePeriodSeconds: -1}", "preemption.evictionGracePeriodSeconds"},
      {"preemption: {enabled: sometimes}", "preemption.enabled"},
      {"preemption: {grace: 1}", "unknown key \"preemption.grace\""},
  };
  for (const auto& [yaml, expect] : cases) {
    auto c = ParseSchedulerConfig(yaml, "c.yaml");
    ASSERT_FALSE(c.ok()) << yaml;
    EXPECT_THAT(c.status().message(), HasSubstr(expect)) << yaml;
    EXPECT_THAT(c.status().message(), HasSubstr("c.yaml")) << yaml;
  }
}

// The scheduler runs the policies that read nothing it does not provide, by their declaration, not by name.
// Every policy is offered; one that reads live metrics or a forecast parses only with its inputs configured.
TEST(SchedulerConfigTest, EveryPolicyIsOfferedWithTheInputsItReads) {
  const std::vector<std::string> names = SchedulerPolicyNames();
  EXPECT_THAT(names, ::testing::IsSupersetOf(
                         {"binpack", "spread", "random", "fgd", "bestfit", "load-aware", "interference-aware"}));
  const std::string inputs =
      "\nmetrics: {prometheus: {url: \"http://127.0.0.1:9090\"}}\ninterference: {enabled: true}\n";
  for (const auto& n : names) {
    auto c = ParseSchedulerConfig("policy: " + n + inputs, "c.yaml");
    ASSERT_TRUE(c.ok()) << n << ": " << c.status().message();
    EXPECT_EQ(c->policy, n);
  }
}

}  // namespace
}  // namespace gpusched::scheduler
