#include "gpusched/sim/whatif.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "gpusched/common/rng.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sched/cluster_cache.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sim/simulator.h"

namespace gpusched::sim {
namespace {

std::string GpuText(const core::Allocation& a) {
  std::string s;
  for (const core::ContainerAllocation& c : a.containers) {
    for (const core::GpuShare& g : c.gpus) {
      if (!s.empty()) {
        s += ",";
      }
      s += std::to_string(g.index);
      if (!g.exclusive && g.milli < common::kGpuMilli) {
        s += fmt::format(" ({}%)", g.milli.value() / 10);
      }
    }
  }
  return s.empty() ? "-" : s;
}

}  // namespace

std::unique_ptr<sched::ClusterCache> BuildCache(const WhatIfCluster& cluster, const common::PodUid* skip) {
  auto cache = std::make_unique<sched::ClusterCache>(sched::CacheOptions{.charge_every_pod = true});
  for (const core::Node& n : cluster.nodes) {
    cache->ApplyNode(n);
  }
  for (const core::PodUpdate& p : cluster.pods) {
    if (skip == nullptr || p.uid != *skip) {
      cache->ApplyPod(core::EventType::kAdded, p);
    }
  }
  return cache;
}

WhatIfSummary SummarizeCluster(const WhatIfCluster& cluster) {
  auto cache = BuildCache(cluster);
  auto lock = cache->ReadLock();
  const core::ClusterState& state = cache->state();
  WhatIfSummary s{.nodes = static_cast<int64_t>(state.NodeCount()),
                  .allocated_milli = state.AllocatedMilli().value(),
                  .capacity_milli = state.CapacityMilli().value()};
  s.gpus = s.capacity_milli / common::kGpuMilli.value();
  s.pods_charged = static_cast<int64_t>(state.AllocationCount());
  return s;
}

common::Result<std::vector<WhatIfOutcome>> WhatIf(const WhatIfCluster& cluster, const std::vector<WhatIfPod>& pods,
                                                  const std::vector<std::string>& policies, uint64_t seed) {
  if (pods.empty()) {
    return common::InvalidArgument("what-if: no pods to place");
  }
  if (policies.empty()) {
    return common::InvalidArgument("what-if: no policies");
  }
  const Workload target{.name = "live", .target = policy::DefaultTargetWorkload()};
  std::vector<WhatIfOutcome> out;
  for (const std::string& name : policies) {
    GPUSCHED_ASSIGN_OR_RETURN(set, MakePolicySet(name, target, cluster.nodes));
    auto cache = BuildCache(cluster);
    auto lock = cache->WriteLock();
    core::ClusterState& state = cache->state();
    sched::CycleRunner runner(
        set.primary(),
        sched::CycleOptions{.check_node_resources = true, .check_node_constraints = true, .stable_ties = true},
        set.mix);
    common::Rng rng(seed);
    const policy::Snapshot snapshot;
    WhatIfOutcome o{.policy = name};
    for (size_t i = 0; i < pods.size(); ++i) {
      core::PodRequest request = pods[i].request;
      request.uid = common::PodUid("whatif-" + std::to_string(i));
      GPUSCHED_ASSIGN_OR_RETURN(cycle, runner.Schedule(request, state, snapshot, rng));
      WhatIfPlacement p{.pod = pods[i].name};
      if (cycle.allocation.has_value()) {
        p.allocation = cycle.allocation;
        ++o.placed;
      } else {
        p.reason = cycle.Summary(400);
      }
      o.placements.push_back(std::move(p));
    }
    out.push_back(std::move(o));
  }
  return out;
}

void PrintWhatIf(std::ostream& out, const WhatIfSummary& summary, const std::vector<WhatIfPod>& pods,
                 const std::vector<WhatIfOutcome>& outcomes) {
  out << fmt::format("cluster: {} nodes, {} GPUs, {:.1f} GPUs of compute allocated to {} pods; nothing was written\n",
                     summary.nodes, summary.gpus, static_cast<double>(summary.allocated_milli) / 1000.0,
                     summary.pods_charged);
  out << fmt::format("{} pods to place, in order\n\n", pods.size());
  out << fmt::format("{:<28} {:>8}\n", "POLICY", "PLACED");
  size_t best = 0;
  for (size_t k = 0; k < outcomes.size(); ++k) {
    out << fmt::format("{:<28} {:>8}\n", outcomes[k].policy,
                       fmt::format("{}/{}", outcomes[k].placed, outcomes[k].placements.size()));
    if (outcomes[k].placed > outcomes[best].placed) {
      best = k;
    }
  }
  if (outcomes.empty()) {
    return;
  }
  const WhatIfOutcome& b = outcomes[best];
  out << fmt::format(
      "\nunder {} (places the most{}):\n", b.policy,
      std::count_if(outcomes.begin(), outcomes.end(), [&](const WhatIfOutcome& o) { return o.placed == b.placed; }) > 1
          ? ", with others"
          : "");
  out << fmt::format("{:<32} {:<24} {:<20} {}\n", "POD", "NODE", "GPUS", "FROM");
  for (size_t i = 0; i < b.placements.size(); ++i) {
    const WhatIfPlacement& p = b.placements[i];
    out << fmt::format("{:<32} {:<24} {:<20} {}\n", p.pod,
                       p.allocation.has_value() ? p.allocation->node.str() : "(does not fit)",
                       p.allocation.has_value() ? GpuText(*p.allocation) : "-", pods[i].source);
  }
  for (const WhatIfPlacement& p : b.placements) {
    if (!p.allocation.has_value()) {
      out << "  " << p.pod << ": " << p.reason << "\n";
    }
  }
}

}  // namespace gpusched::sim
