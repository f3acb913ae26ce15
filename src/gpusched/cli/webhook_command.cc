#include "gpusched/cli/webhook_command.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/common/log.h"
#include "gpusched/daemon/config.h"
#include "gpusched/daemon/tls_reloader.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/net/http_server.h"
#include "gpusched/webhook/cert_keeper.h"
#include "gpusched/webhook/handler.h"
#include "gpusched/webhook/queue_membership.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::cli {
namespace {

using webhook::Endpoint;
using webhook::Outcome;

constexpr auto kCertificateCheckInterval = std::chrono::seconds(30);
constexpr auto kQueueRefreshInterval = std::chrono::seconds(30);
// --self-signed-ca-secret: how often the CA Secret and caBundle are checked and the certificate's expiry; after a
// failure, sooner.
constexpr auto kCertSyncInterval = std::chrono::minutes(5);
constexpr auto kCertRetryInterval = std::chrono::seconds(30);
constexpr const char* kPodNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
// More GpuQueues than this are not read (a cluster has tens).
constexpr size_t kMaxQueues = 10000;
// Live-pod checks (a GET each) of denials at once; a denial past it writes no Event (they are best effort).
constexpr int kMaxEventChecks = 2;

void Say(common::LogLevel level, const std::string& m) { common::Log(level, "gpusched webhook: " + m); }

int Fail(const std::string& message) { return Fatal("gpusched webhook", message); }

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::nullopt;
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// What the handlers share; outlives every server.
struct State {
  webhook::WebhookConfig config;
  adapters::k8s::ApiClient* client = nullptr;    // --events or --queues; set before serving
  adapters::k8s::EventWriter* events = nullptr;  // --events; set before serving
  bool queues_enabled = false;                   // --queues
  bool verify_callers = false;                   // --client-ca: every caller presented an allowed certificate
  webhook::QueueDirectory queues;
  webhook::DecodeLimiter limiter{2, 64 * 1024};
  std::atomic<int> event_checks{0};
  std::atomic<uint64_t> events_unverified{0};
  std::atomic<bool> draining{false};
  bool self_signed = false;                  // --self-signed-ca-secret
  std::atomic<int64_t> cert_not_after_s{0};  // of the serving certificate it made
  std::atomic<uint64_t> cert_sync_failures{0};
  std::array<std::array<std::atomic<uint64_t>, webhook::kOutcomes>, 2> admissions{};  // [endpoint][outcome]

  // A denial's Event, when the review is verifiably real (webhook::TellIfReal).
  void Tell(const webhook::HandlerReply& r, const net::Peer& peer) {
    if (events == nullptr || !r.event.has_value()) {
      return;
    }
    const bool from_apiserver = verify_callers && peer.client_certificate;
    if (!from_apiserver && event_checks.fetch_add(1) >= kMaxEventChecks) {
      event_checks.fetch_sub(1);
      events_unverified.fetch_add(1);
      return;
    }
    const bool told = webhook::TellIfReal(
        r, from_apiserver,
        [this](const std::string& ns, const std::string& name) {
          return client->Get("/api/v1/namespaces/" + ns + "/pods/" + name);
        },
        *events);
    if (!from_apiserver) {
      event_checks.fetch_sub(1);
    }
    if (!told) {
      events_unverified.fetch_add(1);
    }
  }

