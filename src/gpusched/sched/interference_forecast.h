#pragma once

// Fills the Snapshot's interference forecast (policy/interference_forecast.h) before a cycle: for the pod being
// placed, the predicted slowdowns on every GPU that already holds pods, from a ports::SlowdownModel and the
// application classes of the pods on each GPU (ports::JoinSlowdown combines several residents).

#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "gpusched/common/ids.h"
#include "gpusched/core/cluster_state.h"
#include "gpusched/policy/interference_forecast.h"
#include "gpusched/ports/slowdown_model.h"

namespace gpusched::sched {

// The application class of a pod that holds an allocation in the state; "" = unknown (the model's prior).
using AppOfPod = std::function<std::string(const common::PodUid&)>;

// Every live node with at least one pod on a GPU gets an entry; the GPU type handed to the model is the GPU's
// model string (the model maps it to its nearest measured type).
[[nodiscard]] policy::InterferenceForecast ForecastInterference(std::string_view app, const core::ClusterState& state,
                                                                const AppOfPod& app_of,
                                                                const ports::SlowdownModel& model);
// The same for the given node slots of `state` only (the extender's candidate nodes): a cycle over a few nodes of a
// large cluster does not pay for the rest.
[[nodiscard]] policy::InterferenceForecast ForecastInterference(std::string_view app, const core::ClusterState& state,
                                                                std::span<const size_t> slots, const AppOfPod& app_of,
                                                                const ports::SlowdownModel& model);

}  // namespace gpusched::sched
