#pragma once

// `gpusched scheduler`'s config file (YAML). Every key is optional; an unknown key, a wrong type or a value out of
// range is an error naming the key (the scheduler does not start with a config it would misread).
//
//   schedulerNames: [gpusched]        pods whose spec.schedulerName is one of these are scheduled
//   policy: binpack                   placement policy (gpusched-lab simulate --help lists them)
//   listen: "0.0.0.0:10261"           /healthz, /readyz, /metrics (GET only; nothing there changes state)
//   kubeconfig: ""                    default: $KUBECONFIG, in-cluster, ~/.kube/config
//   bindWorkers: 16                   Bindings written at once
//   podInitialBackoffSeconds: 1       a pod whose attempt failed with an error waits this long, doubling
//   podMaxBackoffSeconds: 10          up to this
//   assumedPodTtlSeconds: 120         GPUs of a bind with an unknown outcome stay taken this long unless the watch
//                                     shows the pod
//   gpushareMemoryUnit: GiB           what aliyun.com/gpu-mem counts (MiB where gpushare runs with MiB)
//   geniusLabels: true                read Genius's genius/gpu-number, -memory-each, -memory-total, -model labels
//   ketiSharePercent: 10              keti.com/mpsgpu's share of each GPU without gpusched.io/gpu-core or -memory
//   shareWithin: any                  any | namespace | queue: who may share one GPU (core/share_within.h)
//   metrics, loadAware, interference  the live inputs of load-aware and interference-aware, as the extender's
//                                     (daemon/config.h LiveInputsConfig)
//   preemption:
//     enabled: true                   a pod that fits nowhere may evict pods of lower priority (Eviction API)
//     evictionGracePeriodSeconds:     the victims' termination grace period; default: each pod's own
//   leaderElection:
//     enabled: true
//     namespace: ""                   default: $POD_NAMESPACE, else kube-system
//     name: gpusched-scheduler
//     leaseDurationSeconds: 15
//     renewDeadlineSeconds: 10
//     retryPeriodSeconds: 2

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/daemon/config.h"
#include "gpusched/kube/resources.h"

namespace gpusched::scheduler {

// The shortest assumedPodTtlSeconds allowed: a stalled watch's timeout (60 s) plus twice its grace (15 s), the
// time after which the informer's /readyz reports it stale.
inline constexpr int kMinAssumedTtlSeconds = 90;

struct SchedulerConfig : daemon::LiveInputsConfig {
  std::vector<std::string> scheduler_names = {"gpusched"};
  std::string policy = "binpack";
  // Score with a weighted mix of policies instead of the policy's own score (it still filters and chooses GPUs).
  std::vector<std::pair<std::string, double>> weights;
  std::string host = "0.0.0.0";
  int port = 10261;
  std::string kubeconfig;
  int bind_workers = 16;
  int initial_backoff_seconds = 1;
  int max_backoff_seconds = 10;
  // Longer than the watch's stall detection (a watch the server neither feeds nor ends is cut off after its 60 s
  // timeout plus 15 s of grace, then relisted): an assumption must not expire, freeing GPUs a Binding may hold,
  // while the watch that would show that Binding is silently stuck. kMinAssumedTtlSeconds is that bound.
  int assumed_ttl_seconds = 120;
  daemon::LeaderElectionConfig leader_election{.enabled = true, .name = "gpusched-scheduler"};
  kube::ResourceConfig resources;  // gpushareMemoryUnit, geniusLabels
  bool preemption = true;
  std::optional<int> eviction_grace_period_seconds;
};

// The placement policies the scheduler can run: every registered one. A policy that reads live GPU metrics
// (load-aware) needs `metrics`, one that reads an interference forecast (interference-aware) `interference.enabled`
// and the model file; the config is refused otherwise (PlacementPolicy::Reads says what each reads).
[[nodiscard]] std::vector<std::string> SchedulerPolicyNames();

// `source` names the text in errors (the file name).

[[nodiscard]] common::Result<SchedulerConfig> ParseSchedulerConfig(const std::string& yaml, const std::string& source);
[[nodiscard]] common::Result<SchedulerConfig> LoadSchedulerConfig(const std::string& path);

}  // namespace gpusched::scheduler
