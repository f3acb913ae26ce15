#pragma once

// Where and how to reach the Kubernetes API server: from a kubeconfig file, from the pod's service account
// (in-cluster), or resolved in kubectl's order. k8s-gpu-protocols.md §7.6.
//
// Only static credentials are supported: bearer tokens (inline or a token file, re-read by ApiClient since projected
// service-account tokens rotate) and client certificates. exec / auth-provider plugins and username/password are
// rejected with InvalidArgument naming the file and the user.

#include <chrono>
#include <cstdint>
#include <string>

#include "gpusched/common/status.h"

namespace gpusched::adapters::k8s {

struct ClientConfig {
  std::string server;                           // https://host:port
  std::string ca_pem;                           // PEM bytes of the CA (empty = system store)
  std::string client_cert_pem, client_key_pem;  // mTLS (PEM bytes)
  std::string token;                            // bearer token
  std::string token_file;                       // re-read every minute when set (projected SA tokens rotate)
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
// NotFound message lists what was tried.
[[nodiscard]] common::Result<ClientConfig> ResolveClientConfig(const std::string& explicit_path);

// RFC 4648 base64 (padding optional, whitespace ignored); InvalidArgument on other characters. Exposed for tests.
[[nodiscard]] common::Result<std::string> DecodeBase64(const std::string& text);

}  // namespace gpusched::adapters::k8s
