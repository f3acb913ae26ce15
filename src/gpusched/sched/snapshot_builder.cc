#include "gpusched/sched/snapshot_builder.h"

#include <chrono>
#include <utility>

namespace gpusched::sched {

SnapshotBuilder::SnapshotBuilder(SnapshotSources sources) : sources_(std::move(sources)) {}

bool SnapshotBuilder::WantsForecast(std::span<const policy::PlacementPolicy* const> policies) const {
  if (sources_.slowdown_model == nullptr) {
    return false;
  }
  for (const policy::PlacementPolicy* p : policies) {
    if (p != nullptr && p->Reads().interference_forecast) {
      return true;
    }
  }
  return false;
}

policy::Snapshot SnapshotBuilder::Build(std::string_view app, const core::ClusterState& state,
                                        std::span<const size_t> slots, const AppOfPod& app_of, bool forecast,
                                        Hold& hold) {
  policy::Snapshot snapshot;
  if (forecast && sources_.slowdown_model != nullptr) {
    hold.forecast = forecast_cache_.Forecast(app, state, slots, app_of, *sources_.slowdown_model);
    snapshot.interference = &hold.forecast;
    snapshot.interference_generation = forecast_generation_.fetch_add(1) + 1;
  }
  if (sources_.metrics != nullptr) {
    const uint64_t generation = sources_.metrics->generation();
    hold.metrics = sources_.metrics->Current();
    snapshot.gpu_metrics = hold.metrics.get();
    snapshot.metrics_generation = generation;
    // Freshness is judged at the second: the score cache then serves every request of that second.
    const int64_t now_ms =
        sources_.wall_ms
            ? sources_.wall_ms()
            : std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
    snapshot.now_ms = now_ms - now_ms % 1000;
    snapshot.staleness_ms = sources_.staleness_ms;
  }
  return snapshot;
}

}  // namespace gpusched::sched
