#include "gpusched/cli/extender_command.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/k8s/lease_lock.h"
#include "gpusched/adapters/k8s/pod_binder.h"
#include "gpusched/cli/allocator.h"
#include "gpusched/cli/election_loop.h"
#include "gpusched/cli/live_inputs.h"
#include "gpusched/cli/watch_event.h"
#include "gpusched/common/log.h"
#include "gpusched/extender/config.h"
#include "gpusched/extender/metrics.h"
#include "gpusched/extender/server.h"
#include "gpusched/extender/service.h"
#include "gpusched/extender/state.h"
#include "gpusched/sched/leader_elector.h"
#include "gpusched/sched/metrics_cache.h"

namespace gpusched::cli {
namespace {

namespace ext = extender;
namespace k8s = adapters::k8s;

int Fail(const std::string& message) { return Fatal("gpusched extender", message); }

}  // namespace

int RunExtender(const ExtenderFlags& flags, const SlowdownModelLoader& load_model) {
  SetUpLogging(flags.log, flags.verbose, "extender");
  TuneAllocatorForLists();
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
    if (auto s = ext::ValidateExtenderConfig(config, "--listen " + flags.listen); !s.ok()) {
      return Fail(s.message());
    }
  }
  if (!flags.policy.empty()) {
    config.policy = flags.policy;
  }
  // The slowdown model, loaded before anything starts so that a bad file fails the start with its reason.
  auto loaded_model = LoadSlowdownModel(config, flags.interference_model, load_model);
  if (!loaded_model.ok()) {
    return Fail(loaded_model.status().message());
  }
  const std::shared_ptr<const ports::SlowdownModel> slowdown_model = std::move(loaded_model).value();
  const std::string kubeconfig = !flags.kubeconfig.empty() ? flags.kubeconfig : config.kubeconfig;
  auto client_config = k8s::ResolveClientConfig(kubeconfig, flags.context);
  if (!client_config.ok()) {
    return Fail(client_config.status().message());
  }
  client_config->list_page_size = k8s::kListPageSizeForAllPods;
  auto client = k8s::ApiClient::Create(std::move(client_config).value());
  if (!client.ok()) {
    return Fail(client.status().message());
  }

