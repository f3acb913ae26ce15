#include "gpusched/policy/interference_aware_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "gpusched/policy/binpack_policy.h"
#include "gpusched/policy/gpu_fit.h"

namespace gpusched::policy {
namespace {

using Objective = InterferenceAwareOptions::Objective;

// Terms closer than this are equal: they come from sums of doubles, and a rounding difference must not beat the
// tightest-fit tie break.
constexpr double kTermEpsilon = 1e-9;
// SelectGpusRanked's rank of an unusable GPU: after every usable one (ranks of usable GPUs are −T(g) >= −100).
constexpr double kUnusableRank = 1e9;

double Weighted(int64_t wi, double interference, int64_t wp, double packing) {
  const auto i = static_cast<double>(wi);
  const auto p = static_cast<double>(wp);
  return (i * interference + p * packing) / (i + p);
}

// Sharing predicted to be worse than taking turns (InterferenceAwareOptions::refuse_harmful_pairs): the incoming
// pod's progress rate 1/s plus what the residents keep, Σ 1/s_r, is below what they have now. The residents' own
// current slowdowns are not in the forecast, so each is taken as 1 + (its share of residents_added): exact for one
// resident (1/s(A|B) + 1/s(B|A) < 1), the even-split approximation for more.
bool Harmful(const GpuInterference& f, double min_gain) {
  if (f.residents <= 0 || !(f.incoming > 0)) {
    return false;
  }
  const double r = static_cast<double>(f.residents);
  const double added_each = std::max(f.residents_added, 0.0) / r;
  const double lost = r * (1.0 - 1.0 / (1.0 + added_each));
  return 1.0 / f.incoming - lost < min_gain;
}

}  // namespace

common::Result<std::unique_ptr<PlacementPolicy>> InterferenceAwarePolicy::Create(const PolicyOptions& options) {
  const InterferenceAwareOptions& o = options.interference_aware;
  if (o.interference_weight < 0) {
    return common::InvalidArgument("interference-aware: interference_weight is " +
                                   std::to_string(o.interference_weight) + ", must be >= 0");
  }
  if (o.packing_weight < 0) {
    return common::InvalidArgument("interference-aware: packing_weight is " + std::to_string(o.packing_weight) +
                                   ", must be >= 0");
  }
  if (o.interference_weight == 0 && o.packing_weight == 0) {
    return common::InvalidArgument(
        "interference-aware: interference_weight and packing_weight are both 0; at least one must be positive");
  }
  if (!(o.min_sharing_gain >= 0 && o.min_sharing_gain <= 1)) {
    return common::InvalidArgument("interference-aware: min_sharing_gain is " + std::to_string(o.min_sharing_gain) +
                                   ", must be within 0..1");
  }
  if (o.objective != Objective::kSum && o.objective != Objective::kIncomingOnly) {
    return common::InvalidArgument("interference-aware: objective " + std::to_string(static_cast<int>(o.objective)) +
                                   " is unknown (kSum or kIncomingOnly)");
  }
  return std::unique_ptr<PlacementPolicy>(new InterferenceAwarePolicy(o));
}

std::optional<double> InterferenceAwarePolicy::GpuCost(const core::NodeView& node, size_t i,
                                                       const Snapshot& snapshot) const {
  if (snapshot.interference == nullptr) {
    return 1.0;
  }
  const GpuInterference* f = snapshot.interference->Find(node.name(), i);
  if (f == nullptr || f->residents == 0) {
    return 1.0;
  }
  if (!f->feasible) {
    return std::nullopt;
  }
  if (options_.refuse_harmful_pairs && Harmful(*f, options_.min_sharing_gain)) {
    return std::nullopt;
  }
  const double cost = options_.objective == Objective::kIncomingOnly ? f->incoming : f->Cost();
  // A NaN from a model would poison every comparison; count it as the worst cost rather than as empty.
  return std::isfinite(cost) ? cost : std::numeric_limits<double>::max();
}

std::optional<double> InterferenceAwarePolicy::GpuTerm(const core::NodeView& node, std::span<const core::GpuState> gpus,
                                                       size_t i, int64_t node_usage, const Snapshot& snapshot) const {
  const std::optional<double> cost = GpuCost(node, i, snapshot);
  if (!cost.has_value()) {
    return std::nullopt;
  }
  const double interference = 100.0 / std::max(*cost, 1.0);
  const double gpu_usage =
      std::clamp(static_cast<double>(common::kGpuMilli.value() - gpus[i].free.value()) / 10.0, 0.0, 100.0);
  const double packing = (gpu_usage + static_cast<double>(node_usage)) / 2.0;
  return Weighted(options_.interference_weight, interference, options_.packing_weight, packing);
}

std::vector<core::ContainerAllocation> InterferenceAwarePolicy::Choose(const core::PodRequest& pod,
                                                                       const core::NodeView& node,
                                                                       const Snapshot& snapshot) const {
  const int64_t node_usage = UsageAfterPercent(pod, node);
  const bool multi_share = std::any_of(pod.containers.begin(), pod.containers.end(),
                                       [](const core::GpuRequest& c) { return !WantsWhole(c) && c.count > 1; });
  if (multi_share) {
    std::vector<double> rank(node.gpus.size(), kUnusableRank);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      if (std::optional<double> t = GpuTerm(node, node.gpus, i, node_usage, snapshot); t.has_value()) {
        rank[i] = -*t;
      }
    }
    return SelectGpusRanked(pod, node, rank);
  }
  return SelectGpusWith(pod, node,
                        [&](const core::GpuRequest&, const core::NodeView& n, std::span<const core::GpuState> gpus,
                            std::span<const size_t> candidates) {
                          size_t best = candidates.size();  // index into candidates; none usable yet
                          double best_term = 0;
                          for (size_t k = 0; k < candidates.size(); ++k) {
                            const size_t i = candidates[k];
                            const std::optional<double> t = GpuTerm(n, gpus, i, node_usage, snapshot);
                            if (!t.has_value()) {
                              continue;
                            }
                            // Candidates come in index order, so keeping the first of equals keeps the lowest index.
                            const bool better =
                                best == candidates.size() || *t > best_term + kTermEpsilon ||
                                (*t > best_term - kTermEpsilon && gpus[i].free < gpus[candidates[best]].free);
                            if (better) {
                              best = k;
                              best_term = *t;
                            }
                          }
                          if (best != candidates.size()) {
                            return candidates[best];
                          }
                          // Nothing usable: the tightest fit, a valid placement the Score of 0 already discourages.
                          size_t tightest = candidates[0];
                          for (size_t i : candidates) {
                            if (gpus[i].free < gpus[tightest].free) {
                              tightest = i;
                            }
                          }
                          return tightest;
                        });
}

