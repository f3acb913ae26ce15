#pragma once

// The extender's HTTP(S) server, on net::HttpServer: POST <prefix>/filter, /prioritize, /bind, /preempt; GET
// /healthz (the process serves), /readyz (200 once the watch caches synced, else 503 with what is missing) and
// /metrics (also on the plain-HTTP healthListen listener when configured: those three only, no verb). With
// tls.clientCAFile only clients whose certificate that CA signed, and whose name is in
// tls.allowedClientNames, reach any endpoint (the probes included: kubelet probes then need a loopback or exec
// probe); config.cc refuses plain HTTP on anything but loopback. Bodies over maxBodyBytes get 413 whatever the
// framing, compressed bodies 415, heads over the limits 431, slow senders are cut off after readTimeoutSeconds, idle
// keep-alive connections after idleTimeoutSeconds, connections over maxConnections are closed at once; bad JSON gets
// 400 with the decoder's message. None of these touch the cluster state.

#include <functional>
#include <memory>
#include <string>

#include "gpusched/adapters/extender/config.h"
#include "gpusched/adapters/extender/metrics.h"
#include "gpusched/adapters/extender/service.h"
#include "gpusched/adapters/extender/state.h"
#include "gpusched/common/status.h"

#include "gpusched/net/http_server.h"

namespace gpusched::adapters::extender {

// Empty when ready, else why not.
using Readiness = std::function<std::string()>;

class ExtenderServer {
 public:
  ExtenderServer(ExtenderService& service, const ClusterMirror& mirror, ExtenderMetrics& metrics, ExtenderConfig config,
                 Readiness readiness);
  ~ExtenderServer();
  ExtenderServer(const ExtenderServer&) = delete;
  ExtenderServer& operator=(const ExtenderServer&) = delete;

  // What /readyz adds to a 200 when scheduling works but something is degraded (a metrics source is down); "" = no.
  void SetDegraded(std::function<std::string()> degraded) { degraded_ = std::move(degraded); }

  // Binds (port 0 picks a free one) and serves on background threads. Fails on unreadable TLS files.
  common::Status Start();
  [[nodiscard]] int port() const { return port_; }
  // The healthListen listener's port (0 when the config has none).
  [[nodiscard]] int health_port() const { return health_port_; }
  void Stop();
  // What the HTTP layer refused so far (null before Start).
  [[nodiscard]] const net::HttpServer* http() const { return server_.get(); }

 private:
  ExtenderService& service_;
  const ClusterMirror& mirror_;
  ExtenderMetrics& metrics_;
  ExtenderConfig config_;
  Readiness readiness_;
  std::function<std::string()> degraded_;
  std::unique_ptr<net::HttpServer> server_;
  std::unique_ptr<net::HttpServer> health_;  // healthListen: GET /healthz, /readyz, /metrics only
  int port_ = 0;
  int health_port_ = 0;

  void HandleReadOnly(net::HttpServer& server);
};

}  // namespace gpusched::adapters::extender
