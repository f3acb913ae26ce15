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
//   bind        check the bind is one kube-scheduler may ask for (below); select the GPUs on the node, Assume them
//               (under the mirror's write lock), then the Binder patches gpusched.io/allocation and POSTs the
//               Binding; the cluster cache's bind protocol (BindStarting, FinishBind, as the scheduler's binds)
//               confirms on success, keeps the GPUs for the watch when the outcome is unknown, forgets on failure.
//   preempt     for each candidate node, the victims whose removal frees the GPUs the pod needs: the scheduler's
//               own victims first, then GPU holders of lower priority, lowest priority first; victims not needed
//               after all are spared again (highest priority first). Nodes where even that does not free enough
//               are dropped. Victims are planned as the scheduler's preemption plans them (sched/victims.h,
//               sched/preemption.h): a pod whose bind is still in flight is never one.
// The policy comes from the config or, per pod, from the annotation gpusched.io/policy.
//
// Bind writes to the cluster with the extender's own ServiceAccount, so it trusts nothing of the request but the
// names: the pod is read from the watch cache (PodLookup; never from a filter body, which the caller wrote), and a
// bind is refused, with its reason in the result's Error and nothing changed (no Assume, no API call), when
//   - this replica may not bind now (ServiceOptions::bind_gate: a standby under leader election) (503);
//   - PodUID is missing (400), or the cached pod has another uid (409: a new pod of the same name) or is unknown
//     (404);
//   - the pod is already bound (spec.nodeName set) or terminating (metadata.deletionTimestamp set) (409);
//   - its spec.schedulerName ("" = default-scheduler) is not in ServiceOptions::scheduler_names (403);
//   - the node did not pass this service's filter for that pod UID within bind_filter_window_ms (403):
//     kube-scheduler always filters, then binds, in one cycle. Filter records {uid -> time, the nodes that passed}
//     from every answer it gives; a successful bind consumes the record. Records expire after the window and are
//     capped (max_filter_records, and the node names they hold), dropping the oldest first, so memory is bounded
//     whatever callers send. This is a consistency check, not authentication: a caller that may call filter can
//     record what it likes; who may call at all is the HTTP server's business (TLS client certificates).
// Refusals are counted in ExtenderMetrics::BindRefused by reason.
//
// Sync gate: until the watch caches have delivered their first list (ServiceOptions::sync_gate says which are
// still waiting), every verb answers 503 with "not synced: waiting for pods, nodes" in the body's Error and changes
// nothing (no filter record, no Assume, no API call): an empty mirror would place pods on GPUs that bound pods
// already hold. kube-scheduler takes any answer but 200 as an error: filter and bind errors fail the scheduling
// cycle and the pod is retried with backoff (the extender is not ignorable), prioritize errors add no score,
// preempt errors fail that preemption attempt. Refusals are counted in ExtenderMetrics::NotSynced by verb. The
// gate is asked once per request and is expected to latch (an informer stays synced once it has listed).
// Preempt and prioritize change nothing; preempt reads the victims' UIDs only to look up their allocations.
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
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/clock.h"
#include "gpusched/common/rng.h"
#include "gpusched/common/status.h"
#include "gpusched/extender/metrics.h"
#include "gpusched/extender/state.h"
#include "gpusched/extender/wire.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"
#include "gpusched/policy/interference_forecast.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/event_recorder.h"
#include "gpusched/ports/slowdown_model.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/sched/metrics_cache.h"
#include "gpusched/sched/snapshot_builder.h"

namespace gpusched::extender {

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
  // Bind only pods whose spec.schedulerName is one of these ("" counts as default-scheduler). Must not be empty.
  std::vector<std::string> scheduler_names = {"default-scheduler"};
  // Bind only to a node that passed filter for the pod's UID within this window.
  int64_t bind_filter_window_ms = 30000;
  // At most this many filter records (pods) and node names in them; the oldest go first.
  size_t max_filter_records = 100000;
  size_t max_filter_record_nodes = size_t{8} << 20;
  // Steady time for the filter window; null = common::SystemClock.
  const common::Clock* clock = nullptr;
  // An assumed allocation lives at most bind_in_flight_ms while its bind runs, and assumed_ttl_ms after a bind whose
  // outcome is unknown (timeout, 5xx, 409): the watch confirms or frees it within that time, else it expires
  // (ClusterMirror::ExpireAssumed).
  int64_t bind_in_flight_ms = 300000;
  int64_t assumed_ttl_ms = 120000;  // longer than a stalled watch takes to detect (60 s + 2 x 15 s)
  // Bind waits up to this long (real time) for the pod cache to show the pod, with the uid kube-scheduler sent,
  // before refusing: kube-scheduler's watch may be ahead of the extender's by a few milliseconds.
  int64_t pod_cache_wait_ms = 2000;
  // Asked before each bind: "" = this replica may bind, else why not ("standby: the leader is x"). Null = always.
  std::function<std::string()> bind_gate;
  // Asked before every verb: "" once the pod and node caches (and so the allocations rebuilt from the pods'
  // gpusched.io/allocation annotations) are synced, else what is still awaited ("pods, nodes"). Null = synced
  // (tests that feed the mirror themselves).
  std::function<std::string()> sync_gate;
  // Events on the pod a bind was for, once the pod is known (null = none): GPUsAssigned (Normal: which GPUs on
  // which node), GPUBindRefused (Warning: a refusal above, with its reason), GPUBindFailed (Warning: the API
  // server did not take the Binding). Refusals before the pod is known (no uid, a standby, a pod not in the cache)
  // have no pod to tell.
  ports::EventRecorder* events = nullptr;
};

