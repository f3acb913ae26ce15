#include "gpusched/sched/gpu_queues.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

#include <fmt/format.h>

namespace gpusched::sched {
namespace {

constexpr std::array<int64_t GpuAmount::*, 3> kDims = {&GpuAmount::gpus, &GpuAmount::milli, &GpuAmount::memory_mib};
constexpr std::array<const char*, 3> kDimNames = {"gpus", "milli", "memory"};
// The rank of a queue that holds something of a dimension in which its fair share is nothing.
constexpr double kBeyondShare = 1e9;

}  // namespace

GpuQueues::GpuQueues(GpuAmount capacity) : capacity_(capacity) { SetQueues({}); }

std::map<std::string, std::string> GpuQueues::SetQueues(const std::vector<QueueSpec>& specs) {
  auto rejected = ValidateQueues(specs);
  std::lock_guard lock(mu_);
  std::map<std::string, Queue> next;
  for (const auto& s : specs) {
    if (s.name.empty() || rejected.contains(s.name)) continue;
    Queue q;
    q.spec = s;
    q.declared = true;
    auto old = queues_.find(s.name);
    if (old != queues_.end()) q.reclaimed = old->second.reclaimed;
    next.emplace(s.name, std::move(q));
  }
  if (!next.contains(kDefaultQueue)) {
    Queue q;
    q.spec.name = kDefaultQueue;
    auto old = queues_.find(kDefaultQueue);
    if (old != queues_.end()) q.reclaimed = old->second.reclaimed;
    next.emplace(kDefaultQueue, std::move(q));
  }
  queues_ = std::move(next);
  Rebuild();
  return rejected;
}

void GpuQueues::Rebuild() {
  by_namespace_.clear();
  for (auto& [name, q] : queues_) {
    q.children.clear();
    q.allocated = q.pending = {};
    q.running_pods = q.pending_pods = 0;
  }
  for (auto& [name, q] : queues_) {
    for (const auto& ns : q.spec.namespaces) by_namespace_.emplace(ns, name);
    if (!q.spec.parent.empty()) queues_.at(q.spec.parent).children.push_back(name);
  }
  for (const auto& [uid, p] : pods_) Account(p, true);
  dirty_ = true;
}

void GpuQueues::Account(const PodEntry& p, bool add) {
  Queue& q = QueueFor(p.queue);
  GpuAmount& amount = p.placed ? q.allocated : q.pending;
  size_t& pods = p.placed ? q.running_pods : q.pending_pods;
  if (add) {
    amount += p.demand;
    ++pods;
  } else {
    amount -= p.demand;
    --pods;
  }
  dirty_ = true;
}

GpuAmount GpuQueues::SubtreeAllocated(const Queue& parent) const {
  GpuAmount total = parent.allocated;
  for (const auto& c : parent.children) total += queues_.at(c).allocated;
  return total;
}

void GpuQueues::SetCapacity(const GpuAmount& capacity) {
  std::lock_guard lock(mu_);
  if (capacity_ == capacity) return;
  capacity_ = capacity;
  dirty_ = true;
}

std::string GpuQueues::QueueOf(const std::string& namespace_, const std::string& label_queue) const {
  std::lock_guard lock(mu_);
  if (!label_queue.empty() && JoinRefusalLocked(label_queue, namespace_).empty()) return label_queue;
  auto it = by_namespace_.find(namespace_);
  return it != by_namespace_.end() ? it->second : kDefaultQueue;
}

std::string GpuQueues::JoinRefusal(const std::string& queue, const std::string& namespace_) const {
  std::lock_guard lock(mu_);
  return JoinRefusalLocked(queue, namespace_);
}

std::string GpuQueues::JoinRefusalLocked(const std::string& queue, const std::string& namespace_) const {
  const Queue* q = Find(queue);
  if (q == nullptr) return {};  // Admit says "does not exist"
  const Queue* parent = q->spec.parent.empty() ? nullptr : Find(q->spec.parent);
  const auto served = by_namespace_.find(namespace_);
  return core::QueueJoinRefusal(queue, q->declared ? &q->spec : nullptr, parent != nullptr ? &parent->spec : nullptr,
                                served != by_namespace_.end() ? served->second : std::string(), namespace_);
}

bool GpuQueues::Exists(const std::string& queue) const {
  std::lock_guard lock(mu_);
  return queues_.contains(queue);
}

GpuQueues::Queue& GpuQueues::QueueFor(const std::string& name) {
  auto it = queues_.find(name);
  return it != queues_.end() ? it->second : queues_.at(kDefaultQueue);
}

const GpuQueues::Queue* GpuQueues::Find(const std::string& name) const {
  auto it = queues_.find(name);
  return it != queues_.end() ? &it->second : nullptr;
}

void GpuQueues::Forget(const std::string& uid) {
  auto it = pods_.find(uid);
  if (it == pods_.end()) return;
  Account(it->second, false);
  pods_.erase(it);
}

void GpuQueues::Set(const std::string& uid, PodEntry entry) {
  std::lock_guard lock(mu_);
  Forget(uid);
  Account(pods_[uid] = std::move(entry), true);
}

void GpuQueues::Charge(const std::string& uid, const std::string& queue, const GpuAmount& demand) {
  Set(uid, PodEntry{queue, demand, true});
}

void GpuQueues::SetPending(const std::string& uid, const std::string& queue, const GpuAmount& demand) {
  Set(uid, PodEntry{queue, demand, false});
}

void GpuQueues::Release(const std::string& uid) {
  std::lock_guard lock(mu_);
  Forget(uid);
}

void GpuQueues::CountReclaim(const std::string& queue) {
  std::lock_guard lock(mu_);
  ++QueueFor(queue).reclaimed;
}

std::string GpuQueues::QueueOfPod(const std::string& uid) const {
  std::lock_guard lock(mu_);
  auto it = pods_.find(uid);
  return it != pods_.end() ? it->second.queue : std::string();
}

GpuQueues::Admission GpuQueues::Admit(const std::string& queue, const GpuAmount& demand) const {
  std::lock_guard lock(mu_);
  Admission a;
  const Queue* q = Find(queue);
  if (q == nullptr) {
    a.reason = fmt::format("queue {} does not exist", queue);
    return a;
  }
  if (!q->children.empty()) {
    a.reason = fmt::format("queue {} is a parent queue: pods go to its children", queue);
    return a;
  }
  auto check = [&](const Queue& x, const GpuAmount& allocated) {
    const GpuAmount after = allocated + demand;
    for (size_t i = 0; i < kDims.size(); ++i) {
      const auto d = kDims[i];
      if (after.*d > x.spec.limit.*d) {
        a.reason = fmt::format("queue {}: {} {} > limit {}", x.spec.name, kDimNames[i], after.*d, x.spec.limit.*d);
        return false;
      }
    }
    return true;
  };
  if (!check(*q, q->allocated)) return a;
  bool within = (q->allocated + demand).FitsIn(q->spec.guaranteed);
  if (const Queue* p = q->spec.parent.empty() ? nullptr : Find(q->spec.parent)) {
    const GpuAmount total = SubtreeAllocated(*p);
    if (!check(*p, total)) return a;
    within = within && (total + demand).FitsIn(p->spec.guaranteed);
  }
  a.admitted = true;
  a.within_guarantee = within;
  return a;
}

void GpuQueues::Recompute() const {
  if (!dirty_) return;
  // Demand of each queue: its own pods, or its children's for a parent; capped by its limit.
  for (const auto& [name, q] : queues_) {
    if (!q.spec.parent.empty()) continue;
    GpuAmount w = q.allocated + q.pending;
    for (const auto& c : q.children) {
      const Queue& k = queues_.at(c);
      GpuAmount kw = k.allocated + k.pending;
      for (auto d : kDims) kw.*d = std::min(kw.*d, k.spec.limit.*d);
      k.want = kw;
      w += kw;
    }
    for (auto d : kDims) w.*d = std::min(w.*d, q.spec.limit.*d);
    q.want = w;
  }
  // Water-fills `total` of one dimension among `sibs`: guarantees (up to demand) first, then by weight.
  auto fill = [&](const std::vector<const Queue*>& sibs, double total, size_t dim) {
    const auto d = kDims[dim];
    std::vector<double> share(sibs.size()), cap(sibs.size());
    double left = total;
    for (size_t i = 0; i < sibs.size(); ++i) {
      cap[i] = static_cast<double>(sibs[i]->want.*d);
      share[i] = std::min(static_cast<double>(sibs[i]->spec.guaranteed.*d), cap[i]);
      left -= share[i];
    }
    while (left > 1e-9) {
      double weights = 0;
      for (size_t i = 0; i < sibs.size(); ++i) {
        if (cap[i] - share[i] > 1e-9) weights += sibs[i]->spec.weight;
      }
      if (weights <= 0) break;
      double given = 0;
      for (size_t i = 0; i < sibs.size(); ++i) {
        if (cap[i] - share[i] <= 1e-9) continue;
        const double add = std::min(cap[i] - share[i], left * sibs[i]->spec.weight / weights);
        share[i] += add;
        given += add;
      }
      left -= given;
      if (given <= 1e-9) break;
    }
    for (size_t i = 0; i < sibs.size(); ++i) {
      const Queue& q = *sibs[i];
      q.fair.*d = static_cast<int64_t>(std::floor(share[i] + 1e-6));
      q.fair_exact[dim] = share[i];
    }
  };
  std::vector<const Queue*> top;
  for (const auto& [name, q] : queues_) {
    if (q.spec.parent.empty()) top.push_back(&q);
  }
  for (size_t i = 0; i < kDims.size(); ++i) {
    fill(top, static_cast<double>(capacity_.*kDims[i]), i);
    for (const Queue* p : top) {
      if (p->children.empty()) continue;
      std::vector<const Queue*> kids;
      for (const auto& c : p->children) kids.push_back(&queues_.at(c));
      fill(kids, p->fair_exact[i], i);
    }
  }
  for (const auto& [name, q] : queues_) q.rank = RankLocked(q);
  dirty_ = false;
}

double GpuQueues::RankLocked(const Queue& q, const GpuAmount& more) const {
  double rank = 0;
  for (size_t i = 0; i < kDims.size(); ++i) {
    const double held = static_cast<double>(q.allocated.*kDims[i] + more.*kDims[i]);
    if (held <= 0) continue;
    rank = std::max(rank, q.fair_exact[i] > 0 ? held / q.fair_exact[i] : kBeyondShare);
  }
  return rank;
}

double GpuQueues::Rank(const std::string& queue) const {
  std::lock_guard lock(mu_);
  Recompute();
  auto it = queues_.find(queue);
  return (it != queues_.end() ? it->second : queues_.at(kDefaultQueue)).rank;
}

double GpuQueues::RankIf(const std::string& queue, const GpuAmount& more) const {
  std::lock_guard lock(mu_);
  Recompute();
  auto it = queues_.find(queue);
  return RankLocked(it != queues_.end() ? it->second : queues_.at(kDefaultQueue), more);
}

size_t GpuQueues::Lowest(std::span<const std::string* const> queues) const {
  std::lock_guard lock(mu_);
  Recompute();
  size_t best = 0;
  double best_rank = 0;
  const Queue& fallback = queues_.at(kDefaultQueue);
  for (size_t i = 0; i < queues.size(); ++i) {
    auto it = queues_.find(*queues[i]);
    const double r = (it != queues_.end() ? it->second : fallback).rank;
    if (i == 0 || r < best_rank) {
      best = i;
      best_rank = r;
    }
  }
  return best;
}

bool GpuQueues::MayReclaim(const std::string& queue, const GpuAmount& victim, const GpuAmount& taken,
                           const std::string& reclaimer) const {
  std::lock_guard lock(mu_);
  auto it = queues_.find(queue);
  const Queue& q = it != queues_.end() ? it->second : queues_.at(kDefaultQueue);
  auto borrowing = [&](const GpuAmount& allocated, const GpuAmount& guaranteed) {
    for (auto d : kDims) {
      if (victim.*d > 0 && allocated.*d - taken.*d > guaranteed.*d) return true;
    }
    return false;
  };
  if (!borrowing(q.allocated, q.spec.guaranteed)) return false;
  if (q.spec.parent.empty()) return true;
  const Queue* r = Find(reclaimer);
  if (r != nullptr && r->spec.parent == q.spec.parent) return true;  // siblings: the parent keeps its share
  const Queue& p = queues_.at(q.spec.parent);
  return borrowing(SubtreeAllocated(p), p.spec.guaranteed);
}

std::optional<QueueStatus> GpuQueues::Status(const std::string& queue) const {
  std::lock_guard lock(mu_);
  Recompute();
  const Queue* q = Find(queue);
  if (q == nullptr) return std::nullopt;
  QueueStatus s;
  s.name = q->spec.name;
  s.parent = q->spec.parent;
  s.guaranteed = q->spec.guaranteed;
  s.limit = q->spec.limit;
  s.allocated = q->allocated;
  s.pending = q->pending;
  s.running_pods = q->running_pods;
  s.pending_pods = q->pending_pods;
  for (const auto& c : q->children) {
    const Queue& k = queues_.at(c);
    s.allocated += k.allocated;
    s.pending += k.pending;
    s.running_pods += k.running_pods;
    s.pending_pods += k.pending_pods;
  }
  s.fair_share = q->fair;
  s.weight = q->spec.weight;
  s.rank = RankLocked(*q);
  s.reclaimed_pods = q->reclaimed;
  s.declared = q->declared;
  return s;
}

std::vector<QueueStatus> GpuQueues::All() const {
  std::vector<std::string> names;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, q] : queues_) names.push_back(name);
  }
  std::vector<QueueStatus> out;
  for (const auto& n : names) {
    if (auto s = Status(n)) out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace gpusched::sched
