#include "gpusched/core/node_view.h"

#include <algorithm>
#include <utility>

namespace gpusched::core {

common::MilliGpu NodeView::IdleMilli() const {
  common::MilliGpu idle{0};
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (node->gpus[i].healthy) {
      idle += gpus[i].free;
    }
  }
  return idle;
}

int32_t NodeView::FullyFreeGpus() const {
  int32_t n = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].FullyFree() && node->gpus[i].healthy) {
      ++n;
    }
  }
  return n;
}

int32_t NodeView::ShapeCount(int32_t tag) const {
  for (const auto& [t, n] : shape_counts) {
    if (t == tag) {
      return n;
    }
  }
  return 0;
}

NodeView NodeView::Empty(std::shared_ptr<const Node> node) {
  NodeView v;
  v.cpu_free = node->cpu;
  v.memory_free = node->memory;
  v.scalar_free = node->scalar_resources;
  v.gpus.reserve(node->gpus.size());
  for (const auto& g : node->gpus) {
    v.gpus.push_back(GpuState{.free = common::kGpuMilli, .memory_free = g.memory});
  }
  v.node = std::move(node);
  return v;
}

void ApplyScalarsAndPorts(NodeView& view, const std::map<std::string, int64_t>& scalars,
                          const std::vector<HostPort>& host_ports, int sign) {
  for (const auto& [name, amount] : scalars) {
    view.scalar_free[name] -= amount * sign;
  }
  for (const HostPort& p : host_ports) {
    if (sign > 0) {
      view.host_ports.push_back(p);
    } else if (auto it = std::find(view.host_ports.begin(), view.host_ports.end(), p); it != view.host_ports.end()) {
      view.host_ports.erase(it);
    }
  }
}

}  // namespace gpusched::core