  std::string RenderMetrics(const net::HttpServer& server) const {
    std::string out =
        "# HELP gpusched_webhook_admissions_total Admission reviews answered, by endpoint and outcome "
        "(bad_request: not a valid AdmissionReview; throttled: 429, too many large reviews at once).\n"
        "# TYPE gpusched_webhook_admissions_total counter\n";
    for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
      for (Outcome o :
           {Outcome::kAllowed, Outcome::kPatched, Outcome::kDenied, Outcome::kBadRequest, Outcome::kThrottled}) {
        out += std::string("gpusched_webhook_admissions_total{endpoint=\"") + webhook::EndpointName(e) +
               "\",outcome=\"" + webhook::OutcomeName(o) + "\"} " +
               std::to_string(admissions[static_cast<size_t>(e)][static_cast<size_t>(o)].load()) + "\n";
      }
    }
    if (events != nullptr) {
      out += events->RenderMetrics("gpusched_webhook_events_total");
      out +=
          "# HELP gpusched_webhook_events_unverified_total Denials about an existing pod whose Event was not written: "
          "the review was not from a verified API server and its oldObject is not the live pod.\n"
          "# TYPE gpusched_webhook_events_unverified_total counter\n"
          "gpusched_webhook_events_unverified_total " +
          std::to_string(events_unverified.load()) + "\n";
    }
    if (queues_enabled) {
      out +=
          "# HELP gpusched_webhook_queues GpuQueues the webhook judges labels by (the valid ones last listed).\n"
          "# TYPE gpusched_webhook_queues gauge\n"
          "gpusched_webhook_queues " +
          std::to_string(queues.Get()->size()) + "\n";
    }
    if (self_signed) {
      out +=
          "# HELP gpusched_webhook_certificate_expiry_timestamp_seconds When the serving certificate the webhook "
          "made expires (it is re-issued with a third of its lifetime left).\n"
          "# TYPE gpusched_webhook_certificate_expiry_timestamp_seconds gauge\n"
          "gpusched_webhook_certificate_expiry_timestamp_seconds " +
          std::to_string(cert_not_after_s.load()) +
          "\n"
          "# HELP gpusched_webhook_certificate_sync_failures_total Checks of the CA Secret, caBundle and serving "
          "certificate that failed (each is retried).\n"
          "# TYPE gpusched_webhook_certificate_sync_failures_total counter\n"
          "gpusched_webhook_certificate_sync_failures_total " +
          std::to_string(cert_sync_failures.load()) + "\n";
    }
    return out + net::RenderStats(server.stats(), "gpusched_webhook");
  }
};

constexpr size_t kWebhookMaxConnections = 32;

// A server with every endpoint, not started. Each handler refers to its own server only, so servers can be
// replaced (certificate renewal) while another one is still answering.
common::Result<std::unique_ptr<net::HttpServer>> MakeServer(const std::string& host, int port,
                                                            const WebhookFlags& flags, State& state) {
  GPUSCHED_ASSIGN_OR_RETURN(server,
                            net::HttpServer::Create(net::HttpServerOptions{
                                .host = host,
                                .port = port,
                                .threads = 4,
                                // A review holds the object and the old object; the API server stores objects up to 1.5
                                // MiB (etcd's request limit). Idle keep-alive connections outlive the API server's 90 s
                                // idle timeout, so it is always the client that closes them (no request lost on a
                                // connection closing under it). Connections are few (a handful per API server), and
                                // each may be reading a 4 MiB body: 32 bound what bodies in flight can take. At most
                                // max_connections_per_peer from one address; at the cap an idle connection (or the
                                // slow head of the address holding most) gives way to a new one, so no client locks
                                // out the API server or the kubelet's probes.
                                .limits = net::HttpLimits{.max_body_bytes = 4 << 20,
                                                          .idle_timeout = std::chrono::milliseconds(120000),
                                                          .max_connections = kWebhookMaxConnections,
                                                          .max_connections_per_peer = flags.max_connections_per_peer},
                                .tls = net::TlsOptions{.cert_file = flags.tls_cert,
                                                       .key_file = flags.tls_key,
                                                       .client_ca_file = flags.client_ca,
                                                       .allowed_client_names = flags.apiserver_client_names},
                                .name = "webhook"}));
  net::HttpServer* self = server.get();
  for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
    server->Handle("POST", std::string("/") + webhook::EndpointName(e), [e, &state](net::HttpRequest& req) {
      std::shared_ptr<const webhook::QueueView> queues;
      if (state.queues_enabled) {
        queues = state.queues.Get();
      }
      webhook::HandlerReply r =
          webhook::HandleAdmission(e, req.Header("Content-Type"), req.body, state.config,
                                   webhook::HandlerOptions{.limiter = &state.limiter, .queues = queues.get()});
      std::string{}.swap(req.body);  // the body's memory goes back before the Event check's GET
      state.admissions[static_cast<size_t>(e)][static_cast<size_t>(r.outcome)].fetch_add(1);
      if (!r.summary.empty()) {
        Say(r.outcome == Outcome::kPatched || r.outcome == Outcome::kThrottled ? common::LogLevel::kDebug
                                                                               : common::LogLevel::kInfo,
            std::string(webhook::EndpointName(e)) + ": " + r.summary + " (from " + req.peer.address + ")");
      }
      state.Tell(r, req.peer);
      net::HttpResponse response{.status = r.status, .content_type = r.content_type, .body = std::move(r.body)};
      if (r.retry_after_s > 0) {
        response.headers.emplace_back("Retry-After", std::to_string(r.retry_after_s));
      }
      return response;
    });
  }
  server->Handle("GET", "/healthz", [](net::HttpRequest&) { return net::HttpResponse{.body = "ok\n"}; });
  server->Handle("GET", "/readyz", [&state](net::HttpRequest&) {
    return state.draining ? net::HttpResponse{.status = 503, .body = "shutting down\n"}
                          : net::HttpResponse{.body = "ok\n"};
  });
  server->Handle("GET", "/metrics", [&state, self](net::HttpRequest&) {
    return net::HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8",
                             .body = state.RenderMetrics(*self)};
  });
  return server;
}

