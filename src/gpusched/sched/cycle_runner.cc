#include "gpusched/sched/cycle_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "gpusched/sched/node_predicates.h"

namespace gpusched::sched {

uint64_t NodeNameRank(std::string_view name) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a offset basis
  for (const char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ULL;  // FNV prime
  }
  return h;
}

policy::Fit FitNodeResources(const core::PodRequest& pod, const core::NodeView& node) {
  if (node.node->max_pods > 0 && node.pods >= node.node->max_pods) {
    return policy::Fit::Unschedulable("Too many pods, " + std::to_string(node.pods) + " of " +
                                      std::to_string(node.node->max_pods) + " allowed");
  }
  if (pod.cpu > node.cpu_free) {
    const std::string msg = "Insufficient cpu: needs " + std::to_string(pod.cpu.value()) + "m, " +
                            std::to_string(node.cpu_free.value()) + "m free";
    return pod.cpu > node.node->cpu ? policy::Fit::Unresolvable(msg) : policy::Fit::Unschedulable(msg);
  }
  if (pod.memory > node.memory_free) {
    const std::string msg = "Insufficient memory: needs " + std::to_string(pod.memory.value()) + " MiB, " +
                            std::to_string(node.memory_free.value()) + " MiB free";
    return pod.memory > node.node->memory ? policy::Fit::Unresolvable(msg) : policy::Fit::Unschedulable(msg);
  }
  for (const auto& [name, amount] : pod.scalars) {
    auto free = node.scalar_free.find(name);
    const int64_t have = free == node.scalar_free.end() ? 0 : free->second;
    if (amount > have) {
      auto total = node.node->scalar_resources.find(name);
      const int64_t capacity = total == node.node->scalar_resources.end() ? 0 : total->second;
      const std::string msg =
          "Insufficient " + name + ": needs " + std::to_string(amount) + ", " + std::to_string(have) + " free";
      return amount > capacity ? policy::Fit::Unresolvable(msg) : policy::Fit::Unschedulable(msg);
    }
  }
  for (const auto& p : pod.host_ports) {
    for (const auto& used : node.host_ports) {
      if (p.ConflictsWith(used)) {
        return policy::Fit::Unschedulable("node(s) didn't have free ports for the requested pod ports, " + p.protocol +
                                          "/" + std::to_string(p.port) + " in use");
      }
    }
  }
  return policy::Fit::Fits();
}

void NormalizeScores(std::span<int64_t> scores) {
  if (scores.empty()) {
    return;
  }
  int64_t hi = std::numeric_limits<int64_t>::min();
  int64_t lo = std::numeric_limits<int64_t>::max();
  for (int64_t s : scores) {
    hi = std::max(hi, s);
    lo = std::min(lo, s);
  }
  if (hi == lo) {
    --lo;
  }
  for (int64_t& s : scores) {
    s = (s - lo) * policy::kMaxScore / (hi - lo);
  }
}

std::string_view ReasonGroup(std::string_view reason) {
  const size_t cut = std::min(reason.find("; "), reason.find(", "));
  return cut == std::string_view::npos ? reason : reason.substr(0, cut);
}

std::string CycleResult::Summary(size_t max_bytes) const {
  std::map<std::string_view, size_t> counts;
  for (const auto& [node, fit] : rejections) {
    counts[ReasonGroup(fit.reason)] += 1;
  }
  std::vector<std::pair<std::string_view, size_t>> groups(counts.begin(), counts.end());
  std::stable_sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string s = std::to_string(feasible_nodes) + "/" + std::to_string(considered_nodes) + " nodes are available";
  std::string sep = ": ";
  size_t left = rejections.size();  // nodes in the groups not written yet
  for (size_t i = 0; i < groups.size(); ++i) {
    std::string item = sep + std::to_string(groups[i].second) + " x " + std::string(groups[i].first);
    // Room for this group and, when more follow, for the line that counts them.
    const size_t tail = i + 1 < groups.size() ? 48 : 0;
    if (s.size() + item.size() + tail > max_bytes) {
      s += sep + std::to_string(left) + " x " + std::to_string(groups.size() - i) + " other reason(s)";
      break;
    }
    s += item;
    left -= groups[i].second;
    sep = ", ";
  }
  return s;
}

