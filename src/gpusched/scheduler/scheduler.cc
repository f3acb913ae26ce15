#include "gpusched/scheduler/scheduler.h"

#include <initializer_list>
#include <optional>
#include <utility>

#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
#include "gpusched/daemon/metric_families.h"
#include "gpusched/kube/constraints.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/objects.h"

namespace gpusched::scheduler {

using nlohmann::json;

struct Scheduler::Telemetry {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Histogram& attempt =
      prometheus::BuildHistogram()
          .Name("gpusched_scheduler_attempt_duration_seconds")
          .Help("One scheduling attempt: from pop to bind handed off or pod parked")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                           0.05, 0.1, 0.25, 0.5, 1});
  prometheus::Histogram& e2e = prometheus::BuildHistogram()
                                   .Name("gpusched_scheduler_e2e_scheduling_duration_seconds")
                                   .Help("From the pod first seen pending to its Binding written")
                                   .Register(*registry)
                                   .Add({}, prometheus::Histogram::BucketBoundaries{0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                                                    0.5, 1, 2.5, 5, 10, 30, 60, 300});
};

namespace {

void Warn(const std::string& message) { common::Log(common::LogLevel::kWarn, "gpusched scheduler: " + message); }

}  // namespace

common::Result<std::unique_ptr<Scheduler>> Scheduler::Create(ClusterCache& cache, ports::Binder& binder,
                                                             EventSink events, SchedulerOptions options) {
  auto telemetry = std::make_shared<Telemetry>();
  sched::SchedulerCoreOptions core{.scheduler_names = options.scheduler_names,
                                   .policy = options.policy,
                                   .weights = options.weights,
                                   .queue = options.queue,
                                   .bind_workers = options.bind_workers,
                                   .bind_in_flight_ms = options.bind_in_flight_ms,
                                   .assumed_ttl_ms = options.assumed_ttl_ms,
                                   .seed = options.seed,
                                   .clock = options.clock,
                                   .may_bind = options.may_bind,
                                   .preemptor = options.preemptor,
                                   .snapshots = options.snapshots,
                                   .load_aware = options.load_aware,
                                   .interference_aware = options.interference_aware,
                                   .observe_attempt = [telemetry](double s) { telemetry->attempt.Observe(s); },
                                   .observe_e2e = [telemetry](double s) { telemetry->e2e.Observe(s); }};
  GPUSCHED_ASSIGN_OR_RETURN(made, sched::SchedulerCore::Create(cache, binder, std::move(events), std::move(core)));
  std::unique_ptr<Scheduler> scheduler(new Scheduler(std::move(options), std::move(telemetry)));
  scheduler->core_ = std::move(made);
  sched::SchedulerCore* c = scheduler->core_.get();
  scheduler->decode_ = kube::WatchedPodOptions{.resources = scheduler->options_.resources,
                                               .app_label = cache.options().app_label,
                                               .with_requests = cache.options().charge_every_pod,
                                               .ours = [c](const std::string& name) { return c->Serves(name); }};
  return scheduler;
}

Scheduler::Scheduler(SchedulerOptions options, std::shared_ptr<Telemetry> telemetry)
    : options_(std::move(options)), telemetry_(std::move(telemetry)) {}

Scheduler::~Scheduler() {
  if (core_ != nullptr) {
    core_->Stop();
  }
}

void Scheduler::OnNode(EventType type, const json& node) {
  if (type == EventType::kDeleted) {
    core_->OnNodeDeleted(kube::DecodeNodeName(node));
  } else {
    core_->OnNode(kube::DecodeNode(node));
  }
}

void Scheduler::OnPod(EventType type, const json& pod) { core_->OnPod(type, kube::DecodeWatchedPod(pod, decode_)); }

void Scheduler::OnPodGroup(EventType type, const json& object) {
  auto group = kube::DecodeCoschedulingPodGroup(object);
  if (!group.ok()) {
    Warn(group.status().message() + " (its last readable version, if any, stays)");
    return;
  }
  core_->OnPodGroup(type, group->namespace_, group->name, group->min_member);
}

void Scheduler::OnDisruptionBudget(EventType type, const json& pdb) {
  core_->OnDisruptionBudget(type, kube::DecodeDisruptionBudget(pdb));
}

void Scheduler::OnNamespace(EventType type, const json& ns) {
  const json* meta = ns.is_object() && ns.contains("metadata") ? &ns["metadata"] : nullptr;
  if (meta == nullptr || !meta->is_object() || !meta->contains("name") || !(*meta)["name"].is_string()) {
    Warn("a namespace without metadata.name is ignored");
    return;
  }
  std::map<std::string, std::string> labels;
  if (meta->contains("labels") && (*meta)["labels"].is_object()) {
    for (const auto& [k, v] : (*meta)["labels"].items()) {
      if (v.is_string()) {
        labels.emplace(k, v.get<std::string>());
      }
    }
  }
  core_->OnNamespace(type, (*meta)["name"].get<std::string>(), std::move(labels));
}

