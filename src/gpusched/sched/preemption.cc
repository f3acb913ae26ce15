#include "gpusched/sched/preemption.h"

#include <algorithm>
#include <limits>

namespace gpusched::sched {

namespace {

void Shift(core::NodeView& view, const core::Allocation& allocation, int sign) {
  for (const auto& c : allocation.containers) {
    for (const auto& s : c.gpus) {
      if (s.index < 0 || static_cast<size_t>(s.index) >= view.gpus.size()) {
        continue;
      }
      core::GpuState& g = view.gpus[static_cast<size_t>(s.index)];
      g.free = common::MilliGpu(g.free.value() - sign * s.milli.value());
      g.memory_free = common::MiB(g.memory_free.value() - sign * s.memory.value());
      if (sign > 0) {
        g.share_group = core::JoinShareGroup(g.share_group, g.holders, allocation.share_group);
      }
      g.holders += sign;
      if (s.exclusive) {
        g.exclusive = sign > 0;
      }
      if (g.holders == 0) {
        // Who else shares it is not known here: the group is kept while any holder stays (under shareWithin all
        // sharers of a GPU are of one group, so that is exact), and cleared with the last.
        g.share_group = 0;
      }
    }
  }
  view.cpu_free = common::MilliCpu(view.cpu_free.value() - sign * allocation.cpu.value());
  view.memory_free = common::MiB(view.memory_free.value() - sign * allocation.memory.value());
  view.pods += sign;
  core::ApplyScalarsAndPorts(view, allocation.scalars, allocation.host_ports, sign);
}

}  // namespace

void RemoveFromView(core::NodeView& view, const core::Allocation& allocation) { Shift(view, allocation, -1); }
void AddToView(core::NodeView& view, const core::Allocation& allocation) { Shift(view, allocation, +1); }

bool MoreImportant(const PotentialVictim& a, const PotentialVictim& b) {
  if (a.priority != b.priority) {
    return a.priority > b.priority;
  }
  if (a.over_share != b.over_share) {
    return a.over_share < b.over_share;
  }
  return a.start_ms < b.start_ms;
}

std::optional<VictimSet> SelectVictimsOnNode(const core::NodeView& view, std::span<const PotentialVictim> potential,
                                             std::span<const int32_t> budgets,
                                             const std::function<bool(const core::NodeView&)>& fits,
                                             const VictimChange& on_change) {
  core::NodeView scratch = view;
  for (const PotentialVictim& p : potential) {
    RemoveFromView(scratch, *p.allocation);
    if (on_change) {
      on_change(p, -1);
    }
  }
  if (!fits(scratch)) {
    return std::nullopt;
  }
  std::vector<const PotentialVictim*> ordered;
  ordered.reserve(potential.size());
  for (const PotentialVictim& p : potential) {
    ordered.push_back(&p);
  }
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const PotentialVictim* a, const PotentialVictim* b) { return MoreImportant(*a, *b); });
  // Which would violate a budget if evicted, counting the budgets down in order of importance.
  std::vector<int32_t> left(budgets.begin(), budgets.end());
  std::vector<const PotentialVictim*> violating, other;
  for (const PotentialVictim* p : ordered) {
    bool violates = false;
    for (size_t b : p->pdbs) {
      if (b >= left.size()) {
        continue;
      }
      if (left[b] <= 0) {
        violates = true;
      }
      --left[b];
    }
    (violates ? violating : other).push_back(p);
  }
  VictimSet out{.node = view.name()};
  std::vector<const PotentialVictim*> victims;
  auto reprieve = [&](const PotentialVictim* p) -> bool {
    AddToView(scratch, *p->allocation);
    if (on_change) {
      on_change(*p, +1);
    }
    if (fits(scratch)) {
      return true;
    }
    RemoveFromView(scratch, *p->allocation);
    if (on_change) {
      on_change(*p, -1);
    }
    victims.push_back(p);
    return false;
  };
  for (const PotentialVictim* p : violating) {
    if (!reprieve(p)) {
      ++out.pdb_violations;
    }
  }
  for (const PotentialVictim* p : other) {
    (void)reprieve(p);
  }
  std::stable_sort(victims.begin(), victims.end(),
                   [](const PotentialVictim* a, const PotentialVictim* b) { return MoreImportant(*a, *b); });
  out.highest_priority = std::numeric_limits<int32_t>::min();
  for (const PotentialVictim* v : victims) {
    out.victims.push_back(v->allocation->pod);
    out.priority_sum += static_cast<int64_t>(v->priority) - std::numeric_limits<int32_t>::min();
  }
  if (!victims.empty()) {
    out.highest_priority = victims.front()->priority;
    out.highest_start_ms = victims.front()->start_ms;  // the earliest among the highest priority: sorted so
  }
  return out;
}

bool BetterCandidate(const VictimSet& a, const VictimSet& b) {
  if (a.pdb_violations != b.pdb_violations) {
    return a.pdb_violations < b.pdb_violations;
  }
  if (a.highest_priority != b.highest_priority) {
    return a.highest_priority < b.highest_priority;
  }
  if (a.priority_sum != b.priority_sum) {
    return a.priority_sum < b.priority_sum;
  }
  if (a.victims.size() != b.victims.size()) {
    return a.victims.size() < b.victims.size();
  }
  return a.highest_start_ms > b.highest_start_ms;  // the most important victims started latest
}

size_t PickCandidate(std::span<const VictimSet> candidates) {
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    if (BetterCandidate(candidates[i], candidates[best])) {
      best = i;
    }
  }
  return best;
}

}  // namespace gpusched::sched