void MixScores(std::span<const ScoreWeight> mix, const core::PodRequest& pod, const core::ClusterState& state,
               std::span<const size_t> slots, const policy::Snapshot& snapshot, std::vector<double>& out) {
  out.assign(slots.size(), 0.0);
  double total_weight = 0;
  std::vector<CycleRunner::NodeEval> evals;
  std::vector<int64_t> raw;
  std::vector<size_t> fitting;
  for (const ScoreWeight& member : mix) {
    member.runner->Evaluate(pod, state, slots, snapshot, evals);
    raw.clear();
    fitting.clear();
    for (size_t i = 0; i < evals.size(); ++i) {
      if (evals[i].fits) {
        raw.push_back(evals[i].score);
        fitting.push_back(i);
      }
    }
    if (member.runner->policy().NormalizesScores()) {
      NormalizeScores(raw);
    }
    for (size_t i = 0; i < fitting.size(); ++i) {
      out[fitting[i]] += member.weight * static_cast<double>(std::clamp<int64_t>(raw[i], 0, policy::kMaxScore));
    }
    total_weight += member.weight;
  }
  if (total_weight > 0) {
    for (double& v : out) {
      v /= total_weight;
    }
  }
}

CycleRunner::CycleRunner(const policy::PlacementPolicy& policy, CycleOptions options)
    : policy_(policy), options_(options) {}

CycleRunner::CycleRunner(const policy::PlacementPolicy& policy, CycleOptions options,
                         std::span<const std::pair<const policy::PlacementPolicy*, double>> score_mix)
    : policy_(policy), options_(options) {
  for (const auto& [member, weight] : score_mix) {
    mix_runners_.push_back(std::make_unique<CycleRunner>(*member, options));
    mix_.push_back(ScoreWeight{.runner = mix_runners_.back().get(), .weight = weight});
  }
}

CycleRunner::~CycleRunner() = default;

void CycleRunner::ApplyScoreMix(const core::PodRequest& pod, const core::ClusterState& state,
                                const policy::Snapshot& snapshot) {
  mix_slots_.clear();
  for (const auto& [slot, score] : feasible_) {
    mix_slots_.push_back(slot);
  }
  MixScores(mix_, pod, state, mix_slots_, snapshot, mixed_);
  for (size_t i = 0; i < feasible_.size(); ++i) {
    feasible_[i].second = std::llround(mixed_[i]);
  }
}

policy::Fit CycleRunner::Filter(const core::PodRequest& pod, const core::NodeView& node) const {
  return Filter(pod, node, policy::Snapshot{});
}

policy::Fit CycleRunner::Filter(const core::PodRequest& pod, const core::NodeView& node,
                                const policy::Snapshot& snapshot, const InterPodConstraints* inter_pod) const {
  if (options_.check_node_constraints) {
    if (std::string why = CheckNodeConstraints(pod, *node.node); !why.empty()) {
      return policy::Fit::Unresolvable(std::move(why));
    }
  }
  if (options_.check_node_resources) {
    policy::Fit fit = FitNodeResources(pod, node);
    if (!fit.fits()) {
      return fit;
    }
  }
  if (inter_pod != nullptr) {
    policy::Fit fit = inter_pod->Check(*node.node);
    if (!fit.fits()) {
      return fit;
    }
  }
  return policy_.FilterWithSnapshot(pod, node, snapshot);
}

std::vector<int64_t> CycleRunner::ScoreNodes(const core::PodRequest& pod, std::span<const core::NodeView* const> nodes,
                                             const policy::Snapshot& snapshot) const {
  std::vector<int64_t> scores;
  scores.reserve(nodes.size());
  const int64_t scale = policy_.ScoreScale();
  for (const core::NodeView* n : nodes) {
    scores.push_back(policy_.Score(pod, *n, snapshot) / scale);
  }
  if (policy_.NormalizesScores()) {
    NormalizeScores(scores);
  }
  return scores;
}

uint32_t CycleRunner::Signature(const core::PodRequest& pod) {
  std::string key = std::to_string(pod.cpu.value()) + "/" + std::to_string(pod.memory.value());
  for (const auto& c : pod.containers) {
    key += "|" + std::to_string(c.count) + "x" + std::to_string(c.milli_per_gpu.value()) + "m" +
           std::to_string(c.memory_per_gpu.value()) + "p" + std::to_string(c.memory_percent) +
           (c.exclusive ? "e" : "s") + (c.share_group != 0 ? "g" + std::to_string(c.share_group) : "");
    for (const auto& m : c.models) {
      key += ":" + m;
    }
  }
  for (const auto& [name, amount] : pod.scalars) {
    key += "|" + name + "=" + std::to_string(amount);
  }
  for (const auto& p : pod.host_ports) {
    key += "|port " + p.protocol + "/" + p.ip + ":" + std::to_string(p.port);
  }
  if (signatures_.size() >= kMaxSignatures && !signatures_.contains(key)) {
    signatures_.clear();
    cache_.clear();
  }
  auto [it, inserted] = signatures_.try_emplace(std::move(key), static_cast<uint32_t>(signatures_.size()));
  return it->second;
}

