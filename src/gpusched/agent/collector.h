#pragma once

// Collector: samples the node's DeviceInventory at an interval on a background thread and keeps the latest
// samples for the agent's readers (/metrics, the inventory annotation, the device plugin's health, InfluxDB).
//
// Each tick: inventory.Sample(); on success the samples become the new snapshot (an immutable shared_ptr, so a
// reader holds a consistent set for as long as it needs without blocking the sampler) and the on_sample callback
// runs on the sampling thread; on failure the previous snapshot stays, the error is counted and kept as
// last_error(), and the next tick tries again. The first sample is taken before Start() returns, so /metrics is
// never empty after start-up unless the backend fails.
//
// Cost: the thread sleeps on a condition variable between ticks; a tick is one Sample() plus a vector move. The
// render for /metrics is done on the reader's thread from the snapshot (collector_benchmark.cc measures both).
//
// Thread-safety: every method may be called from any thread. Start/Stop are not re-entrant with each other.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpusched/agent/dcgm_metrics.h"
#include "gpusched/common/status.h"
#include "gpusched/common/worker_thread.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::agent {

// One successful sample of every GPU.
struct GpuSnapshot {
  std::vector<ports::GpuSample> samples;
  std::chrono::system_clock::time_point time;  // when it was taken (the injected clock)
  uint64_t sequence = 0;                       // 1 for the first snapshot, +1 per successful sample
};

struct CollectorOptions {
  std::chrono::milliseconds interval{1000};
  // Wall-clock time for snapshot timestamps; default std::chrono::system_clock::now.
  std::function<std::chrono::system_clock::time_point()> clock;
  // Called on the sampling thread after each successful sample (keep it short: it delays the next tick).
  std::function<void(const GpuSnapshot&)> on_sample;
};

class Collector {
 public:
  Collector(std::unique_ptr<ports::DeviceInventory> inventory, CollectorOptions options);
  ~Collector();  // Stop()
  Collector(const Collector&) = delete;
  Collector& operator=(const Collector&) = delete;

  // Takes the first sample, then starts the thread. InvalidArgument for a non-positive interval; a failing first
  // sample is not an error here (it is counted; the thread keeps trying). Calling Start twice is an error.
  [[nodiscard]] common::Status Start();
  // Stops and joins the thread; idempotent.
  void Stop();

  // One tick now, on the caller's thread (what the thread does every interval; also for tests without a thread).
  common::Status SampleOnce();

  // The latest successful snapshot; nullptr before the first.
  [[nodiscard]] std::shared_ptr<const GpuSnapshot> Latest() const;

  [[nodiscard]] uint64_t samples_taken() const;
  [[nodiscard]] uint64_t sample_errors() const;
  [[nodiscard]] common::Status last_error() const;  // OK when the latest tick succeeded
  [[nodiscard]] std::string Describe() const { return inventory_->Describe(); }

  // The /metrics page: RenderDcgmMetrics of the latest snapshot (no GPU families before the first) followed by
  // the collector's own counters: gpusched_agent_samples_total, gpusched_agent_sample_errors_total,
  // gpusched_agent_sample_duration_seconds (the last tick) and gpusched_agent_last_sample_timestamp_seconds.
  [[nodiscard]] std::string RenderMetrics(const PodAttribution& attribution, const AllocationMap& allocations,
                                          std::string_view hostname) const;
  [[nodiscard]] std::string RenderMetrics(const PodAttribution& attribution, const AllocationMap& allocations,
                                          const DcgmRenderOptions& options) const;

 private:
  void Loop();

  const std::unique_ptr<ports::DeviceInventory> inventory_;
  const CollectorOptions options_;

  mutable std::mutex mu_;
  std::shared_ptr<const GpuSnapshot> latest_;  // GUARDED_BY(mu_)
  uint64_t samples_taken_ = 0;                 // GUARDED_BY(mu_)
  uint64_t sample_errors_ = 0;                 // GUARDED_BY(mu_)
  common::Status last_error_;                  // GUARDED_BY(mu_)
  double last_duration_s_ = 0;                 // GUARDED_BY(mu_)
  std::mutex sample_mu_;                       // one Sample() at a time (the thread and SampleOnce callers)
  common::WorkerThread worker_;                // last: stopped before the rest goes
};

}  // namespace gpusched::agent
