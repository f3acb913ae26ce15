#include "gpusched/sched/scheduling_queue.h"

#include <algorithm>

#include "gpusched/common/backoff.h"

namespace gpusched::sched {

SchedulingQueue::SchedulingQueue(const common::Clock& clock, QueueOptions options) : clock_(clock), options_(options) {}

int64_t SchedulingQueue::BackoffFor(int attempts) const {
  return common::ExponentialBackoff::After(attempts, std::chrono::milliseconds(options_.initial_backoff_ms),
                                           std::chrono::milliseconds(options_.max_backoff_ms))
      .count();
}

void SchedulingQueue::Remove(Entry& e) {
  switch (e.where) {
    case Where::kActive: {
      DropTicket(e, /*orphaned=*/true);
      auto q = active_.find(e.pod.queue);
      if (q != active_.end() && q->second.erase(KeyOf(e)) > 0) {
        --active_count_;
        if (q->second.empty()) active_.erase(q);
      }
      break;
    }
    case Where::kBackoff:
      backoff_.erase({e.backoff_until_ms, e.pod.uid});
      break;
    case Where::kUnschedulable: {
      unschedulable_.erase({e.since_ms, e.pod.uid});
      auto q = parked_.find(e.pod.queue);
      if (q != parked_.end() && q->second.erase(KeyOf(e)) > 0 && q->second.empty()) {
        parked_.erase(q);
      }
      CountBlockers(e.blockers, -1);
      break;
    }
    case Where::kInFlight:
      in_flight_.erase(e.pod.uid);
      break;
  }
}

void SchedulingQueue::ToActive(Entry& e, int64_t now) {
  Remove(e);
  e.where = Where::kActive;
  e.since_ms = now;
  e.blockers = 0;
  if (active_[e.pod.queue].insert(KeyOf(e)).second) ++active_count_;
}

void SchedulingQueue::AddOrUpdate(const QueuedPod& pod) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.NowMs();
  auto [it, inserted] = pods_.try_emplace(pod.uid);
  Entry& e = it->second;
  if (!inserted && e.where == Where::kInFlight) {
    e.pod = pod;  // the cycle holding it requeues it with the new spec
    e.freed_in_flight = kBlockedByAnything;
    return;
  }
  if (!inserted) {
    Remove(e);
  }
  e.pod = pod;                 // (a new spec forgets where it found no room)
  e.where = Where::kInFlight;  // so that ToActive's Remove erases nothing of the ordered sets
  ToActive(e, now);
}

bool SchedulingQueue::Delete(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end()) {
    return false;
  }
  Remove(it->second);
  pods_.erase(it);
  return true;
}

void SchedulingQueue::Promote(int64_t now) {
  while (!backoff_.empty() && backoff_.begin()->first <= now) {
    Entry& e = pods_.at(backoff_.begin()->second);
    ToActive(e, now);
  }
  while (options_.flush_after_ms > 0 && !unschedulable_.empty() &&
         now - unschedulable_.begin()->first >= options_.flush_after_ms) {
    Entry& e = pods_.at(unschedulable_.begin()->second);
    ToActive(e, now);
  }
}

std::optional<QueuedPod> SchedulingQueue::Pop() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.NowMs();
  Promote(now);
  if (active_.empty()) {
    return std::nullopt;
  }
  auto from = active_.begin();
  if (choose_ && active_.size() > 1) {
    ready_queues_.clear();
    for (const auto& [name, pods] : active_) ready_queues_.push_back(&name);
    const size_t chosen = choose_(ready_queues_);
    std::advance(from, static_cast<std::ptrdiff_t>(std::min(chosen, active_.size() - 1)));
  }
  Entry& e = pods_.at(std::get<3>(*from->second.begin()));
  from->second.erase(from->second.begin());  // (Remove's work for an active pod, ticket aside: below)
  --active_count_;
  if (from->second.empty()) active_.erase(from);
  e.where = Where::kInFlight;
  in_flight_.insert(e.pod.uid);
  e.since_ms = now;
  e.freed_in_flight = 0;
  ++e.attempts;
  QueuedPod popped = e.pod;
  DropTicket(e, /*orphaned=*/false);
  return popped;
}

