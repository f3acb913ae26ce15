#include "gpusched/sched/cluster_cache.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "gpusched/common/log.h"
#include "gpusched/ports/binder.h"

namespace gpusched::sched {
namespace {

common::MiB LargestOn(const core::NodeView* view) {
  common::MiB largest{0};
  if (view != nullptr) {
    for (const auto& g : view->node->gpus) {
      largest = std::max(largest, g.memory);
    }
  }
  return largest;
}

// Ids at or above this are not taken as the floor for new ones (the high part must stay below 2^47 so that an id
// fits the annotation's int64); only a forged annotation could carry one.
constexpr uint64_t kMaxSeenId = uint64_t{1} << 62;

int64_t SystemWallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint16_t RandomNonce() {
  std::random_device rd;
  return static_cast<uint16_t>(rd() % 65535 + 1);
}

}  // namespace

ClusterCache::ClusterCache(CacheOptions options)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? options_.clock : &common::SystemClock::Instance()),
      wall_ms_(options_.wall_ms ? options_.wall_ms : std::function<int64_t()>(SystemWallMs)),
      id_nonce_(options_.id_nonce != 0 ? options_.id_nonce : RandomNonce()) {}

void ClusterCache::Warn(const std::string& message) const {
  common::Log(common::LogLevel::kWarn, options_.component + ": " + message);
}

uint64_t ClusterCache::NextAllocationId() {
  const uint64_t floor = static_cast<uint64_t>(std::max<int64_t>(wall_ms_(), 0)) * 16;
  uint64_t last = last_id_.load();
  for (;;) {
    const uint64_t high = std::max(floor, (last >> 16) + 1);
    const uint64_t id = (high << 16) | id_nonce_;
    if (last_id_.compare_exchange_weak(last, id)) {
      return id;
    }
  }
}

void ClusterCache::SeeId(uint64_t id) {
  if (id >= kMaxSeenId) {
    return;
  }
  uint64_t seen = last_id_.load();
  while (id > seen && !last_id_.compare_exchange_weak(seen, id)) {
  }
}

void ClusterCache::ExpireAssumedAfter(const common::PodUid& pod, int64_t ttl_ms, bool bind_running) {
  if (state_.FindAllocation(pod) == nullptr || state_.IsConfirmed(pod)) {
    assumed_deadline_.erase(pod);
    return;
  }
  assumed_deadline_.insert_or_assign(pod, Deadline{.at_ms = clock_->NowMs() + ttl_ms, .bind_running = bind_running});
}

bool ClusterCache::AwaitsBindOutcome(const common::PodUid& pod) const {
  auto it = assumed_deadline_.find(pod);
  return it != assumed_deadline_.end() && !it->second.bind_running && state_.FindAllocation(pod) != nullptr &&
         !state_.IsConfirmed(pod);
}

ClusterCache::HeldForBind ClusterCache::BindState(const common::PodUid& pod) const {
  if (state_.FindAllocation(pod) == nullptr) {
    return HeldForBind::kNothing;
  }
  if (state_.IsConfirmed(pod)) {
    return HeldForBind::kBound;
  }
  return AwaitsBindOutcome(pod) ? HeldForBind::kResend : HeldForBind::kInFlight;
}

void ClusterCache::BindStarting(const core::PodRequest& request, int64_t bind_in_flight_ms) {
  SetPriority(request.uid, request.priority);
  SetApp(request.uid, request.app);
  ExpireAssumedAfter(request.uid, bind_in_flight_ms, /*bind_running=*/true);
}

ClusterCache::BindEnd ClusterCache::FinishBind(const common::PodUid& pod, const common::NodeName& node,
                                               const common::Status& bound, int64_t assumed_ttl_ms) {
  std::unique_lock lock(mu_);
  const core::Allocation* held = state_.FindAllocation(pod);
  const bool assumed = held != nullptr && !state_.IsConfirmed(pod) && held->node == node;
  if (bound.ok()) {
    if (assumed) {
      (void)state_.Confirm(pod);  // the watch may have confirmed it already
    }
    ExpireAssumedAfter(pod, 0);  // confirmed (or gone): no deadline
    return BindEnd::kBound;
  }
  if (ports::BindOutcomeUnknown(bound)) {
    ExpireAssumedAfter(pod, assumed_ttl_ms);  // the Binding may have been written: the watch decides within the TTL
    return BindEnd::kUnknown;
  }
  if (assumed) {
    (void)state_.Forget(pod);
  }
  ExpireAssumedAfter(pod, 0);  // nothing assumed any more
  return BindEnd::kFailed;
}

size_t ClusterCache::ExpireAssumed() {
  std::unique_lock lock(mu_);
  const int64_t now = clock_->NowMs();
  size_t expired = 0;
  for (auto it = assumed_deadline_.begin(); it != assumed_deadline_.end();) {
    const common::PodUid& uid = it->first;
    if (state_.FindAllocation(uid) == nullptr || state_.IsConfirmed(uid)) {
      it = assumed_deadline_.erase(it);
      continue;
    }
    if (it->second.at_ms > now) {
      ++it;
      continue;
    }
    Warn("the assumed allocation of pod " + uid.str() + " on node " + state_.FindAllocation(uid)->node.str() +
         " expired: the watch never showed the pod bound; its GPUs are free again");
    (void)state_.Forget(uid);
    priorities_.erase(uid);
    apps_.erase(uid);
    ++stats_.expired_assumptions;
    ++expired;
    it = assumed_deadline_.erase(it);
  }
  return expired;
}

