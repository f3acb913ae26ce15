#include "gpusched/cli/simulate_command.h"

#include <unistd.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "gpusched/common/nearest.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sim/bound.h"
#include "gpusched/sim/builtin_workload.h"
#include "gpusched/sim/replay.h"
#include "gpusched/sim/report.h"
#include "gpusched/sim/simulator.h"
#include "gpusched/sim/tenants.h"
#include "gpusched/sim/topology_templates.h"
#include "gpusched/sim/trace_reader.h"

namespace gpusched::cli {

std::string ParseSeeds(const std::string& text, std::vector<unsigned long long>& out) {
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) {
      return "--seeds: empty item in '" + text + "'";
    }
    try {
      const size_t dash = part.find('-');
      size_t used = 0;
      if (dash == std::string::npos) {
        out.push_back(std::stoull(part, &used));
        if (used != part.size()) {
          throw std::invalid_argument(part);
        }
      } else {
        const auto lo = std::stoull(part.substr(0, dash), &used);
        if (used != dash) {
          throw std::invalid_argument(part);
        }
        const std::string rest = part.substr(dash + 1);
        const auto hi = std::stoull(rest, &used);
        if (used != rest.size() || hi < lo || hi - lo > 100000) {
          throw std::invalid_argument(part);
        }
        for (auto s = lo; s <= hi; ++s) {
          out.push_back(s);
        }
      }
    } catch (const std::exception&) {
      return "--seeds: '" + part + "' is not a seed or a range like 42-51";
    }
  }
  if (out.empty()) {
    return "--seeds: no seeds in '" + text + "'";
  }
  return "";
}

