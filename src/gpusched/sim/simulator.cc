#include "gpusched/sim/simulator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "gpusched/common/rng.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/topology.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sim/gpu_allocator_baseline.h"

namespace gpusched::sim {

common::Status InMemoryCluster::Bind(const core::PodRequest&, const core::Allocation& allocation) {
  bound_.push_back(allocation);
  bound_.back().id = bound_.size();
  return common::Status::Ok();
}

namespace {

// Adds a placed pod's multi-GPU containers to the topology statistics, judged by `node` (the cluster's own, with
// its topology).
void RecordTopology(const core::Node& node, const core::Allocation& a, TopologyStats& stats, double& pair_score_sum) {
  if (!policy::HasTopology(node)) {
    return;
  }
  for (const core::ContainerAllocation& c : a.containers) {
    if (c.gpus.size() < 2) {
      continue;
    }
    std::vector<size_t> set;
    for (const core::GpuShare& g : c.gpus) {
      set.push_back(static_cast<size_t>(g.index));
    }
    const double pairs = static_cast<double>(set.size() * (set.size() - 1) / 2);
    ++stats.multi_gpu_pods;
    std::vector<size_t> all(node.gpus.size());
    for (size_t i = 0; i < all.size(); ++i) {
      all[i] = i;
    }
    if (policy::LargestNvlinkGroup(node, all) >= set.size()) {
      ++stats.nvlinkable;
      stats.fully_nvlinked += policy::FullyNvlinked(node, set) ? 1 : 0;
    }
    pair_score_sum += static_cast<double>(policy::SetScore(node, set)) / pairs;
  }
}

}  // namespace

std::string_view GpuChoiceName(GpuChoice choice) {
  switch (choice) {
    case GpuChoice::kTopology:
      return "";
    case GpuChoice::kFirstFit:
      return "first-fit";
    case GpuChoice::kGoGpuAllocator:
      return "go-gpuallocator";
  }
  return "";
}

common::Result<std::vector<std::pair<std::string, double>>> ParsePolicyMix(std::string_view spec) {
  std::vector<std::pair<std::string, double>> out;
  if (spec.find('+') == std::string_view::npos && spec.find(':') == std::string_view::npos) {
    out.emplace_back(std::string(spec), 1.0);
    return out;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t end = std::min(spec.find('+', start), spec.size());
    const std::string_view part = spec.substr(start, end - start);
    const size_t colon = part.find(':');
    std::string name(part.substr(0, colon));
    double weight = 1;
    if (colon != std::string_view::npos) {
      const std::string w(part.substr(colon + 1));
      char* stop = nullptr;
      weight = std::strtod(w.c_str(), &stop);
      if (w.empty() || stop != w.c_str() + w.size() || !(weight > 0) || weight > 1e6) {
        return common::InvalidArgument("policy mix '" + std::string(spec) + "': weight '" + w +
                                       "' is not a number in (0, 1000000]");
      }
    }
    if (name.empty()) {
      return common::InvalidArgument("policy mix '" + std::string(spec) + "': an empty policy name");
    }
    out.emplace_back(std::move(name), weight);
    start = end + 1;
  }
  return out;
}

std::vector<const core::PodRequest*> ArrivalOrder(const Workload& workload, int64_t capacity_milli, double tune,
                                                  common::Rng& rng) {
  // 1. shuffle, 2. tune (see header).
  std::vector<const core::PodRequest*> order;
  order.reserve(workload.pods.size() * 2);
  for (const auto& p : workload.pods) {
    order.push_back(&p);
  }
  std::shuffle(order.begin(), order.end(), rng.engine());
  const double target = tune * static_cast<double>(capacity_milli);
  int64_t requested = 0;
  for (const auto& p : workload.pods) {
    requested += p.TotalGpuMilli().value();
  }
  while (!workload.pods.empty() && static_cast<double>(requested) <= target) {
    const core::PodRequest& clone = workload.pods[rng.Uniform(workload.pods.size())];
    order.push_back(&clone);
    const core::PodShape s = core::ShapeOf(clone);
    requested += s.gpu_count > 0 ? s.gpu_milli.value() : 0;
  }
  return order;
}

std::vector<uint32_t> TieRank(size_t slots, common::Rng& rng) {
  std::vector<uint32_t> rank(slots);
  for (uint32_t i = 0; i < rank.size(); ++i) {
    rank[i] = i;
  }
  std::shuffle(rank.begin(), rank.end(), rng.engine());
  return rank;
}

void ParallelFor(size_t n, int jobs, const std::function<void(size_t)>& work) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      work(i);
    }
  };
  const size_t threads_wanted = std::clamp<size_t>(static_cast<size_t>(std::max(jobs, 1)), 1, std::max<size_t>(n, 1));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < threads_wanted; ++t) {
    threads.emplace_back(worker);
  }
  worker();
  for (auto& t : threads) {
    t.join();
  }
}