// Lists the GpuQueues into `directory`; on failure keeps what it had (and says so, at the first list or when the
// failure is new).
void RefreshQueues(adapters::k8s::ApiClient& client, webhook::QueueDirectory& directory, bool first) {
  static std::string last_error;
  auto listed = client.List(kube::kGpuQueuesPath);
  if (!listed.ok()) {
    if (first || listed.status().message() != last_error) {
      Say(common::LogLevel::kWarn, "--queues: cannot list GpuQueues (" + listed.status().message() +
                                       "); queue labels are judged by the queues last listed" +
                                       (first ? " (none yet)" : ""));
    }
    last_error = listed.status().message();
    return;
  }
  last_error.clear();
  std::vector<core::QueueSpec> specs;
  for (const auto& item : listed->items) {
    if (specs.size() >= kMaxQueues) {
      break;
    }
    if (auto spec = kube::DecodeGpuQueue(item); spec.ok()) {
      specs.push_back(std::move(spec).value());
    }
  }
  directory.Set(specs);
  if (first) {
    Say(common::LogLevel::kInfo, "--queues: " + std::to_string(directory.Get()->size()) + " valid GpuQueues");
  }
}

std::string Rfc3339(webhook::WallTime t) {
  const std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// One CertKeeper::Sync, its changes logged. True when it succeeded.
common::Status SyncCertificate(webhook::CertKeeper& keeper, State& state, const std::string& secret_ref) {
  auto report = keeper.Sync();
  if (!report.ok()) {
    state.cert_sync_failures.fetch_add(1);
    return report.status();
  }
  if (report->ca_created) {
    Say(common::LogLevel::kInfo, "made a new CA in " + secret_ref);
  }
  if (report->ca_adopted) {
    Say(common::LogLevel::kInfo, "using the CA another replica wrote to " + secret_ref);
  }
  if (report->ca_rotated) {
    Say(common::LogLevel::kInfo, "rotated the CA in " + secret_ref + " (the old one stays trusted until it expires)");
  }
  for (const std::string& p : report->patched) {
    Say(common::LogLevel::kInfo, "patched caBundle of " + p);
  }
  if (report->cert_issued) {
    Say(
        common::LogLevel::kInfo, "issued a serving certificate for " + [&] {
          std::string names;
          for (const std::string& n : keeper.names()) {
            names += (names.empty() ? "" : ", ") + n;
          }
          return names;
        }() + ", valid until " + Rfc3339(report->cert_not_after));
  }
  state.cert_not_after_s =
      std::chrono::duration_cast<std::chrono::seconds>(report->cert_not_after.time_since_epoch()).count();
  return common::Status::Ok();
}

// The pod's own namespace (its ServiceAccount's namespace file), "" outside a pod.
std::string PodNamespace() {
  auto text = ReadFile(kPodNamespaceFile);
  if (!text) {
    return "";
  }
  std::string ns = *text;
  while (!ns.empty() && (ns.back() == '\n' || ns.back() == ' ')) {
    ns.pop_back();
  }
  return ns;
}

}  // namespace

