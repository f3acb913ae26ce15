#pragma once

// Kubeconfig exec credential plugins (client.authentication.k8s.io ExecCredential, k8s-gpu-protocols.md §7.6): the
// kubeconfigs of EKS (`aws eks get-token`), GKE (`gke-gcloud-auth-plugin`) and AKS (`kubelogin`) name a program
// that prints a short-lived token. ApiClient runs it (proc::RunCommand, no shell, a timeout) before its first
// request, again shortly before the token's expirationTimestamp, and after a 401; between runs the token is cached.
//
// The program gets KUBERNETES_EXEC_INFO = {"apiVersion": <the kubeconfig's>, "kind": "ExecCredential",
// "spec": {"interactive": false, "cluster": {...} when provideClusterInfo}} and the kubeconfig's env entries; it must
// print an ExecCredential of the same apiVersion whose status has a token. A plugin that returns a client
// certificate instead is refused with a clear message (gpusched's TLS client is set up once, at start).

#include <chrono>
#include <optional>
#include <string>

#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/common/status.h"

namespace gpusched::adapters::k8s {

struct ExecCredential {
  std::string token;
  std::optional<std::chrono::system_clock::time_point> expires;  // none: valid until the server says 401
};

// The plugin's standard output, checked against the apiVersion it was asked for. Errors name `where`.
[[nodiscard]] common::Result<ExecCredential> ParseExecCredential(const std::string& json_text,
                                                                 const std::string& api_version,
                                                                 const std::string& where);

// KUBERNETES_EXEC_INFO for this plugin and cluster (server, CA, insecure-skip-tls-verify when provideClusterInfo).
[[nodiscard]] std::string ExecInfo(const ExecPluginConfig& plugin, const ClientConfig& cluster);

// Runs config.exec and parses what it printed. The error says what failed: the command could not be started (with
// the kubeconfig's installHint), it exited non-zero (with its stderr), it ran past `timeout`, or its output is not
// a usable ExecCredential.
[[nodiscard]] common::Result<ExecCredential> RunExecPlugin(const ClientConfig& config,
                                                           std::chrono::milliseconds timeout);

// RFC 3339 time ("2026-11-26T13:00:00Z", fractional seconds and offsets too); exposed for tests.
[[nodiscard]] common::Result<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text);

}  // namespace gpusched::adapters::k8s
