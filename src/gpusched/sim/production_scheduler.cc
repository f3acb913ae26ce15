#include "gpusched/sim/production_scheduler.h"

#include <utility>

namespace gpusched::sim {

common::Status ProductionScheduler::Binder::Bind(const core::PodRequest& pod, const core::Allocation& allocation) {
  bound.emplace_back(pod.uid, allocation);
  return common::Status::Ok();
}

common::Status ProductionScheduler::Preemptor::Evict(const std::string&, const std::string&,
                                                     const common::PodUid& uid) {
  evicted.emplace_back(uid, by);
  return common::Status::Ok();
}

// The preemptor names itself (its namespace is its queue) before it evicts.
common::Status ProductionScheduler::Preemptor::Nominate(const std::string& ns, const std::string&,
                                                        const std::string& node) {
  if (!node.empty()) {
    by = ns;
  }
  return common::Status::Ok();
}

ProductionScheduler::ProductionScheduler()
    : cache_(sched::CacheOptions{
          .clock = &clock_, .wall_ms = [this] { return clock_.now_ms; }, .id_nonce = 1, .component = "simulate"}) {}

ProductionScheduler::~ProductionScheduler() {
  if (core_ != nullptr) {
    core_->Stop();
  }
}

common::Result<std::unique_ptr<ProductionScheduler>> ProductionScheduler::Create(
    const std::vector<core::Node>& nodes, const std::vector<core::QueueSpec>& queues,
    sched::SchedulerCoreOptions options, bool preemption) {
  std::unique_ptr<ProductionScheduler> s(new ProductionScheduler());
  options.clock = &s->clock_;
  options.preemptor = preemption ? &s->preemptor_ : nullptr;
  if (options.scheduler_names.empty()) {
    options.scheduler_names = {"gpusched"};
  }
  GPUSCHED_ASSIGN_OR_RETURN(core, sched::SchedulerCore::Create(s->cache_, s->binder_, nullptr, std::move(options)));
  s->core_ = std::move(core);
  for (const core::Node& n : nodes) {
    s->core_->OnNode(n);
  }
  if (s->cache_.stats().rejected_events > 0 || s->cache_.state().NodeCount() != nodes.size()) {
    return common::InvalidArgument(
        "the cluster's nodes cannot all be added (a node that cannot be read, or two of one name)");
  }
  for (core::QueueSpec q : queues) {
    q.namespaces = {q.name};
    const std::string name = q.name;
    s->core_->OnGpuQueue(core::EventType::kAdded, name, name, std::move(q));
  }
  if (auto errors = s->core_->QueueErrors(); !errors.empty()) {
    return common::InvalidArgument("queue " + errors.begin()->first + ": " + errors.begin()->second);
  }
  return s;
}

void ProductionScheduler::SetTime(int64_t seconds) { clock_.now_ms = seconds * 1000; }

core::WatchedPod ProductionScheduler::Watched(const Known& k) {
  core::WatchedPod w;
  w.uid = k.pod.uid;
  w.namespace_ = k.pod.namespace_;
  w.name = k.pod.name;
  w.scheduler_name = "gpusched";
  w.labels = k.pod.labels;
  w.created_ms = k.created_ms;
  w.priority = k.pod.priority;
  core::PodUpdate u{.uid = w.uid, .key = w.Key(), .priority = w.priority};
  if (k.bound.has_value()) {
    w.node_name = k.bound->node.str();
    u.node_name = w.node_name;
    u.namespace_ = w.namespace_;
    u.app = k.pod.app;
    u.annotated = true;
    u.allocation = *k.bound;
    w.pod_group = k.pod.pod_group;
    w.min_available = k.pod.min_available;
    w.anti_affinity = k.pod.pod_anti_affinity;
  } else {
    w.pending = true;
    w.request = k.pod;
    w.fingerprint = std::hash<std::string>{}(w.uid.str());
  }
  w.update = std::move(u);
  return w;
}

void ProductionScheduler::Add(const core::PodRequest& pod) {
  Known& k = pods_[pod.uid.str()];
  k = Known{.pod = pod, .created_ms = clock_.now_ms};
  core_->OnPod(core::EventType::kAdded, Watched(k));
}

void ProductionScheduler::Remove(const common::PodUid& uid) {
  auto it = pods_.find(uid.str());
  if (it == pods_.end()) {
    return;
  }
  core_->OnPod(core::EventType::kDeleted, Watched(it->second));
  pods_.erase(it);
}

void ProductionScheduler::RunAttempts(const OnBound& on_bound, const OnEvicted& on_evicted) {
  while (core_->ScheduleOne()) {
    std::vector<std::pair<common::PodUid, core::Allocation>> bound;
    bound.swap(binder_.bound);
    for (auto& [uid, allocation] : bound) {
      auto it = pods_.find(uid.str());
      if (it == pods_.end()) {
        continue;
      }
      it->second.bound = allocation;
      core_->OnPod(core::EventType::kModified, Watched(it->second));
      if (on_bound) {
        on_bound(uid, allocation);
      }
    }
    std::vector<std::pair<common::PodUid, std::string>> evicted;
    evicted.swap(preemptor_.evicted);
    for (const auto& [uid, by] : evicted) {
      if (!pods_.contains(uid.str())) {
        continue;
      }
      Remove(uid);
      if (on_evicted) {
        on_evicted(uid, by);
      }
    }
  }
}

std::optional<int64_t> ProductionScheduler::NextWakeSeconds() const {
  auto at = core_->NextWakeMs();
  if (!at.has_value()) {
    return std::nullopt;
  }
  return (*at + 999) / 1000;
}

}  // namespace gpusched::sim