namespace {

// The multi-tenant mode: three GPU queues share the trace's cluster, the trace's GPU pods dealt to them in turn,
// each running its real lifetime (creation to deletion).
int RunTenantMode(const SimulateFlags& f, unsigned long long seed) {
  if (f.trace_dir.empty()) {
    std::cerr << "gpusched-lab simulate: --tenants needs --trace-dir (pods with creation and deletion times)\n";
    return 2;
  }
  int min_size = 0, max_size = 0;  // of gangs (--gangs MIN-MAX)
  if (!f.gangs.empty()) {
    char dash = 0;
    std::istringstream in(f.gangs);
    if (!(in >> min_size >> dash >> max_size) || dash != '-' || !in.eof() || min_size < 2 || max_size < min_size) {
      std::cerr << "gpusched-lab simulate: --gangs " << f.gangs
                << ": expected MIN-MAX with 2 <= MIN <= MAX, e.g. 2-16\n";
      return 2;
    }
  }
  auto nodes = sim::ReadNodeList(f.trace_dir + "/" + f.node_list + ".csv");
  if (!nodes.ok()) {
    std::cerr << "gpusched-lab simulate: " << nodes.status().message() << "\n";
    return 1;
  }
  sim::Cluster cluster{.name = f.node_list};
  int64_t gpus = 0;
  for (const auto& n : nodes.value()) {
    cluster.nodes.push_back(sim::ToNode(n));
    gpus += n.gpus;
  }
  const std::string stem = f.workloads.empty() ? "openb_pod_list_default" : f.workloads.front();
  auto pods = sim::ReadPodList(f.trace_dir + "/" + stem + ".csv");
  if (!pods.ok()) {
    std::cerr << "gpusched-lab simulate: " << pods.status().message() << "\n";
    return 1;
  }
  sim::Workload w{.name = stem};
  std::vector<std::pair<int64_t, int64_t>> times;
  for (const auto& p : pods.value()) {
    if (p.creation_s < 0 || p.deletion_s < 0) {
      std::cerr << "gpusched-lab simulate: --tenants: pod " << p.name << " in " << stem
                << " has no creation_time or deletion_time\n";
      return 1;
    }
    w.pods.push_back(sim::ToPodRequest(p));
    times.emplace_back(p.creation_s, p.deletion_s);
  }
  w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
  // Research's and prod's streams start a quarter and a half of the (compressed) arrival span after batch's.
  int64_t last_creation = 0;
  for (const auto& [created, deleted] : times) {
    last_creation = std::max(last_creation, created);
  }
  const double speedup = f.arrival_speedup > 0 ? f.arrival_speedup : 20000;
  const auto delay = static_cast<int64_t>(static_cast<double>(last_creation) / speedup / 4);
  sim::TenantSpec spec{.queues = sim::DefaultTenantQueues(gpus, delay),
                       .policy = f.policies.empty() ? std::string("fgd") : f.policies.front(),
                       .seed = seed,
                       .arrival_speedup = speedup};
  auto streams = sim::DealToQueues(w.pods, times, spec.queues.size());
  // As the FGD protocol inflates the workload: clones until the pods ask for --tune times the cluster's GPUs.
  sim::InflateStreams(streams, static_cast<int64_t>(f.tune * static_cast<double>(gpus) * 1000), spec.queues.size(),
                      seed);
  const size_t gangs = f.gangs.empty() ? 0 : sim::GroupIntoGangs(streams, min_size, max_size, seed);
  auto outcome = sim::SimulateTenants(cluster, w, streams, spec);
  if (!outcome.ok()) {
    std::cerr << "gpusched-lab simulate: " << outcome.status().message() << "\n";
    return 1;
  }
  std::cout << "multi-tenant: cluster " << cluster.name << " (" << outcome->cluster_gpus << " GPUs), " << stem << " ("
            << streams.size() << " GPU pods dealt to " << spec.queues.size() << " queues), policy " << spec.policy
            << ", seed " << seed << ", arrivals " << spec.arrival_speedup << "x faster than the trace";
  if (!f.gangs.empty()) {
    std::cout << ", multi-GPU pods in " << gangs << " gangs of " << f.gangs;
  }
  std::cout << "\n";
  for (const auto& q : spec.queues) {
    std::cout << "  queue " << q.spec.name << ": guaranteed " << q.spec.guaranteed.gpus << " GPUs, weight "
              << q.spec.weight << ", stream from t=" << q.offset_s << " s\n";
  }
  sim::PrintTenantTable(std::cout, *outcome);
  std::cout << outcome->events << " event times, " << outcome->wall_seconds << " s";
  if (!f.gangs.empty()) {
    std::cout << "; event times with a gang holding GPUs below its minimum: " << outcome->partial_gang_events;
  }
  std::cout << "\n";
  if (!f.out.empty()) {
    if (auto written = sim::WriteTenantReport(f.out, *outcome); !written.ok()) {
      std::cerr << "gpusched-lab simulate: " << written.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << f.out << "/{shares.csv,shares.svg,shares.png}\n";
  }
  return 0;
}

// Trace replay with departures: every (workload, policy, seed), each pod at its creation time (compressed by
// --arrival-speedup) for its real lifetime; pods that do not fit wait.
int RunReplayMode(const SimulateFlags& f, const std::vector<unsigned long long>& seeds) {
  if (f.trace_dir.empty()) {
    std::cerr << "gpusched-lab simulate: --replay time needs --trace-dir (pods with creation and deletion times)\n";
    return 2;
  }
  const double speedup = f.arrival_speedup > 0 ? f.arrival_speedup : 1;
  auto nodes = sim::ReadNodeList(f.trace_dir + "/" + f.node_list + ".csv");
  if (!nodes.ok()) {
    std::cerr << "gpusched-lab simulate: " << nodes.status().message() << "\n";
    return 1;
  }
  sim::Cluster cluster{.name = f.node_list};
  for (const auto& n : nodes.value()) {
    cluster.nodes.push_back(sim::ToNode(n));
  }
  if (f.topology) {
    sim::ApplyTopologyTemplates(cluster);
  }
  struct Loaded {
    sim::Workload workload;
    std::vector<sim::ReplayPod> pods;
  };
  std::vector<Loaded> loaded;
  for (const std::string& stem :
       f.workloads.empty() ? std::vector<std::string>{"openb_pod_list_default"} : f.workloads) {
    auto pods = sim::ReadPodList(f.trace_dir + "/" + stem + ".csv");
    if (!pods.ok()) {
      std::cerr << "gpusched-lab simulate: " << pods.status().message() << "\n";
      return 1;
    }
    Loaded l{.workload = sim::Workload{.name = stem}};
    for (const auto& p : pods.value()) {
      if (p.creation_s < 0 || p.deletion_s < 0) {
        std::cerr << "gpusched-lab simulate: --replay time: pod " << p.name << " in " << stem
                  << " has no creation_time or deletion_time (the multigpu lists have none)\n";
        return 1;
      }
      core::PodRequest pod = sim::ToPodRequest(p);
      pod.priority = sim::PriorityOfQos(p.qos);
      l.workload.pods.push_back(pod);
      l.pods.push_back(sim::ReplayPod{.pod = std::move(pod), .creation_s = p.creation_s, .deletion_s = p.deletion_s});
    }
    l.workload.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(l.workload.pods));
    loaded.push_back(std::move(l));
  }
  const std::vector<std::string> policies =
      f.policies.empty() ? std::vector<std::string>{"fgd", "bestfit", "binpack", "random"} : f.policies;
  struct Job {
    const Loaded* data;
    sim::ReplaySpec spec;
  };
  std::vector<Job> jobs;
  for (const Loaded& l : loaded) {
    for (const std::string& p : policies) {
      for (auto s : seeds) {
        jobs.push_back(Job{.data = &l, .spec = sim::ReplaySpec{.policy = p, .seed = s, .arrival_speedup = speedup}});
      }
    }
  }
  std::vector<std::optional<common::Result<sim::ReplayOutcome>>> results(jobs.size());
  int64_t capacity_milli = 0;
  for (const core::Node& n : cluster.nodes) {
    capacity_milli += static_cast<int64_t>(n.gpus.size()) * common::kGpuMilli.value();
  }
  const auto target_milli = static_cast<int64_t>(f.tune * static_cast<double>(capacity_milli));
  sim::ParallelFor(jobs.size(), f.jobs, [&](size_t i) {
    std::vector<sim::ReplayPod> pods = jobs[i].data->pods;
    sim::InflateReplay(pods, target_milli, jobs[i].spec.seed);
    results[i] = sim::Replay(cluster, jobs[i].data->workload, pods, jobs[i].spec);
  });
  std::vector<sim::ReplayOutcome> runs;
  for (auto& r : results) {
    if (!r->ok()) {
      std::cerr << "gpusched-lab simulate: " << r->status().message() << "\n";
      return 1;
    }
    runs.push_back(std::move(r->value()));
  }
  std::cout << "replay with departures: cluster " << cluster.name << " (" << runs.front().cluster_gpus
            << " GPUs), pods cloned up to " << f.tune << "x its GPUs, arrivals " << speedup
            << "x faster than the trace, lifetimes real; " << runs.size() << " runs\n";
  sim::PrintReplayTable(std::cout, runs);
  std::cout << "waits: arrival to placement over the placed pods; never: still waiting when every placed pod had "
               "left; alloc: mean GPU compute allocated while the middle 80 % of the pods arrived\n";
  if (!f.out.empty()) {
    if (auto written = sim::WriteReplayReport(f.out, runs); !written.ok()) {
      std::cerr << "gpusched-lab simulate: " << written.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << f.out
              << "/{replay.csv,replay-allocation.csv,replay-allocation.svg,replay-allocation.png}\n";
  }
  return 0;
}

int RunSimulate(const SimulateFlags& f, const SimulateModes& modes) {
  std::vector<unsigned long long> seeds;
  if (auto err = ParseSeeds(f.seeds, seeds); !err.empty()) {
    std::cerr << "gpusched-lab simulate: " << err << "\n";
    return 2;
  }
  if (!f.colocation.source.empty()) {
    if (!modes.colocation) {
      std::cerr << "gpusched-lab simulate: --colocation needs the interference learner, which this build left out "
                   "(configured with GPUSCHED_SIM_ONLY=ON, as `make demo` does); build gpusched-lab with "
                   "`make build`\n";
      return 2;
    }
    return modes.colocation(f.colocation, seeds);
  }
  if (f.tenants) {
    return RunTenantMode(f, seeds.front());
  }
  const std::vector<std::string> known = policy::PolicyNames();
  for (const auto& p : f.policies) {
    auto mix = sim::ParsePolicyMix(p);
    if (!mix.ok()) {
      std::cerr << "gpusched-lab simulate: --policies: " << mix.status().message() << "\n";
      return 2;
    }
    for (const auto& [name, weight] : mix.value()) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::cerr << "gpusched-lab simulate: --policies: unknown policy '" << name << "'"
                  << common::NearestAndKnown(name, known) << "\n";
        return 2;
      }
    }
  }
  if (!f.replay.empty()) {
    return RunReplayMode(f, seeds);
  }
  if (f.from_cluster) {
    if (!modes.from_cluster) {
      std::cerr << "gpusched-lab simulate: --from-cluster needs the Kubernetes client, which this build left out "
                   "(configured with GPUSCHED_SIM_ONLY=ON, as `make demo` does); build gpusched-lab with "
                   "`make build`\n";
      return 2;
    }
    return modes.from_cluster(WhatIfFlags{.kubeconfig = f.kubeconfig,
                                          .context = f.context,
                                          .files = f.files,
                                          .policies = f.policies,
                                          .seed = seeds.front()});
  }
  std::vector<std::string> policies = f.policies.empty() ? policy::BenchmarkPolicyNames() : f.policies;

