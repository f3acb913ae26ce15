#pragma once

// ScrapeFamilies: the Prometheus families a daemon builds at scrape time from values it holds elsewhere (the
// counters of its scheduling core, its cluster cache, its GPU queues), written out after those of its
// prometheus::Registry (histograms and counters it updates as they happen).

#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/metric_family.h>

#include "gpusched/core/gpu_queue.h"

namespace gpusched::daemon {

class ScrapeFamilies {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // Starts with `collected` (a Registry's Collect()).
  explicit ScrapeFamilies(std::vector<prometheus::MetricFamily> collected = {});

  // A new family, written in the order added; the reference stays valid while *this lives.
  prometheus::MetricFamily& Family(std::string name, std::string help, prometheus::MetricType type);
  // One sample of a counter or gauge family (by its type) with these labels.
  static void Sample(prometheus::MetricFamily& family, double value, Labels labels = {});
  // The GPU queues' families: gpusched_queue_allocated, _guaranteed, _limit and _fair_share by {queue, resource}
  // (resource gpus, milli, memory_mib; unlimited amounts left out), gpusched_queue_pending_pods and
  // gpusched_queue_reclaimed_pods_total by {queue}.
  void GpuQueues(const std::vector<core::QueueStatus>& queues);

  // The Prometheus text exposition of every family.
  [[nodiscard]] std::string Serialize() const;

 private:
  std::vector<prometheus::MetricFamily> collected_;
  std::deque<prometheus::MetricFamily> added_;
};

}  // namespace gpusched::daemon
