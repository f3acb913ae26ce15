#pragma once

// Fills the Snapshot's interference forecast (policy/interference_forecast.h) before a cycle: for the pod being
// placed, the predicted slowdowns on every GPU that already holds pods, from a ports::SlowdownModel and the
// application classes of the pods on each GPU (ports::JoinSlowdown combines several residents).

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

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

// ForecastInterference with memory: a node's entries for an application class are kept with the node's generation
// and reused while it is unchanged (ClusterState generations are unique for the state's lifetime, and change with
// every allocation on the node). A scheduler that forecasts every request over the same candidates then pays one
// lookup per unchanged node instead of a model query per resident. One cache serves one ClusterState (it forgets
// everything when handed another) and one model. A pod whose application class changes without its node
// changing is seen at the node's next change. Thread-safe (one lock around each call).
class ForecastCache {
 public:
  explicit ForecastCache(size_t max_apps = 1024) : max_apps_(max_apps) {}
  [[nodiscard]] policy::InterferenceForecast Forecast(std::string_view app, const core::ClusterState& state,
                                                      std::span<const size_t> slots, const AppOfPod& app_of,
                                                      const ports::SlowdownModel& model);
  // Node entries computed (not reused) so far: for tests and metrics.
  [[nodiscard]] uint64_t misses() const;

 private:
  struct Entry {
    uint64_t generation = 0;  // 0 = never computed (generations start at 1)
    bool has_pods = false;
    std::vector<policy::GpuInterference> gpus;
  };
  mutable std::mutex mu_;
  const core::ClusterState* state_ = nullptr;
  const ports::SlowdownModel* model_ = nullptr;
  std::unordered_map<std::string, std::vector<Entry>> by_app_;  // per application class, per node slot
  size_t max_apps_;
  uint64_t misses_ = 0;
};

}  // namespace gpusched::sched
