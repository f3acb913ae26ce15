#pragma once

// LeaderElector: which replica of a daemon may act (bind), over a ports::LeaderLock, with kube-scheduler's rules and
// defaults (lease 15 s, renew deadline 10 s, retry every 2 s):
//   - Tick() is one attempt, called every retry period: create the record when there is none; renew it while this
//     replica holds it; take it over when its holder has not renewed it for a whole lease duration as timed by this
//     replica's own clock from the moment it last saw the record change (never from the times written in it).
//   - IsLeader() is true only while this replica holds the record and its last successful renew is less than the
//     renew deadline ago. The deadline is shorter than the lease, so a leader that cannot reach the lock stops
//     acting (lease - deadline) before any other replica can take over.
//   - A new leader is told to wait `settle` after acquiring before it acts (CanAct), so that its caches hold what
//     the previous leader did last.
//   - A standby times the holder's lease from when its GET returned, not when it was sent: a slow API server never
//     makes a lease look older than it is.
//   - Release() on shutdown hands the record back (holder "") so that a standby takes over at its next tick.
//
// Pure: the lock and the clocks are injected. Thread-safety: Tick and Release from one thread; the queries from any.

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "gpusched/common/clock.h"
#include "gpusched/common/status.h"
#include "gpusched/ports/leader_lock.h"

namespace gpusched::sched {

struct LeaderElectionOptions {
  std::string identity;  // unique per replica (hostname and a random suffix)
  int64_t lease_duration_ms = 15000;
  int64_t renew_deadline_ms = 10000;
  int64_t retry_period_ms = 2000;
  int64_t settle_ms = 2000;
};

// InvalidArgument unless identity is set and retry < renew deadline < lease duration.
[[nodiscard]] common::Status ValidateLeaderElection(const LeaderElectionOptions& o);

class LeaderElector {
 public:
  // `wall_ms` gives wall-clock time for the record's timestamps (what people read); decisions use `clock`.
  LeaderElector(ports::LeaderLock& lock, const common::Clock& clock, std::function<int64_t()> wall_ms,
                LeaderElectionOptions options);

  // One attempt to acquire or renew. Returns whether this replica leads after it.
  bool Tick();
  // Hands the record back if this replica holds it; it stops leading at once either way.
  void Release();

  [[nodiscard]] bool IsLeader() const;
  // Leader for at least settle_ms: may act.
  [[nodiscard]] bool CanAct() const;
  // How long from now this replica may still write as the leader: until its last successful renew plus the renew
  // deadline; 0 when it does not hold the lock or the deadline has passed. The API client's write fence: no
  // Binding, eviction or status write is sent with less budget, and none is given longer than this to complete,
  // so every write of a deposed leader ends (lease duration - renew deadline) before a standby may take over.
  [[nodiscard]] int64_t ActBudgetMs() const;
  // The holder this replica last saw ("" when none), and what the last failed attempt said ("" after a success).
  [[nodiscard]] std::string Holder() const;
  [[nodiscard]] std::string LastError() const;
  [[nodiscard]] uint64_t transitions_seen() const;  // times this replica became leader
  [[nodiscard]] const LeaderElectionOptions& options() const { return options_; }

 private:
  bool TryAcquireOrRenew(int64_t now);
  // Records the outcome of writing `written` (create or update): on success this replica holds the lock.
  bool Wrote(const common::Status& status, const char* verb, const ports::LeaderRecord& written, int64_t now);

  ports::LeaderLock& lock_;
  const common::Clock& clock_;
  const std::function<int64_t()> wall_ms_;
  const LeaderElectionOptions options_;

  mutable std::mutex mu_;
  bool holding_ = false;          // GUARDED_BY(mu_): this replica wrote the record last and it named us
  int64_t last_renew_ms_ = 0;     // GUARDED_BY(mu_): steady time of our last successful write
  int64_t acquired_ms_ = 0;       // GUARDED_BY(mu_): steady time we became leader
  ports::LeaderRecord observed_;  // GUARDED_BY(mu_)
  bool have_observed_ = false;    // GUARDED_BY(mu_)
  int64_t observed_ms_ = 0;       // GUARDED_BY(mu_): steady time the record last changed as we saw it
  std::string last_error_;        // GUARDED_BY(mu_)
  uint64_t became_leader_ = 0;    // GUARDED_BY(mu_)
};

}  // namespace gpusched::sched