void AddWebhookCommand(CLI::App& app, WebhookFlags& flags, int& exit_code) {
  CLI::App* wh = app.add_subcommand(
      "webhook",
      "Admission webhook over HTTPS: refuses forged gpusched.io/allocation annotations and GPU requests that can "
      "never be met, completes GPU requests with their device count (docs/webhook.md). TLS: its own certificate "
      "(--self-signed-ca-secret, the default install) or one given (--tls-cert/--tls-key, e.g. cert-manager's)");
  wh->add_option("--listen", flags.listen, "host:port")->capture_default_str();
  wh->add_option("--self-signed-ca-secret", flags.self_signed_ca_secret,
                 "Make the serving certificate: a CA kept in this Secret (created when missing, rotated before it "
                 "expires), a certificate from it for --service, and the CA patched into caBundle of the webhook "
                 "configurations named below. The default install (deploy/base/webhook). Needs Secrets create, get "
                 "and update of this name, and get and patch of the configurations. Not with --tls-cert/--tls-key");
  wh->add_option("--namespace", flags.namespace_,
                 "With --self-signed-ca-secret: the namespace of the Secret and the Service (default: the pod's own)");
  wh->add_option("--service", flags.service,
                 "With --self-signed-ca-secret: the webhook's Service; its names <svc>, <svc>.<ns>, <svc>.<ns>.svc "
                 "and <svc>.<ns>.svc.cluster.local go in the certificate");
  wh->add_option("--mutating-webhook-configuration", flags.mutating_configuration,
                 "With --self-signed-ca-secret: the MutatingWebhookConfiguration whose webhooks get the caBundle");
  wh->add_option("--validating-webhook-configuration", flags.validating_configuration,
                 "With --self-signed-ca-secret: the ValidatingWebhookConfiguration whose webhooks get the caBundle");
  wh->add_option("--extra-san", flags.extra_sans,
                 "With --self-signed-ca-secret: more names for the certificate (IP addresses or DNS names, "
                 "comma-separated), for tests and out-of-cluster use (a webhook reached by URL)")
      ->delimiter(',');
  wh->add_option("--cert-dir", flags.cert_dir,
                 "With --self-signed-ca-secret: where the serving certificate and key are written (tls.crt, tls.key; "
                 "an emptyDir in the pod)")
      ->capture_default_str();
  wh->add_option("--ca-validity-days", flags.ca_validity_days,
                 "With --self-signed-ca-secret: a new CA's lifetime; rotated with a third of it left")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  wh->add_option("--cert-validity-days", flags.cert_validity_days,
                 "With --self-signed-ca-secret: a serving certificate's lifetime; re-issued with a third of it left")
      ->check(CLI::Range(1, 36500))
      ->capture_default_str();
  wh->add_option("--tls-cert", flags.tls_cert,
                 "PEM serving certificate (chain), e.g. cert-manager's Secret mounted; re-read when it changes. Not "
                 "with --self-signed-ca-secret")
      ->check(CLI::ExistingFile);
  wh->add_option("--tls-key", flags.tls_key, "PEM private key")->check(CLI::ExistingFile);
  wh->add_option("--config", flags.config,
                 "YAML config (allowedUsers, allowedGroups, schedulerName, namespaces, schedulerNames, resourceNames)")
      ->check(CLI::ExistingFile);
  wh->add_option("--shutdown-delay", flags.shutdown_delay_s,
                 "Seconds to keep serving after SIGTERM, with /readyz at 503, so that callers move to other replicas")
      ->capture_default_str();
  wh->add_option("--max-connections-per-peer", flags.max_connections_per_peer,
                 "Connections open at once from one IP address (of 32); beyond it the address's idle one gives way, "
                 "else the new one is closed")
      ->check(CLI::Range(size_t{1}, kWebhookMaxConnections))
      ->capture_default_str();
  wh->add_flag("--events", flags.events,
               "Tell a pod, as a Warning Event (AdmissionDenied), when a change to it is denied and the review is "
               "verifiably real: from a caller with an allowed --client-ca certificate, or whose oldObject is the live "
               "pod (needs events create and patch, pods get; without it and --queues the webhook calls no API)");
  wh->add_flag("--queues", flags.queues,
               "List the GpuQueues (at start and every 30 s) and deny a pod whose gpusched.io/queue label names a "
               "queue that does not admit its namespace (needs gpuqueues list)");
  wh->add_option("--client-ca", flags.client_ca,
                 "PEM CA that callers' client certificates must chain to (kube-apiserver presents one when its "
                 "AdmissionConfiguration gives it a kubeConfigFile for this webhook); with --apiserver-client-names")
      ->check(CLI::ExistingFile);
  wh->add_option("--apiserver-client-names", flags.apiserver_client_names,
                 "With --client-ca: the names (subject CN, DNS or URI SAN) a caller's certificate must carry")
      ->delimiter(',');
  wh->add_option("--kubeconfig", flags.kubeconfig,
                 "With --events, --queues or --self-signed-ca-secret: kubeconfig (default $KUBECONFIG, in-cluster, "
                 "~/.kube/config)");
  wh->add_option("--context", flags.context,
                 "With --events, --queues or --self-signed-ca-secret: kubeconfig context (default: its "
                 "current-context)");
  wh->add_flag("-v,--verbose", flags.verbose, "Debug logging, every patch (--v=4)");
  AddLogFlags(*wh, flags.log);
  wh->callback([&flags, &exit_code] { exit_code = RunWebhook(flags); });
}