Fit InterferenceAwarePolicy::FilterWithSnapshot(const core::PodRequest& pod, const core::NodeView& node,
                                                const Snapshot& snapshot) const {
  Fit fit = Filter(pod, node);
  if (!fit.fits() || !options_.avoid_predicted_oom || snapshot.interference == nullptr || !pod.RequestsGpu()) {
    return fit;
  }
  // Choose takes usable GPUs first, so a chosen unusable GPU means the node has too few usable ones.
  for (const core::ContainerAllocation& c : Choose(pod, node, snapshot)) {
    for (const core::GpuShare& share : c.gpus) {
      if (!GpuCost(node, static_cast<size_t>(share.index), snapshot).has_value()) {
        const GpuInterference* f = snapshot.interference->Find(node.name(), static_cast<size_t>(share.index));
        const bool memory = f != nullptr && !f->feasible;
        return Fit::Unschedulable("no GPU with room is usable: GPU " + std::to_string(share.index) +
                                  (memory ? " is predicted not to fit in memory next to its residents"
                                          : " is predicted to run slower shared than its residents taking turns") +
                                  " (interference model)");
      }
    }
  }
  return fit;
}

int64_t InterferenceAwarePolicy::Score(const core::PodRequest& pod, const core::NodeView& node,
                                       const Snapshot& snapshot) const {
  const int64_t node_usage = UsageAfterPercent(pod, node);
  if (!pod.RequestsGpu()) {
    return std::clamp<int64_t>(std::llround(Weighted(options_.interference_weight, 100.0, options_.packing_weight,
                                                     static_cast<double>(node_usage))),
                               0, kMaxScore);
  }
  double sum = 0;
  int64_t n = 0;
  for (const core::ContainerAllocation& c : Choose(pod, node, snapshot)) {
    for (const core::GpuShare& share : c.gpus) {
      const std::optional<double> t = GpuTerm(node, node.gpus, static_cast<size_t>(share.index), node_usage, snapshot);
      if (!t.has_value()) {
        return 0;
      }
      sum += *t;
      ++n;
    }
  }
  if (n == 0) {
    return 0;
  }
  return std::clamp<int64_t>(std::llround(sum / static_cast<double>(n)), 0, kMaxScore);
}

std::vector<core::ContainerAllocation> InterferenceAwarePolicy::SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                                       const core::NodeView& node,
                                                                                       const Snapshot& snapshot,
                                                                                       common::Rng&) const {
  return Choose(pod, node, snapshot);
}

}  // namespace gpusched::policy
