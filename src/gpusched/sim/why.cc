#include "gpusched/sim/why.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sched/cluster_cache.h"
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
    const bool whole = c.exclusive || c.milli_per_gpu >= common::kGpuMilli;
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

// The node's numbers for the pod's GPUs: fully free GPUs, and the GPU with the most compute free (and its memory).
std::string Numbers(const core::NodeView& v) {
  if (v.gpus.empty()) {
    return fmt::format("{}: no GPUs, {:.1f} CPU free", v.name().str(),
                       static_cast<double>(v.cpu_free.value()) / 1000.0);
  }
  int64_t whole = 0;
  size_t most = 0;
  for (size_t i = 0; i < v.gpus.size(); ++i) {
    if (!v.node->gpus[i].healthy) {
      continue;
    }
    whole += v.gpus[i].FullyFree() ? 1 : 0;
    if (v.gpus[i].free > v.gpus[most].free ||
        (v.gpus[i].free == v.gpus[most].free && v.gpus[i].memory_free > v.gpus[most].memory_free)) {
      most = i;
    }
  }
  return fmt::format("{}: {} of {} GPUs wholly free; GPU {} has {}% and {} MiB free; {:.1f} CPU free", v.name().str(),
                     whole, v.gpus.size(), most, v.gpus[most].free.value() / 10, v.gpus[most].memory_free.value(),
                     static_cast<double>(v.cpu_free.value()) / 1000.0);
}

// How close a node comes (higher is closer): whole GPUs free, then the most compute on one GPU, then its memory.
std::tuple<int64_t, int64_t, int64_t> Closeness(const core::NodeView& v) {
  int64_t whole = 0, compute = 0, memory = 0;
  for (size_t i = 0; i < v.gpus.size(); ++i) {
    if (!v.node->gpus[i].healthy) {
      continue;
    }
    whole += v.gpus[i].FullyFree() ? 1 : 0;
    if (v.gpus[i].free.value() > compute ||
        (v.gpus[i].free.value() == compute && v.gpus[i].memory_free.value() > memory)) {
      compute = v.gpus[i].free.value();
      memory = v.gpus[i].memory_free.value();
    }
  }
  return {whole, compute, memory};
}

}  // namespace

WhyReport ExplainPod(const WhatIfCluster& cluster, const core::PodRequest& pod) {
  sched::ClusterCache cache(sched::CacheOptions{.charge_every_pod = true});
  for (const core::Node& n : cluster.nodes) {
    cache.ApplyNode(n);
  }
  std::unordered_map<std::string, const core::PodUpdate*> by_uid;
  for (const core::PodUpdate& p : cluster.pods) {
    if (p.uid == pod.uid) {
      continue;  // the pod itself, should it be bound already: judge it as if it were not
    }
    cache.ApplyPod(core::EventType::kAdded, p);
    by_uid[p.uid.str()] = &p;
  }
  auto made = policy::MakePolicy("binpack", policy::PolicyOptions{.target_workload = policy::DefaultTargetWorkload()});
  const policy::PlacementPolicy& filter_policy = *made.value();
  sched::CycleRunner runner(filter_policy,
                            sched::CycleOptions{.check_node_resources = true, .check_node_constraints = true});
  auto lock = cache.ReadLock();
  const core::ClusterState& state = cache.state();
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
    if (acc.best == nullptr || Closeness(*v) > Closeness(*acc.best)) {
      acc.best = v;
    }
    if (fit.code != policy::Fit::Code::kUnschedulable) {
      continue;  // nothing on the node could make it fit
    }
    std::vector<sched::PotentialVictim> potential;
    for (const core::PodUpdate& p : cluster.pods) {
      if (p.node_name != n.name.str() || p.uid == pod.uid) {
        continue;
      }
      const core::Allocation* a = state.FindAllocation(p.uid);
      const int32_t priority = p.priority.value_or(0);
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
