#include "gpusched/cli/extender_command.h"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/extender/config.h"
#include "gpusched/adapters/extender/metrics.h"
#include "gpusched/adapters/extender/server.h"
#include "gpusched/adapters/extender/service.h"
#include "gpusched/adapters/extender/state.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/k8s/pod_binder.h"
#include "gpusched/common/log.h"

namespace gpusched::cli {
namespace {

namespace ext = adapters::extender;
namespace k8s = adapters::k8s;

ext::EventType ToEvent(k8s::WatchEvent::Type t) {
  switch (t) {
    case k8s::WatchEvent::Type::kAdded:
      return ext::EventType::kAdded;
    case k8s::WatchEvent::Type::kModified:
      return ext::EventType::kModified;
    case k8s::WatchEvent::Type::kDeleted:
      return ext::EventType::kDeleted;
  }
  return ext::EventType::kModified;
}

int Fail(const std::string& message) {
  std::cerr << "gpusched extender: " << message << "\n";
  return 1;
}

}  // namespace

int RunExtender(const ExtenderFlags& flags) {
  common::SetLogLevel(flags.verbose ? common::LogLevel::kDebug : common::LogLevel::kInfo);
  ext::ExtenderConfig config;
  if (!flags.config.empty()) {
    auto loaded = ext::LoadExtenderConfig(flags.config);
    if (!loaded.ok()) {
      return Fail(loaded.status().message());
    }
    config = std::move(loaded).value();
  }
  if (!flags.listen.empty()) {
    if (auto s = ext::ParseListen(flags.listen, config.host, config.port); !s.ok()) {
      return Fail("--listen: " + s.message());
    }
  }
  if (!flags.policy.empty()) {
    config.policy = flags.policy;
  }
  const std::string kubeconfig = !flags.kubeconfig.empty() ? flags.kubeconfig : config.kubeconfig;
  auto client_config = k8s::ResolveClientConfig(kubeconfig);
  if (!client_config.ok()) {
    return Fail(client_config.status().message());
  }
  auto client = k8s::ApiClient::Create(std::move(client_config).value());
  if (!client.ok()) {
    return Fail(client.status().message());
  }

  // Signals are taken by sigwait below; block them before any thread starts so that every thread inherits it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ext::ClusterMirror mirror;
  k8s::Informer nodes(**client, k8s::InformerOptions{.path = "/api/v1/nodes"},
                      [&mirror](const k8s::WatchEvent& e) { mirror.OnNode(ToEvent(e.type), e.object); });
  k8s::Informer pods(**client, k8s::InformerOptions{.path = "/api/v1/pods"},
                     [&mirror](const k8s::WatchEvent& e) { mirror.OnPod(ToEvent(e.type), e.object); });
  nodes.Start();
  pods.Start();

  k8s::PodBinder binder(**client);
  ext::ExtenderMetrics metrics;
  auto service = ext::ExtenderService::Create(
      mirror, binder, [&pods](const std::string& ns, const std::string& name) { return pods.Get(ns + "/" + name); },
      ext::ServiceOptions{.policy = config.policy, .weights = config.weights, .resources = config.resources}, &metrics);
  if (!service.ok()) {
    return Fail(service.status().message());
  }
  ext::ExtenderServer server(**service, mirror, metrics, config, [&nodes, &pods]() -> std::string {
    std::string why;
    if (!nodes.HasSynced()) {
      why += "node cache not synced" + (nodes.last_error().empty() ? "" : " (" + nodes.last_error() + ")") + "; ";
    }
    if (!pods.HasSynced()) {
      why += "pod cache not synced" + (pods.last_error().empty() ? "" : " (" + pods.last_error() + ")") + "; ";
    }
    return why;
  });
  if (auto s = server.Start(); !s.ok()) {
    return Fail(s.message());
  }
  common::Log(common::LogLevel::kInfo, "gpusched extender: serving on " + config.host + ":" +
                                           std::to_string(server.port()) + config.path_prefix + " (policy " +
                                           config.policy + ")");
  int sig = 0;
  sigwait(&signals, &sig);
  common::Log(common::LogLevel::kInfo, std::string("gpusched extender: stopping on ") + strsignal(sig));
  server.Stop();
  pods.Stop();
  nodes.Stop();
  return 0;
}

}  // namespace gpusched::cli
