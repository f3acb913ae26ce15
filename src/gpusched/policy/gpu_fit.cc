#include "gpusched/policy/gpu_fit.h"

#include "gpusched/policy/topology.h"

#include <algorithm>
#include <string>

#include "gpusched/common/check.h"

namespace gpusched::policy {

using common::kGpuMilli;

namespace {

std::string GpuName(const core::NodeView& node, size_t i) {
  return "GPU " + std::to_string(i) + " (" + node.node->gpus[i].model + ")";
}

std::string ModelList(const std::vector<std::string>& models) {
  std::string s;
  for (const auto& m : models) {
    s += (s.empty() ? "" : "|") + m;
  }
  return s;
}

// A GPU that already has as many sharers as its node's device plugin has device ids for it.
bool AtSharerLimit(const core::Gpu& spec, const core::GpuState& g) {
  return spec.max_sharers > 0 && g.holders >= spec.max_sharers;
}

// Why container c does not fit; the states are those it would see.
Fit Explain(const core::GpuRequest& c, const core::NodeView& node, std::span<const core::GpuState> gpus) {
  // Could an empty node host it? If not, nothing on this node could make it fit.
  int32_t could = 0;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const core::Gpu& spec = node.node->gpus[i];
    if (spec.healthy && c.AllowsModel(spec.model) && spec.memory >= c.MemoryOn(spec)) {
      ++could;
    }
  }
  const std::string who = "container " + c.container + ": ";
  if (could < c.count) {
    std::string what = std::to_string(c.count) + " GPU(s)";
    if (!c.models.empty()) {
      what += " of model " + ModelList(c.models);
    }
    if (c.memory_per_gpu.value() > 0) {
      what += " with " + std::to_string(c.memory_per_gpu.value()) + " MiB";
    }
    std::string have = std::to_string(gpus.size()) + " GPU(s)";
    if (!gpus.empty()) {
      have += " (" + node.node->gpus[0].model + ", " + std::to_string(node.node->gpus[0].memory.value()) + " MiB)";
    }
    return Fit::Unresolvable(who + "needs " + what + ", node has " + have + ", " + std::to_string(could) + " usable");
  }
  if (WantsWhole(c)) {
    int32_t free = 0;
    for (size_t i = 0; i < gpus.size(); ++i) {
      free += GpuCanHost(c, node, gpus, i) ? 1 : 0;
    }
    return Fit::Unschedulable(who + "needs " + std::to_string(c.count) + " fully free GPU(s), " + std::to_string(free) +
                              " of " + std::to_string(gpus.size()) + " free");
  }
  // A share: name the GPU that came closest.
  size_t best = gpus.size();
  int32_t full = 0;     // usable GPUs with as many sharers as they have device ids
  int32_t tenants = 0;  // usable GPUs shared by pods it may not share with (shareWithin)
  for (size_t i = 0; i < gpus.size(); ++i) {
    const core::Gpu& spec = node.node->gpus[i];
    if (!spec.healthy || gpus[i].exclusive || !c.AllowsModel(spec.model)) {
      continue;
    }
    if (AtSharerLimit(spec, gpus[i])) {
      ++full;
      continue;
    }
    if (!core::ShareGroupAdmits(gpus[i].share_group, gpus[i].holders, c.share_group)) {
      ++tenants;
      continue;
    }
    if (best == gpus.size() || gpus[i].free > gpus[best].free) {
      best = i;
    }
  }
  std::string need = std::to_string(c.milli_per_gpu.value()) + " milli";
  if (c.memory_percent > 0) {
    need += " and " + std::to_string(c.memory_percent) + "% of the GPU's memory";
  } else if (c.memory_per_gpu.value() > 0) {
    need += " and " + std::to_string(c.memory_per_gpu.value()) + " MiB";
  }
  // What the pod needs, before the first "; ": the part a summary groups by (sched::ReasonGroup), so it carries
  // no node's numbers; shareWithin shows there, since it is why such pods wait.
  const std::string needs = who + "needs " + need + " on " + std::to_string(c.count) + " GPU(s)" +
                            (tenants > 0 ? " not shared by another namespace or queue (shareWithin)" : "");
  const std::string others =
      tenants > 0 ? "; " + std::to_string(tenants) + " GPU(s) are shared by another namespace or queue" : std::string();
  if (best == gpus.size()) {
    if (tenants > 0 && full == 0) {
      return Fit::Unschedulable(needs +
                                "; every usable GPU is held exclusively or shared by another namespace or "
                                "queue (" +
                                std::to_string(tenants) + " such GPU(s))");
    }
    return Fit::Unschedulable(needs + "; every usable GPU is " +
                              (full > 0 ? "shared by as many pods as the node's device plugin admits (" +
                                              std::to_string(full) + " such GPU(s)) or held exclusively"
                                        : std::string("held exclusively")) +
                              others);
  }
  return Fit::Unschedulable(needs + "; most free is " + GpuName(node, best) + " with " +
                            std::to_string(gpus[best].free.value()) + " milli and " +
                            std::to_string(gpus[best].memory_free.value()) + " MiB free" + others);
}

void Take(const core::GpuRequest& c, const core::NodeView& node, std::span<core::GpuState> gpus, size_t i,
          core::ContainerAllocation& out) {
  core::GpuState& g = gpus[i];
  const core::Gpu& spec = node.node->gpus[i];
  core::GpuShare share{.index = static_cast<int32_t>(i), .uuid = spec.uuid, .numa_node = spec.numa_node};
  if (WantsWhole(c)) {
    share.milli = kGpuMilli;
    share.memory = g.memory_free;  // an exclusive GPU is charged whole
    share.exclusive = true;
  } else {
    share.milli = c.milli_per_gpu;
    share.memory = c.MemoryOn(spec);
  }
  g.free -= share.milli;
  g.memory_free -= share.memory;
  g.share_group = core::JoinShareGroup(g.share_group, g.holders, c.share_group);
  g.holders += 1;
  g.exclusive = share.exclusive;
  out.gpus.push_back(std::move(share));
}

// The fitting candidate with the least free milli, lowest index on ties: the "best" choice, and the GPU FitFrom
// gives a single shared GPU.
size_t Tightest(std::span<const core::GpuState> gpus, std::span<const size_t> candidates) {
  size_t best = candidates[0];
  for (size_t i : candidates) {
    if (gpus[i].free < gpus[best].free) {
      best = i;
    }
  }
  return best;
}

// A share about to open a fully free GPU takes, among the fully free candidates interchangeable with it (same
// model, same free memory), the one whose loss breaks the least NVLink connectivity (ChooseWholeGpus for one GPU).
// Any other pick, and any node without topology, stays as it is.
size_t SpareLinks(const core::NodeView& node, std::span<const core::GpuState> gpus, std::span<const size_t> candidates,
                  size_t pick) {
  if (!gpus[pick].FullyFree() || !HasTopology(*node.node)) {
    return pick;
  }
  std::vector<size_t> same;
  for (size_t i : candidates) {
    if (gpus[i].FullyFree() && gpus[i].memory_free == gpus[pick].memory_free &&
        node.node->gpus[i].model == node.node->gpus[pick].model) {
      same.push_back(i);
    }
  }
  if (same.size() < 2) {
    return pick;
  }
  // The connectivity that counts is the one among fully free GPUs: later whole-GPU pods choose among those.
  return ChooseWholeGpus(*node.node, same, 1).front();
}

// Places containers [first, end) one after another on `gpus`: whole GPUs at the lowest indices, shares on the
// tightest fitting GPUs (ascending free milli, then index). Explains the first container that does not fit.
Fit FitFrom(const core::PodRequest& pod, const core::NodeView& node, std::vector<core::GpuState> gpus, size_t first) {
  for (size_t k = first; k < pod.containers.size(); ++k) {
    const core::GpuRequest& c = pod.containers[k];
    std::vector<size_t> candidates;
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (GpuCanHost(c, node, gpus, i)) {
        candidates.push_back(i);
      }
    }
    if (static_cast<int32_t>(candidates.size()) < c.count) {
      return Explain(c, node, gpus);
    }
    if (!WantsWhole(c)) {
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](size_t a, size_t b) { return gpus[a].free < gpus[b].free; });
    }
    core::ContainerAllocation scratch;
    for (int32_t n = 0; n < c.count; ++n) {
      Take(c, node, gpus, candidates[static_cast<size_t>(n)], scratch);
    }
  }
  return Fit::Fits();
}

}  // namespace

