#pragma once

// `gpusched webhook`: the admission webhook (webhook/) served over HTTPS through net::HttpServer. Wiring only.
//
//   POST /validate   the validating webhook (webhook/validator.h)
//   POST /mutate     the mutating webhook (webhook/mutator.h)
//   GET  /healthz    200 while the process serves
//   GET  /readyz     200, or 503 once SIGTERM arrived (the shutdown delay drains the replica first)
//   GET  /metrics    admissions by endpoint and outcome, the HTTP layer's refusals (those restart from 0 when a
//                    renewed certificate re-creates the listener), and with --events the events written and the
//                    denials whose Event was not written because the review could not be verified
//
// At most 2 reviews over 64 KiB decode at once (webhook::DecodeLimiter); more get 429 with Retry-After. Bodies are
// at most 4 MiB, at most 32 connections are open.
//
// TLS is required (kube-apiserver calls webhooks over HTTPS only) unless --listen is a loopback address. Either
//   * --self-signed-ca-secret NAME (the default install): the webhook makes its own serving certificate
//     (webhook/cert_keeper.h): a CA kept in that Secret, a certificate from it for --service's DNS names (plus
//     --extra-san), written to --cert-dir, and the caBundle of --mutating-webhook-configuration and
//     --validating-webhook-configuration patched to trust it. It serves (and /readyz answers) only once that is
//     done; then every 5 minutes it checks again (renewal, a CA another replica rotated, a caBundle reset); or
//   * --tls-cert and --tls-key (cert-manager, or files made by hand).
// Either way the certificate and key are read again every 30 s; when they change (renewed) the listener is
// re-created with them on the same port, so a renewal never needs a restart. SIGINT or SIGTERM: /readyz turns 503,
// requests are served for --shutdown-delay seconds more (a second signal cuts it short), then the server stops
// and the process exits 0.

#include <string>
#include <vector>

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
  // --self-signed-ca-secret: the webhook's own certificate (exclusive with --tls-cert/--tls-key). The namespace
  // defaults to the pod's own (the ServiceAccount's namespace file).
  std::string self_signed_ca_secret;
  std::string namespace_;
  std::string service;
  std::string mutating_configuration, validating_configuration;
  std::vector<std::string> extra_sans;  // IP addresses or DNS names: tests, out-of-cluster use
  std::string cert_dir = "/run/gpusched-webhook";
  int ca_validity_days = 3650;
  int cert_validity_days = 365;
  double shutdown_delay_s = 0;
  // Connections open at once from one IP address, of the 256 the webhook holds (net::HttpLimits): the API server
  // (or the proxy it reaches webhooks through) is one or a few peers.
  size_t max_connections_per_peer = 16;
  // --events: denials about existing pods become Warning Events on them (AdmissionDenied), through the API server
  // of --kubeconfig/--context (in a pod: its ServiceAccount's token). Off: the webhook calls no API.
  bool events = false;
  // --queues: list the GpuQueues (at start, then every 30 s) and deny a pod whose gpusched.io/queue label names a
  // queue that does not admit its namespace (webhook/validator.h, rule 5). Needs list on gpuqueues.
  bool queues = false;
  std::string kubeconfig, context;
  // --client-ca and --apiserver-client-names: require a client certificate signed by that CA and naming one of
  // those (kube-apiserver's, from its AdmissionConfiguration kubeConfigFile). Without them an Event is written
  // only for a review whose oldObject is the live pod (uid and resourceVersion, fetched: needs get on pods).
  std::string client_ca;
  std::vector<std::string> apiserver_client_names;
  bool verbose = false;
  LogFlags log;
};

void AddWebhookCommand(CLI::App& app, WebhookFlags& flags, int& exit_code);

// Runs until SIGINT or SIGTERM; returns the process exit code.
int RunWebhook(const WebhookFlags& flags);

}  // namespace gpusched::cli