  // Signals are taken by sigtimedwait below; block them before any thread starts so that every thread inherits it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ext::ClusterMirror mirror(
      ext::MirrorOptions{.app_label = config.resources.app_label, .share_within = config.resources.share_within});
  // The caches keep only what scheduling reads (no managedFields, env, volumes, statuses, node images).
  k8s::Informer nodes(**client, k8s::InformerOptions{.path = "/api/v1/nodes", .prune = &k8s::SchedulingPrune()},
                      [&mirror](const k8s::WatchEvent& e) { mirror.OnNode(ToEvent(e.type), e.object); });
  k8s::Informer pods(**client, k8s::InformerOptions{.path = "/api/v1/pods", .prune = &k8s::SchedulingPrune()},
                     [&mirror](const k8s::WatchEvent& e) { mirror.OnPod(ToEvent(e.type), e.object); });
  nodes.Start();
  pods.Start();

  auto metrics_started = StartMetricsCache(config, "gpusched extender");
  if (!metrics_started.ok()) {
    return Fail(metrics_started.status().message());
  }
  const std::unique_ptr<sched::MetricsCache> metrics_cache = std::move(metrics_started).value();

  // Leader election: only the Lease holder binds and reports ready.
  std::unique_ptr<k8s::LeaseLock> lease;
  std::shared_ptr<sched::LeaderElector> elector;
  if (config.leader_election.enabled) {
    auto made = MakeElection(**client, config.leader_election, "gpusched-extender");
    if (!made.ok()) {
      return Fail(made.status().message());
    }
    lease = std::move(made->lease);
    elector = std::move(made->elector);
    common::Log(common::LogLevel::kInfo,
                "gpusched extender: leader election on " + lease->Describe() + " as " + elector->options().identity);
  }
  auto bind_gate = [&elector]() -> std::string {
    if (elector == nullptr || elector->CanAct()) {
      return "";
    }
    if (elector->IsLeader()) {
      return "this replica became leader moments ago and is catching up with the cluster; retry";
    }
    const std::string holder = elector->Holder();
    return "this replica is a standby (leader: " + (holder.empty() ? std::string("none yet") : holder) + ")";
  };

  // What the verbs wait for (service.h, sync gate): the informers deliver their whole first list to the mirror,
  // allocations included, before they count as synced, and stay synced from then on.
  auto waiting = [&pods, &nodes]() -> std::string {
    std::string w = pods.HasSynced() ? "" : "pods";
    if (!nodes.HasSynced()) {
      w += (w.empty() ? "" : ", ") + std::string("nodes");
    }
    return w;
  };

  k8s::PodBinder binder(**client);
  k8s::EventWriter events(**client, "gpusched-extender");
  ext::ExtenderMetrics metrics;
  metrics.SetMetricsCache(metrics_cache.get());
  metrics.SetExtra([&events] { return events.RenderMetrics("gpusched_extender_events_total"); });
  auto service = ext::ExtenderService::Create(
      mirror, binder, [&pods](const std::string& ns, const std::string& name) { return pods.Get(ns + "/" + name); },
      ext::ServiceOptions{.policy = config.policy,
                          .weights = config.weights,
                          .resources = config.resources,
                          .metrics = metrics_cache.get(),
                          .staleness_ms = int64_t{config.metrics_staleness_seconds} * 1000,
                          .load_aware = LoadAwareOptionsOf(config),
                          .interference_aware = config.interference_aware,
                          .slowdown_model = slowdown_model,
                          .scheduler_names = config.scheduler_names,
                          .bind_filter_window_ms = int64_t{config.bind_filter_window_seconds} * 1000,
                          .bind_gate = elector ? std::function<std::string()>(bind_gate) : nullptr,
                          .sync_gate = waiting,
                          .events = &events},
      &metrics);
  if (!service.ok()) {
    return Fail(service.status().message());
  }
  const policy::Inputs reads = (*service)->DefaultReads();
  if (slowdown_model != nullptr) {
    common::Log(common::LogLevel::kInfo,
                "gpusched extender: slowdown model " + slowdown_model->Describe() +
                    (reads.interference_forecast ? "" : " (used only by pods whose gpusched.io/policy reads it)"));
  }
  if (reads.gpu_metrics && metrics_cache == nullptr) {
    common::Log(common::LogLevel::kWarn,
                "gpusched extender: the configured policy reads live GPU metrics but no metrics source is "
                "configured (prometheus or influxdb): it ranks GPUs by their static attributes alone");
  }
  ext::ExtenderServer server(
      **service, mirror, metrics, config, [&nodes, &pods, &bind_gate, &waiting]() -> std::string {
        std::string why;
        if (std::string gate = bind_gate(); !gate.empty()) {
          why += gate + "; ";  // a standby, or a leader still settling: not to be called yet
        }
        if (std::string w = waiting(); !w.empty()) {
          why += "not synced: waiting for " + w + "; ";
          for (const auto& [name, informer] : {std::pair{"pods", &pods}, std::pair{"nodes", &nodes}}) {
            if (!informer->HasSynced() && !informer->last_error().empty()) {
              why += std::string(name) + ": " + informer->last_error() + "; ";
            }
          }
        }
        for (const k8s::Informer* informer : {&nodes, &pods}) {
          if (std::string stale = informer->Staleness(); !stale.empty()) {
            why += stale + "; ";
          }
        }
        return why;
      });
  if (metrics_cache) {
    server.SetDegraded([&metrics_cache] { return metrics_cache->Degraded(); });
  }
  if (auto s = server.Start(); !s.ok()) {
    return Fail(s.message());
  }
  std::unique_ptr<ElectionLoop> election;
  if (elector != nullptr) {
    election = std::make_unique<ElectionLoop>(
        *elector, "gpusched extender", [&metrics](bool leads, uint64_t became) { metrics.SetLeader(leads, became); });
  }
  common::Log(common::LogLevel::kInfo,
              "gpusched extender: serving on " + config.host + ":" + std::to_string(server.port()) +
                  config.path_prefix + " (policy " + config.policy + ")" +
                  (config.health_host.empty() ? std::string()
                                              : "; probes and /metrics also on " + config.health_host + ":" +
                                                    std::to_string(server.health_port())));
  // The main thread waits for a signal, and once a second forgets assumed allocations whose time ran out.
  int sig = 0;
  const timespec tick{.tv_sec = 1, .tv_nsec = 0};
  bool synced = false;
  const auto started = std::chrono::steady_clock::now();
  while ((sig = sigtimedwait(&signals, nullptr, &tick)) < 0) {
    (void)mirror.ExpireAssumed();
    if (!synced && waiting().empty()) {
      synced = true;
      const auto ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
      common::Log(common::LogLevel::kInfo, "gpusched extender: pod and node caches synced (" +
                                               std::to_string(mirror.stats().rebuilt_allocations) +
                                               " allocations rebuilt from annotations) within " +
                                               std::to_string(ms / 1000 + 1) + " s of serving: the verbs answer");
    }
  }
  common::Log(common::LogLevel::kInfo, std::string("gpusched extender: stopping on ") + strsignal(sig));
  if (election != nullptr) {
    election->Stop();
  }
  server.Stop();  // binds in flight finish first
  if (elector != nullptr) {
    elector->Release();  // a standby takes over at its next attempt instead of after a whole lease
  }
  if (metrics_cache) {
    metrics_cache->Stop();
  }
  events.Stop();  // what the last binds told is written
  pods.Stop();
  nodes.Stop();
  return 0;
}

}  // namespace gpusched::cli