bool SchedulingQueue::Claim(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.where == Where::kInFlight) {
    return false;
  }
  Entry& e = it->second;
  Remove(e);
  e.where = Where::kInFlight;
  in_flight_.insert(uid);
  e.since_ms = clock_.NowMs();
  e.freed_in_flight = 0;
  ++e.attempts;
  return true;
}

void SchedulingQueue::Requeue(const std::string& uid, Outcome outcome, uint32_t blockers) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it == pods_.end() || it->second.where != Where::kInFlight) {
    return;  // deleted meanwhile, or not ours to requeue
  }
  Entry& e = it->second;
  const int64_t now = clock_.NowMs();
  in_flight_.erase(uid);
  if (outcome == Outcome::kError) {
    e.where = Where::kBackoff;
    e.since_ms = now;
    e.backoff_until_ms = now + BackoffFor(e.attempts);
    backoff_.insert({e.backoff_until_ms, uid});
    return;
  }
  if ((e.freed_in_flight & blockers) != 0) {
    ToActive(e, now);  // something it waits for was freed while it was being tried
    return;
  }
  e.where = Where::kUnschedulable;
  e.since_ms = now;
  e.blockers = blockers;
  unschedulable_.insert({now, uid});
  parked_[e.pod.queue].emplace(KeyOf(e), &e);
  CountBlockers(blockers, +1);
}

void SchedulingQueue::Done(const std::string& uid) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it != pods_.end()) {
    Remove(it->second);
    pods_.erase(it);
  }
}

size_t SchedulingQueue::OnClusterEvent(uint32_t freed) { return OnClusterEvent(freed, nullptr); }

void SchedulingQueue::CountBlockers(uint32_t blockers, int sign) {
  for (size_t bit = 0; bit < blocked_by_.size(); ++bit) {
    if ((blockers & (1U << bit)) != 0) {
      blocked_by_[bit] = static_cast<size_t>(static_cast<int64_t>(blocked_by_[bit]) + sign);
    }
  }
}

bool SchedulingQueue::NoteEvent(uint32_t freed) {
  for (const auto& uid : in_flight_) {
    pods_.at(uid).freed_in_flight |= freed;
  }
  for (size_t bit = 0; bit < blocked_by_.size(); ++bit) {
    if ((freed & (1U << bit)) != 0 && blocked_by_[bit] > 0) {
      return true;
    }
  }
  return false;
}

size_t SchedulingQueue::OnClusterEvent(uint32_t freed, const std::function<bool(const QueuedPod&)>& may_help) {
  std::lock_guard lock(mu_);
  if (!NoteEvent(freed)) {
    return 0;
  }
  const int64_t now = clock_.NowMs();
  std::vector<std::string> moving;
  for (const auto& [since, uid] : unschedulable_) {
    const Entry& e = pods_.at(uid);
    if ((e.blockers & freed) != 0 && (!may_help || may_help(e.pod))) {
      moving.push_back(uid);
    }
  }
  for (const auto& uid : moving) {
    ToActive(pods_.at(uid), now);
  }
  return moving.size();
}

