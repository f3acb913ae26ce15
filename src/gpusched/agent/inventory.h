#pragma once

// What the agent tells the rest of the cluster about its node, and what it learns from the pods on it.
//
// InventoryPublisher: the node's GPUs (uuid, index, model, memory, NUMA node, NVLink peers, health) go into the
// node annotation gpusched.io/gpus (ARCHITECTURE.md §3) by a merge patch, when they change and never otherwise:
// utilisation and temperature are not in it, health is. A failed patch is retried at the next sample. At start
// the publisher is told what the node already carries, so a restarted agent with the same GPUs patches nothing.
//
// PodsOnNode -> attribution and allocations: from the gpusched.io/allocation annotations of the pods bound to this
// node (not Succeeded/Failed, not deleted), which pod, namespace and container hold each GPU (the pod labels of
// /metrics) and what gpusched allocated on it (gpusched_gpu_allocated_*).

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/agent/dcgm_metrics.h"
#include "gpusched/common/status.h"
#include "gpusched/core/gpu.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::agent {

// The inventory part of the samples (no live metrics); `max_sharers`: the device ids per GPU the node's device
// plugin advertises (0: unknown), so that schedulers never put more pods on one GPU than the kubelet admits.
std::vector<core::Gpu> InventoryOf(const std::vector<ports::GpuSample>& samples, int32_t max_sharers = 0);

class InventoryPublisher {
 public:
  // Patches annotation gpusched.io/gpus of `node` to `value` (the API client's PatchNodeAnnotations in the agent).
  using Patch = std::function<common::Status(const std::string& node, const std::string& value)>;

  InventoryPublisher(std::string node, Patch patch, int32_t max_sharers = 0)
      : node_(std::move(node)), patch_(std::move(patch)), max_sharers_(max_sharers) {}

  // What the node carries now (its annotation at start-up), or nullopt when it has none.
  void SetCurrent(std::optional<std::string> annotation);
  // Publishes the samples' inventory if it differs from what the node carries.
  common::Status Publish(const std::vector<ports::GpuSample>& samples);

  [[nodiscard]] uint64_t patches() const;
  [[nodiscard]] std::optional<std::string> current() const;

 private:
  const std::string node_;
  const Patch patch_;
  const int32_t max_sharers_;
  mutable std::mutex mu_;
  std::optional<std::string> current_;  // GUARDED_BY(mu_)
  uint64_t patches_ = 0;                // GUARDED_BY(mu_)
};

struct PodsOnNode {
  PodAttribution attribution;
  AllocationMap allocations;
  size_t pods = 0;  // pods whose allocation counted
};

// From pod objects (any namespace): those bound to `node` that hold an allocation for it.
PodsOnNode SummarisePods(const std::vector<nlohmann::json>& pods, const std::string& node);

}  // namespace gpusched::agent