uint32_t CycleRunner::SnapshotEpoch(const policy::Snapshot& snapshot) {
  if (!policy_.ScoresFromSnapshot()) {
    return 0;
  }
  const SnapshotKey key{.gpu_metrics = snapshot.gpu_metrics,
                        .metrics_generation = snapshot.metrics_generation,
                        .now_ms = snapshot.now_ms,
                        .staleness_ms = snapshot.staleness_ms,
                        .interference = snapshot.interference,
                        .interference_generation = snapshot.interference_generation};
  if (snapshot_epoch_ != 0 && key == snapshot_key_) {
    return snapshot_epoch_;
  }
  snapshot_key_ = key;
  if (snapshot_epoch_ == std::numeric_limits<uint32_t>::max()) {
    cache_.clear();  // epochs wrap: no old entry may match a reused number
    snapshot_epoch_ = 0;
  }
  return ++snapshot_epoch_;
}

CycleRunner::Entry CycleRunner::Cached(const core::PodRequest& pod, size_t slot, uint32_t sig, uint32_t epoch,
                                       const core::NodeView& view, const policy::Snapshot& snapshot) {
  if (cache_.size() <= sig) {
    cache_.resize(sig + 1);
  }
  std::vector<Entry>& row = cache_[sig];  // one pod shape's entries, node after node: a cycle reads them in order
  if (row.size() <= slot) {
    row.resize(slot + 1);
  }
  Entry& e = row[slot];
  if (e.generation != view.generation || e.snapshot_epoch != epoch) {
    e = Evaluate(pod, view, snapshot);
    e.snapshot_epoch = epoch;
  }
  return e;
}

CycleRunner::Entry CycleRunner::Evaluate(const core::PodRequest& pod, const core::NodeView& node,
                                         const policy::Snapshot& snapshot) const {
  Entry e{.generation = node.generation, .fits = Filter(pod, node, snapshot).fits()};
  if (e.fits) {
    e.score = policy_.Score(pod, node, snapshot);
  }
  return e;
}

void CycleRunner::Evaluate(const core::PodRequest& pod, const core::ClusterState& state, std::span<const size_t> slots,
                           const policy::Snapshot& snapshot, std::vector<NodeEval>& out) {
  out.clear();
  out.reserve(slots.size());
  const uint32_t sig = options_.use_score_cache ? Signature(pod) : 0;
  const uint32_t epoch = options_.use_score_cache ? SnapshotEpoch(snapshot) : 0;
  const int64_t scale = policy_.ScoreScale();
  for (size_t slot : slots) {
    const core::NodeView& view = state.View(slot);
    const Entry e =
        options_.use_score_cache ? Cached(pod, slot, sig, epoch, view, snapshot) : Evaluate(pod, view, snapshot);
    out.push_back(NodeEval{.fits = e.fits, .score = e.score / scale});
  }
}

