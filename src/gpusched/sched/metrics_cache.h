#pragma once

// MetricsCache: the scheduler's copy of live GPU metrics, kept fresh by a background thread so that a scheduling
// cycle never waits on the network. Readers take an immutable snapshot with Current(); the
// refresher builds a new map and swaps the pointer under a mutex, so a reader holds its snapshot as long as it
// likes without copying and without blocking the refresher.
//
// One refresh, every `interval` (or RefreshOnce()):
//   1. Fetch each source in turn (each may block up to its own timeout). On success the source's last map is
//      replaced; on failure the source keeps its last map, its failure count grows and its error is recorded.
//   2. Merge the sources' maps by GPU UUID; per metric the newest sample wins (a tie keeps the earlier source's).
//   3. If the merged map differs from the current one, publish it and bump generation().
// A source that fails keeps serving its last samples: they carry their own timestamps, and readers treat a sample
// older than their staleness bound as unknown (core::GpuMetrics::Fresh), which degrades load-aware scoring to the
// static attributes; nothing here ever fails a pod. A source going down is logged once (warn), and coming back
// once (info), not every tick.
//
// Degraded() is the /readyz reason: "" when every source answered its last fetch, else one clause per failing
// source, e.g. "metrics source prometheus http://p:9090: Couldn't connect to server (3 failures since
// 12:00:01Z)".
//
// Thread-safety: every method is safe from any thread. Start/Stop are not re-entrant with each other. The
// injected clock (Unix ms) stamps health times; the refresh interval runs on the steady clock.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/common/worker_thread.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/ports/metrics_source.h"

namespace gpusched::sched {

struct MetricsCacheOptions {
  std::chrono::milliseconds interval{15000};
  // Unix milliseconds; default: the system clock.
  std::function<int64_t()> now_ms;
};

// A source's state after the last refresh.
struct MetricsSourceHealth {
  std::string source;                // Describe()
  bool ok = false;                   // the last fetch succeeded
  std::string last_error;            // the last failure's message ("" when none yet)
  int64_t consecutive_failures = 0;  // since the last success
  int64_t last_success_ms = 0;       // Unix ms, 0 = never
  int64_t failing_since_ms = 0;      // Unix ms of the first failure of the current run, 0 when ok
  int64_t gpus = 0;                  // GPUs in the source's last good map
  // Counters for /metrics (gpusched_metrics_refreshes_total{source=...} and so on).
  int64_t refreshes_total = 0;
  int64_t refresh_errors_total = 0;
  double last_duration_seconds = 0;
  double duration_seconds_total = 0;
};

class MetricsCache {
 public:
  MetricsCache(std::vector<std::unique_ptr<ports::MetricsSource>> sources, MetricsCacheOptions options);
  ~MetricsCache();  // Stop()s
  MetricsCache(const MetricsCache&) = delete;
  MetricsCache& operator=(const MetricsCache&) = delete;

  // Starts the refresher; the first refresh runs at once on that thread. FailedPrecondition when running or when
  // the interval is not positive.
  [[nodiscard]] common::Status Start();
  // Wakes and joins the refresher (a fetch in progress finishes first, bounded by its source's timeout).
  void Stop();
  // One refresh on the calling thread (tests, and callers without the thread).
  void RefreshOnce();
  // Blocks until at least `n` refreshes have completed or `timeout` passes; true in the first case.
  bool WaitForRefreshes(int64_t n, std::chrono::milliseconds timeout) const;

  // The current snapshot (never null; empty before the first successful fetch).
  [[nodiscard]] std::shared_ptr<const core::GpuMetricsMap> Current() const;
  // Bumped each time a different map is published; 0 before the first.
  [[nodiscard]] uint64_t generation() const;
  // Completed refreshes.
  [[nodiscard]] int64_t refreshes() const;
  // "" when healthy; else the reasons, joined by "; ".
  [[nodiscard]] std::string Degraded() const;
  [[nodiscard]] std::vector<MetricsSourceHealth> Health() const;

 private:
  struct SourceState {
    std::unique_ptr<ports::MetricsSource> source;
    std::string name;
    std::shared_ptr<const core::GpuMetricsMap> last;  // the last good map (null before one)
    MetricsSourceHealth health;
  };

  int64_t NowMs() const;

  MetricsCacheOptions options_;
  std::mutex refresh_mu_;             // serialises refreshes (thread and RefreshOnce); guards sources_' maps
  std::vector<SourceState> sources_;  // GUARDED_BY(refresh_mu_) except the immutable source/name

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::shared_ptr<const core::GpuMetricsMap> current_;  // GUARDED_BY(mu_)
  uint64_t generation_ = 0;                             // GUARDED_BY(mu_)
  int64_t refreshes_ = 0;                               // GUARDED_BY(mu_)
  std::vector<MetricsSourceHealth> health_;             // GUARDED_BY(mu_): a copy for readers
  common::WorkerThread worker_;                         // last: stopped before the rest goes
};

// True when both maps hold the same GPUs with the same samples (values and timestamps).
[[nodiscard]] bool SameMetrics(const core::GpuMetricsMap& a, const core::GpuMetricsMap& b);

}  // namespace gpusched::sched