bool GpuCanHost(const core::GpuRequest& c, const core::NodeView& node, std::span<const core::GpuState> gpus, size_t i) {
  const core::Gpu& spec = node.node->gpus[i];
  const core::GpuState& g = gpus[i];
  if (!spec.healthy || g.exclusive || !c.AllowsModel(spec.model)) {
    return false;
  }
  if (WantsWhole(c)) {
    return g.holders == 0 && g.free >= kGpuMilli && g.memory_free >= c.MemoryOn(spec);
  }
  return g.free >= c.milli_per_gpu && g.memory_free >= c.MemoryOn(spec) && !AtSharerLimit(spec, g) &&
         core::ShareGroupAdmits(g.share_group, g.holders, c.share_group);
}

namespace {

// gpusched.io/topology: required: every container of 2 or more whole GPUs must find that many free GPUs all
// NVLink-joined (each container judged on the node's free GPUs as they are).
Fit NvlinkFit(const core::PodRequest& pod, const core::NodeView& node) {
  for (const core::GpuRequest& c : pod.containers) {
    if (!WantsWhole(c) || c.count < 2) {
      continue;
    }
    std::vector<size_t> free;
    std::vector<size_t> usable;
    const core::NodeView empty = core::NodeView::Empty(node.node);
    for (size_t i = 0; i < node.gpus.size(); ++i) {
      if (GpuCanHost(c, node, node.gpus, i)) {
        free.push_back(i);
      }
      if (GpuCanHost(c, empty, empty.gpus, i)) {
        usable.push_back(i);
      }
    }
    const auto want = static_cast<size_t>(c.count);
    const std::string who = "container " + c.container + " needs " + std::to_string(c.count) +
                            " GPUs all NVLink-joined (gpusched.io/topology: required); ";
    const size_t on_node = LargestNvlinkGroup(*node.node, usable);
    if (on_node < want) {
      return Fit::Unresolvable(who + "the node's largest NVLink-joined group is " + std::to_string(on_node));
    }
    const size_t now = LargestNvlinkGroup(*node.node, free);
    if (now < want) {
      return Fit::Unschedulable(who + "its largest free NVLink-joined group is " + std::to_string(now));
    }
  }
  return Fit::Fits();
}

Fit FitGpusAnyTopology(const core::PodRequest& pod, const core::NodeView& node);

}  // namespace

