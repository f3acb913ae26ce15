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
//
// Certificate renewal: with TLS, a TlsReloader reads tls.certFile and tls.keyFile every tls.reloadIntervalSeconds;
// when they changed and the new pair loads, a new verbs' listener with it replaces the old one on the same port
// (the old one stops first: connections open at that moment are closed, and kube-scheduler retries what it had in
// flight). A pair that does not load (half written) keeps the old listener and is tried again at the next check. If
// the port cannot be taken again, /readyz on healthListen says so and the next check tries again. The HTTP
// counters in /metrics add up over the listeners.
//
// Whatever /readyz says is passed through common::RedactUrls: a degraded metrics source is named without the
// credentials its URL may carry.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "gpusched/common/status.h"
#include "gpusched/daemon/tls_reloader.h"
#include "gpusched/extender/config.h"
#include "gpusched/extender/metrics.h"
#include "gpusched/extender/service.h"
#include "gpusched/extender/state.h"

#include "gpusched/net/http_server.h"

namespace gpusched::extender {

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
  // The verbs' listener now (null before Start); it changes when a renewed certificate is loaded.
  [[nodiscard]] const net::HttpServer* http() const;
  // What the verbs' listeners refused so far, summed over the listeners renewals replaced.
  [[nodiscard]] net::HttpServerStats stats() const;
  // Renewed certificates served so far (0 without TLS).
  [[nodiscard]] uint64_t tls_reloads() const { return reloader_ ? reloader_->reloads() : 0; }
  // Renewed pairs that did not load (each check retries until one does).
  [[nodiscard]] uint64_t tls_reload_failures() const { return reloader_ ? reloader_->failures() : 0; }

 private:
  ExtenderService& service_;
  const ClusterMirror& mirror_;
  ExtenderMetrics& metrics_;
  ExtenderConfig config_;
  Readiness readiness_;
  std::function<std::string()> degraded_;
  mutable std::mutex server_mu_;                   // guards server_, retired_, down_ (never held across Start/Stop)
  std::unique_ptr<net::HttpServer> server_;        // the verbs' listener
  net::HttpServerStats retired_;                   // counters of the listeners renewals replaced
  std::string down_;                               // why the verbs' listener is not serving after a renewal, or ""
  std::unique_ptr<net::HttpServer> health_;        // healthListen: GET /healthz, /readyz, /metrics only
  std::unique_ptr<daemon::TlsReloader> reloader_;  // with TLS
  int port_ = 0;
  int health_port_ = 0;

  // The verbs' listener on `port`, not started.
  common::Result<std::unique_ptr<net::HttpServer>> MakeVerbServer(int port);
  // TlsReloader's callback: the verbs' listener again, with the files as they are now.
  common::Status Renew();
  void HandleReadOnly(net::HttpServer& server);
};

}  // namespace gpusched::extender
