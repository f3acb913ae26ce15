#include "gpusched/net/connection_table.h"

#include <algorithm>
#include <utility>

namespace gpusched::net {

ConnectionTable::ConnectionTable(size_t max_connections, size_t max_per_peer)
    : max_connections_(std::max<size_t>(1, max_connections)),
      max_per_peer_(std::clamp<size_t>(max_per_peer, 1, std::max<size_t>(1, max_connections))) {}

size_t ConnectionTable::PeerCountLocked(const std::string& peer) const {
  auto it = per_peer_.find(peer);
  return it == per_peer_.end() ? 0 : it->second;
}

void ConnectionTable::EraseLocked(std::unordered_map<uint64_t, Entry>::iterator it) {
  if (it->second.state == State::kIdle) {
    idle_.erase(it->second.since);
  }
  auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second == 0) {
    per_peer_.erase(p);
  }
  entries_.erase(it);
}

ConnectionTable::Admission ConnectionTable::Admit(const std::string& peer) {
  Admission out;
  std::lock_guard lock(mu_);
  const size_t mine = PeerCountLocked(peer);
  auto victim = entries_.end();
  if (mine >= max_per_peer_) {
    // The peer's own connection idle longest gives way (a client's pool renewing itself, or several clients behind
    // one address); with none idle the new one is refused.
    for (const auto& [since, id] : idle_) {
      auto it = entries_.find(id);
      if (it->second.peer == peer) {
        victim = it;
        break;
      }
    }
    if (victim == entries_.end()) {
      ++counts_.refused_per_peer;
      out.verdict = Verdict::kRefusedPerPeer;
      return out;
    }
    out.evicted = Evicted::kIdle;
  } else if (entries_.size() >= max_connections_) {
    if (!idle_.empty()) {
      victim = entries_.find(idle_.begin()->second);
      out.evicted = Evicted::kIdle;
    } else {
      // The oldest connection still reading its head, of the peer holding most.
      size_t most = 0;
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->second.state != State::kReadingHead) {
          continue;
        }
        const size_t held = PeerCountLocked(it->second.peer);
        if (victim == entries_.end() || held > most || (held == most && it->second.since < victim->second.since)) {
          victim = it;
          most = held;
        }
      }
      if (victim != entries_.end() && mine + 1 < most) {
        out.evicted = Evicted::kReadingHead;
      } else {
        victim = entries_.end();
      }
    }
    if (victim == entries_.end()) {
      ++counts_.refused;
      out.verdict = Verdict::kRefused;
      return out;
    }
  }
  if (victim != entries_.end()) {
    out.close_victim = std::move(victim->second.close);
    ++(out.evicted == Evicted::kIdle ? counts_.evicted_idle : counts_.evicted_head);
    EraseLocked(victim);
  }
  const uint64_t id = next_id_++;
  const uint64_t since = ++seq_;
  entries_.emplace(id, Entry{.peer = peer, .state = State::kIdle, .since = since, .close = {}});
  idle_.emplace(since, id);
  ++per_peer_[peer];
  ++counts_.served;
  out.verdict = Verdict::kServed;
  out.id = id;
  return out;
}

void ConnectionTable::Attach(uint64_t id, std::function<void()> close) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    it->second.close = std::move(close);
  }
}

bool ConnectionTable::Mark(uint64_t id, State state) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return false;
  }
  Entry& e = it->second;
  if (e.state == state) {
    return true;
  }
  if (e.state == State::kIdle) {
    idle_.erase(e.since);
  }
  e.state = state;
  e.since = ++seq_;
  if (state == State::kIdle) {
    idle_.emplace(e.since, id);
  }
  return true;
}

bool ConnectionTable::MarkIdle(uint64_t id) { return Mark(id, State::kIdle); }
bool ConnectionTable::MarkReadingHead(uint64_t id) { return Mark(id, State::kReadingHead); }
bool ConnectionTable::MarkBusy(uint64_t id) { return Mark(id, State::kBusy); }

void ConnectionTable::Remove(uint64_t id) {
  std::function<void()> close;  // destroyed outside the lock
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(id); it != entries_.end()) {
    close = std::move(it->second.close);
    EraseLocked(it);
  }
}

ConnectionTable::Counts ConnectionTable::counts() const {
  std::lock_guard lock(mu_);
  Counts c = counts_;
  c.open = entries_.size();
  c.idle = idle_.size();
  return c;
}

size_t ConnectionTable::open_from(const std::string& peer) const {
  std::lock_guard lock(mu_);
  return PeerCountLocked(peer);
}

}  // namespace gpusched::net
