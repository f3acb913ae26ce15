#include "gpusched/extender/server.h"

#include <chrono>

#include "gpusched/common/log.h"
#include "gpusched/common/redact.h"
#include "gpusched/extender/wire.h"

namespace gpusched::extender {
namespace {

// The counters of `b` added to `a`; open_connections is a gauge of the listener now and is left alone.
void AddCounters(net::HttpServerStats& a, const net::HttpServerStats& b) {
  a.connections_accepted += b.connections_accepted;
  a.connections_refused += b.connections_refused;
  a.tls_handshake_failures += b.tls_handshake_failures;
  a.client_identity_refused += b.client_identity_refused;
  a.requests += b.requests;
  a.header_too_large += b.header_too_large;
  a.body_too_large += b.body_too_large;
  a.encoding_refused += b.encoding_refused;
  a.timeouts += b.timeouts;
  a.bad_requests += b.bad_requests;
}

}  // namespace

ExtenderServer::ExtenderServer(ExtenderService& service, const ClusterMirror& mirror, ExtenderMetrics& metrics,
                               ExtenderConfig config, Readiness readiness)
    : service_(service),
      mirror_(mirror),
      metrics_(metrics),
      config_(std::move(config)),
      readiness_(std::move(readiness)) {}

ExtenderServer::~ExtenderServer() { Stop(); }

namespace {

// The config's timeouts, for both listeners; the verbs' listener takes the config's sizes too. At most
// max_connections_per_peer from one address; at the cap an idle connection (or the slow head of the address holding
// most) gives way to the new one (net::HttpLimits).
net::HttpLimits Limits(const ExtenderConfig& config, size_t max_body_bytes, size_t max_connections,
                       size_t max_connections_per_peer) {
  const auto read_timeout = std::chrono::milliseconds(int64_t{config.read_timeout_seconds} * 1000);
  return net::HttpLimits{.max_body_bytes = max_body_bytes,
                         .header_timeout = read_timeout,
                         .body_timeout = read_timeout,
                         .idle_timeout = std::chrono::milliseconds(int64_t{config.idle_timeout_seconds} * 1000),
                         .write_timeout = read_timeout,
                         .max_connections = max_connections,
                         .max_connections_per_peer = max_connections_per_peer};
}

}  // namespace

common::Result<std::unique_ptr<net::HttpServer>> ExtenderServer::MakeVerbServer(int port) {
  net::HttpServerOptions options{
      .host = config_.host,
      .port = port,
      .threads = config_.threads,
      .limits = Limits(config_, config_.max_body_bytes, config_.max_connections, config_.max_connections_per_peer),
      .tls = net::TlsOptions{.cert_file = config_.tls_cert_file,
                             .key_file = config_.tls_key_file,
                             .client_ca_file = config_.tls_client_ca_file,
                             .allowed_client_names = config_.tls_allowed_client_names},
      .name = "extender"};
  GPUSCHED_ASSIGN_OR_RETURN(server, net::HttpServer::Create(std::move(options)));
  auto verb = [this](const std::string& name, Reply (ExtenderService::*fn)(std::string)) {
    return [this, name, fn](net::HttpRequest& req) {
      const auto start = std::chrono::steady_clock::now();
      Reply reply = (service_.*fn)(std::move(req.body));
      metrics_.Request(name, reply.status,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      return net::HttpResponse{
          .status = reply.status, .content_type = "application/json", .body = std::move(reply.body)};
    };
  };
  const std::string& prefix = config_.path_prefix;
  server->Handle("POST", prefix + "/filter", verb("filter", &ExtenderService::Filter),
                 net::HandlerRuns::kInlineIfSmall);
  server->Handle("POST", prefix + "/prioritize", verb("prioritize", &ExtenderService::Prioritize),
                 net::HandlerRuns::kInlineIfSmall);
  server->Handle("POST", prefix + "/bind", verb("bind", &ExtenderService::Bind));
  server->Handle("POST", prefix + "/preempt", verb("preempt", &ExtenderService::Preempt));
  HandleReadOnly(*server);
  return server;
}

common::Status ExtenderServer::Start() {
  if (!config_.tls_cert_file.empty()) {
    reloader_ =
        std::make_unique<daemon::TlsReloader>(daemon::TlsReloaderOptions{.cert_file = config_.tls_cert_file,
                                                                         .key_file = config_.tls_key_file,
                                                                         .interval = config_.tls_reload_interval,
                                                                         .name = "gpusched extender"},
                                              [this] { return Renew(); });
    reloader_->Prime();  // before the listener reads the files: a renewal in between is seen at the first check
  }
  auto made = MakeVerbServer(config_.port);
  if (!made.ok()) {
    return made.status();
  }
  if (auto s = (*made)->Start(); !s.ok()) {
    return s;
  }
  {
    std::lock_guard lock(server_mu_);
    server_ = std::move(made).value();
    port_ = server_->port();
  }
  if (!config_.health_host.empty()) {
    // Probes and scrapes only: small bodies, few connections, no TLS (nothing here changes state).
    auto health = net::HttpServer::Create(net::HttpServerOptions{.host = config_.health_host,
                                                                 .port = config_.health_port,
                                                                 .threads = 2,
                                                                 .limits = Limits(config_, 4096, 64, 16),
                                                                 .name = "extender-health"});
    if (!health.ok()) {
      server_->Stop();
      return health.status();
    }
    health_ = std::move(health).value();
    HandleReadOnly(*health_);
    if (auto s = health_->Start(); !s.ok()) {
      server_->Stop();
      return common::Status(s.code(), "healthListen " + config_.health_host + ":" +
                                          std::to_string(config_.health_port) + ": " + s.message());
    }
    health_port_ = health_->port();
  }
  if (reloader_ != nullptr) {
    if (auto s = reloader_->Start(); !s.ok()) {
      Stop();
      return s;
    }
  }
  return common::Status::Ok();
}

common::Status ExtenderServer::Renew() {
  // Built first: a pair that does not load leaves the old listener serving.
  GPUSCHED_ASSIGN_OR_RETURN(next, MakeVerbServer(port_));
  net::HttpServer* old = nullptr;
  {
    std::lock_guard lock(server_mu_);
    old = server_.get();
  }
  // Not under server_mu_: handlers of the old listener (/metrics) take it while Stop waits for them.
  old->Stop();
  const common::Status started = next->Start();
  {
    std::lock_guard lock(server_mu_);
    AddCounters(retired_, server_->stats());
    server_ = std::move(next);  // the old listener is destroyed here, stopped
    down_ = started.ok() ? ""
                         : "the verbs' listener is down since a certificate renewal: cannot listen on port " +
                               std::to_string(port_) + " again: " + started.message();
  }
  if (!started.ok()) {
    common::Log(common::LogLevel::kError, "gpusched extender: " + down_ + " (tried again at the next check)");
    return common::Unavailable(down_);
  }
  return common::Status::Ok();
}

const net::HttpServer* ExtenderServer::http() const {
  std::lock_guard lock(server_mu_);
  return server_.get();
}

net::HttpServerStats ExtenderServer::stats() const {
  std::lock_guard lock(server_mu_);
  net::HttpServerStats out = server_ != nullptr ? server_->stats() : net::HttpServerStats{};
  AddCounters(out, retired_);
  return out;
}

void ExtenderServer::HandleReadOnly(net::HttpServer& server) {
  server.Handle("GET", "/healthz", [](net::HttpRequest&) { return net::HttpResponse{.body = "ok\n"}; });
  server.Handle("GET", "/readyz", [this](net::HttpRequest&) {
    std::string why = readiness_ ? readiness_() : std::string();
    {
      std::lock_guard lock(server_mu_);
      if (!down_.empty()) {
        why += (why.empty() ? "" : "; ") + down_;
      }
    }
    if (!why.empty()) {
      return net::HttpResponse{.status = 503, .body = common::RedactUrls(why) + "\n"};
    }
    const std::string degraded = degraded_ ? degraded_() : std::string();
    return net::HttpResponse{.body =
                                 degraded.empty() ? "ok\n" : "ok (degraded: " + common::RedactUrls(degraded) + ")\n"};
  });
  server.Handle("GET", "/metrics", [this](net::HttpRequest&) {
    std::string body = metrics_.Serialize(mirror_);
    body += net::RenderStats(stats(), "gpusched_extender");
    return net::HttpResponse{.content_type = "text/plain; version=0.0.4", .body = std::move(body)};
  });
}

void ExtenderServer::Stop() {
  if (reloader_ != nullptr) {
    reloader_->Stop();  // no renewal replaces the listener while it stops
  }
  if (health_ != nullptr) {
    health_->Stop();
  }
  net::HttpServer* server = nullptr;
  {
    std::lock_guard lock(server_mu_);
    server = server_.get();
  }
  if (server != nullptr) {
    server->Stop();
  }
}

}  // namespace gpusched::extender
