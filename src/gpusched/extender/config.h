#pragma once

// The extender's config file (YAML). Every key is optional; unknown keys are errors (a typo must not silently
// fall back to a default).
//
//   listen: "127.0.0.1:12345"      address:port of the HTTP(S) server. Plain HTTP only on loopback (kube-scheduler
//                                  on the same host); any other address needs every tls key below, so that only
//                                  kube-scheduler may call the extender (a bind is a write to the cluster)
//   pathPrefix: "/scheduler"       verbs are served at <pathPrefix>/filter, /prioritize, /bind, /preempt
//   tls:                           HTTPS when certFile and keyFile are set (kube-scheduler: enableHTTPS + tlsConfig)
//     certFile: /etc/gpusched/tls.crt
//     keyFile: /etc/gpusched/tls.key
//     clientCAFile: /etc/gpusched/client-ca.crt   clients must present a certificate this CA signed (needs certFile)
//     allowedClientNames: [kube-scheduler]        ... carrying one of these names (subject CN, DNS or URI SAN);
//                                  needs clientCAFile. kube-scheduler: tlsConfig.certFile/keyFile
//     reloadIntervalSeconds: 30    certFile and keyFile are read again this often; when they changed and the new
//                                  pair loads, the verbs' listener is replaced by one serving it, on the same port
//   maxConnections: 256            connections open at once; more are closed at once
//   idleTimeoutSeconds: 30         a keep-alive connection idle this long is closed
//   schedulerNames: [default-scheduler]   /bind refuses pods whose spec.schedulerName is not listed ("" counts as
//                                  default-scheduler): another scheduler's pods are not the extender's to bind
//   bindFilterWindowSeconds: 30    /bind binds a pod only to a node that passed /filter for that pod UID within
//                                  this many seconds (kube-scheduler filters, then binds, in one cycle)
//   leaderElection:                for several replicas: only the one holding a coordination.k8s.io Lease binds
//     enabled: false               and reports ready (a Service then sends every call to it); a standby answers
//     namespace: ""                /bind with an error naming the leader. namespace "" = $POD_NAMESPACE, else
//     name: gpusched-extender      kube-system. A new leader binds after one retry period (its caches catch up
//     leaseDurationSeconds: 15     with the last binds of the old one); a leader that cannot renew stops binding
//     renewDeadlineSeconds: 10     at the renew deadline, before the lease can pass to another replica.
//     retryPeriodSeconds: 2        Needs retry < renew deadline < lease duration.
//   policy: binpack                any policy of the registry (`gpusched extender --help` lists them); a pod may
//                                  override it with the annotation gpusched.io/policy
//   weights:                       optional: prioritize with several policies, score = sum(w * score) / sum(w) over
//     binpack: 1                   their 0..100 scores (normalised per policy when it asks); filter and the GPUs
//     fgd: 2                       chosen at bind stay with `policy`
//   resourceNames: [...]           GPU resource names to honour; default: all that gpusched knows
//   maxBodyBytes: 67108864         larger request bodies get 413 (a full NodeList of 5000 nodes is about 17 MB)
//   threads: 32                    HTTP I/O threads. Handlers run on them and a bind waits on the API server, so keep
//                                  this above the binds kube-scheduler runs at once
//   readTimeoutSeconds: 5          a client that sends its body slower than this is cut off
//   kubeconfig: ""                 used when --kubeconfig is not given (then KUBECONFIG, in-cluster, ~/.kube/config)
//   metrics:                       live GPU metrics for the load-aware policy (optional)
//     refreshSeconds: 15           background refresh; a scheduling cycle never waits on the network
//     stalenessSeconds: 60         older samples count as unknown (scoring falls back to static attributes)
//     prometheus:                  and/or influxdb: (same keys, plus database)
//       url: http://prometheus:9090
//       timeoutSeconds: 5
//       uuidLabel: UUID            the GPU UUID label of the series (dcgm-exporter's)
//       queries:                   per metric (gpu_util, memory_used_mib, memory_copy_util, power_w, temperature_c,
//         gpu_util: 'avg_over_time(DCGM_FI_DEV_GPU_UTIL[1m])'   encoder_util, decoder_util); "" turns one off
//   loadAware:                     weights of the load-aware policy (policy_options.h LoadAwareOptions)
//     gpuUtil: 30                  memorySize, memoryBandwidth, compute, gpuUtil, memoryUsed, memoryCopyUtil, power,
//                                  temperature, encoderUtil, decoderUtil
//     models:                      the static model table (replaces the built-in one, policy_options.h)
//       - {name: A100-SXM4-80GB, aliases: [A100, A100-80GB], memoryMib: 81920, bandwidthGBps: 2039,
//          fp32Tflops: 19.5, tdpW: 400}
//   interference:                  co-location slowdowns for the interference-aware policy (optional)
//     enabled: false               true: load the slowdown model (`gpusched extender --interference-model FILE`)
//                                  and forecast every pod's slowdowns before interference-aware scores it
//     appLabel: ""                 a label naming a pod's application class when the annotation gpusched.io/app
//                                  is absent (e.g. app.kubernetes.io/name); "" = the annotation only
//     objective: sum               sum: the incoming pod's slowdown plus what it adds to the residents;
//                                  incoming: the incoming pod's alone (Co-scheML's greedy rule)
//     interferenceWeight: 100      the policy's weights (policy_options.h InterferenceAwareOptions); packingWeight
//     packingWeight: 0             > 0 trades interference for consolidation
//     avoidPredictedOom: true      a GPU predicted not to fit in memory next to its residents is not a fit
//     refuseHarmfulPairs: true     nor is one where sharing is predicted slower than taking turns (the pod waits)
//     minSharingGain: 0.25         ... or adds less than this to the GPU's progress rate (0..1; 0 = break-even)

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/daemon/config.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/policy_options.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace gpusched::extender {

using daemon::GpuModelConfig;
using daemon::IsLiveInputKey;
using daemon::LeaderElectionConfig;
using daemon::LiveInputsConfig;
using daemon::MetricsSourceConfig;
using daemon::ParseLeaderElection;
using daemon::ParseListen;
using daemon::ParseLiveInput;
using daemon::ParseResourceCompat;

struct ExtenderConfig : LiveInputsConfig {
  std::string host = "127.0.0.1";
  int port = 12345;
  std::string path_prefix = "/scheduler";
  // healthListen: a second, plain-HTTP listener with GET /healthz, /readyz and /metrics only (no verb, nothing that
  // changes state), for kubelet probes and Prometheus when `listen` is loopback or needs client certificates.
  // Empty host = none.
  std::string health_host;
  int health_port = 0;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;                                    // tls.clientCAFile
  std::vector<std::string> tls_allowed_client_names;                 // tls.allowedClientNames
  std::chrono::milliseconds tls_reload_interval{30000};              // tls.reloadIntervalSeconds
  size_t max_connections = 256;                                      // maxConnections
  size_t max_connections_per_peer = 64;                              // maxConnectionsPerPeer (one IP address)
  int idle_timeout_seconds = 30;                                     // idleTimeoutSeconds
  std::vector<std::string> scheduler_names = {"default-scheduler"};  // schedulerNames
  int bind_filter_window_seconds = 30;                               // bindFilterWindowSeconds
  std::string policy = "binpack";
  std::vector<std::pair<std::string, double>> weights;  // empty: `policy` alone scores
  kube::ResourceConfig resources;
  size_t max_body_bytes = size_t{64} << 20;
  int threads = 32;
  int read_timeout_seconds = 5;
  std::string kubeconfig;
  // leaderElection: only the replica holding the Lease binds (and reports ready).
  LeaderElectionConfig leader_election{.enabled = false, .name = "gpusched-extender"};
};

// Parses YAML text and validates the result (ValidateExtenderConfig); `source` names the file in errors.
common::Result<ExtenderConfig> ParseExtenderConfig(const std::string& yaml, const std::string& source);
// The checks across keys, for a config changed after parsing (`gpusched extender --listen`): a listen address that
// is not loopback needs tls.certFile, tls.keyFile, tls.clientCAFile and tls.allowedClientNames; clientCAFile needs
// certFile; allowedClientNames needs clientCAFile. The error names the key.
common::Status ValidateExtenderConfig(const ExtenderConfig& config, const std::string& source);
common::Result<ExtenderConfig> LoadExtenderConfig(const std::string& path);

}  // namespace gpusched::extender
