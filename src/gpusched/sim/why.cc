#include "gpusched/sim/why.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "gpusched/policy/gpu_fit.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sched/preemption.h"

namespace gpusched::sim {
namespace {

std::string ClassOf(const core::Node& n) {
  if (n.gpus.empty()) {
    return "no GPUs";
  }
  return fmt::format("{}x {}", n.gpus.size(), n.gpus.front().model);
}

std::string Need(const core::PodRequest& pod) {
  std::string s;
  for (const core::GpuRequest& c : pod.containers) {
    const bool whole = policy::WantsWhole(c);
    std::string part =
        whole ? fmt::format("{} whole GPU{}", c.count, c.count == 1 ? "" : "s")
              : fmt::format("{}% of {} GPU{}", c.milli_per_gpu.value() / 10, c.count, c.count == 1 ? "" : "s");
    if (c.memory_per_gpu.value() > 0) {
      part += fmt::format(" with {} MiB each", c.memory_per_gpu.value());
    }
    s += (s.empty() ? "" : " + ") + part;
  }
  s += fmt::format("{}{:.1f} CPU, {} MiB memory", s.empty() ? "" : ", ", static_cast<double>(pod.cpu.value()) / 1000.0,
                   pod.memory.value());
  return s;
}

// How close a node comes to hosting the pod's GPUs: GPUs wholly free, and the healthy GPU with the most compute free
// (then memory). Compared by (whole, compute, memory): higher is closer.
struct Closeness {
  int64_t whole = 0;
  size_t gpu = 0;  // the GPU with the most free
  int64_t compute = -1, memory = -1;
  auto Key() const { return std::tie(whole, compute, memory); }
};

Closeness ClosenessOf(const core::NodeView& v) {
  Closeness c;
  for (size_t i = 0; i < v.gpus.size(); ++i) {
    if (!v.node->gpus[i].healthy) {
      continue;
    }
    c.whole += v.gpus[i].FullyFree() ? 1 : 0;
    const std::tuple<int64_t, int64_t> here{v.gpus[i].free.value(), v.gpus[i].memory_free.value()};
    if (here > std::tie(c.compute, c.memory)) {
      std::tie(c.compute, c.memory) = here;
      c.gpu = i;
    }
  }
  return c;
}

// The node's numbers for the pod's GPUs, in words.
std::string Numbers(const core::NodeView& v) {
  if (v.gpus.empty()) {
    return fmt::format("{}: no GPUs, {:.1f} CPU free", v.name().str(),
                       static_cast<double>(v.cpu_free.value()) / 1000.0);
  }
  const Closeness c = ClosenessOf(v);
  return fmt::format("{}: {} of {} GPUs wholly free; GPU {} has {}% and {} MiB free; {:.1f} CPU free", v.name().str(),
                     c.whole, v.gpus.size(), c.gpu, std::max<int64_t>(c.compute, 0) / 10,
                     std::max<int64_t>(c.memory, 0), static_cast<double>(v.cpu_free.value()) / 1000.0);
}

}  // namespace

WhyReport ExplainPod(const WhatIfCluster& cluster, const core::PodRequest& pod) {
  // The pod itself, should it be bound already, is judged as if it were not.
  const auto cache = BuildCache(cluster, &pod.uid);
  std::unordered_map<std::string, const core::PodUpdate*> by_uid;
  std::unordered_map<std::string, std::vector<const core::PodUpdate*>> by_node;
  for (const core::PodUpdate& p : cluster.pods) {
    if (p.uid != pod.uid) {
      by_uid[p.uid.str()] = &p;
      by_node[p.node_name].push_back(&p);
    }
  }
  auto made = policy::MakePolicy("binpack", policy::PolicyOptions{.target_workload = policy::DefaultTargetWorkload()});
  const policy::PlacementPolicy& filter_policy = *made.value();
  sched::CycleRunner runner(filter_policy,
                            sched::CycleOptions{.check_node_resources = true, .check_node_constraints = true});
  auto lock = cache->ReadLock();
  const core::ClusterState& state = cache->state();
  WhyReport out{.need = Need(pod)};
  struct ClassAcc {
    int64_t nodes = 0, fit = 0;
    std::map<std::string, int64_t> reasons;
    const core::NodeView* best = nullptr;
  };
  std::map<std::string, ClassAcc> classes;
  std::vector<sched::VictimSet> candidates;
  for (const core::Node& n : cluster.nodes) {
    const core::NodeView* v = state.Find(n.name);
    if (v == nullptr) {
      continue;
    }
    ClassAcc& acc = classes[ClassOf(n)];
    ++acc.nodes;
    const policy::Fit fit = runner.Filter(pod, *v, policy::Snapshot{});
    if (fit.fits()) {
      ++acc.fit;
      if (out.fits_on.empty()) {
        out.fits_on = n.name.str();
      }
      continue;
    }
    acc.reasons[std::string(sched::ReasonGroup(fit.reason))] += 1;
    if (acc.best == nullptr || ClosenessOf(*v).Key() > ClosenessOf(*acc.best).Key()) {
      acc.best = v;
    }
    if (fit.code != policy::Fit::Code::kUnschedulable) {
      continue;  // nothing on the node could make it fit
    }
    std::vector<sched::PotentialVictim> potential;
    for (const core::PodUpdate* p : by_node[n.name.str()]) {
      const core::Allocation* a = state.FindAllocation(p->uid);
      const int32_t priority = p->priority.value_or(0);
      if (a != nullptr && priority < pod.priority) {
        potential.push_back(sched::PotentialVictim{.allocation = a, .priority = priority});
      }
    }
    if (potential.empty()) {
      continue;
    }
    auto set = sched::SelectVictimsOnNode(*v, potential, {},
                                          [&](const core::NodeView& view) { return runner.Filter(pod, view).fits(); });
    if (set.has_value() && !set->victims.empty()) {
      candidates.push_back(std::move(*set));
    }
  }
  for (auto& [name, acc] : classes) {
    NodeClassWhy c{.name = name, .nodes = acc.nodes, .fit = acc.fit};
    int64_t most = 0;
    for (const auto& [reason, count] : acc.reasons) {
      if (count > most) {
        most = count;
        c.reason = reason;
      }
    }
    if (acc.best != nullptr) {
      c.best = Numbers(*acc.best);
    }
    out.classes.push_back(std::move(c));
  }
  if (!candidates.empty()) {
    const sched::VictimSet& best = candidates[sched::PickCandidate(candidates)];
    out.preempt_node = best.node.str();
    for (const common::PodUid& v : best.victims) {
      auto it = by_uid.find(v.str());
      const std::string name = it != by_uid.end() ? it->second->key : v.str();
      const int32_t priority = it != by_uid.end() ? it->second->priority.value_or(0) : 0;
      out.victims.push_back(fmt::format("{} (priority {})", name, priority));
    }
  }
  return out;
}

std::string FormatWhy(const WhyReport& r) {
  std::string s = "needs: " + r.need + "\n";
  if (!r.fits_on.empty()) {
    s += "it fits now, on " + r.fits_on +
         " (among others): the scheduler has not retried it since the cluster changed\n";
  }
  s += "\nnode classes:\n";
  for (const NodeClassWhy& c : r.classes) {
    s += fmt::format("  {}: {} node{}", c.name, c.nodes, c.nodes == 1 ? "" : "s");
    if (c.fit > 0) {
      s += fmt::format(", {} fit", c.fit);
    }
    if (!c.reason.empty()) {
      s += ", " + c.reason;
    }
    s += "\n";
    if (!c.best.empty()) {
      s += "    closest " + c.best + "\n";
    }
  }
  s += "\nwhat would make it fit: ";
  if (!r.fits_on.empty()) {
    s += "nothing, it fits\n";
  } else if (!r.preempt_node.empty()) {
    s += "on " + r.preempt_node + ", evicting";
    for (size_t i = 0; i < r.victims.size(); ++i) {
      s += (i == 0 ? " " : ", ") + r.victims[i];
    }
    s += " (the pods of lower priority the scheduler's preemption would pick)\n";
  } else {
    s += "no eviction of lower-priority pods would; the pod needs capacity the cluster does not have free (or a "
         "higher priority)\n";
  }
  return s;
}

}  // namespace gpusched::sim
