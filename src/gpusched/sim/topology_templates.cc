#include "gpusched/sim/topology_templates.h"

#include <array>
#include <string_view>

namespace gpusched::sim {
namespace {

using core::LinkKind;

// DGX-1 (V100) links: 0 = across sockets, n > 0 = n NVLinks.
constexpr std::array<std::array<int, 8>, 8> kCubeMesh = {{{0, 1, 1, 2, 2, 0, 0, 0},
                                                          {1, 0, 2, 1, 0, 2, 0, 0},
                                                          {1, 2, 0, 2, 0, 0, 1, 0},
                                                          {2, 1, 2, 0, 0, 0, 0, 1},
                                                          {2, 0, 0, 0, 0, 1, 1, 2},
                                                          {0, 2, 0, 0, 1, 0, 2, 1},
                                                          {0, 0, 1, 0, 1, 2, 0, 2},
                                                          {0, 0, 0, 1, 2, 1, 2, 0}}};

bool IsV100(std::string_view model) { return model.rfind("V100", 0) == 0; }

}  // namespace

std::string TopologyTemplateName(const core::Node& node) {
  const size_t n = node.gpus.size();
  const std::string model = n > 0 ? node.gpus[0].model : "";
  if (n == 8) {
    return model == "G3" ? "nvswitch" : (model == "G2" || IsV100(model)) ? "cube-mesh" : "pcie";
  }
  if (n == 4) {
    return IsV100(model) ? "nvlink-pairs" : "pcie";
  }
  return n == 2 ? "pcie" : "none";
}

void ApplyTopologyTemplate(core::Node& node) {
  const size_t n = node.gpus.size();
  const std::string name = TopologyTemplateName(node);
  for (size_t i = 0; i < n; ++i) {
    core::Gpu& g = node.gpus[i];
    g.links.clear();
    g.nvlink_peers.clear();
    g.numa_node = n == 8 ? static_cast<int32_t>(i / 4) : 0;
    for (size_t j = 0; j < n; ++j) {
      if (i == j) {
        continue;
      }
      core::GpuLink l{.peer = static_cast<int32_t>(j)};
      if (name == "nvswitch") {
        l.kind = LinkKind::kNvSwitch;
        l.nvlinks = 12;
      } else if (name == "cube-mesh") {
        const int links = kCubeMesh[i][j];
        l.kind = links > 0 ? LinkKind::kNvlink : LinkKind::kCrossSocket;
        l.nvlinks = links;
      } else if (name == "nvlink-pairs") {
        const bool pair = i / 2 == j / 2;
        l.kind = pair ? LinkKind::kNvlink : LinkKind::kHostBridge;
        l.nvlinks = pair ? 2 : 0;
      } else if (name == "pcie") {
        if (n == 8) {
          l.kind =
              i / 4 == j / 4 ? (i / 2 == j / 2 ? LinkKind::kPcieSwitch : LinkKind::kSameNuma) : LinkKind::kCrossSocket;
        } else {
          l.kind = i / 2 == j / 2 ? LinkKind::kPcieSwitch : LinkKind::kSameNuma;
        }
      }
      if (l.kind == LinkKind::kNvlink || l.kind == LinkKind::kNvSwitch) {
        g.nvlink_peers.push_back(static_cast<int32_t>(j));
      }
      g.links.push_back(l);
    }
  }
}

void ApplyTopologyTemplates(Cluster& cluster) {
  for (core::Node& n : cluster.nodes) {
    ApplyTopologyTemplate(n);
  }
}

}  // namespace gpusched::sim
