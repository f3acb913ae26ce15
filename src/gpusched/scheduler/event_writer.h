#pragma once

// EventWriter: writes the scheduler's PodEvents to the API server off the scheduling path: a core/v1 Event per
// PodEvent and, for an unschedulable pod, its PodScheduled=False condition (a strategic merge patch of pods/status,
// which merges conditions by type). A bounded queue (max_queued) drained by one thread: when the API server is slow
// the newest events are dropped and counted, never the scheduling loop held up. Failures are logged and counted.
// Repeats are not written: a pod's event with the same reason and message as its last one within repeat_window
// (a pending pod tried again after each node change finds the same reasons) is counted as a repeat instead.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/scheduler/scheduler.h"

namespace gpusched::scheduler {

class EventWriter {
 public:
  EventWriter(adapters::k8s::ApiClient& client, std::string component, size_t max_queued = 1000,
              std::chrono::milliseconds repeat_window = std::chrono::minutes(10));
  ~EventWriter();  // Stop
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void Push(PodEvent event);
  // Asked right before a PodScheduled=False patch: false (the pod was placed since the event was queued) skips the
  // patch, which would otherwise land after the Binding's PodScheduled=True. Null = always write it.
  void SetStillPending(std::function<bool(const std::string& uid)> still_pending);
  // Writes what is queued, then stops. Idempotent.
  void Stop();

  struct Stats {
    uint64_t written = 0, failed = 0, dropped = 0, repeats = 0;
  };
  [[nodiscard]] Stats stats() const;

 private:
  void Run();
  void Write(const PodEvent& event);

  adapters::k8s::ApiClient& client_;
  const std::string component_;
  const size_t max_queued_;
  const std::chrono::milliseconds repeat_window_;
  struct Last {
    std::string reason, message;
    std::chrono::steady_clock::time_point at;
  };
  std::unordered_map<std::string, Last> last_;  // GUARDED_BY(mu_), by pod uid; cleared past 10000 pods
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PodEvent> queue_;                             // GUARDED_BY(mu_)
  std::function<bool(const std::string&)> still_pending_;  // GUARDED_BY(mu_)
  bool stop_ = false;                                      // GUARDED_BY(mu_)
  Stats stats_;                                            // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace gpusched::scheduler