Fit FitGpus(const core::PodRequest& pod, const core::NodeView& node) {
  Fit fit = FitGpusAnyTopology(pod, node);
  if (fit.fits() && pod.topology == core::TopologyNeed::kRequired) {
    return NvlinkFit(pod, node);
  }
  return fit;
}

namespace {

Fit FitGpusAnyTopology(const core::PodRequest& pod, const core::NodeView& node) {
  if (pod.containers.size() == 1) {  // the common case, without copying the GPU states
    const auto& c = pod.containers.front();
    int32_t n = 0;
    for (size_t i = 0; i < node.gpus.size() && n < c.count; ++i) {
      n += GpuCanHost(c, node, node.gpus, i) ? 1 : 0;
    }
    return n >= c.count ? Fit::Fits() : Explain(c, node, node.gpus);
  }
  Fit fit = FitFrom(pod, node, node.gpus, 0);
  if (fit.code != Fit::Code::kUnschedulable) {
    return fit;
  }
  // Each container alone could fit somewhere, but together? If not even on the empty node, nothing could make the
  // pod fit here (e.g. its GPU memory in all is more than the node's).
  const core::NodeView empty = core::NodeView::Empty(node.node);
  if (FitFrom(pod, empty, empty.gpus, 0).fits()) {
    return fit;
  }
  int64_t asked = 0;
  int64_t total = 0;
  for (const core::GpuRequest& c : pod.containers) {
    asked += c.count * c.memory_per_gpu.value();
  }
  for (const core::Gpu& g : node.node->gpus) {
    total += g.healthy ? g.memory.value() : 0;
  }
  if (asked > total) {
    return Fit::Unresolvable("pod needs " + std::to_string(asked) + " MiB of GPU memory in all, node has " +
                             std::to_string(total) + " MiB on its healthy GPUs");
  }
  return Fit::Unresolvable("the pod's GPU containers do not fit together even on the empty node (" + fit.reason + ")");
}

}  // namespace