common::Result<CycleResult> CycleRunner::Schedule(const core::PodRequest& pod, core::ClusterState& state,
                                                  const policy::Snapshot& snapshot, common::Rng& rng,
                                                  uint64_t allocation_id, const InterPodConstraints* inter_pod) {
  if (inter_pod != nullptr && !inter_pod->Active()) {
    inter_pod = nullptr;
  }
  CycleResult result;
  const size_t slots = state.SlotCount();
  const uint32_t sig = options_.use_score_cache ? Signature(pod) : 0;
  const uint32_t epoch = options_.use_score_cache ? SnapshotEpoch(snapshot) : 0;
  feasible_.clear();
  for (size_t slot = 0; slot < slots; ++slot) {
    if (!state.IsLive(slot)) {
      continue;
    }
    ++result.considered_nodes;
    const core::NodeView& view = state.View(slot);
    if (options_.check_node_constraints && !CheckNodeConstraints(pod, *view.node).empty()) {
      continue;
    }
    if (inter_pod != nullptr && !inter_pod->Passes(*view.node)) {
      continue;
    }
    const Entry e =
        options_.use_score_cache ? Cached(pod, slot, sig, epoch, view, snapshot) : Evaluate(pod, view, snapshot);
    if (e.fits) {
      feasible_.emplace_back(slot, e.score);
    }
  }
  result.feasible_nodes = feasible_.size();
  if (feasible_.empty()) {
    if (options_.collect_reasons) {
      for (size_t slot = 0; slot < slots; ++slot) {
        if (state.IsLive(slot)) {
          result.rejections.emplace_back(state.View(slot).name(), Filter(pod, state.View(slot), snapshot, inter_pod));
        }
      }
    }
    return result;
  }
  if (!mix_.empty()) {
    ApplyScoreMix(pod, state, snapshot);
  } else if (policy_.NormalizesScores()) {
    scores_.clear();
    for (const auto& [slot, score] : feasible_) {
      scores_.push_back(score);
    }
    NormalizeScores(scores_);
    for (size_t i = 0; i < feasible_.size(); ++i) {
      feasible_[i].second = scores_[i];
    }
  }
  if (options_.check_node_constraints && state.PreferNoScheduleNodes() > 0) {
    AddTaintScores(pod, state);
  }
  int64_t best = std::numeric_limits<int64_t>::min();
  ties_.clear();
  for (const auto& [slot, score] : feasible_) {
    if (score > best) {
      best = score;
      ties_.clear();
    }
    if (score == best) {
      ties_.push_back(slot);
    }
  }
  size_t chosen = ties_.front();
  if (ties_.size() > 1) {
    if (policy_.ChoosesNodeAtRandom() || (options_.tie_rank.empty() && !options_.stable_ties)) {
      chosen = ties_[rng.Uniform(ties_.size())];
    } else {
      // The tied node that ranks lowest: by tie_rank when given, else by its name (stable_ties).
      const auto rank_of = [&](size_t slot) -> uint64_t {
        if (options_.tie_rank.empty()) {
          return NodeNameRank(state.View(slot).name().str());
        }
        return slot < options_.tie_rank.size() ? options_.tie_rank[slot] : UINT64_MAX;
      };
      uint64_t best_rank = UINT64_MAX;
      for (size_t slot : ties_) {
        const uint64_t rank = rank_of(slot);
        if (rank < best_rank) {
          best_rank = rank;
          chosen = slot;
        }
      }
    }
  }
  const core::NodeView& view = state.View(chosen);
  core::Allocation allocation{.pod = pod.uid,
                              .node = view.name(),
                              .cpu = pod.cpu,
                              .memory = pod.memory,
                              .containers = policy_.SelectGpusWithSnapshot(pod, view, snapshot, rng),
                              .id = allocation_id,
                              .share_group = pod.GpuShareGroup()};
  if (options_.check_node_resources) {
    allocation.scalars = pod.scalars;  // charged where they are checked (not by the extender)
    allocation.host_ports = pod.host_ports;
  }
  common::Status reserved = state.Assume(allocation);
  if (!reserved.ok()) {
    return common::Internal("policy " + std::string(policy_.Name()) +
                            " chose GPUs that do not fit: " + reserved.message());
  }
  result.allocation = std::move(allocation);
  return result;
}

void CycleRunner::AddTaintScores(const core::PodRequest& pod, const core::ClusterState& state) {
  penalties_.clear();
  int max_penalty = 0;
  for (const auto& [slot, score] : feasible_) {
    penalties_.push_back(TaintPenalty(pod, *state.View(slot).node));
    max_penalty = std::max(max_penalty, penalties_.back());
  }
  if (max_penalty == 0) {
    return;  // no untolerated PreferNoSchedule taint anywhere: the policy's order stands, unchanged
  }
  // kube-scheduler's weighted sum of plugin scores, each 0..100: the policy's (normalised here) and
  // TaintToleration's (fewest untolerated PreferNoSchedule taints = 100), the latter with its default weight.
  scores_.clear();
  for (const auto& [slot, score] : feasible_) {
    scores_.push_back(score);
  }
  NormalizeScores(scores_);
  for (size_t i = 0; i < feasible_.size(); ++i) {
    const int64_t taint_score = policy::kMaxScore - int64_t{penalties_[i]} * policy::kMaxScore / max_penalty;
    feasible_[i].second = scores_[i] + kTaintScoreWeight * taint_score;
  }
}

common::Status CycleRunner::Bind(core::ClusterState& state, ports::Binder& binder, const core::PodRequest& pod,
                                 const core::Allocation& allocation) {
  common::Status bound = binder.Bind(pod, allocation);
  if (!bound.ok()) {
    common::Status forgot = state.Forget(allocation.pod);
    if (!forgot.ok()) {
      return common::Internal("bind failed (" + bound.message() + ") and forget failed: " + forgot.message());
    }
    return bound;
  }
  return state.Confirm(allocation.pod);
}

}  // namespace gpusched::sched
