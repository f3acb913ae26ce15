#include "gpusched/cli/status_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpusched/cli/live_cluster.h"
#include "gpusched/cli/structured_output.h"
#include "gpusched/cli/text_table.h"

namespace gpusched::cli {
namespace {

std::string Gpus(int64_t milli) { return fmt::format("{:.2f}", static_cast<double>(milli) / 1000.0); }

std::string Bar(int64_t milli) {
  const auto filled = static_cast<size_t>(std::clamp<int64_t>((milli + 50) / 100, 0, 10));
  return "[" + std::string(filled, '#') + std::string(10 - filled, '.') + "]";
}

std::string Models(const sim::NodeStatus& n) {
  std::vector<std::string> models;
  for (const auto& g : n.gpus) {
    if (std::find(models.begin(), models.end(), g.model) == models.end()) {
      models.push_back(g.model);
    }
  }
  std::string s;
  for (const auto& m : models) {
    s += (s.empty() ? "" : ",") + m;
  }
  return s.empty() ? "-" : s;
}

nlohmann::json Json(const sim::ClusterStatus& st) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : st.nodes) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : n.gpus) {
      gpus.push_back({{"index", g.index},
                      {"uuid", g.uuid},
                      {"model", g.model},
                      {"healthy", g.healthy},
                      {"milli_used", g.milli_used},
                      {"memory_mib", g.memory_mib},
                      {"memory_used_mib", g.memory_used_mib},
                      {"pods", g.pods}});
    }
    nodes.push_back({{"name", n.name},
                     {"unschedulable", n.unschedulable},
                     {"cpu_milli", n.cpu_milli},
                     {"cpu_used_milli", n.cpu_used_milli},
                     {"pods", n.pods},
                     {"fragmented_milli", n.frag_milli},
                     {"free_milli", n.idle_milli},
                     {"gpus", std::move(gpus)}});
  }
  return {{"kind", "GpuClusterStatus"},
          {"nodes", std::move(nodes)},
          {"totals",
           {{"gpus", st.gpus},
            {"healthy_gpus", st.healthy_gpus},
            {"capacity_milli", st.capacity_milli},
            {"allocated_milli", st.allocated_milli},
            {"free_milli", st.free_milli},
            {"fragmented_milli", st.frag_milli}}}};
}

}  // namespace

std::string FormatStatus(const sim::ClusterStatus& st, const StatusFlags& flags) {
  if (flags.output == "json" || flags.output == "yaml") {
    return RenderStructured(Json(st), flags.output);
  }
  const bool wide = flags.output == "wide";
  std::vector<std::vector<std::string>> rows;
  if (!flags.no_headers) {
    rows.push_back({"NODE", "MODEL", "GPUS", "HEALTHY", "GPU COMPUTE", "GPU MEMORY (MiB)", "CPU", "PODS"});
  }
  for (const auto& n : st.nodes) {
    int64_t used = 0, mem = 0, mem_used = 0, healthy = 0;
    for (const auto& g : n.gpus) {
      used += g.milli_used;
      mem += g.memory_mib;
      mem_used += g.memory_used_mib;
      healthy += g.healthy ? 1 : 0;
    }
    const auto count = static_cast<int64_t>(n.gpus.size());
    rows.push_back({n.name + (n.unschedulable ? " (cordoned)" : ""), Models(n), std::to_string(count),
                    std::to_string(healthy),
                    fmt::format("{}/{} ({}%)", Gpus(used), count, count > 0 ? used / (10 * count) : 0),
                    fmt::format("{}/{}", mem_used, mem),
                    fmt::format("{:.1f}/{:.1f}", static_cast<double>(n.cpu_used_milli) / 1000.0,
                                static_cast<double>(n.cpu_milli) / 1000.0),
                    std::to_string(n.pods)});
    if (!wide) {
      continue;
    }
    for (const auto& g : n.gpus) {
      std::string pods;
      for (const auto& p : g.pods) {
        pods += (pods.empty() ? "" : ",") + p;
      }
      rows.push_back({"  gpu " + std::to_string(g.index), g.model, "", g.healthy ? "yes" : "NO",
                      fmt::format("{} {:>3}%", Bar(g.milli_used), g.milli_used / 10),
                      fmt::format("{}/{}", g.memory_used_mib, g.memory_mib), "", pods.empty() ? "-" : pods});
    }
  }
  std::string out = FormatColumns(rows);
  if (!flags.no_headers) {
    const double frag = st.free_milli > 0 ? 100.0 * st.frag_milli / static_cast<double>(st.free_milli) : 0.0;
    out += fmt::format(
        "\ncluster: {} node{}, {} GPUs ({} healthy), {} GPUs of compute allocated ({}%), {} free; {:.0f}% of the free "
        "compute is fragmented for the typical pod (FGD's measure)\n",
        st.nodes.size(), st.nodes.size() == 1 ? "" : "s", st.gpus, st.healthy_gpus, Gpus(st.allocated_milli),
        st.capacity_milli > 0 ? st.allocated_milli * 100 / st.capacity_milli : 0, Gpus(st.free_milli), frag);
  }
  return out;
}

void AddStatusCommand(CLI::App& app, StatusFlags& flags, int& exit_code) {
  CLI::App* cmd =
      app.add_subcommand("status",
                         "Per node and GPU: what is allocated against capacity and which pods hold it (read-only; as a "
                         "kubectl plugin: kubectl gpusched status)");
  cmd->add_option("nodes", flags.nodes, "Only these nodes (default: every node with GPUs)");
  cmd->add_option("-o,--output", flags.output, "wide (a row per GPU, with the pods holding it), json or yaml")
      ->check(CLI::IsMember({"", "wide", "json", "yaml"}));
  cmd->add_flag("--no-headers", flags.no_headers, "No header line and no totals");
  cmd->add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--context", flags.context, "kubeconfig context (default: its current-context)");
  cmd->callback([&flags, &exit_code] {
    std::ostringstream warnings;
    auto cluster = ReadLiveCluster(flags.kubeconfig, flags.context, warnings);
    std::cerr << warnings.str();
    if (!cluster.ok()) {
      std::cerr << "gpusched status: " << cluster.status().message() << "\n";
      exit_code = 1;
      return;
    }
    std::vector<std::string> missing;
    const sim::ClusterStatus st = sim::BuildStatus(*cluster, flags.nodes, &missing);
    for (const auto& m : missing) {
      std::cerr << "gpusched status: node \"" << m << "\" not found\n";
    }
    std::cout << FormatStatus(st, flags);
    exit_code = missing.empty() ? 0 : 1;
  });
}

}  // namespace gpusched::cli