struct Reply {
  int status = 200;
  std::string body;
};

// Finds a pod by namespace and name (the informer's cache in production). Bind reads pods only from here.
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

  // What the policies serving pods without a gpusched.io/policy annotation read (the configured policy, or the
  // weighted mix): the front end says at start which inputs it provides for them.
  [[nodiscard]] policy::Inputs DefaultReads() const;

 private:
  struct DecodedPod {
    std::string text;  // the JSON it was decoded from (filter and prioritize); empty for watch-cache pods
    std::shared_ptr<const nlohmann::json> object;
    kube::PodMeta meta;
    common::Result<core::PodRequest> request = common::InvalidArgument("not decoded");
    std::string policy;  // gpusched.io/policy, or empty
  };
  // What filter passed for one pod UID, and when.
  struct FilterRecord {
    int64_t at_ms = 0;
    std::vector<uint64_t> nodes;  // hashes of the passing node names, in request order
    std::list<std::string>::iterator age;
  };

  ExtenderService(ClusterMirror& mirror, ports::Binder& binder, PodLookup lookup, ServiceOptions options,
                  ExtenderMetrics* metrics);
  // The 503 every verb answers while the caches are not synced (the sync gate above), else nullopt. `encode` makes
  // the verb's body from the message.
  std::optional<Reply> RefuseUnsynced(std::string_view verb, std::string (*encode)(std::string_view message));
  // A pod from a request body, decoded once per distinct text (filter and prioritize of one cycle).
  common::Result<std::shared_ptr<const DecodedPod>> Decode(std::string_view pod_json);
  common::Result<std::shared_ptr<DecodedPod>> DecodeObject(nlohmann::json object);
  // Filter's record for `uid`: the names of `passed`. Replaces an earlier record of the same pod.
  void RecordFilter(const std::string& uid, const std::vector<const NodeRef*>& passed);
  // "" when `node` passed filter for `uid` within the window, else why not; *reason gets the metrics category.
  std::string CheckFiltered(const std::string& uid, const std::string& node, std::string* reason);
  void ConsumeFilter(const std::string& uid);
  // Drops expired records, then the oldest while over the caps. Holds filters_mu_.
  void TrimFilters(int64_t now_ms);
  const policy::PlacementPolicy* PolicyFor(const DecodedPod& pod) const;
  // What a snapshot points at, kept alive while the snapshot is used.
  using SnapshotHold = sched::SnapshotBuilder::Hold;
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
  const common::Clock* clock_;
  std::map<std::string, std::unique_ptr<policy::PlacementPolicy>, std::less<>> policies_;
  const policy::PlacementPolicy* default_policy_ = nullptr;
  std::vector<std::pair<const policy::PlacementPolicy*, double>> weighted_;

  // Pods seen in filter and prioritize, by their JSON text's hash (a hit is used only when the text is equal).
  std::mutex pods_mu_;
  std::unordered_map<size_t, std::shared_ptr<const DecodedPod>> by_hash_;

  // Filter records by pod UID, and the UIDs oldest first (an updated record moves to the back).
  std::mutex filters_mu_;
  std::map<std::string, FilterRecord, std::less<>> filtered_;  // a tree: callers choose the keys
  std::list<std::string> filter_order_;
  size_t filtered_nodes_ = 0;  // sum of the records' node counts

  std::mutex rng_mu_;
  common::Rng rng_;

  // Builds every request's snapshot (live metrics, interference forecasts): the scheduler's builder too.
  mutable sched::SnapshotBuilder snapshots_;
};

}  // namespace gpusched::extender
