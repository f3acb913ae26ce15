#pragma once

// The extender's Prometheus metrics (prometheus-cpp; served as text at GET /metrics):
//   gpusched_extender_requests_total{verb,code}                 counter
//   gpusched_extender_request_duration_seconds{verb}            histogram
//   gpusched_extender_filter_rejections_total{reason}           counter; reason is a category:
//       gpu_capacity (busy GPUs), gpu_unresolvable (the node can never host it), unknown_node, invalid_request,
//       unknown_policy
//   gpusched_extender_binds_total{result}                       counter; result ok | failed
//   gpusched_extender_bind_refusals_total{reason}               counter; binds refused before any API call:
//       invalid_request, no_uid, unknown_pod, invalid_pod, uid_mismatch, already_bound, terminating,
//       other_scheduler, not_filtered, filter_expired, node_not_filtered, unknown_policy, unknown_node,
//       already_allocated, no_fit, not_synced, not_leader
//   gpusched_extender_unsynced_refusals_total{verb}            counter; calls answered 503 because the pod and
//       node caches had not synced yet (a bind refused so is counted in bind_refusals{reason="not_synced"} too)
//   gpusched_node_gpu_milli_allocated{node}, gpusched_node_gpu_milli_capacity{node},
//   gpusched_node_gpu_memory_allocated_mib{node}, gpusched_node_gpu_memory_capacity_mib{node}
//                                                               gauges, read from the ClusterState at scrape time
//   gpusched_extender_node_events_total, gpusched_extender_pod_events_total,
//   gpusched_extender_rebuilt_allocations_total, gpusched_metrics_source_* (SetMetricsCache),
//   gpusched_extender_rejected_events_total                     from the mirror, at scrape time

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "gpusched/extender/state.h"
#include "gpusched/sched/metrics_cache.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace gpusched::extender {

class ExtenderMetrics {
 public:
  ExtenderMetrics();
  ~ExtenderMetrics();
  ExtenderMetrics(const ExtenderMetrics&) = delete;
  ExtenderMetrics& operator=(const ExtenderMetrics&) = delete;

  void Request(std::string_view verb, int code, double seconds);
  void FilterRejection(std::string_view reason, double count = 1);
  void Bind(bool ok);
  // A failed bind whose outcome is unknown (counted in Bind(false) too, and once more as result="unknown").
  void BindUnknown();
  // A bind refused before any API call (service.h lists why), by reason category.
  void BindRefused(std::string_view reason);
  // A call refused because the caches have not synced yet (service.h, sync gate).
  void NotSynced(std::string_view verb);
  // Leader election: whether this replica leads now, and how many times it became leader so far.
  void SetLeader(bool leading, uint64_t became_leader);
  // Adds gpusched_metrics_source_up{source}, ..._consecutive_failures{source}, ..._refresh_errors_total{source}
  // and ..._gpus{source} at scrape time.
  void SetMetricsCache(const sched::MetricsCache* cache) { cache_ = cache; }
  // Appended to the exposition at scrape time (the event writer's counters); null = nothing. Set before serving.
  void SetExtra(std::function<std::string()> extra) { extra_ = std::move(extra); }

  // The text exposition (format 0.0.4) of every metric, node gauges read from `mirror` under its read lock.
  [[nodiscard]] std::string Serialize(const ClusterMirror& mirror) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  const sched::MetricsCache* cache_ = nullptr;
  std::function<std::string()> extra_;
};

}  // namespace gpusched::extender
