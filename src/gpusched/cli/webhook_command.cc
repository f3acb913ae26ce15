#include "gpusched/cli/webhook_command.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "gpusched/adapters/extender/config.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/common/log.h"
#include "gpusched/net/http_server.h"
#include "gpusched/webhook/handler.h"
#include "gpusched/webhook/webhook_config.h"

namespace gpusched::cli {
namespace {

using webhook::Endpoint;
using webhook::Outcome;

constexpr auto kCertificateCheckInterval = std::chrono::seconds(30);

void Say(common::LogLevel level, const std::string& m) { common::Log(level, "gpusched webhook: " + m); }

int Fail(const std::string& message) {
  std::cerr << "gpusched webhook: " << message << "\n";
  return 1;
}

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
  adapters::k8s::EventWriter* events = nullptr;  // --events; set before serving
  std::atomic<bool> draining{false};
  std::array<std::array<std::atomic<uint64_t>, 4>, 2> admissions{};  // [endpoint][outcome]

  std::string RenderMetrics(const net::HttpServer& server) const {
    std::string out =
        "# HELP gpusched_webhook_admissions_total Admission reviews answered, by endpoint and outcome "
        "(bad_request: not a valid AdmissionReview).\n"
        "# TYPE gpusched_webhook_admissions_total counter\n";
    for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
      for (Outcome o : {Outcome::kAllowed, Outcome::kPatched, Outcome::kDenied, Outcome::kBadRequest}) {
        out += std::string("gpusched_webhook_admissions_total{endpoint=\"") + webhook::EndpointName(e) +
               "\",outcome=\"" + webhook::OutcomeName(o) + "\"} " +
               std::to_string(admissions[static_cast<size_t>(e)][static_cast<size_t>(o)].load()) + "\n";
      }
    }
    if (events != nullptr) {
      out += events->RenderMetrics("gpusched_webhook_events_total");
    }
    return out + net::RenderStats(server.stats(), "gpusched_webhook");
  }
};