void ClusterCache::ApplyNodeDeleted(const common::NodeName& name) {
  std::unique_lock lock(mu_);
  ++stats_.node_events;
  if (state_.Find(name) == nullptr) {
    return;
  }
  // The pods bound there still exist (a Node object can be deleted and re-created under running pods): their
  // allocations wait for the node as if it were not known yet, and leave only with their pods.
  for (const common::PodUid& uid : state_.PodsOn(name)) {
    const core::Allocation* held = state_.FindAllocation(uid);
    if (held != nullptr && state_.IsConfirmed(uid)) {
      pending_.insert_or_assign(uid, *held);
      ++stats_.held_for_node_return;
    }
    assumed_deadline_.erase(uid);
  }
  (void)state_.RemoveNode(name);
  RecomputeLargest();
}

void ClusterCache::ApplyNode(common::Result<core::Node> decoded) {
  std::unique_lock lock(mu_);
  ++stats_.node_events;
  if (!decoded.ok()) {
    ++stats_.rejected_events;
    Warn("ignoring node: " + decoded.status().message());
    return;
  }
  const common::NodeName name = decoded->name;
  const common::MiB before = LargestOn(state_.Find(name));
  std::vector<common::PodUid> assumed_here;
  for (const common::PodUid& uid : state_.PodsOn(name)) {
    if (!state_.IsConfirmed(uid)) {
      assumed_here.push_back(uid);
    }
  }
  auto updated = state_.UpdateNode(std::move(decoded).value());
  if (!updated.ok()) {
    ++stats_.rejected_events;
    Warn("node " + name.str() + " keeps its old description: " + updated.status().message());
    return;
  }
  // The node's description wins. Bound pods whose GPU it no longer lists wait for the GPU to come back (or for
  // the pod to end); an assumed allocation there is simply dropped (its bind, if it lands, is charged by the watch).
  for (core::Allocation& a : *updated) {
    const bool assumed = std::find(assumed_here.begin(), assumed_here.end(), a.pod) != assumed_here.end();
    Warn("node " + name.str() + " no longer has the GPUs that pod " + a.pod.str() + " holds; " +
         (assumed ? "its assumed allocation is dropped" : "its allocation waits for them"));
    assumed_deadline_.erase(a.pod);
    if (!assumed) {
      const common::PodUid uid = a.pod;
      pending_.insert_or_assign(uid, std::move(a));
    }
  }
  if (const std::string over = state_.OvercommitOf(name); !over.empty()) {
    Warn("node " + name.str() + " is overcommitted by the pods bound to it: " + over);
  }
  const common::MiB after = LargestOn(state_.Find(name));
  if (after >= largest_gpu_memory_) {
    largest_gpu_memory_ = after;
  } else if (before == largest_gpu_memory_) {
    RecomputeLargest();  // the node that had the largest GPUs shrank
  }
  // Allocations that arrived before their node.
  std::vector<core::Allocation> waiting;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.node == name) {
      waiting.push_back(std::move(it->second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& a : waiting) {
    ApplyAllocation(std::move(a));
  }
}

void ClusterCache::ApplyPod(EventType type, const common::Result<core::PodUpdate>& decoded) {
  std::unique_lock lock(mu_);
  ++stats_.pod_events;
  if (!decoded.ok()) {
    ++stats_.rejected_events;
    return;
  }
  const core::PodUpdate& pod = *decoded;
  const common::PodUid& uid = pod.uid;
  if (type == EventType::kDeleted || pod.terminal) {
    if (state_.FindAllocation(uid) != nullptr) {
      (void)state_.Release(uid);
    }
    assumed_deadline_.erase(uid);
    pending_.erase(uid);
    priorities_.erase(uid);
    apps_.erase(uid);
    return;
  }
  if (!pod.node_name.empty() && !pod.annotated && !options_.charge_every_pod && state_.FindAllocation(uid) != nullptr &&
      !state_.IsConfirmed(uid)) {
    // This process assumed GPUs for the pod, but it was bound without them (another binder won): they are free.
    (void)state_.Forget(uid);
    assumed_deadline_.erase(uid);
    return;
  }
  if (pod.node_name.empty()) {
    return;  // not bound yet
  }
  if (pod.priority.has_value()) {
    priorities_[uid] = *pod.priority;
  }
  if (!pod.annotated) {
    if (options_.charge_every_pod) {
      ChargeUnannotated(pod);
    } else {
      priorities_.erase(uid);  // not a pod whose GPUs gpusched placed
    }
    return;
  }
  SetApp(uid, pod.app);
  if (const core::Allocation* held = state_.FindAllocation(uid); held != nullptr) {
    assumed_deadline_.erase(uid);
    if (held->node.str() == pod.node_name) {
      if (!state_.IsConfirmed(uid)) {
        (void)state_.Confirm(uid);  // this process's bind landed
      }
      return;
    }
    (void)state_.Release(uid);  // bound elsewhere than we assumed: the annotation and nodeName win
  }
  std::string bad;
  if (!pod.allocation.has_value()) {
    bad = "bad gpusched.io/allocation: " + pod.allocation_error;
  } else if (pod.allocation->node.str() != pod.node_name) {
    bad = "bound to " + pod.node_name + " but its allocation names " + pod.allocation->node.str();
  }
  if (!bad.empty()) {
    ++stats_.rejected_events;
    Warn("pod " + pod.key + ": " + bad + "; its GPUs are not charged");
    if (options_.charge_every_pod) {
      ChargeUnannotated(pod);
    }
    return;
  }
  core::Allocation allocation = *pod.allocation;
  allocation.share_group = core::ShareGroupOf(options_.share_within, pod.namespace_, pod.queue);
  if (options_.charge_every_pod) {
    RequestsOf(pod, allocation);  // the annotation names GPUs only
  }
  SeeId(allocation.id);
  ++stats_.rebuilt_allocations;
  ApplyAllocation(std::move(allocation));
}

void ClusterCache::ReleaseHeld(const common::PodUid& pod) {
  if (state_.FindAllocation(pod) != nullptr) {
    (void)state_.Release(pod);
  }
  pending_.erase(pod);
  assumed_deadline_.erase(pod);
}

void ClusterCache::RequestsOf(const core::PodUpdate& pod, core::Allocation& allocation) {
  // CPU, memory, other resources and host ports; the annotation says the GPUs.
  if (pod.requests.has_value()) {
    allocation.cpu = pod.requests->cpu;
    allocation.memory = pod.requests->memory;
    allocation.scalars = pod.requests->scalars;
    allocation.host_ports = pod.requests->host_ports;
  } else {
    ++stats_.rejected_events;
    Warn("bound pod " + pod.key + " is charged without CPU and memory: " +
         (pod.requests_error.empty() ? std::string("its requests were not read") : pod.requests_error));
  }
}

void ClusterCache::ChargeUnannotated(const core::PodUpdate& pod) {
  const common::PodUid& uid = pod.uid;
  if (const core::Allocation* held = state_.FindAllocation(uid); held != nullptr) {
    if (held->node.str() == pod.node_name && held->containers.empty()) {
      if (!state_.IsConfirmed(uid)) {
        (void)state_.Confirm(uid);  // this scheduler's bind of a pod without GPUs landed
      }
      assumed_deadline_.erase(uid);
      return;
    }
    (void)state_.Release(uid);  // bound elsewhere, or without the GPUs we assumed: what the cluster shows wins
    assumed_deadline_.erase(uid);
  }
  pending_.erase(uid);
  core::Allocation allocation{.pod = uid, .node = common::NodeName(pod.node_name)};
  RequestsOf(pod, allocation);
  ApplyAllocation(std::move(allocation));
}

void ClusterCache::ApplyAllocation(core::Allocation allocation) {
  if (state_.Find(allocation.node) == nullptr) {
    const auto uid = allocation.pod;
    pending_.insert_or_assign(uid, std::move(allocation));
    return;
  }
  // What is bound is charged, always: past the node's capacity if it must be (overcommit is logged and counted,
  // never hidden). Only an allocation that names GPUs the node does not have waits, for the node to show them.
  const auto uid = allocation.pod;
  std::string overcommit;
  if (auto s = state_.Charge(allocation, &overcommit); !s.ok()) {
    ++stats_.rejected_events;
    Warn("allocation of pod " + uid.str() + " waits: " + s.message());
    pending_.insert_or_assign(uid, std::move(allocation));
    return;
  }
  if (!overcommit.empty()) {
    ++stats_.overcommitted_charges;
    Warn("bound pod " + uid.str() + " charged past its node's capacity (the cluster shows it bound): " + overcommit);
  }
}

void ClusterCache::RecomputeLargest() {
  common::MiB largest{0};
  for (size_t i = 0; i < state_.SlotCount(); ++i) {
    if (state_.IsLive(i)) {
      largest = std::max(largest, LargestOn(&state_.View(i)));
    }
  }
  largest_gpu_memory_ = largest;
}

int32_t ClusterCache::PriorityOf(const common::PodUid& pod) const {
  auto it = priorities_.find(pod);
  return it == priorities_.end() ? 0 : it->second;
}

std::string ClusterCache::AppOf(const common::PodUid& pod) const {
  auto it = apps_.find(pod);
  return it == apps_.end() ? std::string() : it->second;
}

void ClusterCache::SetApp(const common::PodUid& pod, std::string app) {
  if (app.empty()) {
    apps_.erase(pod);
  } else {
    apps_.insert_or_assign(pod, std::move(app));
  }
}

CacheStats ClusterCache::stats() const {
  std::shared_lock lock(mu_);
  return stats_;
}

size_t ClusterCache::PendingAllocations() const {
  std::shared_lock lock(mu_);
  return pending_.size();
}

}  // namespace gpusched::sched
