#pragma once

// `gpusched webhook`: the admission webhook (webhook/) served over HTTPS through net::HttpServer. Wiring only.
//
//   POST /validate   the validating webhook (webhook/validator.h)
//   POST /mutate     the mutating webhook (webhook/mutator.h)
//   GET  /healthz    200 while the process serves
//   GET  /readyz     200, or 503 once SIGTERM arrived (the shutdown delay drains the replica first)
//   GET  /metrics    admissions by endpoint and outcome, the HTTP layer's refusals (those restart from 0 when a
//                    renewed certificate re-creates the listener), and with --events the events written
//
// TLS is required (kube-apiserver calls webhooks over HTTPS only) unless --listen is a loopback address. The
// certificate and key are read again every 30 s; when they change (cert-manager renewed the Secret) the listener is
// re-created with them on the same port, so a renewal never needs a restart. SIGINT or SIGTERM: /readyz turns 503,
// requests are served for --shutdown-delay seconds more (a second signal cuts it short), then the server stops
// and the process exits 0.

#include <string>
#include "gpusched/cli/logging.h"

namespace CLI {
class App;
}

namespace gpusched::cli {

struct WebhookFlags {
  std::string listen = "0.0.0.0:8443";
  std::string tls_cert;  // PEM certificate chain
  std::string tls_key;   // PEM private key
  std::string config;    // YAML (webhook/webhook_config.h); optional
  double shutdown_delay_s = 0;
  // Connections open at once from one IP address, of the 256 the webhook holds (net::HttpLimits): the API server
  // (or the proxy it reaches webhooks through) is one or a few peers.
  size_t max_connections_per_peer = 64;
  // --events: denials about existing pods become Warning Events on them (AdmissionDenied), through the API server
  // of --kubeconfig/--context (in a pod: its ServiceAccount's token). Off: the webhook calls no API.
  bool events = false;
  std::string kubeconfig, context;
  bool verbose = false;
  LogFlags log;
};

void AddWebhookCommand(CLI::App& app, WebhookFlags& flags, int& exit_code);

// Runs until SIGINT or SIGTERM; returns the process exit code.
int RunWebhook(const WebhookFlags& flags);

}  // namespace gpusched::cli