  sim::Cluster cluster;
  std::vector<sim::Workload> workloads;
  if (f.trace_dir.empty()) {
    if (!f.workloads.empty()) {
      std::cerr << "gpusched-lab simulate: --workloads needs --trace-dir (the folder with the openb CSV files)\n";
      return 2;
    }
    cluster = sim::BuiltinCluster();
    workloads.push_back(sim::BuiltinWorkload());
  } else {
    auto nodes = sim::ReadNodeList(f.trace_dir + "/" + f.node_list + ".csv");
    if (!nodes.ok()) {
      std::cerr << "gpusched-lab simulate: " << nodes.status().message() << "\n";
      return 1;
    }
    cluster.name = f.node_list;
    for (const auto& n : nodes.value()) {
      cluster.nodes.push_back(sim::ToNode(n));
    }
    const std::vector<std::string> stems =
        f.workloads.empty() ? std::vector<std::string>{"openb_pod_list_default"} : f.workloads;
    for (const auto& stem : stems) {
      auto pods = sim::ReadPodList(f.trace_dir + "/" + stem + ".csv");
      if (!pods.ok()) {
        std::cerr << "gpusched-lab simulate: " << pods.status().message() << "\n";
        return 1;
      }
      sim::Workload w{.name = stem};
      for (const auto& p : pods.value()) {
        w.pods.push_back(sim::ToPodRequest(p));
      }
      w.target = std::make_shared<const policy::TargetWorkload>(policy::TypicalPods(w.pods));
      workloads.push_back(std::move(w));
    }
  }

