#pragma once

// ExtenderService: the four verbs over the ClusterMirror, without HTTP (server.h puts them on the wire).
//
//   filter      decode the pod's GPU request; run the policy's Filter on each candidate node's view; the reason
//               of every rejected node names the GPU and the numbers. Nodes that can never host the pod are
//               listed in FailedAndUnresolvableNodes and, for kube-scheduler 1.20 which knows only that map, in
//               FailedNodes too. A request that cannot be decoded fails every node with its reason (kube-scheduler
//               shows it in the pod's events); a body that is not an ExtenderArgs is a 400.
//   prioritize  the policy's Score on the feasible nodes, normalised when the policy asks, mapped 0..100 -> 0..10
//               (MaxExtenderPriority); infeasible nodes score 0.
//   bind        select the GPUs on the node, Assume them (under the mirror's write lock), then the Binder
//               patches gpusched.io/allocation and POSTs the Binding; Confirm on success, Forget on any failure.
//   preempt     for each candidate node, the victims whose removal frees the GPUs the pod needs: the scheduler's
//               own victims first, then GPU holders of lower priority, lowest priority first; victims not needed
//               after all are spared again (highest priority first). Nodes where even that does not free enough
//               are dropped.
// The policy comes from the config or, per pod, from the annotation gpusched.io/policy.
//
// Interference: when a slowdown model is configured and the policy in use (or one of the weighted mix) is
// interference-aware, every filter, prioritize and bind builds the incoming pod's forecast first
// (sched::ForecastInterference over the mirror's state, with the application class the mirror remembers for each
// bound pod) and hands it to the policy in the snapshot. The forecast is per request: it is for one incoming pod
// and the state it was built from; each gets a fresh Snapshot::interference_generation, so the runner's score cache
// never serves one pod's interference scores to another. Without a model the policy sees no forecast (every GPU
// empty).

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/extender/metrics.h"
#include "gpusched/adapters/extender/state.h"
#include "gpusched/common/rng.h"
#include "gpusched/common/status.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/interference_forecast.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/slowdown_model.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/sched/metrics_cache.h"

namespace gpusched::adapters::extender {

struct ServiceOptions {
  std::string policy = "binpack";
  // Optional: prioritize with several policies, sum(w * score) / sum(w) of their 0..100 scores.
  std::vector<std::pair<std::string, double>> weights;
  kube::ResourceConfig resources;
  uint64_t seed = 0;  // random tie breaks in GPU selection; 0 = from the clock
  // Live GPU metrics for snapshot-scored policies (load-aware); null = none (static attributes only).
  const sched::MetricsCache* metrics = nullptr;
  int64_t staleness_ms = 60000;
  policy::LoadAwareOptions load_aware;
  policy::InterferenceAwareOptions interference_aware;
  // Predicts co-location slowdowns for interference-aware; null = none (the policy then counts every GPU as empty).
  // Shared, immutable and thread-safe (ports/slowdown_model.h).
  std::shared_ptr<const ports::SlowdownModel> slowdown_model;
};

struct Reply {
  int status = 200;
  std::string body;
};

// Finds a pod by namespace and name (the informer's cache in production).
using PodLookup = std::function<std::optional<nlohmann::json>(const std::string& ns, const std::string& name)>;

class ExtenderService {
 public:
  static common::Result<std::unique_ptr<ExtenderService>> Create(ClusterMirror& mirror, ports::Binder& binder,
                                                                 PodLookup lookup, ServiceOptions options,
                                                                 ExtenderMetrics* metrics = nullptr);
  ~ExtenderService();

  Reply Filter(std::string body);
  Reply Prioritize(std::string body);
  Reply Bind(std::string body);
  Reply Preempt(std::string body);

 private:
  struct DecodedPod {
    std::shared_ptr<const nlohmann::json> object;
    common::Result<core::PodRequest> request = common::InvalidArgument("not decoded");
    std::string policy;  // gpusched.io/policy, or empty
  };

  ExtenderService(ClusterMirror& mirror, ports::Binder& binder, PodLookup lookup, ServiceOptions options,
                  ExtenderMetrics* metrics);
  common::Result<std::shared_ptr<const DecodedPod>> Decode(std::string_view pod_json);
  const policy::PlacementPolicy* PolicyFor(const DecodedPod& pod) const;
  // What a snapshot points at, kept alive while the snapshot is used.
  struct SnapshotHold {
    std::shared_ptr<const core::GpuMetricsMap> metrics;
    policy::InterferenceForecast forecast;
  };
  // Whether requests scored or placed by these policies need an interference forecast (a model is configured and
  // one of them is interference-aware).
  [[nodiscard]] bool WantsForecast(std::span<const policy::PlacementPolicy* const> policies) const;
  // The snapshot for one request, the same for filter, prioritize and bind. now_ms is rounded to the second so
  // that the runner's score cache is shared by the requests of one second. With `forecast`, the pod's interference
  // forecast over the node `slots` of `state`; the caller holds a mirror lock (it reads the state and the pods'
  // application classes).
  policy::Snapshot MakeSnapshot(const core::PodRequest& pod, const core::ClusterState& state,
                                std::span<const size_t> slots, bool forecast, SnapshotHold& hold) const;

  ClusterMirror& mirror_;
  ports::Binder& binder_;
  PodLookup lookup_;
  ServiceOptions options_;
  ExtenderMetrics* metrics_;
  uint64_t id_;
  std::map<std::string, std::unique_ptr<policy::PlacementPolicy>, std::less<>> policies_;
  const policy::PlacementPolicy* default_policy_ = nullptr;
  std::vector<std::pair<const policy::PlacementPolicy*, double>> weighted_;

  // Pods seen in filter, by their JSON text's hash (filter and prioritize of one cycle decode once) and by
  // "namespace/name" (bind gets only names).
  std::mutex pods_mu_;
  std::unordered_map<size_t, std::shared_ptr<const DecodedPod>> by_hash_;
  std::unordered_map<std::string, std::shared_ptr<const DecodedPod>> by_key_;

  std::mutex rng_mu_;
  common::Rng rng_;

  // Per-node forecast entries reused across requests while the node is unchanged.
  mutable sched::ForecastCache forecast_cache_;
  // Numbers the forecasts this service builds (Snapshot::interference_generation); never 0 for a forecast.
  mutable std::atomic<uint64_t> forecast_generation_{0};
};

}  // namespace gpusched::adapters::extender
