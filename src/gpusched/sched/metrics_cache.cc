#include "gpusched/sched/metrics_cache.h"

#include <ctime>
#include <utility>

#include "gpusched/common/log.h"

namespace gpusched::sched {
namespace {

// "12:00:01Z" (UTC) for Unix ms.
std::string ClockTime(int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%H:%M:%SZ", &tm);
  return buf;
}

bool SameSample(const std::optional<core::MetricSample>& a, const std::optional<core::MetricSample>& b) {
  if (a.has_value() != b.has_value()) {
    return false;
  }
  return !a.has_value() || (a->value == b->value && a->timestamp_ms == b->timestamp_ms);
}

std::string FailureReason(const MetricsSourceHealth& h) {
  return "metrics source " + h.source + ": " + h.last_error + " (" + std::to_string(h.consecutive_failures) +
         (h.consecutive_failures == 1 ? " failure" : " failures") + " since " + ClockTime(h.failing_since_ms) + ")";
}

}  // namespace

bool SameMetrics(const core::GpuMetricsMap& a, const core::GpuMetricsMap& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (const auto& [uuid, metrics] : a) {
    const auto it = b.find(uuid);
    if (it == b.end()) {
      return false;
    }
    for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
      if (!SameSample(metrics.samples[i], it->second.samples[i])) {
        return false;
      }
    }
  }
  return true;
}

MetricsCache::MetricsCache(std::vector<std::unique_ptr<ports::MetricsSource>> sources, MetricsCacheOptions options)
    : options_(std::move(options)), current_(std::make_shared<const core::GpuMetricsMap>()) {
  for (auto& source : sources) {
    SourceState state;
    state.name = source->Describe();
    state.health.source = state.name;
    state.source = std::move(source);
    health_.push_back(state.health);
    sources_.push_back(std::move(state));
  }
}

MetricsCache::~MetricsCache() { Stop(); }

int64_t MetricsCache::NowMs() const {
  if (options_.now_ms) {
    return options_.now_ms();
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

common::Status MetricsCache::Start() {
  if (options_.interval.count() <= 0) {
    return common::FailedPrecondition("metrics cache: the refresh interval must be positive");
  }
  if (!worker_.Start([this] {
        do {
          RefreshOnce();
        } while (!worker_.WaitFor(options_.interval));
      })) {
    return common::FailedPrecondition("metrics cache: already running");
  }
  return common::Status::Ok();
}

void MetricsCache::Stop() { worker_.Stop(); }

void MetricsCache::RefreshOnce() {
  std::lock_guard refresh_lock(refresh_mu_);
  for (SourceState& s : sources_) {
    const auto start = std::chrono::steady_clock::now();
    common::Result<core::GpuMetricsMap> fetched = s.source->Fetch();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int64_t now = NowMs();
    MetricsSourceHealth& h = s.health;
    ++h.refreshes_total;
    h.last_duration_seconds = seconds;
    h.duration_seconds_total += seconds;
    if (fetched.ok()) {
      if (!h.ok && h.consecutive_failures > 0) {
        common::Log(common::LogLevel::kInfo,
                    "metrics source " + s.name + " is back after " + std::to_string(h.consecutive_failures) +
                        " failed refreshes (down since " + ClockTime(h.failing_since_ms) + ")");
      }
      h.ok = true;
      h.consecutive_failures = 0;
      h.failing_since_ms = 0;
      h.last_success_ms = now;
      h.gpus = static_cast<int64_t>(fetched->size());
      s.last = std::make_shared<const core::GpuMetricsMap>(std::move(fetched).value());
      continue;
    }
    ++h.refresh_errors_total;
    // Sources name themselves in their errors ("prometheus http://p:9090: ..."); Degraded() names the source once.
    const common::Status status = fetched.status();  // by value: message() must not outlive it
    const std::string& message = status.message();
    const std::string self = s.name + ": ";
    h.last_error = message.rfind(self, 0) == 0 ? message.substr(self.size()) : message;
    if (h.consecutive_failures == 0) {
      h.failing_since_ms = now;
      common::Log(common::LogLevel::kWarn,
                  "metrics source " + s.name + " is down: " + h.last_error +
                      (s.last != nullptr ? " (keeping its last samples until they go stale)" : ""));
    }
    h.ok = false;
    ++h.consecutive_failures;
  }

  // Merge: newest sample per GPU and metric; a tie keeps the earlier source's. With one source (the usual case)
  // its map is published as it is, without a copy.
  std::shared_ptr<const core::GpuMetricsMap> next;
  size_t with_maps = 0;
  for (const SourceState& s : sources_) {
    if (s.last != nullptr) {
      ++with_maps;
      next = s.last;
    }
  }
  if (with_maps > 1) {
    auto merged = std::make_shared<core::GpuMetricsMap>();
    for (const SourceState& s : sources_) {
      if (s.last == nullptr) {
        continue;
      }
      for (const auto& [uuid, metrics] : *s.last) {
        core::GpuMetrics& into = (*merged)[uuid];
        for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
          const auto& sample = metrics.samples[i];
          auto& have = into.samples[i];
          if (sample.has_value() && (!have.has_value() || sample->timestamp_ms > have->timestamp_ms)) {
            have = sample;
          }
        }
      }
    }
    next = std::move(merged);
  }
  if (next == nullptr) {
    next = std::make_shared<const core::GpuMetricsMap>();
  }

  std::vector<MetricsSourceHealth> health;
  health.reserve(sources_.size());
  for (const SourceState& s : sources_) {
    health.push_back(s.health);
  }
  std::shared_ptr<const core::GpuMetricsMap> old;
  {
    std::lock_guard lock(mu_);
    old = current_;
  }
  // Comparing outside mu_ keeps readers unblocked; only this (serialised) function writes current_.
  const bool changed = !SameMetrics(*old, *next);
  {
    std::lock_guard lock(mu_);
    if (changed) {
      current_ = std::move(next);
      ++generation_;
    }
    health_ = std::move(health);
    ++refreshes_;
  }
  cv_.notify_all();
}

bool MetricsCache::WaitForRefreshes(int64_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return refreshes_ >= n; });
}

std::shared_ptr<const core::GpuMetricsMap> MetricsCache::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

uint64_t MetricsCache::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

int64_t MetricsCache::refreshes() const {
  std::lock_guard lock(mu_);
  return refreshes_;
}

std::vector<MetricsSourceHealth> MetricsCache::Health() const {
  std::lock_guard lock(mu_);
  return health_;
}

std::string MetricsCache::Degraded() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const MetricsSourceHealth& h : health_) {
    if (h.consecutive_failures == 0) {
      continue;
    }
    if (!out.empty()) {
      out += "; ";
    }
    out += FailureReason(h);
  }
  return out;
}

}  // namespace gpusched::sched
