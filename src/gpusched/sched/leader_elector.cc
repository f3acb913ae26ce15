#include "gpusched/sched/leader_elector.h"

#include <algorithm>
#include <utility>

namespace gpusched::sched {

common::Status ValidateLeaderElection(const LeaderElectionOptions& o) {
  if (o.identity.empty()) {
    return common::InvalidArgument("leader election: identity is empty");
  }
  if (o.retry_period_ms <= 0 || o.renew_deadline_ms <= o.retry_period_ms ||
      o.lease_duration_ms <= o.renew_deadline_ms) {
    return common::InvalidArgument("leader election: need 0 < retry period < renew deadline < lease duration (got " +
                                   std::to_string(o.retry_period_ms) + " ms, " + std::to_string(o.renew_deadline_ms) +
                                   " ms, " + std::to_string(o.lease_duration_ms) + " ms)");
  }
  if (o.settle_ms < 0) {
    return common::InvalidArgument("leader election: settle time is negative");
  }
  return common::Status::Ok();
}

LeaderElector::LeaderElector(ports::LeaderLock& lock, const common::Clock& clock, std::function<int64_t()> wall_ms,
                             LeaderElectionOptions options)
    : lock_(lock), clock_(clock), wall_ms_(std::move(wall_ms)), options_(std::move(options)) {}

bool LeaderElector::Tick() {
  const int64_t now = clock_.NowMs();
  const bool leads = TryAcquireOrRenew(now);
  const int64_t after = clock_.NowMs();
  std::lock_guard lock(mu_);
  if (!leads && holding_ && after - last_renew_ms_ >= options_.renew_deadline_ms) {
    holding_ = false;  // could not renew in time: another replica may take over once the lease runs out
  }
  return holding_ && after - last_renew_ms_ < options_.renew_deadline_ms;
}

bool LeaderElector::TryAcquireOrRenew(int64_t now) {
  const int64_t wall = wall_ms_();
  ports::LeaderRecord fresh{.holder = options_.identity,
                            .lease_duration_ms = options_.lease_duration_ms,
                            .acquire_wall_ms = wall,
                            .renew_wall_ms = wall,
                            .transitions = 0};
  auto current = lock_.Get();
  // The record was seen as it is now, not when the GET was sent: a standby times the holder's lease from here, so a
  // slow GET never makes the lease look older than it is. (Our own renewals are timed from `now`, before the
  // write was sent: the lease as others see it starts later than that, so our deadline errs early.)
  const int64_t seen = clock_.NowMs();
  if (!current.ok()) {
    if (current.status().code() != common::StatusCode::kNotFound) {
      std::lock_guard lock(mu_);
      last_error_ = "reading " + lock_.Describe() + ": " + current.status().message();
      return false;
    }
    return Wrote(lock_.Create(fresh), "creating", fresh, now);
  }
  const ports::LeaderRecord& record = *current;
  {
    std::lock_guard lock(mu_);
    if (!have_observed_ || !(record == observed_)) {
      observed_ = record;
      have_observed_ = true;
      observed_ms_ = seen;
    }
    const bool ours = record.holder == options_.identity;
    if (!ours) {
      holding_ = false;  // someone else holds or released it: we do not lead, whatever we thought
    }
    const int64_t duration = record.lease_duration_ms > 0 ? record.lease_duration_ms : options_.lease_duration_ms;
    if (!ours && !record.holder.empty() && seen - observed_ms_ < duration) {
      last_error_.clear();
      return false;  // held by another replica that renewed within a lease duration (as we timed it)
    }
    if (ours) {
      fresh.acquire_wall_ms = record.acquire_wall_ms;
      fresh.transitions = record.transitions;
    } else {
      fresh.transitions = record.transitions + 1;
    }
  }
  return Wrote(lock_.Update(fresh), "updating", fresh, now);
}

bool LeaderElector::Wrote(const common::Status& status, const char* verb, const ports::LeaderRecord& written,
                          int64_t now) {
  std::lock_guard lock(mu_);
  if (!status.ok()) {
    last_error_ = std::string(verb) + " " + lock_.Describe() + ": " + status.message();
    return false;
  }
  observed_ = written;
  have_observed_ = true;
  observed_ms_ = now;
  if (!holding_) {
    acquired_ms_ = now;
    ++became_leader_;
  }
  holding_ = true;
  last_renew_ms_ = now;
  last_error_.clear();
  return true;
}

void LeaderElector::Release() {
  bool held = false;
  ports::LeaderRecord released;
  {
    std::lock_guard lock(mu_);
    held = holding_;
    holding_ = false;
    released = observed_;
  }
  if (!held) {
    return;
  }
  released.holder.clear();
  released.lease_duration_ms = 1000;  // as client-go: a standby may take it over at its next attempt
  released.renew_wall_ms = wall_ms_();
  if (common::Status s = lock_.Update(released); !s.ok()) {
    std::lock_guard lock(mu_);
    last_error_ = "releasing " + lock_.Describe() + ": " + s.message();
  }
}

bool LeaderElector::IsLeader() const {
  std::lock_guard lock(mu_);
  return holding_ && clock_.NowMs() - last_renew_ms_ < options_.renew_deadline_ms;
}

int64_t LeaderElector::ActBudgetMs() const {
  std::lock_guard lock(mu_);
  if (!holding_) {
    return 0;
  }
  return std::max<int64_t>(0, last_renew_ms_ + options_.renew_deadline_ms - clock_.NowMs());
}

bool LeaderElector::CanAct() const {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.NowMs();
  return holding_ && now - last_renew_ms_ < options_.renew_deadline_ms && now - acquired_ms_ >= options_.settle_ms;
}

std::string LeaderElector::Holder() const {
  std::lock_guard lock(mu_);
  return have_observed_ ? observed_.holder : "";
}

std::string LeaderElector::LastError() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

uint64_t LeaderElector::transitions_seen() const {
  std::lock_guard lock(mu_);
  return became_leader_;
}

}  // namespace gpusched::sched