int RunWebhook(const WebhookFlags& given) {
  SetUpLogging(given.log, given.verbose, "webhook");
  // In self-signed mode the files the webhook writes stand where --tls-cert/--tls-key would.
  WebhookFlags flags = given;
  const bool self_signed = !flags.self_signed_ca_secret.empty();
  if (self_signed && (!flags.tls_cert.empty() || !flags.tls_key.empty())) {
    return Fail(
        "--self-signed-ca-secret and --tls-cert/--tls-key are exclusive: either the webhook makes its own "
        "certificate, or it serves the one given (cert-manager's; docs/webhook.md)");
  }
  if (!self_signed) {
    for (const auto& [flag, set] : {std::pair{"--namespace", !flags.namespace_.empty()},
                                    {"--service", !flags.service.empty()},
                                    {"--mutating-webhook-configuration", !flags.mutating_configuration.empty()},
                                    {"--validating-webhook-configuration", !flags.validating_configuration.empty()},
                                    {"--extra-san", !flags.extra_sans.empty()}}) {
      if (set) {
        return Fail(std::string(flag) + " is for --self-signed-ca-secret");
      }
    }
  }
  std::string host;
  int port = 0;
  if (auto s = daemon::ParseListen(flags.listen, host, port); !s.ok()) {
    return Fail("--listen: " + s.message());
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return Fail("--tls-cert and --tls-key go together");
  }
  const bool tls = !flags.tls_cert.empty() || self_signed;
  if (!tls && !net::IsLoopbackHost(host)) {
    return Fail("refusing to serve plain HTTP on " + flags.listen +
                ": give --tls-cert and --tls-key (kube-apiserver calls webhooks over HTTPS only), or listen on a "
                "loopback address");
  }
  if (flags.client_ca.empty() != flags.apiserver_client_names.empty()) {
    return Fail(
        "--client-ca and --apiserver-client-names go together (a CA alone would admit every certificate it "
        "signed, a cluster CA signs every node's and many users')");
  }
  if (!flags.client_ca.empty() && !tls) {
    return Fail("--client-ca needs TLS: --self-signed-ca-secret, or --tls-cert and --tls-key");
  }
  webhook::CertKeeperOptions keeper_options;
  if (self_signed) {
    keeper_options =
        webhook::CertKeeperOptions{.namespace_ = flags.namespace_.empty() ? PodNamespace() : flags.namespace_,
                                   .secret_name = flags.self_signed_ca_secret,
                                   .service = flags.service,
                                   .extra_names = flags.extra_sans,
                                   .mutating_configuration = flags.mutating_configuration,
                                   .validating_configuration = flags.validating_configuration,
                                   .cert_file = flags.cert_dir + "/tls.crt",
                                   .key_file = flags.cert_dir + "/tls.key",
                                   .ca_validity = std::chrono::hours(24) * flags.ca_validity_days,
                                   .cert_validity = std::chrono::hours(24) * flags.cert_validity_days};
    if (keeper_options.namespace_.empty()) {
      return Fail("--self-signed-ca-secret: give --namespace (outside a pod there is no " +
                  std::string(kPodNamespaceFile) + ")");
    }
    if (auto s = webhook::CheckCertKeeperOptions(keeper_options); !s.ok()) {
      return Fail(s.message());
    }
    std::error_code ec;
    std::filesystem::create_directories(flags.cert_dir, ec);
    if (ec || ::access(flags.cert_dir.c_str(), W_OK) != 0) {
      return Fail("--cert-dir: cannot write to " + flags.cert_dir + (ec ? ": " + ec.message() : std::string()) +
                  " (in a pod, mount an emptyDir there)");
    }
    flags.tls_cert = keeper_options.cert_file;
    flags.tls_key = keeper_options.key_file;
  }
  if (!(flags.shutdown_delay_s >= 0 && flags.shutdown_delay_s <= 300)) {
    return Fail("--shutdown-delay must be between 0 and 300 seconds");
  }
  State state;
  if (!flags.config.empty()) {
    auto text = ReadFile(flags.config);
    if (!text) {
      return Fail("--config: cannot read " + flags.config);
    }
    auto config = webhook::ParseWebhookConfig(*text, flags.config);
    if (!config.ok()) {
      return Fail(config.status().message());
    }
    state.config = std::move(config).value();
  }

  // Signals are taken by sigwait below; block them before any thread starts so that every thread inherits it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<adapters::k8s::ApiClient> client;
  std::unique_ptr<adapters::k8s::EventWriter> events;
  state.verify_callers = !flags.client_ca.empty();
  if (flags.events || flags.queues || self_signed) {
    const std::string which = self_signed ? "--self-signed-ca-secret" : flags.events ? "--events" : "--queues";
    auto config = adapters::k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
    if (!config.ok()) {
      return Fail(which + ": " + config.status().message());
    }
    auto made_client = adapters::k8s::ApiClient::Create(std::move(config).value());
    if (!made_client.ok()) {
      return Fail(which + ": " + made_client.status().message());
    }
    client = std::move(made_client).value();
    state.client = client.get();
  } else if (!flags.kubeconfig.empty() || !flags.context.empty()) {
    return Fail("--kubeconfig and --context are for --events, --queues and --self-signed-ca-secret");
  }
  if (flags.events) {
    events = std::make_unique<adapters::k8s::EventWriter>(*client, "gpusched-webhook");
    state.events = events.get();
  }
  state.queues_enabled = flags.queues;
  if (flags.queues) {
    RefreshQueues(*client, state.queues, /*first=*/true);
  }

  // Self-signed: the CA, caBundle and a first certificate before anything is served (so /readyz answers only then).
  // Bad contents of the Secret or a flag the API refuses stop here; anything else (the API server unreachable, the
  // configurations not applied yet, RBAC not there yet) is retried until it works or a signal comes.
  std::unique_ptr<webhook::CertKeeper> keeper;
  const std::string secret_ref = "Secret " + keeper_options.namespace_ + "/" + keeper_options.secret_name;
  state.self_signed = self_signed;
  if (self_signed) {
    keeper =
        std::make_unique<webhook::CertKeeper>(*client, keeper_options, [] { return std::chrono::system_clock::now(); });
    auto wait = std::chrono::seconds(1);
    for (;;) {
      const common::Status s = SyncCertificate(*keeper, state, secret_ref);
      if (s.ok()) {
        break;
      }
      if (s.code() == common::StatusCode::kInvalidArgument) {
        return Fail("--self-signed-ca-secret: " + s.message());
      }
      Say(common::LogLevel::kWarn, "no serving certificate yet (tried again in " + std::to_string(wait.count()) +
                                       " s): " + adapters::k8s::DescribeApiFailure(s, client->config().server));
      const timespec delay{.tv_sec = static_cast<time_t>(wait.count()), .tv_nsec = 0};
      int got = -1;
      while ((got = sigtimedwait(&signals, nullptr, &delay)) < 0 && errno == EINTR) {
      }
      if (got > 0) {
        Say(common::LogLevel::kInfo, std::string("stopping on ") + strsignal(got) + " before serving");
        return 0;
      }
      wait = std::min(wait * 2, std::chrono::seconds(30));
    }
  }

  // Certificate renewal: the pair the first server loads, read before it is built so that a renewal in between is
  // not missed; later, a changed pair that loads is served by a new listener on the same port (TlsReloader).
  std::unique_ptr<net::HttpServer> server;
  std::atomic<bool> fatal{false};
  daemon::TlsReloader reloader({.cert_file = flags.tls_cert,
                                .key_file = flags.tls_key,
                                .interval = kCertificateCheckInterval,
                                .name = "gpusched webhook"},
                               [&]() -> common::Status {
                                 auto replacement = MakeServer(host, port, flags, state);
                                 if (!replacement.ok()) {  // a half-written pair: tried again at the next check
                                   return replacement.status();
                                 }
                                 server->Stop();
                                 server = std::move(replacement).value();
                                 if (auto s = server->Start(); !s.ok()) {
                                   Say(common::LogLevel::kError,
                                       "cannot listen again on port " + std::to_string(port) + ": " + s.message());
                                   fatal = true;
                                   kill(getpid(), SIGTERM);
                                   return s;
                                 }
                                 return common::Status::Ok();
                               });
  if (tls) {
    reloader.Prime();
  }
  auto made = MakeServer(host, port, flags, state);
  if (!made.ok()) {
    return Fail(made.status().message());
  }
  server = std::move(made).value();
  if (auto s = server->Start(); !s.ok()) {
    return Fail("cannot listen on " + flags.listen + ": " + s.message());
  }
  port = server->port();
  std::string users;
  for (const auto& u : state.config.allowed_users) {
    users += (users.empty() ? "" : ", ") + u;
  }
  Say(common::LogLevel::kInfo, std::string("serving /validate and /mutate on ") + (tls ? "https://" : "http://") +
                                   host + ":" + std::to_string(port) + "; gpusched.io/allocation writable by " +
                                   (users.empty() ? std::string("nobody") : users) +
                                   (state.config.allowed_groups.empty() ? "" : " and the allowed groups"));

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  if (tls) {
    if (auto s = reloader.Start(); !s.ok()) {
      return Fail("certificate renewal: " + s.message());
    }
  }

  // Self-signed: renewal, a CA another replica rotated, a caBundle someone reset (kubectl apply of an older file).
  std::thread cert_syncer;
  if (self_signed) {
    cert_syncer = std::thread([&] {
      std::unique_lock lock(mu);
      auto interval = std::chrono::duration_cast<std::chrono::seconds>(kCertSyncInterval);
      while (!cv.wait_for(lock, interval, [&] { return stopping; })) {
        lock.unlock();
        const common::Status s = SyncCertificate(*keeper, state, secret_ref);
        if (!s.ok()) {
          Say(common::LogLevel::kWarn, "certificate check failed (tried again in " +
                                           std::to_string(kCertRetryInterval.count()) +
                                           " s): " + adapters::k8s::DescribeApiFailure(s, client->config().server));
        }
        interval = s.ok() ? std::chrono::duration_cast<std::chrono::seconds>(kCertSyncInterval) : kCertRetryInterval;
        lock.lock();
      }
    });
  }

  std::thread refresher;
  if (flags.queues) {
    refresher = std::thread([&] {
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, kQueueRefreshInterval, [&] { return stopping; })) {
        lock.unlock();
        RefreshQueues(*client, state.queues, /*first=*/false);
        lock.lock();
      }
    });
  }

  int sig = 0;
  sigwait(&signals, &sig);
  state.draining = true;
  if (!fatal && flags.shutdown_delay_s > 0) {
    std::ostringstream seconds;
    seconds << flags.shutdown_delay_s;
    Say(common::LogLevel::kInfo,
        std::string("stopping on ") + strsignal(sig) + " in " + seconds.str() + " s (/readyz says 503 meanwhile)");
    const double whole = std::floor(flags.shutdown_delay_s);
    const timespec delay{.tv_sec = static_cast<time_t>(whole),
                         .tv_nsec = static_cast<long>((flags.shutdown_delay_s - whole) * 1e9)};
    while (sigtimedwait(&signals, nullptr, &delay) < 0 && errno == EINTR) {
    }
  } else {
    Say(common::LogLevel::kInfo, std::string("stopping on ") + strsignal(sig));
  }
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  cv.notify_all();
  reloader.Stop();  // before the server goes: the reloader may be replacing it
  if (refresher.joinable()) {
    refresher.join();
  }
  if (cert_syncer.joinable()) {
    cert_syncer.join();
  }
  server->Stop();
  if (events != nullptr) {
    events->Stop();  // what the last denials told is written
  }
  return fatal ? 1 : 0;
}

}  // namespace gpusched::cli
