#pragma once

// Builders for tests: nodes, node views in any state, and pod requests, so a table-driven test reads like
//   {.nodes = {View("n1").Gpus(8, "A100").Free({1000, 300}), ...}, .pod = Pod("p").Share(450)}

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"
#include "gpusched/core/node_view.h"

namespace gpusched::testing {

class NodeBuilder {
 public:
  explicit NodeBuilder(std::string name);
  // Adds n GPUs of the model (memory in MiB); UUIDs are "GPU-<node>-<index>".
  NodeBuilder& Gpus(int32_t n, std::string model = "A100", int64_t memory_mib = 81920);
  NodeBuilder& Cpu(int64_t milli);
  NodeBuilder& Memory(int64_t mib);
  [[nodiscard]] core::Node Build() const { return node_; }

 private:
  core::Node node_;
};

// A NodeView in a chosen state, without going through ClusterState.
class ViewBuilder {
 public:
  explicit ViewBuilder(std::string name) : node_(std::move(name)) {}
  ViewBuilder& Gpus(int32_t n, std::string model = "A100", int64_t memory_mib = 81920);
  ViewBuilder& Cpu(int64_t milli);
  ViewBuilder& Memory(int64_t mib);
  // Free milli per GPU, in index order; GPUs not listed stay fully free. A GPU with free < 1000 counts as held by
  // one pod.
  ViewBuilder& Free(std::initializer_list<int64_t> free_milli);
  ViewBuilder& CpuFree(int64_t milli);
  ViewBuilder& MemoryFree(int64_t mib);
  // Records `count` GPU pods of the shape tag (0 = shared, k = k whole GPUs) on the node.
  ViewBuilder& Shape(int32_t tag, int32_t count);
  [[nodiscard]] core::NodeView Build() const;

 private:
  NodeBuilder node_;
  std::vector<int64_t> free_;
  int64_t cpu_free_ = -1;
  int64_t memory_free_ = -1;
  std::vector<std::pair<int32_t, int32_t>> shapes_;
};

class PodBuilder {
 public:
  explicit PodBuilder(std::string name);
  PodBuilder& Cpu(int64_t milli);
  PodBuilder& Memory(int64_t mib);
  // count whole, exclusive GPUs.
  PodBuilder& Gpus(int32_t count);
  // A fraction of one GPU.
  PodBuilder& Share(int64_t milli, int64_t memory_mib = 0);
  // A GPU container with everything explicit.
  PodBuilder& Container(core::GpuRequest request);
  PodBuilder& Models(std::vector<std::string> models);
  PodBuilder& Priority(int32_t priority);
  [[nodiscard]] core::PodRequest Build() const { return pod_; }

 private:
  core::PodRequest pod_;
};

inline NodeBuilder Node(std::string name) { return NodeBuilder(std::move(name)); }
inline ViewBuilder View(std::string name) { return ViewBuilder(std::move(name)); }
inline PodBuilder Pod(std::string name) { return PodBuilder(std::move(name)); }

// The GPU indices of a placement, container after container: what SelectGpus tests compare.
inline std::vector<int32_t> GpuIndices(const std::vector<core::ContainerAllocation>& allocs) {
  std::vector<int32_t> out;
  for (const auto& a : allocs) {
    for (const auto& g : a.gpus) {
      out.push_back(g.index);
    }
  }
  return out;
}

}  // namespace gpusched::testing