std::vector<core::ContainerAllocation> SelectGpusWith(const core::PodRequest& pod, const core::NodeView& node,
                                                      const ShareChooser& choose) {
  std::vector<core::ContainerAllocation> out;
  out.reserve(pod.containers.size());
  std::vector<core::GpuState> gpus = node.gpus;
  std::vector<size_t> candidates;
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const core::GpuRequest& c = pod.containers[ci];
    candidates.clear();
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (GpuCanHost(c, node, gpus, i)) {
        candidates.push_back(i);
      }
    }
    GPUSCHED_CHECK(static_cast<int32_t>(candidates.size()) >= c.count, "SelectGpus on a node that does not fit");
    core::ContainerAllocation& alloc = out.emplace_back();
    alloc.container = c.container;
    if (WantsWhole(c)) {
      // The best-connected set on a node whose topology is known (topology.h), else the lowest indices; when a
      // later container needs GPUs of its own, FitGpus's lowest-index placement unless the chosen set leaves it
      // room too.
      std::vector<size_t> pick = ChooseWholeGpus(*node.node, candidates, static_cast<size_t>(c.count), pod.topology);
      if (ci + 1 < pod.containers.size() && !std::equal(pick.begin(), pick.end(), candidates.begin())) {
        std::vector<core::GpuState> after = gpus;
        core::ContainerAllocation scratch;
        for (size_t i : pick) {
          Take(c, node, after, i, scratch);
        }
        if (!FitFrom(pod, node, std::move(after), ci + 1).fits()) {
          pick.assign(candidates.begin(), candidates.begin() + c.count);
        }
      }
      for (size_t i : pick) {
        Take(c, node, gpus, i, alloc);
      }
    } else if (c.count == 1) {
      size_t pick = SpareLinks(node, gpus, candidates, choose(c, node, gpus, candidates));
      if (ci + 1 < pod.containers.size()) {
        // FitGpus proved the pod fits with this share on the tightest GPU; another pick (worst, random) may starve
        // a later container. Keep the pick only if the rest still fits, else take the tightest, which keeps
        // FitGpus's placement of the rest available.
        std::vector<core::GpuState> after = gpus;
        core::ContainerAllocation scratch;
        Take(c, node, after, pick, scratch);
        if (!FitFrom(pod, node, std::move(after), ci + 1).fits()) {
          pick = Tightest(gpus, candidates);
        }
      }
      Take(c, node, gpus, pick, alloc);
    } else {
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](size_t a, size_t b) { return gpus[a].free < gpus[b].free; });
      for (int32_t k = 0; k < c.count; ++k) {
        Take(c, node, gpus, candidates[static_cast<size_t>(k)], alloc);
      }
    }
  }
  return out;
}

std::vector<core::ContainerAllocation> SelectGpusBest(const core::PodRequest& pod, const core::NodeView& node) {
  return SelectGpusWith(pod, node,
                        [](const core::GpuRequest&, const core::NodeView&, std::span<const core::GpuState> gpus,
                           std::span<const size_t> candidates) { return Tightest(gpus, candidates); });
}

std::vector<core::ContainerAllocation> SelectGpusWorst(const core::PodRequest& pod, const core::NodeView& node) {
  return SelectGpusWith(pod, node,
                        [](const core::GpuRequest&, const core::NodeView&, std::span<const core::GpuState> gpus,
                           std::span<const size_t> candidates) {
                          size_t best = candidates[0];
                          for (size_t i : candidates) {
                            if (gpus[i].free > gpus[best].free) {
                              best = i;
                            }
                          }
                          return best;
                        });
}

std::vector<core::ContainerAllocation> SelectGpusRanked(const core::PodRequest& pod, const core::NodeView& node,
                                                        std::span<const double> rank) {
  GPUSCHED_CHECK(rank.size() == node.gpus.size(), "SelectGpusRanked needs one rank per GPU");
  std::vector<core::ContainerAllocation> out;
  out.reserve(pod.containers.size());
  std::vector<core::GpuState> gpus = node.gpus;
  std::vector<size_t> candidates;
  for (size_t ci = 0; ci < pod.containers.size(); ++ci) {
    const core::GpuRequest& c = pod.containers[ci];
    candidates.clear();
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (GpuCanHost(c, node, gpus, i)) {
        candidates.push_back(i);
      }
    }
    if (static_cast<int32_t>(candidates.size()) < c.count) {
      // An earlier container's ranked pick took what this one needed; FitGpus's placement is known to fit.
      return SelectGpusBest(pod, node);
    }
    std::stable_sort(candidates.begin(), candidates.end(), [&](size_t a, size_t b) { return rank[a] < rank[b]; });
    core::ContainerAllocation& alloc = out.emplace_back();
    alloc.container = c.container;
    for (int32_t k = 0; k < c.count; ++k) {
      Take(c, node, gpus, candidates[static_cast<size_t>(k)], alloc);
    }
  }
  return out;
}

std::vector<core::ContainerAllocation> SelectGpusRandom(const core::PodRequest& pod, const core::NodeView& node,
                                                        common::Rng& rng) {
  return SelectGpusWith(
      pod, node,
      [&rng](const core::GpuRequest&, const core::NodeView&, std::span<const core::GpuState>,
             std::span<const size_t> candidates) { return candidates[rng.Uniform(candidates.size())]; });
}

Fit PlacementPolicy::Filter(const core::PodRequest& pod, const core::NodeView& node) const {
  return FitGpus(pod, node);
}

std::vector<core::ContainerAllocation> PlacementPolicy::SelectGpus(const core::PodRequest& pod,
                                                                   const core::NodeView& node, common::Rng&) const {
  return SelectGpusBest(pod, node);
}

std::vector<core::ContainerAllocation> PlacementPolicy::SelectGpusWithSnapshot(const core::PodRequest& pod,
                                                                               const core::NodeView& node,
                                                                               const Snapshot&,
                                                                               common::Rng& rng) const {
  return SelectGpus(pod, node, rng);
}

}  // namespace gpusched::policy
