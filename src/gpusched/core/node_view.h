#pragma once

// NodeView: a node's description plus what is free on it right now. ClusterState keeps one per node; policies
// read them (and preemption or FGD build hypothetical copies). A plain value type: copying is cheap apart from the
// GPU vector, and the Node description is shared.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/units.h"
#include "gpusched/core/node.h"
#include "gpusched/core/share_within.h"

namespace gpusched::core {

struct GpuState {
  common::MilliGpu free{0};    // unallocated compute, 0..1000
  common::MiB memory_free{0};  // unallocated memory
  int32_t holders = 0;         // allocations holding a share of this GPU
  bool exclusive = false;      // held by one allocation that nobody may share
  // The share group of its holders (share_within.h): 0 while none or all share with anyone, kMixedShareGroup when
  // they are of several groups.
  ShareGroup share_group = 0;

  [[nodiscard]] bool FullyFree() const { return holders == 0; }
};

struct NodeView {
  std::shared_ptr<const Node> node;
  common::MilliCpu cpu_free{0};
  common::MiB memory_free{0};
  std::vector<GpuState> gpus;  // gpus[i] describes node->gpus[i]
  int32_t pods = 0;            // allocations on the node
  // Free amounts of the node's other resources (Node::scalar_resources less what its pods request; a resource the
  // node does not advertise is absent, or negative where a bound pod requests it anyway).
  std::map<std::string, int64_t> scalar_free;
  std::vector<HostPort> host_ports;  // host ports its pods bind
  // How many GPU pods of each shape tag (Allocation::ShapeTag) the node holds, sorted by tag.
  std::vector<std::pair<int32_t, int32_t>> shape_counts;
  // Changes whenever anything on the node changes; unique across the ClusterState's lifetime, so a cache keyed by
  // (node, generation) is never stale.
  uint64_t generation = 0;

  [[nodiscard]] const common::NodeName& name() const { return node->name; }
  [[nodiscard]] const std::string& GpuModel(size_t i) const { return node->gpus[i].model; }
  // Σ free milli over healthy GPUs: the node's idle GPU compute.
  [[nodiscard]] common::MilliGpu IdleMilli() const;
  [[nodiscard]] int32_t FullyFreeGpus() const;
  [[nodiscard]] int32_t ShapeCount(int32_t tag) const;
  [[nodiscard]] bool HasGpuPods() const { return !shape_counts.empty(); }

  // A fresh view of an empty node.
  static NodeView Empty(std::shared_ptr<const Node> node);
};

// Other resources and host ports of a pod into (sign +1) or out of (-1) a view: scalar_free down (up) by each
// amount, the ports added to (one of each removed from) host_ports.
void ApplyScalarsAndPorts(NodeView& view, const std::map<std::string, int64_t>& scalars,
                          const std::vector<HostPort>& host_ports, int sign);

}  // namespace gpusched::core