void Scheduler::OnGpuQueue(EventType type, const json& object) {
  auto named = kube::GpuQueueName(object);
  if (!named.ok()) {
    Warn("ignoring a GpuQueue: " + named.status().message());
    return;
  }
  const std::string spec_text = object.contains("spec") ? object["spec"].dump() : std::string();
  core_->OnGpuQueue(type, *named, spec_text,
                    type == EventType::kDeleted ? common::Result<core::QueueSpec>(common::NotFound("deleted"))
                                                : kube::DecodeGpuQueue(object));
}

std::map<std::string, json> Scheduler::QueueStatusObjects() const {
  std::map<std::string, json> out;
  const std::map<std::string, std::string> errors = core_->QueueErrors();
  for (const std::string& name : core_->QueueObjectNames()) {
    auto error = errors.find(name);
    const std::optional<core::QueueStatus> st = core_->QueueStatusOf(name);
    out.emplace(name, kube::GpuQueueStatus(st.has_value() ? &*st : nullptr,
                                           error != errors.end() ? error->second : std::string()));
  }
  return out;
}

std::string Scheduler::Metrics() const {
  using prometheus::MetricType;
  const SchedulerStats s = core_->stats();
  const sched::SchedulingQueue::Counts q = core_->queue_counts();
  daemon::ScrapeFamilies out(telemetry_->registry->Collect());
  auto one = [](prometheus::MetricFamily& f, const char* label,
                std::initializer_list<std::pair<const char*, double>> v) {
    for (const auto& [value, x] : v) {
      daemon::ScrapeFamilies::Sample(f, x, {{label, value}});
    }
  };
  auto d = [](auto v) { return static_cast<double>(v); };
  one(out.Family("gpusched_scheduler_pending_pods", "Pods waiting to be scheduled, by queue", MetricType::Gauge),
      "queue",
      {{"active", d(q.active)},
       {"backoff", d(q.backoff)},
       {"unschedulable", d(q.unschedulable)},
       {"in_flight", d(q.in_flight)}});
  one(out.Family("gpusched_scheduler_schedule_attempts_total", "Scheduling attempts by result", MetricType::Counter),
      "result", {{"scheduled", d(s.scheduled)}, {"unschedulable", d(s.unschedulable)}, {"error", d(s.errors)}});
  one(out.Family("gpusched_scheduler_binds_total",
                 "Bindings by result (unknown: failed with an outcome only the watch can tell; also counted as failed)",
                 MetricType::Counter),
      "result", {{"ok", d(s.binds_ok)}, {"failed", d(s.binds_failed)}, {"unknown", d(s.binds_unknown)}});
  daemon::ScrapeFamilies::Sample(
      out.Family("gpusched_scheduler_expired_assumptions_total",
                 "Assumed placements forgotten because the watch never showed their binding", MetricType::Counter),
      d(s.expired_assumptions));
  one(out.Family("gpusched_scheduler_preemptions_total",
                 "Preemptions by result (failed: an eviction was refused, the held room given back)",
                 MetricType::Counter),
      "result", {{"ok", d(s.preemptions)}, {"failed", d(s.preemption_failures)}});
  daemon::ScrapeFamilies::Sample(
      out.Family("gpusched_scheduler_preemption_victims_total", "Pods evicted by preemption", MetricType::Counter),
      d(s.victims));
  one(out.Family("gpusched_scheduler_gangs_total",
                 "Pod groups by outcome (placed: min-available members bound together; refused: an attempt that "
                 "placed none; below_minimum: a placed group that lost members below its minimum)",
                 MetricType::Counter),
      "outcome",
      {{"placed", d(s.gangs_placed)}, {"refused", d(s.gangs_refused)}, {"below_minimum", d(s.gangs_below_minimum)}});
  daemon::ScrapeFamilies::Sample(
      out.Family("gpusched_scheduler_oldest_pending_seconds",
                 "How long the pod that has waited longest for a node has waited (0 when none waits)",
                 MetricType::Gauge),
      d(core_->OldestPendingMs()) / 1000.0);
  daemon::ScrapeFamilies::Sample(out.Family("gpusched_scheduler_disruption_budgets",
                                            "PodDisruptionBudgets preemption knows of", MetricType::Gauge),
                                 d(core_->DisruptionBudgets()));
  daemon::ScrapeFamilies::Sample(
      out.Family("gpusched_scheduler_overcommitted_charges_total",
                 "Bound pods charged past their node's capacity (the cluster shows them bound)", MetricType::Counter),
      d(core_->cache().stats().overcommitted_charges));
  out.GpuQueues(core_->QueueStatuses());
  return out.Serialize();
}

}  // namespace gpusched::scheduler
