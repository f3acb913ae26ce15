#include "gpusched/adapters/extender/server.h"

#include <chrono>

#include <httplib.h>

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
  if (!config_.tls_cert_file.empty()) {
    auto ssl = std::make_unique<httplib::SSLServer>(config_.tls_cert_file.c_str(), config_.tls_key_file.c_str());
    if (!ssl->is_valid()) {
      return common::InvalidArgument("extender: cannot load TLS certificate " + config_.tls_cert_file + " or key " +
                                     config_.tls_key_file);
    }
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& svr = *server_;
  const int threads = config_.threads;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_payload_max_length(config_.max_body_bytes);
  svr.set_read_timeout(config_.read_timeout_seconds, 0);
  svr.set_write_timeout(config_.read_timeout_seconds, 0);
  svr.set_keep_alive_max_count(1000000);
  // An idle keep-alive connection holds its worker thread; release it soon so that a burst of new connections
  // (concurrent binds) never waits for a thread longer than this.
  svr.set_keep_alive_timeout(1);
  svr.set_tcp_nodelay(true);  // responses go out at once, not after the client's delayed ACK
  svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty()) {
      std::string why = res.status == 413   ? "request body is larger than maxBodyBytes"
                        : res.status == 404 ? "no such endpoint"
                                            : "HTTP " + std::to_string(res.status);
      res.set_content(EncodeBindingResult(why), "application/json");
    }
  });

  auto verb = [this](const std::string& name, Reply (ExtenderService::*fn)(std::string)) {
    return [this, name, fn](const httplib::Request& req, httplib::Response& res) {
      const auto start = std::chrono::steady_clock::now();
      // The handler owns the request for its duration; take the body instead of copying megabytes.
      std::string body = std::move(const_cast<std::string&>(req.body));
      Reply reply = (service_.*fn)(std::move(body));
      res.status = reply.status;
      res.set_content(std::move(reply.body), "application/json");
      metrics_.Request(name, reply.status,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  };
  const std::string& prefix = config_.path_prefix;
  svr.Post(prefix + "/filter", verb("filter", &ExtenderService::Filter));
  svr.Post(prefix + "/prioritize", verb("prioritize", &ExtenderService::Prioritize));
  svr.Post(prefix + "/bind", verb("bind", &ExtenderService::Bind));
  svr.Post(prefix + "/preempt", verb("preempt", &ExtenderService::Preempt));
  svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", "text/plain"); });
  svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const std::string why = readiness_ ? readiness_() : std::string();
    if (why.empty()) {
      const std::string degraded = degraded_ ? degraded_() : std::string();
      res.set_content(degraded.empty() ? "ok\n" : "ok (degraded: " + degraded + ")\n", "text/plain");
    } else {
      res.status = 503;
      res.set_content(why + "\n", "text/plain");
    }
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Serialize(mirror_), "text/plain; version=0.0.4");
  });

  if (config_.port == 0) {
    port_ = svr.bind_to_any_port(config_.host);
  } else {
    port_ = svr.bind_to_port(config_.host, config_.port) ? config_.port : -1;
  }
  if (port_ <= 0) {
    return common::Unavailable("extender: cannot listen on " + config_.host + ":" + std::to_string(config_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  for (int i = 0; i < 500 && !server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return common::Status::Ok();
}

void ExtenderServer::Stop() {
  if (server_ != nullptr) {
    server_->stop();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

}  // namespace gpusched::adapters::extender