constexpr size_t kWebhookMaxConnections = 256;

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
                                // connection closing under it). At most max_connections_per_peer from one address; at
                                // the cap an idle connection (or the slow head of the address holding most) gives way
                                // to a new one, so no client locks out the API server or the kubelet's probes.
                                .limits = net::HttpLimits{.max_body_bytes = 4 << 20,
                                                          .idle_timeout = std::chrono::milliseconds(120000),
                                                          .max_connections = kWebhookMaxConnections,
                                                          .max_connections_per_peer = flags.max_connections_per_peer},
                                .tls = net::TlsOptions{.cert_file = flags.tls_cert, .key_file = flags.tls_key},
                                .name = "webhook"}));
  net::HttpServer* self = server.get();
  for (Endpoint e : {Endpoint::kValidate, Endpoint::kMutate}) {
    server->Handle("POST", std::string("/") + webhook::EndpointName(e), [e, &state](net::HttpRequest& req) {
      const webhook::HandlerReply r = webhook::HandleAdmission(e, req.Header("Content-Type"), req.body, state.config);
      state.admissions[static_cast<size_t>(e)][static_cast<size_t>(r.outcome)].fetch_add(1);
      if (!r.summary.empty()) {
        Say(r.outcome == Outcome::kPatched ? common::LogLevel::kDebug : common::LogLevel::kInfo,
            std::string(webhook::EndpointName(e)) + ": " + r.summary + " (from " + req.peer.address + ")");
      }
      if (r.event.has_value() && state.events != nullptr) {
        state.events->Record(*r.event);
      }
      return net::HttpResponse{.status = r.status, .content_type = r.content_type, .body = r.body};
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

}  // namespace

void AddWebhookCommand(CLI::App& app, WebhookFlags& flags, int& exit_code) {
  CLI::App* wh = app.add_subcommand(
      "webhook",
      "Admission webhook over HTTPS: refuses forged gpusched.io/allocation annotations and GPU requests that can "
      "never be met, completes GPU requests with their device count (docs/webhook.md)");
  wh->add_option("--listen", flags.listen, "host:port")->capture_default_str();
  wh->add_option("--tls-cert", flags.tls_cert, "PEM serving certificate (chain); re-read when it changes")
      ->check(CLI::ExistingFile);
  wh->add_option("--tls-key", flags.tls_key, "PEM private key")->check(CLI::ExistingFile);
  wh->add_option("--config", flags.config,
                 "YAML config (allowedUsers, allowedGroups, schedulerName, namespaces, schedulerNames, resourceNames)")
      ->check(CLI::ExistingFile);
  wh->add_option("--shutdown-delay", flags.shutdown_delay_s,
                 "Seconds to keep serving after SIGTERM, with /readyz at 503, so that callers move to other replicas")
      ->capture_default_str();
  wh->add_option("--max-connections-per-peer", flags.max_connections_per_peer,
                 "Connections open at once from one IP address (of 256); more are closed at once")
      ->check(CLI::Range(size_t{1}, kWebhookMaxConnections))
      ->capture_default_str();
  wh->add_flag("--events", flags.events,
               "Tell a pod, as a Warning Event (AdmissionDenied), when a change to it is denied (needs events create "
               "and patch; without it the webhook calls no API)");
  wh->add_option("--kubeconfig", flags.kubeconfig,
                 "With --events: kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  wh->add_option("--context", flags.context, "With --events: kubeconfig context (default: its current-context)");
  wh->add_flag("-v,--verbose", flags.verbose, "Debug logging, every patch (--v=4)");
  AddLogFlags(*wh, flags.log);
  wh->callback([&flags, &exit_code] { exit_code = RunWebhook(flags); });
}

int RunWebhook(const WebhookFlags& flags) {
  SetUpLogging(flags.log, flags.verbose, "webhook");
  std::string host;
  int port = 0;
  if (auto s = adapters::extender::ParseListen(flags.listen, host, port); !s.ok()) {
    return Fail("--listen: " + s.message());
  }
  if (flags.tls_cert.empty() != flags.tls_key.empty()) {
    return Fail("--tls-cert and --tls-key go together");
  }
  const bool tls = !flags.tls_cert.empty();
  if (!tls && !net::IsLoopbackHost(host)) {
    return Fail("refusing to serve plain HTTP on " + flags.listen +
                ": give --tls-cert and --tls-key (kube-apiserver calls webhooks over HTTPS only), or listen on a "
                "loopback address");
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
  if (flags.events) {
    auto config = adapters::k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
    if (!config.ok()) {
      return Fail("--events: " + config.status().message());
    }
    auto made_client = adapters::k8s::ApiClient::Create(std::move(config).value());
    if (!made_client.ok()) {
      return Fail("--events: " + made_client.status().message());
    }
    client = std::move(made_client).value();
    events = std::make_unique<adapters::k8s::EventWriter>(*client, "gpusched-webhook");
    state.events = events.get();
  } else if (!flags.kubeconfig.empty() || !flags.context.empty()) {
    return Fail("--kubeconfig and --context are for --events");
  }

  auto made = MakeServer(host, port, flags, state);
  if (!made.ok()) {
    return Fail(made.status().message());
  }
  std::unique_ptr<net::HttpServer> server = std::move(made).value();
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

  // Certificate renewal: same port, new listener, as soon as both files changed and load.
  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::atomic<bool> fatal{false};
  std::thread renewer;
  if (tls) {
    renewer = std::thread([&] {
      std::optional<std::string> cert = ReadFile(flags.tls_cert);
      std::optional<std::string> key = ReadFile(flags.tls_key);
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, kCertificateCheckInterval, [&] { return stopping; })) {
        auto new_cert = ReadFile(flags.tls_cert);
        auto new_key = ReadFile(flags.tls_key);
        if (!new_cert || !new_key || (new_cert == cert && new_key == key)) {
          continue;
        }
        auto replacement = MakeServer(host, port, flags, state);
        if (!replacement.ok()) {  // a half-written pair: try again at the next check
          Say(common::LogLevel::kWarn, "new TLS certificate not loaded yet: " + replacement.status().message());
          continue;
        }
        server->Stop();
        server = std::move(replacement).value();
        if (auto s = server->Start(); !s.ok()) {
          Say(common::LogLevel::kError, "cannot listen again on port " + std::to_string(port) + ": " + s.message());
          fatal = true;
          kill(getpid(), SIGTERM);
          return;
        }
        cert = std::move(new_cert);
        key = std::move(new_key);
        Say(common::LogLevel::kInfo, "serving with the renewed TLS certificate");
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
  if (renewer.joinable()) {
    renewer.join();
  }
  server->Stop();
  if (events != nullptr) {
    events->Stop();  // what the last denials told is written
  }
  return fatal ? 1 : 0;
}

}  // namespace gpusched::cli
