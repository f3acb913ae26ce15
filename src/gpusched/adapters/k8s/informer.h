#pragma once

// Informer: a list+watch cache of one resource (nodes or pods), the client-go reflector pattern without the queue.
//
// The background thread runs:
//   1. List (paginated). The first time, deliver kAdded for every object page by page as the pages arrive (a list
//      that failed or started over half way is compared with what was delivered, like a relist: unchanged objects
//      are skipped, vanished ones deleted), then mark the informer synced. On a relist
//      (after 410 Gone), deliver the difference from the cache instead: first kDeleted for objects no longer listed
//      and for objects listed under their key with another metadata.uid (deleted and re-created by name while the
//      informer was away; with their last known state), then, in key order, kModified for objects whose
//      resourceVersion changed and kAdded for new ones, so the handler's view equals the server's again. Objects
//      are matched by uid, not by name: a handler keyed by uid never keeps a deleted object's state.
//   2. Watch from the list's resourceVersion. ADDED/MODIFIED/DELETED update the cache and reach the handler; an
//      ADDED for a cached key is delivered as kModified, unless its uid differs: then kDeleted of the cached object
//      comes first and the new one is kAdded. A DELETED for an unknown key is dropped. BOOKMARKs advance the
//      resourceVersion only.
//   3. When the stream ends (server timeout, CloseWatches, restart), watch again from the last resourceVersion. On
//      410, go to 1. On errors, wait with exponential backoff (x2 per failure, +-25% jitter, capped at
//      max_backoff) and retry the step that failed; a watch that delivered events resets the backoff.
//
// Threading: the handler runs on the informer thread, in event order, after the cache is updated; it must not call
// Stop(). List(), Get() and the counters may be called from any thread at any time: the mutex is held only for map
// operations, never across network calls or the handler.

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/json_prune.h"
#include "gpusched/common/backoff.h"

namespace gpusched::adapters::k8s {

struct WatchEvent {
  enum class Type { kAdded, kModified, kDeleted };
  Type type;
  nlohmann::json object;
};

struct InformerOptions {
  std::string path;  // "/api/v1/nodes" or "/api/v1/pods" (or a namespaced collection)
  std::string field_selector, label_selector;
  // What to leave out of every object, never built: listed, while its page is read; watched, while the event is
  // read. E.g. &SchedulingPrune(); nullptr: metadata.managedFields. It must keep metadata.name, namespace,
  // uid and resourceVersion.
  const JsonPrune* prune = nullptr;
  // The server ends a healthy watch after watch_timeout_seconds (the informer watches again from the last
  // resourceVersion: no relist); one it has not ended watch_grace_seconds later is stalled (a dead load balancer,
  // a hung apiserver) and is cut off and watched again. No event, bookmark, list or end of a watch for stale_after
  // (0: timeout + 2 x grace) is reported by Staleness() (the daemons' /readyz).
  int watch_timeout_seconds = 60;
  int watch_grace_seconds = 15;
  std::chrono::milliseconds stale_after{0};
  std::chrono::milliseconds initial_backoff{200}, max_backoff{30000};
  // Keep only each object's identity in the cache (metadata.name, namespace, uid, resourceVersion): what the
  // relist diff needs. The handler still gets whole objects for ADDED and MODIFIED, but a kDeleted the informer
  // makes up itself (a relist that no longer lists the object, a uid replaced under its name) carries only the
  // identity, and Get/List return identities. For handlers that keep their own state (the scheduler's cluster
  // mirror): the cache then costs about 200 bytes an object instead of the whole object.
  bool cache_identity_only = false;
  uint64_t seed = 0;  // jitter; 0 picks one from std::random_device
};

// "ns/name" for namespaced objects, else "name".
[[nodiscard]] std::string ObjectKey(const nlohmann::json& object);

class Informer {
 public:
  using Handler = std::function<void(const WatchEvent&)>;

  Informer(ApiClient& client, InformerOptions options, Handler handler);
  ~Informer();  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Starts the background thread; a second call does nothing.
  void Start();
  // Stops and joins the thread (returns within about 100 ms of an idle watch). Idempotent.
  void Stop();

  [[nodiscard]] bool HasSynced() const;  // the first list was delivered
  [[nodiscard]] bool WaitForSync(std::chrono::milliseconds timeout) const;
  [[nodiscard]] std::vector<nlohmann::json> List() const;  // a copy of the cache, in key order
  [[nodiscard]] std::optional<nlohmann::json> Get(const std::string& key) const;

  // Counters for tests and metrics.
  [[nodiscard]] uint64_t relists() const;     // lists after the first (each one follows a 410)
  [[nodiscard]] uint64_t reconnects() const;  // watches started after the first
  [[nodiscard]] std::string resource_version() const;
  [[nodiscard]] std::string last_error() const;     // the last failure, "" when none yet
  [[nodiscard]] uint64_t stalls() const;            // watches cut off because the server sent nothing and did not end
  [[nodiscard]] uint64_t handler_failures() const;  // exceptions out of the handler, each followed by a relist
  // "" while the informer hears from the server (an event, a bookmark, a list, a watch the server ended) at least
  // every stale_after; else what is wrong, for readiness.
  [[nodiscard]] std::string Staleness() const;

 private:
  void Run();                       // RunLoop, restarted after an exception
  void RunLoop();                   // list, then watch, until stopped
  bool ListAndDeliver(bool first);  // false on error (backoff already applied)
  // The first list, delivered a page at a time as the pages arrive (never the whole list in memory at once).
  bool SyncPageByPage();
  void Apply(WatchEvent::Type type, nlohmann::json object);
  void Deliver(const WatchEvent& event);
  void OnWatchEvent(nlohmann::json& event, bool& got_events);
  // Sleeps for the current backoff unless stopped, then doubles it. False when stopped.
  bool Backoff(const common::Status& why, bool is_error = true);
  void ResetBackoff();

  ApiClient& client_;
  const InformerOptions options_;
  const Handler handler_;

  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex start_mu_;  // Start/Stop

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;                                                     // synced_ and stop wake-ups
  std::map<std::string, nlohmann::json> cache_;                                            // GUARDED_BY(mu_)
  std::string resource_version_;                                                           // GUARDED_BY(mu_)
  std::string last_error_;                                                                 // GUARDED_BY(mu_)
  bool synced_ = false;                                                                    // GUARDED_BY(mu_)
  uint64_t relists_ = 0, reconnects_ = 0;                                                  // GUARDED_BY(mu_)
  uint64_t stalls_ = 0;                                                                    // GUARDED_BY(mu_)
  uint64_t handler_failures_ = 0;                                                          // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point last_contact_ = std::chrono::steady_clock::now();  // GUARDED_BY(mu_)
  void Contact();

  // Informer thread only.
  common::ExponentialBackoff backoff_;
  std::mt19937_64 rng_;
};

}  // namespace gpusched::adapters::k8s
