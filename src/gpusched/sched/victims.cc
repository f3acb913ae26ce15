#include "gpusched/sched/victims.h"

#include <map>

namespace gpusched::sched {

VictimPool CollectVictims(const core::ClusterState& state, std::span<const core::NodeView* const> views,
                          const std::function<const PlacedPod*(const common::PodUid&)>& placed,
                          const VictimRules& rules) {
  VictimPool pool;
  pool.budgets = rules.budgets;
  for (const core::DisruptionBudget& b : rules.budgets) {
    pool.allowed.push_back(b.disruptions_allowed);
  }
  // Per other queue and per set of dimensions a pod holds: whether such a pod may be reclaimed, and the queue's
  // over-share (both the same for every pod of the queue within one plan).
  std::map<std::pair<std::string, int>, bool> may_reclaim;
  std::map<std::string, double> over_share;
  std::vector<const PlacedPod*> found;
  for (const core::NodeView* view : views) {
    found.clear();
    int64_t could_free = view->IdleMilli().value();
    for (const common::PodUid& pod : state.PodsOn(view->name())) {
      const PlacedPod* run = placed(pod);
      if (run == nullptr || run->assumed || run->deleting) {
        continue;  // not known bound yet (a bind in flight), or leaving already
      }
      if (run->queue == rules.queue) {
        if (run->priority >= rules.priority) {
          continue;
        }
      } else {
        if (!rules.may_reclaim) {
          continue;
        }
        const int dims =
            (run->demand.gpus > 0 ? 1 : 0) | (run->demand.milli > 0 ? 2 : 0) | (run->demand.memory_mib > 0 ? 4 : 0);
        auto [it, inserted] = may_reclaim.try_emplace({run->queue, dims}, false);
        if (inserted) {
          it->second = rules.may_reclaim(run->queue, run->demand);
        }
        if (!it->second) {
          continue;
        }
      }
      const core::Allocation* held = state.FindAllocation(pod);
      if (held == nullptr || held->node != view->name()) {
        continue;
      }
      found.push_back(run);
      could_free += held->TotalMilli().value();
    }
    if (found.empty() || could_free < rules.need_milli) {
      continue;  // nobody here, or even everyone gone would not free the GPU compute asked for
    }
    VictimPool::Node c{.view = view};
    for (const PlacedPod* run : found) {
      const bool own_queue = run->queue == rules.queue;
      double share = 0.0;
      if (!own_queue && rules.over_share) {
        auto [it, inserted] = over_share.try_emplace(run->queue, 0.0);
        if (inserted) {
          it->second = rules.over_share(run->queue);
        }
        share = it->second;
      }
      PotentialVictim v{.allocation = state.FindAllocation(run->uid),
                        .priority = run->priority,
                        .start_ms = run->start_ms,
                        .over_share = share};
      for (size_t b = 0; b < pool.budgets.size(); ++b) {
        if (pool.budgets[b].Counts(run->namespace_, run->name, run->labels)) {
          v.pdbs.push_back(b);
        }
      }
      c.potential.push_back(std::move(v));
      if (rules.with_pods) {
        c.pods.push_back(*run);
      }
      c.reclaim.emplace_back(own_queue ? std::string() : run->queue, run->demand);
    }
    pool.nodes.push_back(std::move(c));
  }
  return pool;
}

bool CouldFree(const VictimPool::Node& node, const core::PodRequest& request) {
  int64_t could_free = node.view->IdleMilli().value();
  for (const PotentialVictim& v : node.potential) {
    could_free += v.allocation->TotalMilli().value();
  }
  return could_free >= request.TotalGpuMilli().value();
}

}  // namespace gpusched::sched
