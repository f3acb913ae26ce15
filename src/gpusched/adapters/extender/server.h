#pragma once

// The extender's HTTP(S) server (cpp-httplib): POST <prefix>/filter, /prioritize, /bind, /preempt; GET /healthz
// (the process serves), /readyz (200 once the watch caches synced, else 503 with what is missing) and /metrics.
// Bodies over maxBodyBytes get 413, slow senders are cut off after readTimeoutSeconds, bad JSON gets 400 with the
// decoder's message; none of these touch the cluster state.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "gpusched/adapters/extender/config.h"
#include "gpusched/adapters/extender/metrics.h"
#include "gpusched/adapters/extender/service.h"
#include "gpusched/adapters/extender/state.h"
#include "gpusched/common/status.h"

namespace httplib {
class Server;
}  // namespace httplib

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

  // Binds (port 0 picks a free one) and serves on a background thread.
  common::Status Start();
  [[nodiscard]] int port() const { return port_; }
  void Stop();

 private:
  ExtenderService& service_;
  const ClusterMirror& mirror_;
  ExtenderMetrics& metrics_;
  ExtenderConfig config_;
  Readiness readiness_;
  std::function<std::string()> degraded_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gpusched::adapters::extender
