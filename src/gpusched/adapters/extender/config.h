#pragma once

// The extender's config file (YAML). Every key is optional; unknown keys are errors (a typo must not silently
// fall back to a default).
//
//   listen: "0.0.0.0:12345"        address:port of the HTTP(S) server
//   pathPrefix: "/scheduler"       verbs are served at <pathPrefix>/filter, /prioritize, /bind, /preempt
//   tls:                           HTTPS when both are set (kube-scheduler: enableHTTPS + tlsConfig)
//     certFile: /etc/gpusched/tls.crt
//     keyFile: /etc/gpusched/tls.key
//   policy: binpack                any policy of the registry (`gpusched extender --help` lists them); a pod may
//                                  override it with the annotation gpusched.io/policy
//   weights:                       optional: prioritize with several policies, score = sum(w * score) / sum(w) over
//     binpack: 1                   their 0..100 scores (normalised per policy when it asks); filter and the GPUs
//     fgd: 2                       chosen at bind stay with `policy`
//   resourceNames: [...]           GPU resource names to honour; default: all that gpusched knows
//   maxBodyBytes: 67108864         larger request bodies get 413 (a full NodeList of 5000 nodes is about 17 MB)
//   threads: 32                    HTTP worker threads. cpp-httplib serves a keep-alive connection on one thread
//                                  until it goes idle for a second, so keep this above the number of connections
//                                  kube-scheduler holds at once (its scheduling loop plus concurrent binds)
//   readTimeoutSeconds: 5          a client that sends its body slower than this is cut off
//   kubeconfig: ""                 used when --kubeconfig is not given (then KUBECONFIG, in-cluster, ~/.kube/config)

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/kube/resources.h"

namespace gpusched::adapters::extender {

struct ExtenderConfig {
  std::string host = "0.0.0.0";
  int port = 12345;
  std::string path_prefix = "/scheduler";
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string policy = "binpack";
  std::vector<std::pair<std::string, double>> weights;  // empty: `policy` alone scores
  kube::ResourceConfig resources;
  size_t max_body_bytes = size_t{64} << 20;
  int threads = 32;
  int read_timeout_seconds = 5;
  std::string kubeconfig;
};

// Parses YAML text; `source` names the file in errors.
common::Result<ExtenderConfig> ParseExtenderConfig(const std::string& yaml, const std::string& source);
common::Result<ExtenderConfig> LoadExtenderConfig(const std::string& path);
// "host:port" (port 0 = any free port); "[::1]:80" for IPv6.
common::Status ParseListen(const std::string& listen, std::string& host, int& port);

}  // namespace gpusched::adapters::extender
