#include "gpusched/cli/colocation_command.h"

#include <chrono>
#include <cstdio>
#include <memory>

#include "gpusched/interference/dataset.h"
#include "gpusched/interference/eval.h"
#include "gpusched/interference/slowdown_models.h"
#include "gpusched/policy/registry.h"
#include "gpusched/sim/colocation.h"

namespace gpusched::cli {

int RunColocationMode(const ColocationFlags& f, const std::vector<unsigned long long>& seeds) {
  common::Result<interference::Dataset> data = common::InvalidArgument("");
  if (f.source == "gavel") {
    if (f.data.empty()) {
      std::fprintf(stderr,
                   "gpusched-lab simulate --colocation gavel: give --interference-data DIR, the folder of co-location "
                   "measurements (docs/interference.md says how it is laid out and where to download Gavel's)\n");
      return 2;
    }
    data = interference::LoadGavel(f.data + "/gavel/simulation_throughputs.json");
  } else {
    data = interference::LoadPairsCsv(f.source);
  }
  if (!data.ok()) {
    std::fprintf(stderr, "gpusched-lab simulate --colocation: %s\n", data.status().ToString().c_str());
    return 2;
  }
  const interference::GpuTable* table = data->Find(f.gpu);
  if (table == nullptr) {
    std::fprintf(stderr, "gpusched-lab simulate --colocation: the data has no %s table\n", f.gpu.c_str());
    return 2;
  }
  const size_t ti = static_cast<size_t>(table - data->gpus.data());
  // Applications measured on this GPU.
  std::vector<std::string> apps;
  for (size_t i = 0; i < data->size(); ++i) {
    for (size_t j = 0; j < data->size(); ++j) {
      if (interference::Dataset::Fits(data->At(*table, i, j))) {
        apps.push_back(data->apps[i].name);
        break;
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto held_out = interference::LeaveOneOutPredictions(*data, ti, interference::ModelOptions{});
  if (!held_out.ok()) {
    std::fprintf(stderr, "gpusched-lab simulate --colocation: %s\n", held_out.status().ToString().c_str());
    return 1;
  }
  const auto truth = interference::MeasuredSlowdown(*data);
  const auto predicted = interference::HeldOutSlowdown(*data, ti, *held_out);

  auto make = [](const char* name, policy::PolicyOptions o) {
    auto p = policy::MakePolicy(name, o);
    return p.ok() ? std::move(*p) : nullptr;
  };
  policy::PolicyOptions aware_options;
  aware_options.interference_aware.min_sharing_gain = f.min_sharing_gain;
  policy::PolicyOptions greedy_options;
  greedy_options.interference_aware.objective = policy::InterferenceAwareOptions::Objective::kIncomingOnly;
  greedy_options.interference_aware.refuse_harmful_pairs = false;  // Co-scheML only avoids pairs its table forbids
  const auto aware = make("interference-aware", aware_options);
  const auto greedy = make("interference-aware", greedy_options);
  const auto binpack = make("binpack", {});
  const auto random = make("random", {});
  if (!aware || !greedy || !binpack || !random) {
    std::fprintf(stderr, "gpusched-lab simulate --colocation: a policy could not be built\n");
    return 1;
  }
  std::vector<sim::ColocationEntrant> entrants = {
      {.label = "interference-aware", .policy = aware.get(), .predictor = predicted.get()},
      {.label = "coscheml-greedy", .policy = greedy.get(), .predictor = predicted.get()},
      {.label = "binpack", .policy = binpack.get(), .predictor = nullptr},
      {.label = "random", .policy = random.get(), .predictor = nullptr},
  };
  if (f.oracle) {
    entrants.push_back({.label = "interference-aware (measured)", .policy = aware.get(), .predictor = truth.get()});
  }
  sim::ColocationSpec spec;
  spec.apps = apps;
  spec.gpu_type = f.gpu;
  spec.nodes = f.nodes;
  spec.gpus_per_node = f.gpus_per_node;
  spec.jobs = f.jobs;
  spec.mean_interarrival_s = f.interarrival_s;
  spec.min_duration_s = f.min_duration_s;
  spec.max_duration_s = f.max_duration_s;
  const std::vector<uint64_t> s64(seeds.begin(), seeds.end());
  auto summaries = sim::CompareColocation(spec, s64, *truth, entrants);
  if (!summaries.ok()) {
    std::fprintf(stderr, "gpusched-lab simulate --colocation: %s\n", summaries.status().ToString().c_str());
    return summaries.status().code() == common::StatusCode::kInvalidArgument ? 2 : 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "co-location: %s %s, %d nodes x %d GPUs, %d jobs from %zu applications, mean gap %.0f s, isolated "
      "durations %.0f..%.0f s, %zu seeds (medians)\n",
      f.source.c_str(), f.gpu.c_str(), f.nodes, f.gpus_per_node, f.jobs, apps.size(), f.interarrival_s,
      f.min_duration_s, f.max_duration_s, seeds.size());
  std::printf("%s", sim::FormatColocationTable(*summaries).c_str());
  std::printf(
      "(run times stretched by the measured slowdowns; interference-aware and coscheml-greedy see "
      "leave-one-application-out predictions; %.1f s)\n",
      secs);
  for (const auto& s : *summaries) {
    std::printf("RESULT colocation policy=\"%s\" avg_jct_s=%.0f makespan_s=%.0f oom_retries=%.0f\n", s.label.c_str(),
                s.median.avg_jct_s, s.median.makespan_s, s.median.oom_retries);
  }
  return 0;
}

}  // namespace gpusched::cli
