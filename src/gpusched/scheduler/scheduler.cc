#include "gpusched/scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
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
  auto amounts = [](const core::GpuAmount& a) {
    json out = json::object();
    for (const auto& [key, v] :
         {std::pair{"gpus", a.gpus}, std::pair{"gpuMilli", a.milli}, std::pair{"gpuMemoryMiB", a.memory_mib}}) {
      if (v != core::GpuAmount::kUnlimited) {
        out[key] = v;
      }
    }
    return out;
  };
  std::map<std::string, json> out;
  const std::map<std::string, std::string> errors = core_->QueueErrors();
  const std::vector<std::string> names = core_->QueueObjectNames();
  for (const std::string& name : names) {
    json status = json::object();
    auto error = errors.find(name);
    auto st = core_->QueueStatusOf(name);
    if (error == errors.end() && st.has_value()) {
      status = {{"allocated", amounts(st->allocated)}, {"guaranteed", amounts(st->guaranteed)},
                {"limit", amounts(st->limit)},         {"fairShare", amounts(st->fair_share)},
                {"runningPods", st->running_pods},     {"pendingPods", st->pending_pods},
                {"reclaimedPods", st->reclaimed_pods}};
      status["conditions"] = json::array({{{"type", "Valid"},
                                           {"status", "True"},
                                           {"reason", "Accepted"},
                                           {"message", "the scheduler accounts this queue"}}});
    } else {
      const std::string why = error != errors.end() ? error->second : "not known to the scheduler";
      // A merge patch: null removes what an earlier, valid version of the queue reported.
      for (const char* stale :
           {"allocated", "guaranteed", "limit", "fairShare", "runningPods", "pendingPods", "reclaimedPods"}) {
        status[stale] = nullptr;
      }
      status["conditions"] = json::array({{{"type", "Valid"},
                                           {"status", "False"},
                                           {"reason", "Invalid"},
                                           {"message", "left out (its pods go to the default queue): " + why}}});
    }
    out.emplace(name, std::move(status));
  }
  return out;
}

