#pragma once

// What every daemon's config file shares (the scheduler's, the extender's, the webhook's and the agent's listen
// addresses): leader-election settings, the resource-name compatibility keys, the live inputs of the
// snapshot-reading policies, and host:port. One library, so that no daemon links another daemon's.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/policy_options.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace gpusched::daemon {

struct MetricsSourceConfig {
  std::string kind;  // "prometheus" or "influxdb"
  std::string url;
  std::string database;  // influxdb
  int timeout_seconds = 5;
  std::string uuid_label = "UUID";
  std::map<std::string, std::string> queries;  // by core::GpuMetricName; absent = the source's default
};

struct GpuModelConfig {
  std::string name;
  std::vector<std::string> aliases;
  int64_t memory_mib = 0;
  int64_t bandwidth_gbps = 0;
  double fp32_tflops = 0;
  int64_t tdp_w = 0;
};

// The `leaderElection` mapping of a daemon's config file (the extender's and the scheduler's):
//   enabled, namespace ("" = $POD_NAMESPACE, else kube-system), name (the Lease), leaseDurationSeconds,
//   renewDeadlineSeconds, retryPeriodSeconds (each 1..3600, retry < renew < lease).
struct LeaderElectionConfig {
  bool enabled = false;
  std::string namespace_;
  std::string name;
  int lease_duration_seconds = 15;
  int renew_deadline_seconds = 10;
  int retry_period_seconds = 2;
};
// Reads `node` (the value of the leaderElection key) over `out`'s defaults; errors name `source` and the key.
common::Status ParseLeaderElection(const YAML::Node& node, const std::string& source, LeaderElectionConfig& out);

// What the snapshot-reading policies (load-aware, interference-aware) read, in every front end's config file (the
// extender's and the scheduler's): the keys
//   metrics:      {refreshSeconds, stalenessSeconds, prometheus: {url, timeoutSeconds, uuidLabel, queries},
//                  influxdb: {url, database, timeoutSeconds, queries}}
//   loadAware:    weights (memorySize, compute, gpuUtil, ...) and models [{name, aliases, memoryMib, ...}]
//   interference: {enabled, appLabel, objective, avoidPredictedOom, refuseHarmfulPairs, minSharingGain,
//                  interferenceWeight, packingWeight}
struct LiveInputsConfig {
  std::vector<MetricsSourceConfig> metrics_sources;
  int metrics_refresh_seconds = 15;
  int metrics_staleness_seconds = 60;
  std::map<std::string, int64_t> load_aware_weights;  // config key -> weight
  std::vector<GpuModelConfig> gpu_models;             // empty: the built-in table
  bool interference_enabled = false;                  // the application-class label is resources.app_label
  policy::InterferenceAwareOptions interference_aware;
};
// Whether `key` is one of LiveInputsConfig's keys (metrics, loadAware, interference).
[[nodiscard]] bool IsLiveInputKey(const std::string& key);
// Reads one of those keys into `out` (interference.appLabel into resources.app_label); errors name `source` and the
// key.
common::Status ParseLiveInput(const std::string& key, const YAML::Node& node, const std::string& source,
                              LiveInputsConfig& out, kube::ResourceConfig& resources);

// The compatibility keys of a daemon's config file (the extender's and the scheduler's) into `resources`:
//   gpushareMemoryUnit: GiB | MiB   what aliyun.com/gpu-mem counts (GiB by default)
//   geniusLabels: true | false      read Genius's genius/gpu-* labels (default true)
common::Status ParseResourceCompat(const std::string& key, const YAML::Node& node, const std::string& source,
                                   kube::ResourceConfig& resources);

// "host:port" (port 0 = any free port); "[::1]:80" for IPv6.
common::Status ParseListen(const std::string& listen, std::string& host, int& port);

}  // namespace gpusched::daemon
