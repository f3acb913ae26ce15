#pragma once

// `gpusched top` (as a kubectl plugin: `kubectl gpusched top`): live utilisation, memory and power per GPU and per
// pod, from the DCGM series a Prometheus scrapes from the gpusched agent or dcgm-exporter (or the agent's InfluxDB).
// The GPUs and who holds them come from the cluster (nodes and pods, read-only). Wiring and formatting only.

#include <map>
#include <string>
#include <vector>

#include "gpusched/sim/cluster_status.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct TopFlags {
  std::string prometheus, influxdb, influxdb_db = "gpusched";
  std::string output;  // "" (tables), "json" or "yaml"
  bool no_headers = false;
  std::string ns;               // only this namespace's pods in the pod table ("" = every namespace)
  bool all_namespaces = false;  // -A: said explicitly (the default)
  std::string kubeconfig, context;
};

// Per GPU UUID, per metric name (util, fb_used, power): the latest value; a missing entry is unknown ("-").
using TopSamples = std::map<std::string, std::map<std::string, double>>;

// Two tables: one row per GPU (node, index, model, utilisation, memory used of total, power, pods), then one row per
// pod holding GPUs (its GPUs, their mean utilisation, their memory used and power summed). DCGM measures GPUs, not
// pods: a GPU several pods share shows its whole value on each of them (marked "shared").
[[nodiscard]] std::string FormatTop(const sim::ClusterStatus& status, const TopSamples& samples, const TopFlags& flags);

void AddTopCommand(CLI::App& app, TopFlags& flags, int& exit_code);

}  // namespace gpusched::cli
