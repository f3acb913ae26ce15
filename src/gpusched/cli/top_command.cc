#include "gpusched/cli/top_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpusched/cli/live_cluster.h"
#include "gpusched/cli/structured_output.h"
#include "gpusched/cli/text_table.h"
#include "gpusched/monitor/report.h"
#include "gpusched/monitor/source.h"

namespace gpusched::cli {
namespace {

// The metrics `top` shows (monitor::KnownMetrics names).
constexpr const char* kMetrics[] = {"util", "fb_used", "power"};

const double* Sample(const TopSamples& samples, const std::string& uuid, const char* metric) {
  auto g = samples.find(uuid);
  if (g == samples.end()) {
    return nullptr;
  }
  auto m = g->second.find(metric);
  return m == g->second.end() ? nullptr : &m->second;
}

}  // namespace

std::string FormatTop(const sim::ClusterStatus& st, const TopSamples& samples, const TopFlags& flags) {
  struct PodRow {
    std::string node;
    std::vector<std::string> gpus;
    double util = 0, mem = 0, power = 0;
    int util_n = 0, mem_n = 0, power_n = 0;
    bool shared = false;
  };
  std::map<std::string, PodRow> pods;
  nlohmann::json jgpus = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  if (!flags.no_headers) {
    rows.push_back({"NODE", "GPU", "MODEL", "UTIL", "MEMORY USED (MiB)", "POWER (W)", "PODS"});
  }
  for (const auto& n : st.nodes) {
    for (const auto& g : n.gpus) {
      const double* util = Sample(samples, g.uuid, "util");
      const double* mem = Sample(samples, g.uuid, "fb_used");
      const double* power = Sample(samples, g.uuid, "power");
      std::string holders;
      for (const auto& p : g.pods) {
        holders += (holders.empty() ? "" : ",") + p;
        if (!flags.ns.empty() && p.rfind(flags.ns + "/", 0) != 0) {
          continue;  // the GPU rows show every holder; the pod table only the namespace's pods
        }
        PodRow& r = pods[p];
        r.node = n.name;
        r.gpus.push_back(std::to_string(g.index));
        r.shared = r.shared || g.pods.size() > 1;
        if (util != nullptr) {
          r.util += *util;
          ++r.util_n;
        }
        if (mem != nullptr) {
          r.mem += *mem;
          ++r.mem_n;
        }
        if (power != nullptr) {
          r.power += *power;
          ++r.power_n;
        }
      }
      rows.push_back({n.name, std::to_string(g.index), g.model, util ? fmt::format("{:.0f}%", *util) : "-",
                      fmt::format("{}/{}", mem ? fmt::format("{:.0f}", *mem) : "-", g.memory_mib),
                      power ? fmt::format("{:.0f}", *power) : "-", holders.empty() ? "-" : holders});
      nlohmann::json jg = {{"node", n.name},   {"index", g.index},           {"uuid", g.uuid},
                           {"model", g.model}, {"memory_mib", g.memory_mib}, {"pods", g.pods}};
      for (const char* m : kMetrics) {
        const double* v = Sample(samples, g.uuid, m);
        jg[m] = v != nullptr ? nlohmann::json(*v) : nlohmann::json(nullptr);
      }
      jgpus.push_back(std::move(jg));
    }
  }
  if (flags.output == "json" || flags.output == "yaml") {
    nlohmann::json jpods = nlohmann::json::array();
    for (const auto& [name, r] : pods) {
      jpods.push_back({{"pod", name},
                       {"node", r.node},
                       {"gpus", r.gpus},
                       {"shared", r.shared},
                       {"util", r.util_n ? nlohmann::json(r.util / r.util_n) : nlohmann::json(nullptr)},
                       {"fb_used", r.mem_n ? nlohmann::json(r.mem) : nlohmann::json(nullptr)},
                       {"power", r.power_n ? nlohmann::json(r.power) : nlohmann::json(nullptr)}});
    }
    return RenderStructured(nlohmann::json{{"kind", "GpuTop"}, {"gpus", std::move(jgpus)}, {"pods", std::move(jpods)}},
                            flags.output);
  }
  std::string out = FormatColumns(rows);
  std::vector<std::vector<std::string>> prow;
  if (!flags.no_headers) {
    prow.push_back({"POD", "NODE", "GPUS", "UTIL", "MEMORY USED (MiB)", "POWER (W)"});
  }
  for (const auto& [name, r] : pods) {
    std::string gpus;
    for (const auto& g : r.gpus) {
      gpus += (gpus.empty() ? "" : ",") + g;
    }
    prow.push_back({name, r.node, gpus + (r.shared ? " (shared)" : ""),
                    r.util_n ? fmt::format("{:.0f}%", r.util / r.util_n) : "-",
                    r.mem_n ? fmt::format("{:.0f}", r.mem) : "-", r.power_n ? fmt::format("{:.0f}", r.power) : "-"});
  }
  if (!pods.empty()) {
    out += "\n" + FormatColumns(prow);
  }
  return out;
}

void AddTopCommand(CLI::App& app, TopFlags& flags, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "top",
      "Live utilisation, memory and power per GPU and per pod, from the DCGM series in Prometheus (or the "
      "agent's InfluxDB); as a kubectl plugin: kubectl gpusched top");
  cmd->add_option("--prometheus", flags.prometheus, "Prometheus URL (scraping the gpusched agent or dcgm-exporter)");
  cmd->add_option("--influxdb", flags.influxdb, "InfluxDB 1.x URL (the gpusched agent's --influxdb-url)");
  cmd->add_option("--influxdb-db", flags.influxdb_db, "InfluxDB database")->capture_default_str();
  cmd->add_option("-o,--output", flags.output, "json or yaml")->check(CLI::IsMember({"", "json", "yaml"}));
  cmd->add_flag("--no-headers", flags.no_headers, "No header lines");
  auto* ns = cmd->add_option("-n,--namespace", flags.ns, "Only this namespace's pods in the pod table");
  cmd->add_flag("-A,--all-namespaces", flags.all_namespaces, "Every namespace's pods (the default)")->excludes(ns);
  cmd->add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--context", flags.context, "kubeconfig context (default: its current-context)");
  cmd->callback([&flags, &exit_code] {
    if (flags.prometheus.empty() == flags.influxdb.empty()) {
      std::cerr << "gpusched top: give exactly one of --prometheus and --influxdb\n";
      exit_code = 2;
      return;
    }
    auto source = monitor::MakeSource(monitor::SourceOptions{
        .prometheus_url = flags.prometheus, .influxdb_url = flags.influxdb, .influxdb_db = flags.influxdb_db});
    if (!source.ok()) {
      std::cerr << "gpusched top: " << source.status().message() << "\n";
      exit_code = 2;
      return;
    }
    std::ostringstream warnings;
    auto cluster = ReadLiveCluster(flags.kubeconfig, flags.context, warnings);
    std::cerr << warnings.str();
    if (!cluster.ok()) {
      std::cerr << "gpusched top: " << cluster.status().message() << "\n";
      exit_code = 1;
      return;
    }
    const sim::ClusterStatus st = sim::BuildStatus(*cluster, {});
    std::vector<std::string> uuids;
    for (const auto& n : st.nodes) {
      for (const auto& g : n.gpus) {
        uuids.push_back(g.uuid);
      }
    }
    TopSamples samples;
    if (!uuids.empty()) {
      for (const monitor::MetricInfo& m : monitor::KnownMetrics()) {
        if (std::find(std::begin(kMetrics), std::end(kMetrics), m.name) == std::end(kMetrics)) {
          continue;
        }
        auto latest = (*source)->Latest(m, uuids);
        if (!latest.ok()) {
          std::cerr << "gpusched top: " << (*source)->Describe() << ": " << latest.status().message() << "\n";
          exit_code = 1;
          return;
        }
        for (const auto& [uuid, value] : latest.value()) {
          samples[uuid][m.name] = value;
        }
      }
    }
    std::cout << FormatTop(st, samples, flags);
    exit_code = 0;
  });
}

}  // namespace gpusched::cli