std::map<std::string, int64_t> GpusByModel(std::span<const core::Node> nodes) {
  std::map<std::string, int64_t> out;
  for (const core::Node& n : nodes) {
    for (const core::Gpu& g : n.gpus) {
      ++out[g.model];
    }
  }
  return out;
}

common::Result<PolicySet> MakePolicySet(std::string_view spec, const Workload& workload,
                                        std::span<const core::Node> nodes) {
  GPUSCHED_ASSIGN_OR_RETURN(mix, ParsePolicyMix(spec));
  const std::map<std::string, int64_t> gpus_by_model = GpusByModel(nodes);
  PolicySet out;
  for (const auto& [name, weight] : mix) {
    GPUSCHED_ASSIGN_OR_RETURN(made, policy::MakePolicy(name, policy::PolicyOptions{.target_workload = workload.target,
                                                                                   .gpus_by_model = gpus_by_model}));
    out.members.push_back(std::move(made));
    out.mix.emplace_back(out.members.back().get(), weight);
  }
  if (out.members.size() == 1) {
    out.mix.clear();  // one policy: its own scores, no mixing
  }
  return out;
}

common::Result<RunOutcome> RunOne(const Cluster& cluster, const Workload& workload, const RunSpec& spec) {
  const auto start = std::chrono::steady_clock::now();
  if (spec.tune < 0) {
    return common::InvalidArgument("tune ratio must be >= 0, got " + std::to_string(spec.tune));
  }
  GPUSCHED_ASSIGN_OR_RETURN(policies, MakePolicySet(spec.policy, workload, cluster.nodes));
  std::unordered_map<std::string, const core::Node*> real_nodes;
  for (const core::Node& n : cluster.nodes) {
    real_nodes.emplace(n.name.str(), &n);
  }
  std::optional<GoGpuAllocatorPlacement> go_allocator;
  if (spec.gpu_choice == GpuChoice::kGoGpuAllocator) {
    go_allocator.emplace(policies.primary(), std::move(real_nodes));
  }
  const policy::PlacementPolicy& pol =
      go_allocator.has_value() ? static_cast<const policy::PlacementPolicy&>(*go_allocator) : policies.primary();

  std::vector<core::Node> seen = cluster.nodes;  // what the scheduler sees
  if (spec.gpu_choice != GpuChoice::kTopology) {
    for (core::Node& n : seen) {
      for (core::Gpu& g : n.gpus) {
        g.links.clear();
        g.nvlink_peers.clear();
      }
    }
  }
  std::unordered_map<std::string, size_t> node_index;
  for (size_t i = 0; i < cluster.nodes.size(); ++i) {
    node_index.emplace(cluster.nodes[i].name.str(), i);
  }
  InMemoryCluster memory(std::move(seen));
  core::ClusterState state;
  auto nodes = memory.ListNodes();
  if (!nodes.ok()) {
    return nodes.status();
  }
  for (auto& n : nodes.value()) {
    GPUSCHED_RETURN_IF_ERROR(state.AddNode(std::move(n)));
  }

  common::Rng rng(spec.seed);
  const std::vector<const core::PodRequest*> order =
      ArrivalOrder(workload, state.CapacityMilli().value(), spec.tune, rng);

  RunOutcome out{.workload = workload.name, .spec = spec};
  out.total_gpus = state.CapacityMilli().value() / common::kGpuMilli.value();
  out.events.reserve(order.size());

  // Per-node fragmentation and idle, kept incrementally.
  const policy::TargetWorkload& m = *workload.target;
  std::vector<double> frag(state.SlotCount());
  double frag_sum = 0;
  for (size_t i = 0; i < state.SlotCount(); ++i) {
    frag[i] = policy::NodeFragmentation(m, state.View(i));
    frag_sum += frag[i];
  }

  const std::vector<uint32_t> rank = TieRank(state.SlotCount(), rng);
  // KSS's stable node order breaks ties, unless the run asks for random ties (kube-scheduler's own rule).
  sched::CycleRunner runner(
      pol,
      sched::CycleOptions{.collect_reasons = false,
                          .tie_rank = spec.random_ties ? std::span<const uint32_t>() : std::span<const uint32_t>(rank)},
      policies.mix);
  const policy::Snapshot snapshot;
  int64_t arrived = 0;
  int clone_index = 0;
  double pair_score_sum = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    core::PodRequest pod = *order[k];
    if (k >= workload.pods.size()) {  // a clone needs its own identity
      pod.uid = common::PodUid(pod.uid.str() + "-clone-" + std::to_string(clone_index++));
    }
    arrived += pod.TotalGpuMilli().value();
    ++out.pods_submitted;
    auto cycle = runner.Schedule(pod, state, snapshot, rng);
    if (!cycle.ok()) {
      return cycle.status();
    }
    if (cycle->allocation.has_value()) {  // reserved (assumed) already; bind and confirm
      const core::Allocation& a = *cycle->allocation;
      const size_t slot = *state.SlotOf(a.node);
      const double f_before = frag[slot];
      GPUSCHED_RETURN_IF_ERROR(sched::CycleRunner::Bind(state, memory, pod, a));
      RecordTopology(cluster.nodes[node_index.at(a.node.str())], a, out.topology, pair_score_sum);
      frag[slot] = policy::NodeFragmentation(m, state.View(slot));
      frag_sum += frag[slot] - f_before;
      ++out.pods_scheduled;
    } else {
      ++out.pods_failed;
    }
    out.events.push_back(Event{.arrived_milli = arrived,
                               .allocated_milli = state.AllocatedMilli().value(),
                               .frag_milli = frag_sum,
                               .idle_milli = (state.CapacityMilli() - state.AllocatedMilli()).value()});
  }
  if (out.topology.multi_gpu_pods > 0) {
    out.topology.mean_pair_score = pair_score_sum / static_cast<double>(out.topology.multi_gpu_pods);
  }
  if (spec.keep_allocations) {
    auto bound = memory.ListAllocations();
    if (!bound.ok()) {
      return bound.status();
    }
    out.allocations = std::move(bound.value());
  }
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

common::Result<std::vector<RunOutcome>> RunMany(const Cluster& cluster, const std::vector<RunRequest>& requests,
                                                int jobs, const std::function<void(size_t, size_t)>& on_done) {
  std::vector<std::optional<RunOutcome>> results(requests.size());
  std::mutex mu;
  size_t done = 0;
  common::Status first_error;
  ParallelFor(requests.size(), jobs, [&](size_t i) {
    auto r = RunOne(cluster, *requests[i].workload, requests[i].spec);
    std::lock_guard<std::mutex> lock(mu);
    if (r.ok()) {
      results[i] = std::move(r.value());
    } else if (first_error.ok()) {
      first_error = r.status();
    }
    ++done;
    if (on_done) {
      on_done(done, requests.size());
    }
  });
  if (!first_error.ok()) {
    return first_error;
  }
  std::vector<RunOutcome> out;
  out.reserve(results.size());
  for (auto& r : results) {
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace gpusched::sim
