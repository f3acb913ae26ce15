#pragma once

// GPU topology templates for the simulator's nodes, by GPU model and count (`gpusched-lab simulate --topology`). The
// openb trace says nothing of links, so these are assumptions, stated here:
//   8 GPUs, model G3:                 NVSwitch: every pair NVLink through the switch (12 links), as on HGX A100
//                                     boards; GPUs 0-3 on NUMA node 0, 4-7 on NUMA node 1.
//   8 GPUs, G2 and every V100 model:  the hybrid cube-mesh of a DGX-1 with V100s: two quads, each fully NVLinked
//                                     (1 or 2 links a pair), GPU i joined to i+4 by 2 links, every other pair across
//                                     the sockets [SYS]; GPUs 0-3 on NUMA node 0, 4-7 on 1.
//   4 GPUs, V100 models:              two NVLink pairs (0-1, 2-3, 2 links each) under one host bridge [PHB].
//   4 GPUs, other models (T4):        PCIe only: pairs 0-1 and 2-3 each under one switch [PIX], across them [NODE].
//   2 GPUs:                           PCIe only, one switch [PIX].
//   1 GPU:                            nothing to link.
// nvlink_peers is filled to match, for code that reads only it.

#include <string>

#include "gpusched/core/node.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {

// The template's name for a node ("cube-mesh", "nvswitch", "nvlink-pairs", "pcie", "none"), without changing it.
[[nodiscard]] std::string TopologyTemplateName(const core::Node& node);
// Sets every GPU's links, NUMA node and nvlink_peers from its template.
void ApplyTopologyTemplate(core::Node& node);
void ApplyTopologyTemplates(Cluster& cluster);

}  // namespace gpusched::sim