  if (f.topology) {
    sim::ApplyTopologyTemplates(cluster);
  }
  std::vector<sim::RunRequest> requests;
  for (const auto& w : workloads) {
    for (const auto& p : policies) {
      const std::vector<sim::GpuChoice> choices =
          f.topology ? std::vector<sim::GpuChoice>{sim::GpuChoice::kTopology, sim::GpuChoice::kGoGpuAllocator,
                                                   sim::GpuChoice::kFirstFit}
                     : std::vector<sim::GpuChoice>{sim::GpuChoice::kTopology};
      for (const sim::GpuChoice choice : choices) {
        for (auto s : seeds) {
          requests.push_back(sim::RunRequest{
              .workload = &w,
              .spec = sim::RunSpec{
                  .policy = p, .seed = s, .tune = f.tune, .gpu_choice = choice, .random_ties = f.random_ties}});
        }
      }
    }
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  const auto start = std::chrono::steady_clock::now();
  auto runs = sim::RunMany(cluster, requests, f.jobs, [&](size_t done, size_t total) {
    if (!tty) {
      return;
    }
    constexpr int kWidth = 40;
    const int filled = static_cast<int>(kWidth * done / total);
    std::fprintf(stderr, "\r[%s%s] %zu/%zu runs", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(kWidth - filled), '.').c_str(), done, total);
    if (done == total) {
      std::fprintf(stderr, "\n");
    }
  });
  if (!runs.ok()) {
    std::cerr << "gpusched-lab simulate: " << runs.status().message() << "\n";
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "cluster " << cluster.name << ": " << cluster.nodes.size() << " nodes, " << runs->front().total_gpus
            << " GPUs; " << requests.size() << " runs, tune " << f.tune << ", jobs " << f.jobs << "\n";
  for (sim::RunOutcome& r : runs.value()) {
    if (r.spec.random_ties) {
      r.spec.policy += " (random ties)";
    }
    if (r.spec.gpu_choice != sim::GpuChoice::kTopology) {
      r.spec.policy += " (" + std::string(sim::GpuChoiceName(r.spec.gpu_choice)) + ")";
    }
  }
  sim::PrintSummary(std::cout, runs.value());
  if (f.topology) {
    std::cout << "\nmulti-GPU pods on the nodes' topology (templates by GPU model; docs/configuration.md):\n";
    sim::PrintTopologySummary(std::cout, runs.value());
  }
  if (f.bound) {
    const int64_t capacity = runs->front().total_gpus * common::kGpuMilli.value();
    std::cout << "\nupper bound on GPU allocation at 100 % arrived, for the same arrivals (GPU-only packing "
                 "relaxation: no placement can allocate more), and what an offline packer (best fit decreasing, "
                 "same relaxation) reaches; docs/configuration.md\n";
    std::cout << fmt::format("{:<34} {:>5} {:>22} {:>22}\n", "workload", "seeds", "bound % mean (min-max)",
                             "offline % mean (min-max)");
    for (const auto& w : workloads) {
      double sum = 0, lo = 100, hi = 0;
      double packed_sum = 0, packed_lo = 100, packed_hi = 0;
      for (auto s : seeds) {
        const sim::PackingBound b = sim::BoundAtArrived(w, capacity, s, f.tune);
        const double v = 100.0 * static_cast<double>(b.bound_milli) / static_cast<double>(capacity);
        sum += v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
        const double packed = 100.0 * static_cast<double>(b.offline_packed_milli) / static_cast<double>(capacity);
        packed_sum += packed;
        packed_lo = std::min(packed_lo, packed);
        packed_hi = std::max(packed_hi, packed);
      }
      const auto n = static_cast<double>(seeds.size());
      std::cout << fmt::format("{:<34} {:>5} {:>8.2f} ({:.2f}-{:.2f}) {:>8.2f} ({:.2f}-{:.2f})\n", w.name, seeds.size(),
                               sum / n, lo, hi, packed_sum / n, packed_lo, packed_hi);
    }
  }
  std::cout << "total wall time " << wall << " s\n";
  if (!f.out.empty()) {
    common::Status written = sim::WriteReport(f.out, runs.value());
    if (!written.ok()) {
      std::cerr << "gpusched-lab simulate: " << written.message() << "\n";
      return 1;
    }
    std::cout << "wrote " << f.out
              << "/{alloc.csv,frag_amount.csv,frag_ratio.csv,unallocated.svg,unallocated.png,unallocated-zoom.svg,"
                 "unallocated-zoom.png}\n";
  }
  return 0;
}

}  // namespace

