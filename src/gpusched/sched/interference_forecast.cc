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

policy::InterferenceForecast ForecastInterference(std::string_view app, const core::ClusterState& state,
                                                  std::span<const size_t> slots, const AppOfPod& app_of,
                                                  const ports::SlowdownModel& model) {
  policy::InterferenceForecast forecast{.app = std::string(app)};
  std::vector<std::vector<std::string>> residents;  // per GPU index: the application classes on it
  for (const size_t slot : slots) {
    if (slot >= state.SlotCount() || !state.IsLive(slot)) {
      continue;
    }
    const core::NodeView& view = state.View(slot);
    const bool any =
        std::any_of(view.gpus.begin(), view.gpus.end(), [](const core::GpuState& g) { return g.holders > 0; });
    if (!any) {
      continue;  // no entry: every GPU of the node is empty
    }
    residents.assign(view.gpus.size(), {});
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
    std::vector<policy::GpuInterference>& gpus = forecast.nodes[view.name()];
    gpus.resize(view.gpus.size());
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
  }
  return forecast;
}

}  // namespace gpusched::sched