std::string Scheduler::Metrics() const {
  const SchedulerStats s = core_->stats();
  const sched::SchedulingQueue::Counts q = core_->queue_counts();
  std::vector<prometheus::MetricFamily> families = telemetry_->registry->Collect();
  families.reserve(families.size() + 20);  // `family` hands out references into it
  auto family = [&families](std::string name, std::string help, prometheus::MetricType type) -> auto& {
    prometheus::MetricFamily f;
    f.name = std::move(name);
    f.help = std::move(help);
    f.type = type;
    families.push_back(std::move(f));
    return families.back();
  };
  auto add = [](prometheus::MetricFamily& f, const char* label, const char* value, double v) {
    prometheus::ClientMetric m;
    if (label != nullptr) {
      m.label.push_back(prometheus::ClientMetric::Label{label, value});
    }
    (f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = v;
    f.metric.push_back(std::move(m));
  };
  auto& pending = family("gpusched_scheduler_pending_pods", "Pods waiting to be scheduled, by queue",
                         prometheus::MetricType::Gauge);
  add(pending, "queue", "active", static_cast<double>(q.active));
  add(pending, "queue", "backoff", static_cast<double>(q.backoff));
  add(pending, "queue", "unschedulable", static_cast<double>(q.unschedulable));
  add(pending, "queue", "in_flight", static_cast<double>(q.in_flight));
  auto& attempts = family("gpusched_scheduler_schedule_attempts_total", "Scheduling attempts by result",
                          prometheus::MetricType::Counter);
  add(attempts, "result", "scheduled", static_cast<double>(s.scheduled));
  add(attempts, "result", "unschedulable", static_cast<double>(s.unschedulable));
  add(attempts, "result", "error", static_cast<double>(s.errors));
  auto& binds = family("gpusched_scheduler_binds_total",
                       "Bindings by result (unknown: failed with an outcome only the watch can tell; also counted "
                       "as failed)",
                       prometheus::MetricType::Counter);
  add(binds, "result", "ok", static_cast<double>(s.binds_ok));
  add(binds, "result", "failed", static_cast<double>(s.binds_failed));
  add(binds, "result", "unknown", static_cast<double>(s.binds_unknown));
  auto& expired = family("gpusched_scheduler_expired_assumptions_total",
                         "Assumed placements forgotten because the watch never showed their binding",
                         prometheus::MetricType::Counter);
  add(expired, nullptr, nullptr, static_cast<double>(s.expired_assumptions));
  auto& preemptions = family("gpusched_scheduler_preemptions_total",
                             "Preemptions by result (failed: an eviction was refused, the held room given back)",
                             prometheus::MetricType::Counter);
  add(preemptions, "result", "ok", static_cast<double>(s.preemptions));
  add(preemptions, "result", "failed", static_cast<double>(s.preemption_failures));
  auto& victims = family("gpusched_scheduler_preemption_victims_total", "Pods evicted by preemption",
                         prometheus::MetricType::Counter);
  add(victims, nullptr, nullptr, static_cast<double>(s.victims));
  auto& gangs = family("gpusched_scheduler_gangs_total",
                       "Pod groups by outcome (placed: min-available members bound together; refused: an attempt "
                       "that placed none; below_minimum: a placed group that lost members below its minimum)",
                       prometheus::MetricType::Counter);
  add(gangs, "outcome", "placed", static_cast<double>(s.gangs_placed));
  add(gangs, "outcome", "refused", static_cast<double>(s.gangs_refused));
  add(gangs, "outcome", "below_minimum", static_cast<double>(s.gangs_below_minimum));
  const size_t budgets = core_->DisruptionBudgets();
  const int64_t oldest_ms = core_->OldestPendingMs();  // how long the pod waiting longest has waited
  auto& oldest = family("gpusched_scheduler_oldest_pending_seconds",
                        "How long the pod that has waited longest for a node has waited (0 when none waits)",
                        prometheus::MetricType::Gauge);
  add(oldest, nullptr, nullptr, static_cast<double>(oldest_ms) / 1000.0);
  auto& pdbs = family("gpusched_scheduler_disruption_budgets", "PodDisruptionBudgets preemption knows of",
                      prometheus::MetricType::Gauge);
  add(pdbs, nullptr, nullptr, static_cast<double>(budgets));
  const auto ms = core_->cache().stats();
  auto& over = family("gpusched_scheduler_overcommitted_charges_total",
                      "Bound pods charged past their node's capacity (the cluster shows them bound)",
                      prometheus::MetricType::Counter);
  add(over, nullptr, nullptr, static_cast<double>(ms.overcommitted_charges));
  // GPU queues: per queue, and per resource (gpus, milli, memory_mib) where amounts; unlimited amounts are left out.
  auto& q_allocated = family("gpusched_queue_allocated", "What a GPU queue's placed pods hold, by resource",
                             prometheus::MetricType::Gauge);
  auto& q_guaranteed =
      family("gpusched_queue_guaranteed", "A GPU queue's guaranteed quota, by resource", prometheus::MetricType::Gauge);
  auto& q_limit = family("gpusched_queue_limit", "A GPU queue's limit, by resource (absent: unlimited)",
                         prometheus::MetricType::Gauge);
  auto& q_fair =
      family("gpusched_queue_fair_share",
             "A GPU queue's fair share of the cluster now (guarantee up to demand, then idle GPUs by weight)",
             prometheus::MetricType::Gauge);
  auto& q_pending = family("gpusched_queue_pending_pods", "Pods of a GPU queue waiting to be scheduled",
                           prometheus::MetricType::Gauge);
  auto& q_reclaimed =
      family("gpusched_queue_reclaimed_pods_total",
             "Pods of a GPU queue evicted to give another queue its guarantee back", prometheus::MetricType::Counter);
  auto add_amount = [](prometheus::MetricFamily& f, const std::string& queue, const core::GpuAmount& a) {
    for (const auto& [resource, v] :
         {std::pair{"gpus", a.gpus}, std::pair{"milli", a.milli}, std::pair{"memory_mib", a.memory_mib}}) {
      if (v == core::GpuAmount::kUnlimited) {
        continue;
      }
      prometheus::ClientMetric m;
      m.label = {{"queue", queue}, {"resource", resource}};
      m.gauge.value = static_cast<double>(v);
      f.metric.push_back(std::move(m));
    }
  };
  for (const sched::QueueStatus& st : core_->QueueStatuses()) {
    add_amount(q_allocated, st.name, st.allocated);
    add_amount(q_guaranteed, st.name, st.guaranteed);
    add_amount(q_limit, st.name, st.limit);
    add_amount(q_fair, st.name, st.fair_share);
    add(q_pending, "queue", st.name.c_str(), static_cast<double>(st.pending_pods));
    add(q_reclaimed, "queue", st.name.c_str(), static_cast<double>(st.reclaimed_pods));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace gpusched::scheduler
