#pragma once

// The live inputs of the snapshot-reading policies, built from a front end's config (`metrics`, `loadAware`,
// `interference`: daemon/config.h LiveInputsConfig) for `gpusched scheduler` and `gpusched extender`
// alike: the metric sources and their cache, the load-aware options, the slowdown model. Wiring only.

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"
#include "gpusched/daemon/config.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/ports/slowdown_model.h"
#include "gpusched/sched/metrics_cache.h"

namespace gpusched::cli {

// Reads a slowdown model file. Injected so that the commands do not depend on how the model is stored.
using SlowdownModelLoader =
    std::function<common::Result<std::shared_ptr<const ports::SlowdownModel>>(const std::string& path)>;

// The loader of `gpusched-lab interference train`'s model files.
[[nodiscard]] SlowdownModelLoader TrainedModelLoader();

// The metrics cache over the config's sources, started; null when the config names none. A source whose address
// is wrong or whose query does not run yet is logged (as `component`) and the daemon still starts: scores use
// static attributes until it answers. A source that cannot be built at all is an error.
[[nodiscard]] common::Result<std::unique_ptr<sched::MetricsCache>> StartMetricsCache(
    const daemon::LiveInputsConfig& config, std::string_view component);

[[nodiscard]] policy::LoadAwareOptions LoadAwareOptionsOf(const daemon::LiveInputsConfig& config);

// The slowdown model when interference is enabled or a model file is given (null otherwise). Enabled without a
// file, a missing loader, or a file that does not load: an error saying which.
[[nodiscard]] common::Result<std::shared_ptr<const ports::SlowdownModel>> LoadSlowdownModel(
    const daemon::LiveInputsConfig& config, const std::string& model_file, const SlowdownModelLoader& load_model);

}  // namespace gpusched::cli