size_t SchedulingQueue::WakeInOrder(uint32_t freed, const std::string& node,
                                    const std::function<Offer(const QueuedPod&)>& choose, const Rank& rank,
                                    const std::string& only_queue) {
  std::lock_guard lock(mu_);
  if (!NoteEvent(freed)) {
    return 0;
  }
  // One cursor per queue, in name order; each step offers the next pod of the queue of the lowest rank.
  struct Cursor {
    const std::string* name;
    std::map<ActiveKey, Entry*>::const_iterator at, end;
    double rank = 0;
  };
  std::vector<Cursor> cursors;
  for (const auto& [name, pods] : parked_) {
    if (only_queue.empty() || name == only_queue) {
      cursors.push_back(Cursor{.name = &name, .at = pods.begin(), .end = pods.end()});
    }
  }
  std::map<std::string, core::GpuAmount> more = ticketed_demand_;  // by queue, this offer's wakes added
  if (rank) {
    for (Cursor& c : cursors) c.rank = rank(*c.name, more[*c.name]);
  }
  const int64_t now = clock_.NowMs();
  std::vector<std::pair<Entry*, bool>> moving;  // (entry, for the room)
  for (;;) {
    Cursor* next = nullptr;
    for (Cursor& c : cursors) {
      if (c.at != c.end && (next == nullptr || c.rank < next->rank)) next = &c;
    }
    if (next == nullptr) {
      break;
    }
    Entry* entry = (next->at++)->second;
    if ((entry->blockers & freed) == 0) {
      continue;
    }
    const Offer offer = choose(entry->pod);
    if (offer == Offer::kStop) {
      break;
    }
    if (offer != Offer::kPass) {
      moving.emplace_back(entry, offer == Offer::kWakeForRoom);
      if (rank && offer == Offer::kWakeForRoom && entry->pod.request != nullptr) {
        more[*next->name] += core::DemandOf(*entry->pod.request);
        next->rank = rank(*next->name, more[*next->name]);
      }
    }
  }
  for (const auto& [entry, for_room] : moving) {
    Entry& e = *entry;
    ToActive(e, now);
    if (for_room) {
      AddTicket(e, node);
    }
  }
  return moving.size();
}

void SchedulingQueue::Decline(const std::string& uid, const std::string& node, uint64_t generation) {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  if (it != pods_.end()) {
    it->second.pod.declined_node = node;
    it->second.pod.declined_generation = generation;
  }
}

void SchedulingQueue::AddTicket(Entry& e, const std::string& node) {
  e.pod.woken_for = node;
  ++tickets_[node];
  if (e.pod.request != nullptr) {
    ticketed_demand_[e.pod.queue] += core::DemandOf(*e.pod.request);
  }
}

void SchedulingQueue::DropTicket(Entry& e, bool orphaned) {
  if (e.pod.woken_for.empty()) {
    return;
  }
  if (orphaned) {
    orphaned_rooms_.insert(e.pod.woken_for);
  }
  if (auto t = tickets_.find(e.pod.woken_for); t != tickets_.end() && --t->second == 0) {
    tickets_.erase(t);
  }
  if (auto d = ticketed_demand_.find(e.pod.queue); d != ticketed_demand_.end() && e.pod.request != nullptr) {
    d->second -= core::DemandOf(*e.pod.request);
    if (d->second.IsZero()) {
      ticketed_demand_.erase(d);
    }
  }
  e.pod.woken_for.clear();
}

std::vector<std::string> SchedulingQueue::TakeOrphanedRooms() {
  std::lock_guard lock(mu_);
  std::vector<std::string> nodes(orphaned_rooms_.begin(), orphaned_rooms_.end());
  orphaned_rooms_.clear();
  return nodes;
}

size_t SchedulingQueue::TicketsFor(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto t = tickets_.find(node);
  return t == tickets_.end() ? 0 : t->second;
}

std::optional<int64_t> SchedulingQueue::NextWakeMs() const {
  std::lock_guard lock(mu_);
  std::optional<int64_t> wake;
  if (!backoff_.empty()) {
    wake = backoff_.begin()->first;
  }
  if (options_.flush_after_ms > 0 && !unschedulable_.empty()) {
    const int64_t flush = unschedulable_.begin()->first + options_.flush_after_ms;
    wake = wake ? std::min(*wake, flush) : flush;
  }
  return wake;
}

void SchedulingQueue::SetQueueChooser(QueueChooser choose) {
  std::lock_guard lock(mu_);
  choose_ = std::move(choose);
}

SchedulingQueue::Counts SchedulingQueue::counts() const {
  std::lock_guard lock(mu_);
  return Counts{.active = active_count_,
                .backoff = backoff_.size(),
                .unschedulable = unschedulable_.size(),
                .in_flight = in_flight_.size()};
}

int SchedulingQueue::attempts(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  return it == pods_.end() ? -1 : it->second.attempts;
}

}  // namespace gpusched::sched
