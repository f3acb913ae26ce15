#pragma once

// Where and how to reach the Kubernetes API server: from a kubeconfig file, from the pod's service account
// (in-cluster), or resolved in kubectl's order. k8s-gpu-protocols.md §7.6.
//
// Credentials: bearer tokens (inline or a token file, re-read by ApiClient since projected service-account tokens
// rotate), client certificates, and exec credential plugins (client.authentication.k8s.io/v1 and v1beta1
// ExecCredential, as the kubeconfigs of EKS, GKE and AKS use: exec_credential.h) that return a token. auth-provider
// plugins and username/password are rejected with InvalidArgument naming the file and the user.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/kube/base64.h"

namespace gpusched::adapters::k8s {

// users[].user.exec of a kubeconfig: a program that prints an ExecCredential with a token.
struct ExecPluginConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 or /v1beta1
  std::string command;      // a name looked up on PATH, or a path (relative ones: to the kubeconfig's directory)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  bool provide_cluster_info = false;  // KUBERNETES_EXEC_INFO carries spec.cluster
  std::string install_hint;           // shown when the command cannot be run
  std::string source;                 // "<file>: users[name=<user>].user.exec", for messages
};

struct ClientConfig {
  std::string server;                           // https://host:port
  std::string ca_pem;                           // PEM bytes of the CA (empty = system store)
  std::string client_cert_pem, client_key_pem;  // mTLS (PEM bytes)
  std::string token;                            // bearer token
  std::string token_file;                       // re-read every minute when set (projected SA tokens rotate)
  ExecPluginConfig exec;                        // command set: the token comes from this plugin (exec_credential.h)
  bool insecure_skip_verify = false;
  std::string namespace_;  // default namespace (kubeconfig context / in-cluster namespace file)
  std::chrono::milliseconds request_timeout{10000};
  // Objects per page of a list (limit=). The scheduler and the extender, which list every pod at start, ask for
  // kListPageSizeForAllPods: at 50,000 pods, pages of 500 made their restart a second slower.
  int64_t list_page_size = 500;
};

inline constexpr int64_t kListPageSizeForAllPods = 2000;

// kubeconfig YAML (apiVersion v1, kind Config): clusters[].cluster.{server, certificate-authority(-data),
// insecure-skip-tls-verify}, users[].user.{token, tokenFile, client-certificate(-data), client-key(-data)}, contexts,
// current-context. Relative file paths are relative to the kubeconfig's directory; *-data are base64. `context` empty
// means current-context. The namespace defaults to "default". Errors name the file and the missing or bad key.
[[nodiscard]] common::Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context = "");

// The same from text; `source` names the input in errors and `base_dir` anchors relative paths.
[[nodiscard]] common::Result<ClientConfig> ParseKubeconfig(const std::string& text, const std::string& source,
                                                           const std::string& base_dir,
                                                           const std::string& context = "");

// In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (an IPv6 host is bracketed), and token,
// ca.crt and namespace (optional, default "default") under `sa_dir`. token_file is set so the token is re-read.
[[nodiscard]] common::Result<ClientConfig> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// Order: explicit path (flag) > $KUBECONFIG (first entry) > in-cluster when KUBERNETES_SERVICE_HOST is set >
// ~/.kube/config. The first source that applies decides: its error is returned as is. When none applies the
// NotFound message lists what was tried. `context` (--context) picks a kubeconfig context instead of
// current-context; it is an error with the in-cluster configuration, which has none.
[[nodiscard]] common::Result<ClientConfig> ResolveClientConfig(const std::string& explicit_path,
                                                               const std::string& context = "");

// The *-data fields' decoding (kube/base64.h).
using kube::DecodeBase64;

}  // namespace gpusched::adapters::k8s
