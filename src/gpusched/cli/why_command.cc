#include "gpusched/cli/why_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/cli/whatif_mode.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/gpu_fit.h"
#include "gpusched/sim/why.h"

namespace gpusched::cli {
namespace {

namespace k8s = adapters::k8s;
using nlohmann::json;

int Run(const WhyFlags& flags) {
  auto config = k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
  if (!config.ok()) {
    std::cerr << "gpusched why: " << config.status().message() << "\n";
    return 1;
  }
  const std::string ns = !flags.ns.empty() ? flags.ns : (config->namespace_.empty() ? "default" : config->namespace_);
  auto api = k8s::ApiClient::Create(*config);
  if (!api.ok()) {
    std::cerr << "gpusched why: " << api.status().message() << "\n";
    return 1;
  }
  auto pod = (*api)->Get("/api/v1/namespaces/" + ns + "/pods/" + flags.pod);
  if (!pod.ok()) {
    std::cerr << "gpusched why: pod " << ns << "/" << flags.pod << ": " << pod.status().message() << "\n";
    return 1;
  }
  const json& p = *pod;
  const std::string node = p.value("spec", json::object()).value("nodeName", "");
  const std::string phase = p.value("status", json::object()).value("phase", "");
  std::cout << "pod " << ns << "/" << flags.pod << ": " << (phase.empty() ? "Unknown" : phase);
  if (!node.empty()) {
    std::cout << ", placed on " << node << "\n";
    const json annotations = p.value("metadata", json::object()).value("annotations", json::object());
    if (auto it = annotations.find("gpusched.io/allocation"); it != annotations.end() && it->is_string()) {
      auto a = kube::DecodeAllocation(it->get<std::string>(), common::PodUid(""));
      if (a.ok()) {
        for (const core::ContainerAllocation& c : a->containers) {
          std::cout << "  container " << c.container << ":";
          for (const core::GpuShare& g : c.gpus) {
            std::cout << fmt::format(" GPU {} ({}, {})", g.index, g.uuid.str(),
                                     policy::HoldsWhole(g)
                                         ? std::string("whole")
                                         : fmt::format("{}%, {} MiB", g.milli.value() / 10, g.memory.value()));
          }
          std::cout << "\n";
        }
      } else {
        std::cout << "  its gpusched.io/allocation annotation cannot be read: " << a.status().message() << "\n";
      }
    } else {
      std::cout << "  no gpusched.io/allocation annotation: not placed by gpusched (or it asks for no GPU)\n";
    }
    return 0;
  }
  std::cout << "\n";
  for (const json& c : p.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "PodScheduled" && c.value("status", "") != "True") {
      std::cout << "the scheduler said (" << c.value("reason", "") << "): " << c.value("message", "") << "\n";
    }
  }
  auto request = kube::DecodePodRequest(p, kube::ResourceConfig{});
  if (!request.ok()) {
    std::cout << "its request cannot be read: " << request.status().message() << "\n";
    return 1;
  }
  std::ostringstream warnings;
  auto cluster = ReadLiveCluster(flags.kubeconfig, flags.context, warnings);
  std::cerr << warnings.str();
  if (!cluster.ok()) {
    std::cerr << "gpusched why: " << cluster.status().message() << "\n";
    return 1;
  }
  std::cout << sim::FormatWhy(sim::ExplainPod(*cluster, *request));
  return 0;
}

}  // namespace

void AddWhyCommand(CLI::App& app, WhyFlags& flags, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "why",
      "Where a pod was placed and on which GPUs, or why it is pending and what would make it fit (read-only; "
      "as a kubectl plugin: kubectl gpusched why POD)");
  cmd->add_option("pod", flags.pod, "The pod's name")->required();
  cmd->add_option("-n,--namespace", flags.ns, "Its namespace (default: the kubeconfig's, else default)");
  cmd->add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--context", flags.context, "kubeconfig context (default: its current-context)");
  cmd->callback([&flags, &exit_code] { exit_code = Run(flags); });
}

}  // namespace gpusched::cli
