#include "gpusched/agent/collector.h"

#include <utility>

#include "gpusched/common/log.h"

namespace gpusched::agent {
namespace {

void AppendCounter(std::string& out, std::string_view name, std::string_view type, std::string_view help,
                   double value) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += ' ';
  AppendMetricValue(out, value);
  out += '\n';
}

}  // namespace

Collector::Collector(std::unique_ptr<ports::DeviceInventory> inventory, CollectorOptions options)
    : inventory_(std::move(inventory)), options_(std::move(options)) {}

Collector::~Collector() { Stop(); }

common::Status Collector::Start() {
  if (options_.interval.count() <= 0) {
    return common::InvalidArgument("collector: the sample interval must be positive, got " +
                                   std::to_string(options_.interval.count()) + " ms");
  }
  if (worker_.Running()) {
    return common::FailedPrecondition("collector: already started");
  }
  (void)SampleOnce();  // a failure is logged and counted; the thread keeps trying
  worker_.Start([this] { Loop(); });
  return common::Status::Ok();
}

void Collector::Stop() { worker_.Stop(); }

void Collector::Loop() {
  auto next = std::chrono::steady_clock::now() + options_.interval;
  while (!worker_.WaitUntil(next)) {
    (void)SampleOnce();  // counted and logged inside
    // Fixed-rate ticks; after a stall (a slow driver) start again from now rather than catching up in a burst.
    next += options_.interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) {
      next = now + options_.interval;
    }
  }
}

common::Status Collector::SampleOnce() {
  std::lock_guard sample_lock(sample_mu_);
  const auto start = std::chrono::steady_clock::now();
  auto result = inventory_->Sample();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::shared_ptr<const GpuSnapshot> snapshot;
  bool recovered = false;
  {
    std::lock_guard lock(mu_);
    last_duration_s_ = seconds;
    if (!result.ok()) {
      const bool first = last_error_.ok();
      ++sample_errors_;
      last_error_ = result.status();
      if (first) {  // logged when sampling starts failing, not every tick
        common::Log(common::LogLevel::kWarn, "collector: sampling " + inventory_->Describe() +
                                                 " failed (the last values are served): " + last_error_.ToString());
      }
      return last_error_;
    }
    recovered = !last_error_.ok();
    auto next = std::make_shared<GpuSnapshot>();
    next->samples = std::move(result).value();
    next->time = options_.clock ? options_.clock() : std::chrono::system_clock::now();
    next->sequence = ++samples_taken_;
    latest_ = next;
    last_error_ = common::Status::Ok();
    snapshot = std::move(next);
  }
  if (recovered) {
    common::Log(common::LogLevel::kInfo, "collector: sampling recovered");
  }
  if (options_.on_sample) {
    options_.on_sample(*snapshot);
  }
  return common::Status::Ok();
}

std::shared_ptr<const GpuSnapshot> Collector::Latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

uint64_t Collector::samples_taken() const {
  std::lock_guard lock(mu_);
  return samples_taken_;
}

uint64_t Collector::sample_errors() const {
  std::lock_guard lock(mu_);
  return sample_errors_;
}

common::Status Collector::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

std::string Collector::RenderMetrics(const PodAttribution& attribution, const AllocationMap& allocations,
                                     std::string_view hostname) const {
  return RenderMetrics(attribution, allocations, DcgmRenderOptions{.hostname = std::string(hostname)});
}

std::string Collector::RenderMetrics(const PodAttribution& attribution, const AllocationMap& allocations,
                                     const DcgmRenderOptions& options) const {
  std::shared_ptr<const GpuSnapshot> snapshot;
  uint64_t taken = 0;
  uint64_t errors = 0;
  double duration = 0;
  {
    std::lock_guard lock(mu_);
    snapshot = latest_;
    taken = samples_taken_;
    errors = sample_errors_;
    duration = last_duration_s_;
  }
  std::string out;
  if (snapshot != nullptr) {
    out = RenderDcgmMetrics(snapshot->samples, attribution, allocations, options);
  }
  AppendCounter(out, "gpusched_agent_samples_total", "counter", "Successful samples of every GPU.",
                static_cast<double>(taken));
  AppendCounter(out, "gpusched_agent_sample_errors_total", "counter",
                "Samples that failed (the previous values are served meanwhile).", static_cast<double>(errors));
  AppendCounter(out, "gpusched_agent_sample_duration_seconds", "gauge", "How long the last sample took.", duration);
  if (snapshot != nullptr) {
    AppendCounter(out, "gpusched_agent_last_sample_timestamp_seconds", "gauge",
                  "When the served samples were taken (unix time).",
                  std::chrono::duration<double>(snapshot->time.time_since_epoch()).count());
  }
  return out;
}

}  // namespace gpusched::agent
