#include "gpusched/policy/fgd_policy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {

namespace {

// ⌊kMaxScore · scale · sigmoid(ΔF / 1000)⌋: fgd's score, resolved `scale` times finer.
int64_t SigmoidScore(double delta_milli, int64_t scale) {
  return static_cast<int64_t>(
      std::floor(static_cast<double>(kMaxScore * scale) / (1.0 + std::exp(-delta_milli / 1000.0))));
}

common::Status NeedTargetWorkload(std::string_view policy, const PolicyOptions& options) {
  if (options.target_workload == nullptr || options.target_workload->classes.empty()) {
    return common::InvalidArgument("policy " + std::string(policy) +
                                   " needs a target workload (the typical pods of a trace); none was given or it "
                                   "is empty");
  }
  return common::Status::Ok();
}

}  // namespace

double ModelScarcity::Reserved(const std::string& model) const {
  auto it = reserved.find(model);
  return it == reserved.end() ? 0.0 : it->second;
}

ModelScarcity ComputeModelScarcity(const TargetWorkload& m, const std::map<std::string, int64_t>& gpus_by_model) {
  int64_t supply = 0;
  for (const auto& [model, gpus] : gpus_by_model) {
    supply += std::max<int64_t>(0, gpus);
  }
  double demand = 0;
  std::map<std::string, double> need;
  for (const TaskClass& c : m.classes) {
    const double milli = c.weight * c.gpu_count * static_cast<double>(c.gpu_milli.value());
    if (milli <= 0) {
      continue;
    }
    demand += milli;
    std::vector<std::string> named;
    int64_t named_gpus = 0;
    for (const std::string& x : c.models) {
      auto it = gpus_by_model.find(x);
      if (it != gpus_by_model.end() && it->second > 0 && std::find(named.begin(), named.end(), x) == named.end()) {
        named.push_back(x);
        named_gpus += it->second;
      }
    }
    for (const std::string& x : named) {
      need[x] += milli * static_cast<double>(gpus_by_model.at(x)) / static_cast<double>(named_gpus);
    }
  }
  ModelScarcity out;
  if (supply <= 0 || demand <= 0) {
    return out;
  }
  for (const auto& [model, gpus] : gpus_by_model) {
    if (gpus > 0) {
      auto it = need.find(model);
      const double demand_share = it == need.end() ? 0.0 : it->second / demand;
      const double supply_share = static_cast<double>(gpus) / static_cast<double>(supply);
      out.reserved[model] = std::min(1.0, demand_share / supply_share);
    }
  }
  return out;
}

common::Result<std::unique_ptr<PlacementPolicy>> FgdPolicy::Create(const PolicyOptions& options) {
  GPUSCHED_RETURN_IF_ERROR(NeedTargetWorkload("fgd", options));
  return std::unique_ptr<PlacementPolicy>(new FgdPolicy(options.target_workload));
}

common::Result<std::unique_ptr<PlacementPolicy>> FgdPolicy::CreateScarcity(const PolicyOptions& options) {
  GPUSCHED_RETURN_IF_ERROR(NeedTargetWorkload("fgd-scarcity", options));
  return std::unique_ptr<PlacementPolicy>(
      new FgdPolicy(options.target_workload, ComputeModelScarcity(*options.target_workload, options.gpus_by_model),
                    FeedPerGpuMilli(*options.target_workload)));
}

