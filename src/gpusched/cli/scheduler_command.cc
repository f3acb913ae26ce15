#include "gpusched/cli/scheduler_command.h"

#include <malloc.h>
#include <algorithm>
#include <atomic>
#include <chrono>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/k8s/lease_lock.h"
#include "gpusched/adapters/k8s/pod_binder.h"
#include "gpusched/adapters/k8s/pod_preemptor.h"
#include "gpusched/cli/allocator.h"
#include "gpusched/cli/election_loop.h"
#include "gpusched/cli/live_inputs.h"
#include "gpusched/cli/watch_event.h"
#include "gpusched/common/log.h"
#include "gpusched/daemon/config.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/resources.h"
#include "gpusched/net/http_server.h"
#include "gpusched/sched/cluster_cache.h"
#include "gpusched/sched/leader_elector.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/scheduler/config.h"
#include "gpusched/scheduler/scheduler.h"

namespace gpusched::cli {
namespace {

namespace k8s = adapters::k8s;

constexpr const char* kWho = "gpusched scheduler";

int Fail(const std::string& message) { return Fatal(kWho, message); }

// An informer on `path` where the API server serves `api` (asked once at start: an API installed later is read
// after a restart); null where it does not (404), saying `absent` in the log. Other errors are retried for 30 s.
common::Result<std::unique_ptr<k8s::Informer>> InformerIfServed(k8s::ApiClient& client, const char* api,
                                                                const char* path, const std::string& kind,
                                                                const std::string& absent,
                                                                k8s::Informer::Handler handler) {
  for (int attempt = 1;; ++attempt) {
    auto served = client.Request("GET", api);
    if (served.ok()) {
      return std::make_unique<k8s::Informer>(client, k8s::InformerOptions{.path = path}, std::move(handler));
    }
    if (served.status().code() == common::StatusCode::kNotFound) {
      common::Log(common::LogLevel::kInfo, std::string(kWho) + ": " + absent);
      return std::unique_ptr<k8s::Informer>();
    }
    if (attempt == 15) {
      return common::Unavailable("cannot ask the API server whether it serves " + kind + ": " +
                                 served.status().message());
    }
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

}  // namespace

void AddSchedulerCommand(CLI::App& app, SchedulerFlags& flags, int& exit_code) {
  std::string policies;
  for (const auto& n : scheduler::SchedulerPolicyNames()) {
    policies += (policies.empty() ? "" : ", ") + n;
  }
  CLI::App* cmd = app.add_subcommand(
      "scheduler",
      "A Kubernetes scheduler of its own for pods with spec.schedulerName gpusched (or the config's names): GPU "
      "sharing, node predicates, priority queue, leader election");
  cmd->add_option("--config", flags.config,
                  "YAML config (schedulerNames, policy, listen, leaderElection, backoff and bind settings)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--kubeconfig", flags.kubeconfig,
                  "kubeconfig (default: the config's, then $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--listen", flags.listen, "host:port of /healthz, /readyz and /metrics; overrides the config");
  cmd->add_option("--policy", flags.policy, "Placement policy, overrides the config. Known: " + policies);
  cmd->add_flag("-v,--verbose", flags.verbose, "Debug logging (--v=4)");
  cmd->add_option("--context", flags.context, "kubeconfig context to use (default: its current-context)");
  AddLogFlags(*cmd, flags.log);
  cmd->add_option("--interference-model", flags.interference_model,
                  "Slowdown model file from `gpusched-lab interference train` (for the interference-aware policy)");
  cmd->callback([&flags, &exit_code] { exit_code = RunScheduler(flags, TrainedModelLoader()); });
}

int RunScheduler(const SchedulerFlags& flags, const SlowdownModelLoader& load_model) {
  SetUpLogging(flags.log, flags.verbose, "scheduler");
  TuneAllocatorForLists();
  scheduler::SchedulerConfig config;
  if (!flags.config.empty()) {
    auto loaded = scheduler::LoadSchedulerConfig(flags.config);
    if (!loaded.ok()) {
      return Fail(loaded.status().message());
    }
    config = std::move(loaded).value();
  }
  if (!flags.listen.empty()) {
    if (auto s = daemon::ParseListen(flags.listen, config.host, config.port); !s.ok()) {
      return Fail("--listen: " + s.message());
    }
  }
  if (!flags.policy.empty()) {
    config.policy = flags.policy;
  }
  // The slowdown model (interference-aware), loaded before anything starts so that a bad file fails the start.
  auto loaded_model = LoadSlowdownModel(config, flags.interference_model, load_model);
  if (!loaded_model.ok()) {
    return Fail(loaded_model.status().message());
  }
  const std::shared_ptr<const ports::SlowdownModel> slowdown_model = std::move(loaded_model).value();
  auto client_config =
      k8s::ResolveClientConfig(!flags.kubeconfig.empty() ? flags.kubeconfig : config.kubeconfig, flags.context);
  if (!client_config.ok()) {
    return Fail(client_config.status().message());
  }
  client_config->list_page_size = k8s::kListPageSizeForAllPods;
  const std::string api_server = client_config->server;  // named in every line about reaching it
  auto client = k8s::ApiClient::Create(std::move(client_config).value());
  if (!client.ok()) {
    return Fail(client.status().message());
  }

  // Leader election first: its settings are checked before anything starts.
  std::unique_ptr<k8s::LeaseLock> lease;
  std::shared_ptr<sched::LeaderElector> elector;
  if (config.leader_election.enabled) {
    auto election = MakeElection(**client, config.leader_election, "gpusched-scheduler");
    if (!election.ok()) {
      return Fail(election.status().message());
    }
    lease = std::move(election->lease);
    elector = std::move(election->elector);
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // Preemption evicts through the policy API group's Eviction and reads its PodDisruptionBudgets: which version
  // the server serves (policy/v1 from Kubernetes 1.21) is asked once, waiting a while for a server still starting.
  std::unique_ptr<k8s::PodPreemptor> preemptor;
  std::string policy_version;
  if (config.preemption) {
    constexpr int kTries = 15;
    for (int attempt = 1;; ++attempt) {
      auto v = k8s::PolicyApiVersion(**client);
      if (v.ok()) {
        policy_version = *v;
        break;
      }
      // The first request to the API server: say which server, and whether it could be reached at all.
      const common::StatusCode code = v.status().code();
      const std::string why = code == common::StatusCode::kUnavailable || code == common::StatusCode::kDeadlineExceeded
                                  ? k8s::DescribeApiFailure(v.status(), api_server)
                                  : "the API server at " + api_server +
                                        " did not say which policy API version it serves: " + v.status().message();
      if (attempt == kTries) {
        return Fail(why + " (" + std::to_string(kTries) + " tries, 2 s apart)");
      }
      common::Log(common::LogLevel::kWarn,
                  std::string(kWho) + ": " + why + " (try " + std::to_string(attempt) + " of " +
                      std::to_string(kTries) + ", again in 2 s)",
                  {{"reason", "api_server_unreachable"}});
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    std::optional<int64_t> grace;
    if (config.eviction_grace_period_seconds.has_value()) {
      grace = *config.eviction_grace_period_seconds;
    }
    preemptor = std::make_unique<k8s::PodPreemptor>(**client, policy_version, grace);
  }

  // Live GPU metrics (load-aware), refreshed in the background; the same cache and sources as the extender's.
  auto metrics_started = StartMetricsCache(config, kWho);
  if (!metrics_started.ok()) {
    return Fail(metrics_started.status().message());
  }
  const std::unique_ptr<sched::MetricsCache> metrics_cache = std::move(metrics_started).value();

  sched::ClusterCache mirror(sched::CacheOptions{.app_label = config.resources.app_label,
                                                 .charge_every_pod = true,
                                                 .share_within = config.resources.share_within,
                                                 .component = "scheduler"});
  std::atomic<bool> caches_synced{false};
  k8s::PodBinder binder(**client);
  k8s::EventWriter events(**client, "gpusched");
  auto made = scheduler::Scheduler::Create(
      mirror, binder, [&events](scheduler::PodEvent e) { events.Record(std::move(e)); },
      scheduler::SchedulerOptions{
          .scheduler_names = config.scheduler_names,
          .policy = config.policy,
          .weights = config.weights,
          .resources = config.resources,
          .queue = sched::QueueOptions{.initial_backoff_ms = int64_t{config.initial_backoff_seconds} * 1000,
                                       .max_backoff_ms = int64_t{config.max_backoff_seconds} * 1000},
          .bind_workers = static_cast<size_t>(config.bind_workers),
          .assumed_ttl_ms = int64_t{config.assumed_ttl_seconds} * 1000,
          // Nothing is scheduled before both caches hold the whole cluster (a pending pod listed before the bound
          // pods would see their capacity free), nor by a replica that does not lead.
          .may_bind = [&caches_synced,
                       &elector] { return caches_synced.load() && (elector == nullptr || elector->CanAct()); },
          .preemptor = preemptor.get(),
          .snapshots = sched::SnapshotSources{.metrics = metrics_cache.get(),
                                              .staleness_ms = int64_t{config.metrics_staleness_seconds} * 1000,
                                              .slowdown_model = slowdown_model},
          .load_aware = LoadAwareOptionsOf(config),
          .interference_aware = config.interference_aware});
  if (!made.ok()) {
    return Fail(made.status().message());
  }
  scheduler::Scheduler& sched = **made;
  events.SetStillPending([&sched](const std::string& uid) { return sched.StillPending(uid); });

  // The mirror keeps what scheduling needs of every object; the informers keep identities only.
  k8s::Informer nodes(
      **client,
      k8s::InformerOptions{.path = "/api/v1/nodes", .prune = &k8s::SchedulingPrune(), .cache_identity_only = true},
      [&sched](const k8s::WatchEvent& e) { sched.OnNode(ToEvent(e.type), e.object); });
  k8s::Informer pods(
      **client,
      k8s::InformerOptions{.path = "/api/v1/pods", .prune = &k8s::SchedulingPrune(), .cache_identity_only = true},
      [&sched](const k8s::WatchEvent& e) { sched.OnPod(ToEvent(e.type), e.object); });
  // Namespace labels, for inter-pod terms that select namespaces by label.
  k8s::Informer namespaces(
      **client,
      k8s::InformerOptions{.path = "/api/v1/namespaces", .prune = &k8s::SchedulingPrune(), .cache_identity_only = true},
      [&sched](const k8s::WatchEvent& e) { sched.OnNamespace(ToEvent(e.type), e.object); });
  // GPU queues, where the GpuQueue CRD is installed (deploy/ ships it); without it every pod is in the default
  // queue.
  auto gpu_queues = InformerIfServed(
      **client, kube::kGpuQueueApi, kube::kGpuQueuesPath, "GpuQueues",
      "the GpuQueue resource (gpusched.io/v1alpha1) is not installed: every pod is in the default queue",
      [&sched](const k8s::WatchEvent& e) { sched.OnGpuQueue(ToEvent(e.type), e.object); });
  if (!gpu_queues.ok()) {
    return Fail(gpu_queues.status().message());
  }
  // The coscheduling plugin's PodGroups (minMember of groups named by the label scheduling.x-k8s.io/pod-group),
  // where that API is served; read only, never required.
  auto pod_groups = InformerIfServed(
      **client, kube::kCoschedulingApi, kube::kPodGroupsPath, "PodGroups",
      "the PodGroup resource (scheduling.x-k8s.io/v1alpha1) is not served: a pod group needs the annotation "
      "gpusched.io/min-available",
      [&sched](const k8s::WatchEvent& e) { sched.OnPodGroup(ToEvent(e.type), e.object); });
  if (!pod_groups.ok()) {
    return Fail(pod_groups.status().message());
  }
  // Budgets only where preemption is on (it alone reads them).
  std::unique_ptr<k8s::Informer> budgets;
  if (preemptor != nullptr) {
    budgets = std::make_unique<k8s::Informer>(
        **client,
        k8s::InformerOptions{.path = "/apis/" + policy_version + "/poddisruptionbudgets",
                             .prune = &k8s::SchedulingPrune()},
        [&sched](const k8s::WatchEvent& e) { sched.OnDisruptionBudget(ToEvent(e.type), e.object); });
  }
  // Every cache, by what readiness calls it, in start order (stopped in reverse).
  std::vector<std::pair<std::string, k8s::Informer*>> caches = {
      {"node", &nodes}, {"pod", &pods}, {"namespace", &namespaces}};
  for (const auto& [name, informer] : {std::pair<std::string, k8s::Informer*>{"GpuQueue", gpu_queues->get()},
                                       {"PodGroup", pod_groups->get()},
                                       {"PodDisruptionBudget", budgets.get()}}) {
    if (informer != nullptr) {
      caches.emplace_back(name, informer);
    }
  }
  auto all_synced = [&caches] {
    return std::all_of(caches.begin(), caches.end(), [](const auto& c) { return c.second->HasSynced(); });
  };
  const auto started = std::chrono::steady_clock::now();
  for (const auto& [name, informer] : caches) {
    informer->Start();
  }

  std::atomic<bool> leading{elector == nullptr};
  // Ready = the caches are synced and the watches live: a standby is ready too (it takes over with warm caches);
  // who leads is in the body and in gpusched_scheduler_leader.
  auto role = [&]() -> std::string {
    if (elector == nullptr) {
      return "no leader election";
    }
    if (elector->CanAct()) {
      return "leader";
    }
    const std::string holder = elector->Holder();
    return elector->IsLeader() ? "leader since moments ago, catching up"
                               : "standby (leader: " + (holder.empty() ? std::string("none yet") : holder) + ")";
  };
  auto not_ready = [&]() -> std::string {
    std::string why;
    for (const auto& [name, informer] : caches) {
      if (!informer->HasSynced()) {
        const std::string error = informer->last_error();
        why += name + " cache not synced" + (error.empty() ? "" : " (" + error + ")") + "; ";
      }
    }
    for (const auto& [name, informer] : caches) {
      if (std::string stale = informer->Staleness(); !stale.empty()) {
        why += stale + "; ";
      }
    }
    return why;
  };

  auto server_made = net::HttpServer::Create(net::HttpServerOptions{
      .host = config.host,
      .port = config.port,
      .threads = 1,
      // Probes and scrapes only: 16 connections per address, and idle ones give way at the cap (net::HttpLimits).
      .limits = net::HttpLimits{.max_header_bytes = 8 * 1024,
                                .max_header_fields = 32,
                                .max_body_bytes = 4 * 1024,
                                .max_connections = 64,
                                .max_connections_per_peer = 16},
      .name = "scheduler"});
  if (!server_made.ok()) {
    return Fail(server_made.status().message());
  }
  std::unique_ptr<net::HttpServer> server = std::move(server_made).value();
  server->Handle("GET", "/healthz", [](net::HttpRequest&) { return net::HttpResponse{.body = "ok\n"}; });
  server->Handle("GET", "/readyz", [&not_ready, &role, &metrics_cache](net::HttpRequest&) {
    const std::string why = not_ready();
    // A metrics source that does not answer degrades load-aware scores (static attributes) but not readiness.
    const std::string degraded = metrics_cache != nullptr && !metrics_cache->Degraded().empty()
                                     ? "; degraded: " + metrics_cache->Degraded()
                                     : std::string();
    return why.empty() ? net::HttpResponse{.body = "ok: " + role() + degraded + "\n"}
                       : net::HttpResponse{.status = 503, .body = "not ready: " + why + role() + degraded + "\n"};
  });
  server->Handle("GET", "/metrics", [&](net::HttpRequest&) {
    std::string body = sched.Metrics();
    body +=
        "# HELP gpusched_scheduler_leader 1 while this replica schedules (leads, or runs without election)\n"
        "# TYPE gpusched_scheduler_leader gauge\ngpusched_scheduler_leader " +
        std::string(leading.load() ? "1" : "0") + "\n";
    body += events.RenderMetrics("gpusched_scheduler_events_total");
    body += net::RenderStats(server->stats(), "gpusched_scheduler");
    return net::HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = std::move(body)};
  });
  if (auto s = server->Start(); !s.ok()) {
    return Fail("cannot listen on " + config.host + ":" + std::to_string(config.port) + ": " + s.message());
  }
  std::unique_ptr<ElectionLoop> election;
  if (elector != nullptr) {
    common::Log(common::LogLevel::kInfo,
                std::string(kWho) + ": leader election on " + lease->Describe() + " as " + elector->options().identity);
    election =
        std::make_unique<ElectionLoop>(*elector, kWho, [&leading](bool leads, uint64_t) { leading.store(leads); });
  }
  sched.Start();
  std::string names;
  for (const auto& n : config.scheduler_names) {
    names += (names.empty() ? "" : ", ") + n;
  }
  common::Log(common::LogLevel::kInfo, std::string(kWho) + ": scheduling pods of " + names + " (policy " +
                                           config.policy + "); /healthz /readyz /metrics on " + config.host + ":" +
                                           std::to_string(server->port()));
  // Each GpuQueue's status, written by the leader at most once a second, and only where it changed.
  std::map<std::string, std::string> queue_status_written;
  auto last_status_write = std::chrono::steady_clock::now();
  auto write_queue_status = [&]() {
    if (*gpu_queues == nullptr || !caches_synced.load() || (elector != nullptr && !elector->CanAct()) ||
        std::chrono::steady_clock::now() - last_status_write < std::chrono::seconds(1)) {
      return;
    }
    last_status_write = std::chrono::steady_clock::now();
    for (auto& [name, status] : sched.QueueStatusObjects()) {
      const std::string text = status.dump();
      if (auto was = queue_status_written.find(name); was != queue_status_written.end() && was->second == text) {
        continue;
      }
      const nlohmann::json patch = {{"status", std::move(status)}};
      auto r = (**client).Request("PATCH", std::string(kube::kGpuQueuesPath) + "/" + name + "/status", patch.dump(),
                                  "application/merge-patch+json");
      if (r.ok()) {
        queue_status_written[name] = text;
      } else if (r.status().code() != common::StatusCode::kNotFound) {
        common::Log(common::LogLevel::kWarn,
                    std::string(kWho) + ": cannot write the status of GpuQueue " + name + ": " + r.status().message());
      }
    }
  };
  // The main thread waits for a signal, and tells when the caches first hold the whole cluster.
  int sig = 0;
  const timespec tick{.tv_sec = 0, .tv_nsec = 100'000'000};
  while ((sig = sigtimedwait(&signals, nullptr, &tick)) < 0) {
    write_queue_status();
    if (!caches_synced.load() && all_synced()) {
      // The first lists' pages are freed by now: hand that memory back to the system.
      malloc_trim(0);
      caches_synced.store(true);
      sched.Wake();
      size_t node_count = 0;
      size_t bound = 0;
      {
        auto lock = mirror.ReadLock();
        node_count = mirror.state().NodeCount();
        bound = mirror.state().AllocationCount();
      }
      common::Log(common::LogLevel::kInfo, std::string(kWho) + ": caches synced in " +
                                               std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                  std::chrono::steady_clock::now() - started)
                                                                  .count()) +
                                               " ms: " + std::to_string(node_count) + " nodes, " +
                                               std::to_string(bound) + " bound pods charged, " +
                                               std::to_string(sched.queue_counts().active) + " pending");
    }
  }
  common::Log(common::LogLevel::kInfo, std::string(kWho) + ": stopping on " + strsignal(sig));
  if (election != nullptr) {
    election->Stop();
  }
  sched.Stop();  // binds in flight finish first
  if (metrics_cache != nullptr) {
    metrics_cache->Stop();
  }
  if (elector != nullptr) {
    elector->Release();
  }
  server->Stop();
  for (auto it = caches.rbegin(); it != caches.rend(); ++it) {
    it->second->Stop();
  }
  events.Stop();
  return 0;
}

}  // namespace gpusched::cli
