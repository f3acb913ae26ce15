#include "gpusched/sched/interference_forecast.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace gpusched::sched {

policy::InterferenceForecast ForecastInterference(std::string_view app, const core::ClusterState& state,
                                                  const AppOfPod& app_of, const ports::SlowdownModel& model) {
  std::vector<size_t> slots(state.SlotCount());
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i] = i;
  }
  return ForecastInterference(app, state, slots, app_of, model);
}

namespace {

// The entries of one node for a pod of class `app`; false when no GPU of the node holds a pod.
bool ForecastNode(std::string_view app, const core::ClusterState& state, size_t slot, const AppOfPod& app_of,
                  const ports::SlowdownModel& model, std::vector<policy::GpuInterference>& gpus) {
  const core::NodeView& view = state.View(slot);
  const bool any =
      std::any_of(view.gpus.begin(), view.gpus.end(), [](const core::GpuState& g) { return g.holders > 0; });
  if (!any) {
    return false;  // no entry: every GPU of the node is empty
  }
  std::vector<std::vector<std::string>> residents(view.gpus.size());  // per GPU: the application classes on it
  std::vector<std::vector<common::PodUid>> counted(view.gpus.size());
  for (const common::PodUid& pod : state.PodsOn(view.name())) {
    const core::Allocation* a = state.FindAllocation(pod);
    if (a == nullptr) {
      continue;
    }
    std::optional<std::string> class_of;  // asked once per pod, only when it holds a GPU share
    for (const core::ContainerAllocation& c : a->containers) {
      for (const core::GpuShare& share : c.gpus) {
        if (share.index < 0 || static_cast<size_t>(share.index) >= view.gpus.size()) {
          continue;
        }
        const auto i = static_cast<size_t>(share.index);
        // A pod whose two containers share one GPU is one resident there: the model's pairs are per application.
        if (std::find(counted[i].begin(), counted[i].end(), pod) != counted[i].end()) {
          continue;
        }
        counted[i].push_back(pod);
        if (!class_of.has_value()) {
          class_of = app_of ? app_of(pod) : std::string();
        }
        residents[i].push_back(*class_of);
      }
    }
  }
  gpus.assign(view.gpus.size(), policy::GpuInterference{});
  for (size_t i = 0; i < view.gpus.size(); ++i) {
    if (residents[i].empty()) {
      continue;  // residents = 0: an empty GPU
    }
    policy::GpuInterference& g = gpus[i];
    g.residents = static_cast<int32_t>(residents[i].size());
    const std::optional<ports::GroupSlowdown> joined =
        ports::JoinSlowdown(model, app, residents[i], view.node->gpus[i].model);
    if (!joined.has_value()) {
      g.feasible = false;
      continue;
    }
    g.incoming = joined->incoming;
    g.residents_added = joined->residents_added;
  }
  return true;
}

}  // namespace

policy::InterferenceForecast ForecastInterference(std::string_view app, const core::ClusterState& state,
                                                  std::span<const size_t> slots, const AppOfPod& app_of,
                                                  const ports::SlowdownModel& model) {
  policy::InterferenceForecast forecast{.app = std::string(app)};
  std::vector<policy::GpuInterference> gpus;
  for (const size_t slot : slots) {
    if (slot >= state.SlotCount() || !state.IsLive(slot)) {
      continue;
    }
    if (ForecastNode(app, state, slot, app_of, model, gpus)) {
      forecast.nodes[state.View(slot).name()] = gpus;
    }
  }
  return forecast;
}

policy::InterferenceForecast ForecastCache::Forecast(std::string_view app, const core::ClusterState& state,
                                                     std::span<const size_t> slots, const AppOfPod& app_of,
                                                     const ports::SlowdownModel& model) {
  std::lock_guard lock(mu_);
  if (state_ != &state || model_ != &model) {
    by_app_.clear();
    state_ = &state;
    model_ = &model;
  }
  auto it = by_app_.find(std::string(app));
  if (it == by_app_.end()) {
    if (by_app_.size() >= max_apps_) {
      by_app_.clear();  // many classes: start over rather than grow without bound
    }
    it = by_app_.emplace(std::string(app), std::vector<Entry>{}).first;
  }
  std::vector<Entry>& entries = it->second;
  if (entries.size() < state.SlotCount()) {
    entries.resize(state.SlotCount());
  }
  policy::InterferenceForecast forecast{.app = std::string(app)};
  for (const size_t slot : slots) {
    if (slot >= state.SlotCount() || !state.IsLive(slot)) {
      continue;
    }
    Entry& e = entries[slot];
    const uint64_t generation = state.View(slot).generation;
    if (e.generation != generation) {
      e.has_pods = ForecastNode(app, state, slot, app_of, model, e.gpus);
      e.generation = generation;
      ++misses_;
    }
    if (e.has_pods) {
      forecast.nodes[state.View(slot).name()] = e.gpus;
    }
  }
  return forecast;
}

uint64_t ForecastCache::misses() const {
  std::lock_guard lock(mu_);
  return misses_;
}

}  // namespace gpusched::sched