FgdPolicy::Best FgdPolicy::Evaluate(const core::PodRequest& pod, const core::NodeView& node) const {
  const size_t n = node.gpus.size();
  std::vector<int64_t> free(n);
  for (size_t i = 0; i < n; ++i) {
    free[i] = node.gpus[i].free.value();
  }
  const double before =
      Fragmentation(index_, node, node.cpu_free, free) + Stranded(node, node.cpu_free, node.memory_free, free);
  const common::MilliCpu cpu_after = node.cpu_free - pod.cpu;
  const common::MiB memory_after = node.memory_free - pod.memory;
  const core::PodShape s = core::ShapeOf(pod);

  if (s.IsSharing() && pod.containers.size() == 1) {
    const core::GpuRequest& c = pod.containers.front();
    Best best{.score = -1};
    // GPUs of one model with equal free milli give the same n' up to order, and F is order-free: evaluate the
    // first (lowest index) of each such group only.
    std::vector<std::pair<int64_t, const std::string*>> seen;
    for (size_t i = 0; i < n; ++i) {
      if (!GpuCanHost(c, node, node.gpus, i)) {
        continue;
      }
      const std::pair<int64_t, const std::string*> key{free[i], &node.GpuModel(i)};
      if (std::any_of(seen.begin(), seen.end(),
                      [&](const auto& k) { return k.first == key.first && *k.second == *key.second; })) {
        continue;
      }
      seen.push_back(key);
      // Off the plan, the room the share leaves counts kOffPlanWeight times (fgd-scarcity; fgd's plan is empty).
      const int64_t room_after = free[i] - c.milli_per_gpu.value();
      const double off_plan = plan_.Follows(common::kGpuMilli.value() - free[i], c.milli_per_gpu.value())
                                  ? 0.0
                                  : kOffPlanWeight * static_cast<double>(room_after);
      free[i] = room_after;
      const int64_t score = SigmoidScore(before - Fragmentation(index_, node, cpu_after, free) -
                                             Stranded(node, cpu_after, memory_after, free) - off_plan,
                                         scale_);
      free[i] += c.milli_per_gpu.value();
      if (score > best.score) {
        best = Best{.score = score, .gpu = i};
      }
    }
    return best.score < 0 ? Best{} : best;
  }

  // n' = n.Sub(pod): each container takes its GPUs in ascending free-milli order.
  std::vector<core::GpuState> gpus = node.gpus;
  for (const auto& c : pod.containers) {
    std::vector<size_t> candidates;
    for (size_t i = 0; i < n; ++i) {
      if (GpuCanHost(c, node, gpus, i)) {
        candidates.push_back(i);
      }
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [&](size_t a, size_t b) { return gpus[a].free < gpus[b].free; });
    const bool whole = WantsWhole(c);
    for (size_t k = 0; k < candidates.size() && k < static_cast<size_t>(c.count); ++k) {
      core::GpuState& g = gpus[candidates[k]];
      g.free -= whole ? common::kGpuMilli : c.milli_per_gpu;
      g.share_group = core::JoinShareGroup(g.share_group, g.holders, c.share_group);
      g.holders += 1;
      g.exclusive = whole;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    free[i] = gpus[i].free.value();
  }
  return Best{.score = SigmoidScore(
                  before - Fragmentation(index_, node, cpu_after, free) - Stranded(node, cpu_after, memory_after, free),
                  scale_)};
}

double FgdPolicy::Stranded(const core::NodeView& node, common::MilliCpu cpu_free, common::MiB memory_free,
                           std::span<const int64_t> free_milli) const {
  if (feed_.cpu_per_milli <= 0 && feed_.memory_per_milli <= 0) {
    return 0;
  }
  int64_t idle = 0;
  for (size_t i = 0; i < free_milli.size(); ++i) {
    if (node.node->gpus[i].healthy) {
      idle += free_milli[i];
    }
  }
  // The GPU milli the node's CPU, and its memory, could still serve with M's typical pods.
  double fed = static_cast<double>(idle);
  if (feed_.cpu_per_milli > 0) {
    fed = std::min(fed, static_cast<double>(std::max<int64_t>(0, cpu_free.value())) / feed_.cpu_per_milli);
  }
  if (feed_.memory_per_milli > 0) {
    fed = std::min(fed, static_cast<double>(std::max<int64_t>(0, memory_free.value())) / feed_.memory_per_milli);
  }
  return kStrandedWeight * (static_cast<double>(idle) - fed);
}

Feed FeedPerGpuMilli(const TargetWorkload& m) {
  double cpu = 0;
  double memory = 0;
  double milli = 0;
  for (const TaskClass& c : m.classes) {
    if (c.gpu_count > 0) {
      cpu += c.weight * static_cast<double>(c.cpu.value());
      memory += c.weight * static_cast<double>(c.memory.value());
      milli += c.weight * c.gpu_count * static_cast<double>(c.gpu_milli.value());
    }
  }
  return milli > 0 ? Feed{.cpu_per_milli = cpu / milli, .memory_per_milli = memory / milli} : Feed{};
}

int64_t FgdPolicy::ScarcityPenalty(const core::PodRequest& pod, const core::NodeView& node) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (scarcity_.reserved.empty() || s.gpu_count == 0) {
    return 0;
  }
  double least = 1.0;  // the least reserved model the pod may use
  for (const auto& [model, r] : scarcity_.reserved) {
    if (s.AllowsModel(model)) {
      least = std::min(least, r);
    }
  }
  double here = 0;  // the most reserved model of this node that the pod may use
  const std::string* last = nullptr;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const std::string& model = node.GpuModel(i);
    if (last != nullptr && model == *last) {
      continue;  // a node's GPUs are mostly of one model
    }
    last = &model;
    if (s.AllowsModel(model)) {
      here = std::max(here, scarcity_.Reserved(model));
    }
  }
  return std::lround(kScarcityWeight * static_cast<double>(scale_) * std::max(0.0, here - least));
}

int64_t FgdPolicy::Score(const core::PodRequest& pod, const core::NodeView& node, const Snapshot&) const {
  return std::max<int64_t>(0, Evaluate(pod, node).score - ScarcityPenalty(pod, node));
}

std::vector<core::ContainerAllocation> FgdPolicy::SelectGpus(const core::PodRequest& pod, const core::NodeView& node,
                                                             common::Rng&) const {
  const core::PodShape s = core::ShapeOf(pod);
  if (s.IsSharing() && pod.containers.size() == 1) {
    const size_t gpu = Evaluate(pod, node).gpu;
    return SelectGpusWith(pod, node,
                          [gpu](const core::GpuRequest&, const core::NodeView&, std::span<const core::GpuState>,
                                std::span<const size_t>) { return gpu; });
  }
  return SelectGpusBest(pod, node);
}

}  // namespace gpusched::policy
