#include "gpusched/cli/live_inputs.h"

#include <chrono>
#include <utility>
#include <vector>

#include "gpusched/adapters/influxdb/influx_source.h"
#include "gpusched/adapters/prometheus/prometheus_source.h"
#include "gpusched/common/log.h"
#include "gpusched/interference/table_slowdown.h"

namespace gpusched::cli {

namespace {

common::Result<std::vector<std::unique_ptr<ports::MetricsSource>>> MakeSources(const daemon::LiveInputsConfig& config,
                                                                               std::string_view component) {
  std::vector<std::unique_ptr<ports::MetricsSource>> sources;
  for (const auto& src : config.metrics_sources) {
    auto query_of = [&](size_t i, const std::string& fallback) {
      auto it = src.queries.find(std::string(core::GpuMetricName(static_cast<core::GpuMetric>(i))));
      return it == src.queries.end() ? fallback : it->second;
    };
    std::unique_ptr<ports::MetricsSource> made;
    common::Status check = common::Status::Ok();
    if (src.kind == "prometheus") {
      adapters::prometheus::PrometheusSourceOptions o{
          .url = src.url, .timeout = std::chrono::seconds(src.timeout_seconds), .uuid_label = src.uuid_label};
      o.queries = adapters::prometheus::DefaultQueries(src.uuid_label);
      for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
        o.queries[i] = query_of(i, o.queries[i]);
      }
      auto p = adapters::prometheus::PrometheusSource::Create(std::move(o));
      if (!p.ok()) {
        return common::InvalidArgument("metrics.prometheus: " + p.status().message());
      }
      check = (*p)->Check();
      made = std::move(p).value();
    } else {
      adapters::influxdb::InfluxSourceOptions o{
          .url = src.url, .database = src.database, .timeout = std::chrono::seconds(src.timeout_seconds)};
      for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
        o.queries[i] = query_of(i, o.queries[i]);
      }
      auto p = adapters::influxdb::InfluxSource::Create(std::move(o));
      if (!p.ok()) {
        return common::InvalidArgument("metrics.influxdb: " + p.status().message());
      }
      check = (*p)->Check();
      made = std::move(p).value();
    }
    if (!check.ok()) {
      common::Log(common::LogLevel::kWarn, std::string(component) + ": metrics source " + made->Describe() +
                                               " does not answer yet: " + check.message() +
                                               " (scoring uses static GPU attributes until it does)");
    }
    sources.push_back(std::move(made));
  }
  return sources;
}

}  // namespace

policy::LoadAwareOptions LoadAwareOptionsOf(const daemon::LiveInputsConfig& config) {
  policy::LoadAwareOptions o;
  const std::pair<const char*, int64_t*> fields[] = {{"memorySize", &o.memory_size_weight},
                                                     {"memoryBandwidth", &o.memory_bandwidth_weight},
                                                     {"compute", &o.compute_weight},
                                                     {"gpuUtil", &o.gpu_util_weight},
                                                     {"memoryUsed", &o.memory_used_weight},
                                                     {"memoryCopyUtil", &o.memory_copy_util_weight},
                                                     {"power", &o.power_weight},
                                                     {"temperature", &o.temperature_weight},
                                                     {"encoderUtil", &o.encoder_util_weight},
                                                     {"decoderUtil", &o.decoder_util_weight}};
  for (const auto& [key, field] : fields) {
    if (auto it = config.load_aware_weights.find(key); it != config.load_aware_weights.end()) {
      *field = it->second;
    }
  }
  for (const auto& m : config.gpu_models) {
    o.models.push_back(policy::GpuModelSpec{.name = m.name,
                                            .aliases = m.aliases,
                                            .memory_mib = m.memory_mib,
                                            .bandwidth_gbps = m.bandwidth_gbps,
                                            .fp32_tflops = m.fp32_tflops,
                                            .tdp_w = m.tdp_w});
  }
  return o;
}

SlowdownModelLoader TrainedModelLoader() {
  return [](const std::string& path) -> common::Result<std::shared_ptr<const ports::SlowdownModel>> {
    // The tables `interference train` wrote: the daemons never run the learner.
    GPUSCHED_ASSIGN_OR_RETURN(served, interference::LoadServedModel(path));
    return std::shared_ptr<const ports::SlowdownModel>(std::move(served));
  };
}

common::Result<std::unique_ptr<sched::MetricsCache>> StartMetricsCache(const daemon::LiveInputsConfig& config,
                                                                       std::string_view component) {
  GPUSCHED_ASSIGN_OR_RETURN(sources, MakeSources(config, component));
  if (sources.empty()) {
    return std::unique_ptr<sched::MetricsCache>();
  }
  auto cache = std::make_unique<sched::MetricsCache>(
      std::move(sources), sched::MetricsCacheOptions{.interval = std::chrono::seconds(config.metrics_refresh_seconds)});
  GPUSCHED_RETURN_IF_ERROR(cache->Start());
  return cache;
}

common::Result<std::shared_ptr<const ports::SlowdownModel>> LoadSlowdownModel(const daemon::LiveInputsConfig& config,
                                                                              const std::string& model_file,
                                                                              const SlowdownModelLoader& load_model) {
  if (!config.interference_enabled && model_file.empty()) {
    return std::shared_ptr<const ports::SlowdownModel>();
  }
  if (model_file.empty()) {
    return common::InvalidArgument(
        "interference.enabled needs the model: --interference-model FILE (gpusched-lab interference train)");
  }
  if (!load_model) {
    return common::InvalidArgument("--interference-model: this build has no slowdown model loader");
  }
  auto loaded = load_model(model_file);
  if (!loaded.ok()) {
    return common::InvalidArgument("--interference-model " + model_file + ": " + loaded.status().message());
  }
  if (*loaded == nullptr) {
    return common::InvalidArgument("--interference-model " + model_file + ": the loader returned no model");
  }
  return loaded;
}

}  // namespace gpusched::cli
