#pragma once

// EventWriter: the EventRecorder of every gpusched daemon. It writes PodEvents to the API server off the caller's
// path: a core/v1 Event per new event and, for an unschedulable pod, its PodScheduled=False condition (a strategic
// merge patch of pods/status, which merges conditions by type). One thread drains a bounded queue (max_queued):
// when the API server is slow the newest events are dropped and counted, never the caller held up.
//
// No event storms, the way kube-scheduler's event broadcaster avoids them:
//   * aggregation: the same event again (same pod, reason and message) within repeat_window is not a new Event;
//     the first one's count and lastTimestamp are patched instead, the first repeat at once and then at most once
//     per patch_interval: repeats in between are counted and written when the interval has passed (the writer looks
//     every 250 ms while some count is unwritten), and at Stop;
//   * a rate limit per pod: a token bucket of `burst` new Events, one token back per `refill`; events past it are
//     dropped and counted (kube's spam filter: 25, one per 5 minutes).
// Failures are logged and counted; an Event that vanished (events expire) is created again at its next repeat.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/common/clock.h"
#include "gpusched/ports/event_recorder.h"

namespace gpusched::adapters::k8s {

struct EventWriterOptions {
  size_t max_queued = 1000;
  std::chrono::milliseconds repeat_window = std::chrono::minutes(10);
  std::chrono::milliseconds patch_interval = std::chrono::seconds(10);
  int burst = 25;
  std::chrono::milliseconds refill = std::chrono::minutes(5);
};

class EventWriter final : public ports::EventRecorder {
 public:
  // `component` is the Event's source.component and names the writer in its log lines. `clock` (tests) defaults to
  // the steady clock.
  EventWriter(ApiClient& client, std::string component, EventWriterOptions options = {},
              const common::Clock* clock = nullptr);
  ~EventWriter() override;  // Stop
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  void Record(ports::PodEvent event) override;
  // Asked right before a PodScheduled=False patch: false (the pod was placed since the event was queued) skips the
  // patch, which would otherwise land after the Binding's PodScheduled=True. Null = always write it.
  void SetStillPending(std::function<bool(const std::string& uid)> still_pending);
  // Writes what is queued, then stops. Idempotent.
  void Stop();

  struct Stats {
    uint64_t written = 0;       // Events created
    uint64_t aggregated = 0;    // repeats folded into an earlier Event's count
    uint64_t patched = 0;       // count patches written
    uint64_t failed = 0;        // creates or patches the API server refused or did not answer
    uint64_t dropped = 0;       // the queue was full (or the writer stopped)
    uint64_t rate_limited = 0;  // past the pod's token bucket
  };
  [[nodiscard]] Stats stats() const;
  // Prometheus text of the counter `name` (e.g. gpusched_scheduler_events_total), one series per
  // result=written|aggregated|patched|failed|dropped|rate_limited.
  [[nodiscard]] std::string RenderMetrics(const std::string& name) const;

 private:
  struct Series {                // one Event and its repeats
    std::string ns, event_name;  // event_name: empty until created
    int64_t count = 1;
    int64_t written_count = 0;  // what the API server has
    int64_t last_seen_ms = 0;
    std::chrono::system_clock::time_point last_seen_wall;  // the lastTimestamp its count patch writes
    std::optional<int64_t> last_patch_ms;
    bool patch_queued = false;
  };
  struct Bucket {
    double tokens = 0;
    int64_t at_ms = 0;
  };
  struct Job {
    ports::PodEvent event;  // create: the event; patch: only its series key matters
    std::string series;
    bool patch = false;
  };
  void Run();
  void Create(const Job& job);
  void Patch(const Job& job);
  [[nodiscard]] int64_t NowMs() const;
  bool TakeToken(const std::string& object, int64_t now_ms);  // REQUIRES(mu_)
  // Queues the count patches of unwritten repeats that are due (every one when `all`). REQUIRES(mu_)
  void PromoteDirty(bool all);
  void Prune(int64_t now_ms);  // REQUIRES(mu_)

  ApiClient& client_;
  const std::string component_;
  const EventWriterOptions options_;
  const common::Clock* clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Series> series_;         // GUARDED_BY(mu_), by pod, reason and message
  std::unordered_map<std::string, Bucket> buckets_;        // GUARDED_BY(mu_), by pod
  std::unordered_set<std::string> dirty_;                  // GUARDED_BY(mu_): series with unwritten repeats
  std::deque<Job> queue_;                                  // GUARDED_BY(mu_)
  std::function<bool(const std::string&)> still_pending_;  // GUARDED_BY(mu_)
  bool stop_ = false;                                      // GUARDED_BY(mu_)
  Stats stats_;                                            // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace gpusched::adapters::k8s
