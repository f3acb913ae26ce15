#include "gpusched/adapters/extender/state.h"

#include <algorithm>
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

}  // namespace

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
  if (auto s = state_.UpdateNode(std::move(decoded).value()); !s.ok()) {
    ++stats_.rejected_events;
    LogWarn("extender: node " + name.str() + " keeps its old description: " + s.message());
    return;
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
    pending_.erase(uid);
    priorities_.erase(uid);
    apps_.erase(uid);
    return;
  }
  const std::string* annotation = meta->Annotation(kube::kAnnotationAllocation);
  if (meta->node_name.empty() || annotation == nullptr) {
    return;  // not bound yet, or not a pod whose GPUs gpusched placed
  }
  if (const auto* spec = pod.contains("spec") ? &pod["spec"] : nullptr;
      spec != nullptr && spec->is_object() && spec->contains("priority") && (*spec)["priority"].is_number_integer()) {
    priorities_[uid] = (*spec)["priority"].get<int32_t>();
  }
  SetApp(uid, kube::DecodePodApp(pod, app_label_));
  if (const core::Allocation* held = state_.FindAllocation(uid); held != nullptr) {
    if (held->node.str() == meta->node_name) {
      if (!state_.IsConfirmed(uid)) {
        (void)state_.Confirm(uid);  // this extender's bind landed
      }
      return;
    }
    (void)state_.Release(uid);  // bound elsewhere than we assumed: the annotation and nodeName win
  }
  auto allocation = kube::DecodeAllocation(*annotation, uid);
  if (!allocation.ok()) {
    ++stats_.rejected_events;
    LogWarn("extender: pod " + meta->Key() + ": bad " + std::string(kube::kAnnotationAllocation) + ": " +
            allocation.status().message());
    return;
  }
  if (allocation->node.str() != meta->node_name) {
    ++stats_.rejected_events;
    LogWarn("extender: pod " + meta->Key() + " is bound to " + meta->node_name + " but its allocation names " +
            allocation->node.str() + "; not charged");
    return;
  }
  uint64_t seen = next_id_.load();
  while (allocation->id > seen && !next_id_.compare_exchange_weak(seen, allocation->id)) {
  }
  ++stats_.rebuilt_allocations;
  ApplyAllocation(std::move(allocation).value());
}

void ClusterMirror::ApplyAllocation(core::Allocation allocation) {
  if (state_.Find(allocation.node) == nullptr) {
    const auto uid = allocation.pod;
    pending_.insert_or_assign(uid, std::move(allocation));
    return;
  }
  const auto uid = allocation.pod;
  if (auto s = state_.Assume(std::move(allocation)); !s.ok()) {
    ++stats_.rejected_events;
    LogWarn("extender: allocation of pod " + uid.str() + " not charged: " + s.message());
    return;
  }
  (void)state_.Confirm(uid);
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
