#pragma once

// FakeMetricsSource: a ports::MetricsSource with scripted state for tests of the metrics cache and of the wiring
// that reads it. Fetch returns the scripted map, or the scripted error while one is set. Thread-safe: a test may
// script it while a refresher thread fetches.

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_metrics.h"
#include "gpusched/ports/metrics_source.h"

namespace gpusched::testing {

class FakeMetricsSource final : public ports::MetricsSource {
 public:
  explicit FakeMetricsSource(std::string name = "fake") : name_(std::move(name)) {}

  common::Result<core::GpuMetricsMap> Fetch() override {
    std::lock_guard lock(mu_);
    ++fetches_;
    if (!error_.ok()) {
      return error_;
    }
    return map_;
  }
  std::string Describe() const override { return name_; }

  void Set(const std::string& uuid, core::GpuMetric metric, double value, int64_t timestamp_ms) {
    std::lock_guard lock(mu_);
    map_[common::GpuUuid(uuid)].Set(metric, {.value = value, .timestamp_ms = timestamp_ms});
  }
  void Remove(const std::string& uuid) {
    std::lock_guard lock(mu_);
    map_.erase(common::GpuUuid(uuid));
  }
  // Every Fetch fails with `error` until Recover().
  void Fail(common::Status error) {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
  }
  void Recover() {
    std::lock_guard lock(mu_);
    error_ = common::Status::Ok();
  }
  int64_t fetches() const {
    std::lock_guard lock(mu_);
    return fetches_;
  }

 private:
  const std::string name_;
  mutable std::mutex mu_;
  core::GpuMetricsMap map_;  // GUARDED_BY(mu_)
  common::Status error_;     // GUARDED_BY(mu_)
  int64_t fetches_ = 0;      // GUARDED_BY(mu_)
};

}  // namespace gpusched::testing
