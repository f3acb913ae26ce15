#include "gpusched/sim/cluster_status.h"

#include <algorithm>
#include <map>

#include "gpusched/policy/target_workload.h"

namespace gpusched::sim {

ClusterStatus BuildStatus(const WhatIfCluster& cluster, const std::vector<std::string>& only,
                          std::vector<std::string>* missing) {
  const auto cache = BuildCache(cluster);
  // Who holds which GPU: node -> GPU index -> pods.
  std::map<std::string, std::map<int32_t, std::vector<std::string>>> holders;
  for (const core::PodUpdate& p : cluster.pods) {
    if (p.terminal || p.node_name.empty() || !p.allocation.has_value() || p.allocation->node.str() != p.node_name) {
      continue;
    }
    for (const core::ContainerAllocation& c : p.allocation->containers) {
      for (const core::GpuShare& g : c.gpus) {
        auto& list = holders[p.node_name][g.index];
        if (std::find(list.begin(), list.end(), p.key) == list.end()) {
          list.push_back(p.key);
        }
      }
    }
  }
  const auto target = policy::DefaultTargetWorkload();
  auto lock = cache->ReadLock();
  const core::ClusterState& state = cache->state();
  ClusterStatus out;
  std::vector<std::string> names;
  for (const core::Node& n : cluster.nodes) {
    names.push_back(n.name.str());
  }
  std::sort(names.begin(), names.end());
  for (const std::string& want : only) {
    if (std::find(names.begin(), names.end(), want) == names.end() && missing != nullptr) {
      missing->push_back(want);
    }
  }
  for (const std::string& name : names) {
    const core::NodeView* view = state.Find(common::NodeName(name));
    if (view == nullptr) {
      continue;
    }
    if (only.empty() ? view->gpus.empty() : std::find(only.begin(), only.end(), name) == only.end()) {
      continue;
    }
    NodeStatus ns{.name = name,
                  .unschedulable = view->node->unschedulable,
                  .cpu_milli = view->node->cpu.value(),
                  .cpu_used_milli = (view->node->cpu - view->cpu_free).value(),
                  .pods = view->pods};
    for (size_t i = 0; i < view->gpus.size(); ++i) {
      const core::Gpu& g = view->node->gpus[i];
      const core::GpuState& s = view->gpus[i];
      GpuStatus gs{.index = g.index,
                   .uuid = g.uuid.str(),
                   .model = g.model,
                   .healthy = g.healthy,
                   .milli_used = (common::kGpuMilli - s.free).value(),
                   .memory_mib = g.memory.value(),
                   .memory_used_mib = (g.memory - s.memory_free).value()};
      if (auto n = holders.find(name); n != holders.end()) {
        if (auto h = n->second.find(g.index); h != n->second.end()) {
          gs.pods = h->second;
        }
      }
      out.gpus += 1;
      out.healthy_gpus += g.healthy ? 1 : 0;
      out.capacity_milli += common::kGpuMilli.value();
      out.allocated_milli += gs.milli_used;
      if (g.healthy) {
        ns.idle_milli += s.free.value();
      }
      ns.gpus.push_back(std::move(gs));
    }
    ns.frag_milli = policy::NodeFragmentation(*target, *view);
    out.free_milli += ns.idle_milli;
    out.frag_milli += ns.frag_milli;
    out.nodes.push_back(std::move(ns));
  }
  return out;
}

}  // namespace gpusched::sim
