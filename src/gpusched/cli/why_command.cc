#include "gpusched/cli/why_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <iostream>
#include <optional>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/cli/live_cluster.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/gpu_fit.h"
#include "gpusched/sim/queue_why.h"
#include "gpusched/sim/why.h"

namespace gpusched::cli {
namespace {

namespace k8s = adapters::k8s;
using nlohmann::json;

// The pod's standing in its GPU queue, from every pod (`pods`, as listed for the cluster) and the GpuQueue objects
// (none when their API is not served).
common::Result<sim::QueueWhy> ExplainPodQueue(k8s::ApiClient& api, const sim::WhatIfCluster& cluster,
                                              const std::vector<json>& pods, const json& pod) {
  std::vector<core::QueueSpec> specs;
  auto queues = api.List(kube::kGpuQueuesPath);
  if (queues.ok()) {
    for (const json& q : queues->items) {
      if (auto spec = kube::DecodeGpuQueue(q); spec.ok()) {
        specs.push_back(*std::move(spec));
      }
    }
  } else if (queues.status().code() != common::StatusCode::kNotFound) {
    return common::Status(queues.status().code(), "listing GpuQueues: " + queues.status().message());
  }
  core::GpuAmount capacity;
  for (const core::Node& n : cluster.nodes) {
    for (const core::Gpu& g : n.gpus) {
      capacity += core::GpuAmount{1, common::kGpuMilli.value(), g.memory.value()};
    }
  }
  auto view = [](const json& object) -> std::optional<sim::QueuedPodView> {
    auto meta = kube::DecodePodMeta(object);
    if (!meta.ok() || meta->Terminal()) {
      return std::nullopt;
    }
    auto request = kube::DecodePodRequest(object, kube::ResourceConfig{});
    if (!request.ok() || !request->RequestsGpu()) {
      return std::nullopt;
    }
    sim::QueuedPodView v{.uid = meta->uid.str(),
                         .key = meta->Key(),
                         .namespace_ = meta->namespace_,
                         .queue_label = kube::QueueLabel(meta->labels),
                         .scheduler_name = meta->scheduler_name,
                         .priority = request->priority,
                         .created = meta->creation_timestamp,
                         .placed = !meta->node_name.empty(),
                         .demand = core::DemandOf(*request)};
    if (v.placed) {
      // As the scheduler charges a bound pod: what its allocation holds (nothing without a readable one).
      v.demand = {};
      if (const std::string* a = meta->Annotation(kube::kAnnotationAllocation); a != nullptr) {
        if (auto held = kube::DecodeAllocation(*a, meta->uid); held.ok()) {
          v.demand = core::DemandOf(*held);
        }
      }
    }
    return v;
  };
  std::vector<sim::QueuedPodView> all;
  for (const json& item : pods) {
    if (auto v = view(item); v.has_value()) {
      all.push_back(*std::move(v));
    }
  }
  auto me = view(pod);
  if (!me.has_value()) {
    return common::InvalidArgument("the pod asks for no GPU, or has ended");
  }
  return sim::ExplainQueue(specs, capacity, all, *me);
}

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
  std::vector<json> pods;  // as listed once for the cluster; the GPU queue's view reads them too
  auto cluster = ReadLiveCluster(flags.kubeconfig, flags.context, warnings, &pods);
  std::cerr << warnings.str();
  if (!cluster.ok()) {
    std::cerr << "gpusched why: " << cluster.status().message() << "\n";
    return 1;
  }
  std::cout << sim::FormatWhy(sim::ExplainPod(*cluster, *request));
  // GPU queues order and admit the pods of gpusched's own scheduler only (kube-scheduler's pods, in extender mode,
  // wait in kube-scheduler's queue).
  const std::string scheduler = p.value("spec", json::object()).value("schedulerName", "");
  if (!scheduler.empty() && scheduler != "default-scheduler") {
    if (auto queue = ExplainPodQueue(**api, *cluster, pods, p); queue.ok()) {
      std::cout << "\n" << sim::FormatQueueWhy(*queue);
    } else {
      std::cerr << "gpusched why: its GPU queue: " << queue.status().message() << "\n";
    }
  }
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
