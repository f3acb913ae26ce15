#include "gpusched/adapters/extender/state.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

namespace gpusched::adapters::extender {
namespace {

void LogWarn(const std::string& message) { common::Log(common::LogLevel::kWarn, message); }

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

ClusterMirror::ClusterMirror(MirrorOptions options)
    : app_label_(std::move(options.app_label)),
      charge_every_pod_(options.charge_every_pod),
      clock_(options.clock != nullptr ? options.clock : &common::SystemClock::Instance()),
      wall_ms_(options.wall_ms ? std::move(options.wall_ms) : std::function<int64_t()>(SystemWallMs)),
      id_nonce_(options.id_nonce != 0 ? options.id_nonce : RandomNonce()) {}

uint64_t ClusterMirror::NextAllocationId() {
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

void ClusterMirror::SeeId(uint64_t id) {
  if (id >= kMaxSeenId) {
    return;
  }
  uint64_t seen = last_id_.load();
  while (id > seen && !last_id_.compare_exchange_weak(seen, id)) {
  }
}

void ClusterMirror::ExpireAssumedAfter(const common::PodUid& pod, int64_t ttl_ms, bool bind_running) {
  if (state_.FindAllocation(pod) == nullptr || state_.IsConfirmed(pod)) {
    assumed_deadline_.erase(pod);
    return;
  }
  assumed_deadline_.insert_or_assign(pod, Deadline{.at_ms = clock_->NowMs() + ttl_ms, .bind_running = bind_running});
}

bool ClusterMirror::AwaitsBindOutcome(const common::PodUid& pod) const {
  auto it = assumed_deadline_.find(pod);
  return it != assumed_deadline_.end() && !it->second.bind_running && state_.FindAllocation(pod) != nullptr &&
         !state_.IsConfirmed(pod);
}

size_t ClusterMirror::ExpireAssumed() {
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
    LogWarn("extender: the assumed allocation of pod " + uid.str() + " on node " +
            state_.FindAllocation(uid)->node.str() +
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

void ClusterMirror::OnNode(EventType type, const nlohmann::json& node) {
  std::unique_lock lock(mu_);
  ++stats_.node_events;
  if (type == EventType::kDeleted) {
    const auto* md = node.is_object() && node.contains("metadata") ? &node["metadata"] : nullptr;
    if (md == nullptr || !md->is_object() || !md->contains("name") || !(*md)["name"].is_string()) {
      ++stats_.rejected_events;
      return;
    }
    const common::NodeName name((*md)["name"].get<std::string>());
    if (state_.Find(name) != nullptr) {
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
    return;
  }
  auto decoded = kube::DecodeNode(node);
  if (!decoded.ok()) {
    ++stats_.rejected_events;
    LogWarn("extender: ignoring node: " + decoded.status().message());
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
    LogWarn("extender: node " + name.str() + " keeps its old description: " + updated.status().message());
    return;
  }
  // The node's description wins. Bound pods whose GPU it no longer lists wait for the GPU to come back (or for
  // the pod to end); an assumed allocation there is simply dropped (its bind, if it lands, is charged by the watch).
  for (core::Allocation& a : *updated) {
    const bool assumed = std::find(assumed_here.begin(), assumed_here.end(), a.pod) != assumed_here.end();
    LogWarn("extender: node " + name.str() + " no longer has the GPUs that pod " + a.pod.str() + " holds; " +
            (assumed ? "its assumed allocation is dropped" : "its allocation waits for them"));
    assumed_deadline_.erase(a.pod);
    if (!assumed) {
      const common::PodUid uid = a.pod;
      pending_.insert_or_assign(uid, std::move(a));
    }
  }
  if (const std::string over = state_.OvercommitOf(name); !over.empty()) {
    LogWarn("extender: node " + name.str() + " is overcommitted by the pods bound to it: " + over);
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

void ClusterMirror::OnPod(EventType type, const nlohmann::json& pod) {
  auto meta = kube::DecodePodMeta(pod);
  std::unique_lock lock(mu_);
  ++stats_.pod_events;
  if (!meta.ok() || meta->uid.empty()) {
    ++stats_.rejected_events;
    return;
  }
  const common::PodUid& uid = meta->uid;
  if (type == EventType::kDeleted || meta->Terminal()) {
    if (state_.FindAllocation(uid) != nullptr) {
      (void)state_.Release(uid);
    }
    assumed_deadline_.erase(uid);
    pending_.erase(uid);
    priorities_.erase(uid);
    apps_.erase(uid);
    return;
  }
  const std::string* annotation = meta->Annotation(kube::kAnnotationAllocation);
  if (!meta->node_name.empty() && annotation == nullptr && !charge_every_pod_ &&
      state_.FindAllocation(uid) != nullptr && !state_.IsConfirmed(uid)) {
    // This extender assumed GPUs for the pod, but it was bound without them (another binder won): they are free.
    (void)state_.Forget(uid);
    assumed_deadline_.erase(uid);
    return;
  }
  if (meta->node_name.empty()) {
    return;  // not bound yet
  }
  if (const auto* spec = pod.contains("spec") ? &pod["spec"] : nullptr;
      spec != nullptr && spec->is_object() && spec->contains("priority") && (*spec)["priority"].is_number_integer()) {
    priorities_[uid] = (*spec)["priority"].get<int32_t>();
  }
  if (annotation == nullptr) {
    if (charge_every_pod_) {
      ChargeUnannotated(pod, uid, meta->node_name, meta->Key());
    } else {
      priorities_.erase(uid);  // not a pod whose GPUs gpusched placed
    }
    return;
  }
  SetApp(uid, kube::DecodePodApp(pod, app_label_));
  if (const core::Allocation* held = state_.FindAllocation(uid); held != nullptr) {
    assumed_deadline_.erase(uid);
    if (held->node.str() == meta->node_name) {
      if (!state_.IsConfirmed(uid)) {
        (void)state_.Confirm(uid);  // this extender's bind landed
      }
      return;
    }
    (void)state_.Release(uid);  // bound elsewhere than we assumed: the annotation and nodeName win
  }
  auto allocation = kube::DecodeAllocation(*annotation, uid);
  std::string bad;
  if (!allocation.ok()) {
    bad = "bad " + std::string(kube::kAnnotationAllocation) + ": " + allocation.status().message();
  } else if (allocation->node.str() != meta->node_name) {
    bad = "bound to " + meta->node_name + " but its allocation names " + allocation->node.str();
  }
  if (!bad.empty()) {
    ++stats_.rejected_events;
    LogWarn("extender: pod " + meta->Key() + ": " + bad + "; its GPUs are not charged");
    if (charge_every_pod_) {
      ChargeUnannotated(pod, uid, meta->node_name, meta->Key());
    }
    return;
  }
  if (charge_every_pod_) {
    RequestsOf(pod, meta->Key(), *allocation);  // the annotation names GPUs only
  }
  SeeId(allocation->id);
  ++stats_.rebuilt_allocations;
  ApplyAllocation(std::move(allocation).value());
}

void ClusterMirror::ReleaseHeld(const common::PodUid& pod) {
  if (state_.FindAllocation(pod) != nullptr) {
    (void)state_.Release(pod);
  }
  pending_.erase(pod);
  assumed_deadline_.erase(pod);
}

void ClusterMirror::RequestsOf(const nlohmann::json& pod, const std::string& key, core::Allocation& allocation) {
  // CPU, memory, other resources and host ports; the annotation says the GPUs.
  if (auto request = kube::DecodePodResources(pod); request.ok()) {
    allocation.cpu = request->cpu;
    allocation.memory = request->memory;
    allocation.scalars = request->scalars;
    allocation.host_ports = request->host_ports;
  } else {
    ++stats_.rejected_events;
    LogWarn("extender: bound pod " + key + " is charged without CPU and memory: " + request.status().message());
  }
}

void ClusterMirror::ChargeUnannotated(const nlohmann::json& pod, const common::PodUid& uid, const std::string& node,
                                      const std::string& key) {
  if (const core::Allocation* held = state_.FindAllocation(uid); held != nullptr) {
    if (held->node.str() == node && held->containers.empty()) {
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
  core::Allocation allocation{.pod = uid, .node = common::NodeName(node)};
  RequestsOf(pod, key, allocation);
  ApplyAllocation(std::move(allocation));
}

void ClusterMirror::ApplyAllocation(core::Allocation allocation) {
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
    LogWarn("extender: allocation of pod " + uid.str() + " waits: " + s.message());
    pending_.insert_or_assign(uid, std::move(allocation));
    return;
  }
  if (!overcommit.empty()) {
    ++stats_.overcommitted_charges;
    LogWarn("extender: bound pod " + uid.str() +
            " charged past its node's capacity (the cluster shows it bound): " + overcommit);
  }
}

void ClusterMirror::RecomputeLargest() {
  common::MiB largest{0};
  for (size_t i = 0; i < state_.SlotCount(); ++i) {
    if (!state_.IsLive(i)) {
      continue;
    }
    for (const auto& g : state_.View(i).node->gpus) {
      largest = std::max(largest, g.memory);
    }
  }
  largest_gpu_memory_ = largest;
}

int32_t ClusterMirror::PriorityOf(const common::PodUid& pod) const {
  auto it = priorities_.find(pod);
  return it == priorities_.end() ? 0 : it->second;
}

std::string ClusterMirror::AppOf(const common::PodUid& pod) const {
  auto it = apps_.find(pod);
  return it == apps_.end() ? std::string() : it->second;
}

void ClusterMirror::SetApp(const common::PodUid& pod, std::string app) {
  if (app.empty()) {
    apps_.erase(pod);
  } else {
    apps_.insert_or_assign(pod, std::move(app));
  }
}

MirrorStats ClusterMirror::stats() const {
  std::shared_lock lock(mu_);
  return stats_;
}

size_t ClusterMirror::PendingAllocations() const {
  std::shared_lock lock(mu_);
  return pending_.size();
}

}  // namespace gpusched::adapters::extender