void AddSimulateCommand(CLI::App& app, SimulateFlags& flags, int& exit_code, SimulateModes modes) {
  CLI::App* cmd =
      app.add_subcommand("simulate",
                         "Replay a cluster trace through the scheduling code (FGD benchmark protocol); with no trace "
                         "options, the built-in cluster and workload");
  cmd->add_option("--trace-dir", flags.trace_dir, "Folder with the openb CSV files")->check(CLI::ExistingDirectory);
  cmd->add_option("--node-list", flags.node_list, "Node list file stem in --trace-dir")->capture_default_str();
  cmd->add_option("--workloads", flags.workloads, "Pod list file stems (default openb_pod_list_default)")
      ->delimiter(',');
  std::string names;
  for (const auto& n : policy::PolicyNames()) {
    names += (names.empty() ? "" : ", ") + n;
  }
  cmd->add_option("--policies", flags.policies,
                  "Comma list of policies (default: the six FGD-paper ones); a+b scores with both, a:3+b:1 with "
                  "weights (the first filters and picks GPUs). Known: " +
                      names)
      ->delimiter(',');
  cmd->add_option("--seeds", flags.seeds, "Seeds, e.g. 42-51 or 42,43")->capture_default_str();
  cmd->add_option("--tune", flags.tune, "Inflate the workload to this ratio of cluster GPUs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_option("--jobs", flags.jobs, "Runs in parallel")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--out", flags.out, "Write CSVs and plots to this folder");
  cmd->add_flag(
      "--tenants", flags.tenants,
      "Multi-tenant mode (needs --trace-dir): GPU queues prod (40 % guaranteed), research (20 %, weight 2) "
      "and batch (none) share the cluster, the trace's GPU pods dealt to them in turn with their real "
      "lifetimes, inflated to --tune times the cluster's GPUs; per queue: wait to first bind, reclaims, share "
      "over time");
  cmd->add_option("--replay", flags.replay,
                  "Replay mode 'time' (needs --trace-dir): pods arrive at their creation times and leave after their "
                  "real lifetimes; pods that do not fit wait (priority, then arrival) and are retried when others "
                  "leave; per policy: waits, pods never placed, GPU allocation over time")
      ->check(CLI::IsMember({"time"}));
  cmd->add_flag("--bound", flags.bound,
                "Also print, per workload, an upper bound on the GPU allocation any policy could reach at 100 % "
                "arrived with the same arrivals (a GPU-only packing relaxation)");
  cmd->add_flag("--from-cluster", flags.from_cluster,
                "What-if on the live cluster (read-only: lists nodes and pods): would the pods of -f fit, where, and "
                "under which policy would more fit (default policies binpack, spread, bestfit, fgd)");
  cmd->add_option("-f,--filename", flags.files,
                  "--from-cluster: a YAML file or directory of pods to place; repeatable");
  cmd->add_option("--kubeconfig", flags.kubeconfig,
                  "--from-cluster: kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  cmd->add_option("--context", flags.context, "--from-cluster: kubeconfig context (default: its current-context)");
  cmd->add_option("--arrival-speedup", flags.arrival_speedup,
                  "Multi-tenant and replay modes: divide the trace's creation times by this (lifetimes stay real; "
                  "default 20000 multi-tenant, 1 replay)")
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_flag("--random-ties", flags.random_ties,
                "Break score ties at random (kube-scheduler's rule) instead of the benchmark's stable node order");
  cmd->add_flag(
      "--topology", flags.topology,
      "Give the nodes GPU topology templates by model (NVSwitch, cube-mesh, NVLink pairs, PCIe) and run every "
      "policy also with go-gpuallocator's and first-fit GPU choice; prints how multi-GPU pods landed");
  cmd->add_option("--gangs", flags.gangs,
                  "Multi-tenant mode: group each queue's multi-GPU pods into gangs of MIN-MAX pods (e.g. 2-16), "
                  "placed all or nothing");
  ColocationFlags& c = flags.colocation;
  cmd->add_option("--colocation", c.source,
                  "Co-location mode: 'gavel' (or a CSV of pairs) jobs sharing GPUs, stretched by measured slowdowns");
  cmd->add_option("--interference-data", c.data,
                  "Co-location: folder of co-location measurements (gavel/, coscheml/, *.csv; docs/interference.md "
                  "says how it is laid out and where to download them); required with --colocation gavel");
  cmd->add_option("--gpu", c.gpu, "Co-location: GPU table (k80, p100, v100)")->capture_default_str();
  cmd->add_option("--nodes", c.nodes, "Co-location: nodes")->capture_default_str()->check(CLI::Range(1, 100000));
  cmd->add_option("--gpus-per-node", c.gpus_per_node, "Co-location: GPUs per node")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  cmd->add_option("--colocation-jobs", c.jobs, "Co-location: jobs")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  cmd->add_option("--interarrival", c.interarrival_s, "Co-location: mean seconds between arrivals (0 = all at once)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--min-sharing-gain", c.min_sharing_gain,
                  "Co-location: interference-aware waits for a partner that adds at least this progress rate (0..1)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-duration", c.min_duration_s, "Co-location: shortest isolated duration, s")
      ->capture_default_str();
  cmd->add_option("--max-duration", c.max_duration_s, "Co-location: longest isolated duration, s")
      ->capture_default_str();
  cmd->callback([&flags, &exit_code, modes = std::move(modes)] { exit_code = RunSimulate(flags, modes); });
}

}  // namespace gpusched::cli
