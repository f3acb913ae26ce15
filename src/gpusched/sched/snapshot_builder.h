#pragma once

// SnapshotBuilder: the one way every front end (the standalone scheduler, the extender) builds the policy::Snapshot
// a cycle reads: live GPU samples from a MetricsCache with freshness judged at a wall-clock second (so that the cycle
// runner's score cache is shared by the requests of one second; without metrics now_ms stays 0), and, when a slowdown
// model is configured and a policy wants it, the incoming pod's interference forecast over the given node slots, from a
// ForecastCache (nodes unchanged since an earlier request of the same application class are reused). Every forecast
// gets a number never used before (Snapshot::interference_generation).
//
// Thread-safe: Build may run on several threads at once (the extender's handlers); each caller keeps what the
// snapshot borrows alive in its own Hold until the cycle is done.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "gpusched/core/cluster_state.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/ports/slowdown_model.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/sched/metrics_cache.h"

namespace gpusched::sched {

struct SnapshotSources {
  const MetricsCache* metrics = nullptr;  // null: no live metrics (snapshot-reading scores see none)
  int64_t staleness_ms = 60000;           // older samples count as unknown
  std::shared_ptr<const ports::SlowdownModel> slowdown_model;  // null: no forecasts
  std::function<int64_t()> wall_ms;                            // Unix milliseconds; empty = the system clock

  // Whether `inputs` can be given: live metrics need a metrics cache, forecasts a slowdown model.
  [[nodiscard]] bool Provide(const policy::Inputs& inputs) const {
    return (!inputs.gpu_metrics || metrics != nullptr) && (!inputs.interference_forecast || slowdown_model != nullptr);
  }
};

class SnapshotBuilder {
 public:
  SnapshotBuilder() : SnapshotBuilder(SnapshotSources{}) {}
  explicit SnapshotBuilder(SnapshotSources sources);

  // What a snapshot borrows; keep it until the cycle that reads the snapshot is done.
  struct Hold {
    std::shared_ptr<const core::GpuMetricsMap> metrics;
    policy::InterferenceForecast forecast;
  };

  [[nodiscard]] const SnapshotSources& sources() const { return sources_; }
  // Whether these policies need a forecast: a model is configured and one of them reads it.
  [[nodiscard]] bool WantsForecast(std::span<const policy::PlacementPolicy* const> policies) const;
  [[nodiscard]] bool Provides(const policy::Inputs& inputs) const { return sources_.Provide(inputs); }

  // The snapshot for a pod of application class `app` over the node `slots` of `state` (the forecast covers those
  // only), with a forecast when `forecast` (and a model is configured). `app_of` names the classes of placed pods.
  [[nodiscard]] policy::Snapshot Build(std::string_view app, const core::ClusterState& state,
                                       std::span<const size_t> slots, const AppOfPod& app_of, bool forecast,
                                       Hold& hold);
  // Forecast node entries computed so far (ForecastCache::misses).
  [[nodiscard]] uint64_t forecast_misses() const { return forecast_cache_.misses(); }

 private:
  SnapshotSources sources_;
  ForecastCache forecast_cache_;
  std::atomic<uint64_t> forecast_generation_{0};
};

}  // namespace gpusched::sched
