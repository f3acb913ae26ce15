#include "gpusched/adapters/extender/server.h"

#include <chrono>

#include "gpusched/adapters/extender/wire.h"

namespace gpusched::adapters::extender {

ExtenderServer::ExtenderServer(ExtenderService& service, const ClusterMirror& mirror, ExtenderMetrics& metrics,
                               ExtenderConfig config, Readiness readiness)
    : service_(service),
      mirror_(mirror),
      metrics_(metrics),
      config_(std::move(config)),
      readiness_(std::move(readiness)) {}

ExtenderServer::~ExtenderServer() { Stop(); }

common::Status ExtenderServer::Start() {
  // The config's timeouts, for both listeners; the verbs' listener takes the config's sizes too.
  // At most max_connections_per_peer from one address; at the cap an idle connection (or the slow head of the
  // address holding most) gives way to the new one (net::HttpLimits).
  auto limits = [this](size_t max_body_bytes, size_t max_connections, size_t max_connections_per_peer) {
    const auto read_timeout = std::chrono::milliseconds(int64_t{config_.read_timeout_seconds} * 1000);
    return net::HttpLimits{.max_body_bytes = max_body_bytes,
                           .header_timeout = read_timeout,
                           .body_timeout = read_timeout,
                           .idle_timeout = std::chrono::milliseconds(int64_t{config_.idle_timeout_seconds} * 1000),
                           .write_timeout = read_timeout,
                           .max_connections = max_connections,
                           .max_connections_per_peer = max_connections_per_peer};
  };
  net::HttpServerOptions options{
      .host = config_.host,
      .port = config_.port,
      .threads = config_.threads,
      .limits = limits(config_.max_body_bytes, config_.max_connections, config_.max_connections_per_peer),
      .tls = net::TlsOptions{.cert_file = config_.tls_cert_file,
                             .key_file = config_.tls_key_file,
                             .client_ca_file = config_.tls_client_ca_file,
                             .allowed_client_names = config_.tls_allowed_client_names},
      .name = "extender"};
  auto made = net::HttpServer::Create(std::move(options));
  if (!made.ok()) {
    return made.status();
  }
  server_ = std::move(made).value();

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
  server_->Handle("POST", prefix + "/filter", verb("filter", &ExtenderService::Filter),
                  net::HandlerRuns::kInlineIfSmall);
  server_->Handle("POST", prefix + "/prioritize", verb("prioritize", &ExtenderService::Prioritize),
                  net::HandlerRuns::kInlineIfSmall);
  server_->Handle("POST", prefix + "/bind", verb("bind", &ExtenderService::Bind));
  server_->Handle("POST", prefix + "/preempt", verb("preempt", &ExtenderService::Preempt));
  HandleReadOnly(*server_);
  if (auto s = server_->Start(); !s.ok()) {
    return s;
  }
  port_ = server_->port();
  if (!config_.health_host.empty()) {
    // Probes and scrapes only: small bodies, few connections, no TLS (nothing here changes state).
    auto health = net::HttpServer::Create(net::HttpServerOptions{.host = config_.health_host,
                                                                 .port = config_.health_port,
                                                                 .threads = 2,
                                                                 .limits = limits(4096, 64, 16),
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
  return common::Status::Ok();
}

void ExtenderServer::HandleReadOnly(net::HttpServer& server) {
  server.Handle("GET", "/healthz", [](net::HttpRequest&) { return net::HttpResponse{.body = "ok\n"}; });
  server.Handle("GET", "/readyz", [this](net::HttpRequest&) {
    const std::string why = readiness_ ? readiness_() : std::string();
    if (!why.empty()) {
      return net::HttpResponse{.status = 503, .body = why + "\n"};
    }
    const std::string degraded = degraded_ ? degraded_() : std::string();
    return net::HttpResponse{.body = degraded.empty() ? "ok\n" : "ok (degraded: " + degraded + ")\n"};
  });
  server.Handle("GET", "/metrics", [this](net::HttpRequest&) {
    std::string body = metrics_.Serialize(mirror_);
    body += net::RenderStats(server_->stats(), "gpusched_extender");
    return net::HttpResponse{.content_type = "text/plain; version=0.0.4", .body = std::move(body)};
  });
}

void ExtenderServer::Stop() {
  if (health_ != nullptr) {
    health_->Stop();
  }
  if (server_ != nullptr) {
    server_->Stop();
  }
}

}  // namespace gpusched::adapters::extender
