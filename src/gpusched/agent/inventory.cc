#include "gpusched/agent/inventory.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"

namespace gpusched::agent {

std::vector<core::Gpu> InventoryOf(const std::vector<ports::GpuSample>& samples, int32_t max_sharers) {
  std::vector<core::Gpu> gpus;
  gpus.reserve(samples.size());
  for (const auto& s : samples) {
    gpus.push_back(core::Gpu{.index = s.index,
                             .uuid = s.uuid,
                             .model = s.model,
                             .memory = s.memory_total,
                             .numa_node = s.numa_node,
                             .nvlink_peers = s.nvlink_peers,
                             .links = s.links,
                             .healthy = s.healthy,
                             .max_sharers = max_sharers});
  }
  return gpus;
}

void InventoryPublisher::SetCurrent(std::optional<std::string> annotation) {
  std::lock_guard lock(mu_);
  current_ = std::move(annotation);
}

common::Status InventoryPublisher::Publish(const std::vector<ports::GpuSample>& samples) {
  const std::vector<core::Gpu> gpus = InventoryOf(samples, max_sharers_);
  const std::string value = kube::EncodeGpuInventory(gpus);
  {
    std::lock_guard lock(mu_);
    if (current_.has_value()) {
      if (*current_ == value) {
        return common::Status::Ok();
      }
      // Another encoding of the same GPUs (written by an older agent, keys in another order) is no change either.
      auto theirs = kube::DecodeGpuInventory(*current_);
      if (theirs.ok() && *theirs == gpus) {
        return common::Status::Ok();
      }
    }
  }
  GPUSCHED_RETURN_IF_ERROR(patch_(node_, value));
  std::lock_guard lock(mu_);
  current_ = value;
  ++patches_;
  return common::Status::Ok();
}

uint64_t InventoryPublisher::patches() const {
  std::lock_guard lock(mu_);
  return patches_;
}

std::optional<std::string> InventoryPublisher::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

PodsOnNode SummarisePods(const std::vector<nlohmann::json>& pods, const std::string& node) {
  PodsOnNode out;
  for (const auto& pod : pods) {
    auto meta = kube::DecodePodMeta(pod);
    if (!meta.ok() || meta->node_name != node || meta->Terminal() || meta->deleting) {
      continue;
    }
    const std::string* annotation = meta->Annotation(kube::kAnnotationAllocation);
    if (annotation == nullptr) {
      continue;
    }
    auto allocation = kube::DecodeAllocation(*annotation, meta->uid);
    if (!allocation.ok() || allocation->node.str() != node) {
      continue;
    }
    ++out.pods;
    for (const auto& c : allocation->containers) {
      for (const auto& g : c.gpus) {
        const PodRef ref{.namespace_name = meta->namespace_, .pod = meta->name, .container = c.container};
        out.attribution[g.uuid].push_back(ref);
        GpuAllocated& a = out.allocations[g.uuid];
        a.milli += g.milli;
        a.memory += g.memory;
        a.pods.push_back(PodShare{.ref = ref, .milli = g.milli, .memory = g.memory});
      }
    }
  }
  for (auto& [uuid, refs] : out.attribution) {
    std::sort(refs.begin(), refs.end());
  }
  return out;
}

}  // namespace gpusched::agent
