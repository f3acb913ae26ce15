#include "gpusched/extender/metrics.h"

#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "gpusched/common/redact.h"
#include "gpusched/daemon/metric_families.h"

namespace gpusched::extender {

struct ExtenderMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests = prometheus::BuildCounter()
                                                          .Name("gpusched_extender_requests_total")
                                                          .Help("Extender HTTP requests by verb and status code")
                                                          .Register(*registry);
  prometheus::Family<prometheus::Histogram>& latency = prometheus::BuildHistogram()
                                                           .Name("gpusched_extender_request_duration_seconds")
                                                           .Help("Time from request read to response written, by verb")
                                                           .Register(*registry);
  prometheus::Family<prometheus::Counter>& rejections = prometheus::BuildCounter()
                                                            .Name("gpusched_extender_filter_rejections_total")
                                                            .Help("Nodes the filter rejected, by reason category")
                                                            .Register(*registry);
  prometheus::Family<prometheus::Counter>& binds =
      prometheus::BuildCounter().Name("gpusched_extender_binds_total").Help("Binds by result").Register(*registry);
  prometheus::Family<prometheus::Counter>& bind_refusals = prometheus::BuildCounter()
                                                               .Name("gpusched_extender_bind_refusals_total")
                                                               .Help("Binds refused before any API call, by reason")
                                                               .Register(*registry);
  prometheus::Family<prometheus::Counter>& unsynced =
      prometheus::BuildCounter()
          .Name("gpusched_extender_unsynced_refusals_total")
          .Help("Calls answered 503 because the pod and node caches had not synced yet, by verb")
          .Register(*registry);
  prometheus::Family<prometheus::Gauge>& leader =
      prometheus::BuildGauge()
          .Name("gpusched_extender_leader")
          .Help("1 while this replica holds the leader Lease (binds), 0 while it stands by; absent without election")
          .Register(*registry);
  prometheus::Family<prometheus::Counter>& leader_transitions = prometheus::BuildCounter()
                                                                    .Name("gpusched_extender_leader_transitions_total")
                                                                    .Help("Times this replica became leader")
                                                                    .Register(*registry);
  std::mutex mu;  // guards the per-label lookups (Family::Add is thread-safe, the maps below are not)
  std::map<std::string, prometheus::Histogram*, std::less<>> histograms;
};

namespace {

const prometheus::Histogram::BucketBoundaries& Buckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5};
  return buckets;
}

}  // namespace

ExtenderMetrics::ExtenderMetrics() : impl_(std::make_unique<Impl>()) {}
ExtenderMetrics::~ExtenderMetrics() = default;

void ExtenderMetrics::Request(std::string_view verb, int code, double seconds) {
  impl_->requests.Add({{"verb", std::string(verb)}, {"code", std::to_string(code)}}).Increment();
  prometheus::Histogram* h = nullptr;
  {
    std::lock_guard lock(impl_->mu);
    auto it = impl_->histograms.find(verb);
    if (it == impl_->histograms.end()) {
      h = &impl_->latency.Add({{"verb", std::string(verb)}}, Buckets());
      impl_->histograms.emplace(std::string(verb), h);
    } else {
      h = it->second;
    }
  }
  h->Observe(seconds);
}

void ExtenderMetrics::FilterRejection(std::string_view reason, double count) {
  impl_->rejections.Add({{"reason", std::string(reason)}}).Increment(count);
}

void ExtenderMetrics::Bind(bool ok) { impl_->binds.Add({{"result", ok ? "ok" : "failed"}}).Increment(); }

void ExtenderMetrics::BindUnknown() { impl_->binds.Add({{"result", "unknown"}}).Increment(); }

void ExtenderMetrics::SetLeader(bool leading, uint64_t became_leader) {
  impl_->leader.Add({}).Set(leading ? 1 : 0);
  prometheus::Counter& c = impl_->leader_transitions.Add({});
  if (const double more = static_cast<double>(became_leader) - c.Value(); more > 0) {
    c.Increment(more);
  }
}

void ExtenderMetrics::BindRefused(std::string_view reason) {
  impl_->bind_refusals.Add({{"reason", std::string(reason)}}).Increment();
}

void ExtenderMetrics::NotSynced(std::string_view verb) {
  impl_->unsynced.Add({{"verb", std::string(verb)}}).Increment();
}

std::string ExtenderMetrics::Serialize(const ClusterMirror& mirror) const {
  using daemon::ScrapeFamilies;
  using prometheus::MetricType;
  ScrapeFamilies out(impl_->registry->Collect());
  auto& overcommitted =
      out.Family("gpusched_node_overcommitted",
                 "1 when the pods bound to the node hold more than it has (GPU, memory, CPU)", MetricType::Gauge);
  auto& milli_alloc = out.Family("gpusched_node_gpu_milli_allocated",
                                 "GPU compute allocated on the node (1000 = one GPU)", MetricType::Gauge);
  auto& milli_cap = out.Family("gpusched_node_gpu_milli_capacity",
                               "GPU compute of the node's healthy and unhealthy GPUs", MetricType::Gauge);
  auto& mem_alloc =
      out.Family("gpusched_node_gpu_memory_allocated_mib", "GPU memory allocated on the node (MiB)", MetricType::Gauge);
  auto& mem_cap =
      out.Family("gpusched_node_gpu_memory_capacity_mib", "GPU memory of the node (MiB)", MetricType::Gauge);
  {
    auto lock = mirror.ReadLock();
    const core::ClusterState& state = mirror.state();
    for (const auto& [node, over] : state.Overcommits()) {
      ScrapeFamilies::Sample(overcommitted, 1, {{"node", node.str()}});
    }
    for (size_t i = 0; i < state.SlotCount(); ++i) {
      if (!state.IsLive(i)) {
        continue;
      }
      const core::NodeView& v = state.View(i);
      int64_t milli_free = 0;
      int64_t mem_free = 0;
      int64_t mem_total = 0;
      for (size_t g = 0; g < v.gpus.size(); ++g) {
        milli_free += v.gpus[g].free.value();
        mem_free += v.gpus[g].memory_free.value();
        mem_total += v.node->gpus[g].memory.value();
      }
      const int64_t milli_total = 1000 * static_cast<int64_t>(v.gpus.size());
      const std::string& name = v.name().str();
      ScrapeFamilies::Sample(milli_alloc, static_cast<double>(milli_total - milli_free), {{"node", name}});
      ScrapeFamilies::Sample(milli_cap, static_cast<double>(milli_total), {{"node", name}});
      ScrapeFamilies::Sample(mem_alloc, static_cast<double>(mem_total - mem_free), {{"node", name}});
      ScrapeFamilies::Sample(mem_cap, static_cast<double>(mem_total), {{"node", name}});
    }
  }
  const MirrorStats stats = mirror.stats();
  const std::tuple<const char*, const char*, uint64_t> counters[] = {
      {"gpusched_extender_node_events_total", "Node watch events applied", stats.node_events},
      {"gpusched_extender_pod_events_total", "Pod watch events applied", stats.pod_events},
      {"gpusched_extender_rebuilt_allocations_total",
       "Allocations charged from pod annotations (restart or other writers)", stats.rebuilt_allocations},
      {"gpusched_extender_rejected_events_total",
       "Watch events ignored: undecodable objects or allocations that did not fit", stats.rejected_events},
      {"gpusched_extender_expired_assumptions_total",
       "Assumed allocations forgotten because the watch never showed their pod bound in time",
       stats.expired_assumptions},
      {"gpusched_extender_overcommitted_charges_total",
       "Bound pods charged past their node's capacity (the cluster shows them bound)", stats.overcommitted_charges},
      {"gpusched_extender_allocations_held_for_deleted_nodes_total",
       "Allocations of bound pods kept when their Node object was deleted", stats.held_for_node_return},
  };
  for (const auto& [name, help, value] : counters) {
    ScrapeFamilies::Sample(out.Family(name, help, MetricType::Counter), static_cast<double>(value));
  }
  if (cache_ != nullptr) {
    auto& up = out.Family("gpusched_metrics_source_up", "1 when the last fetch of the metrics source succeeded",
                          MetricType::Gauge);
    auto& failures = out.Family("gpusched_metrics_source_consecutive_failures", "Failed fetches since the last success",
                                MetricType::Gauge);
    auto& gpus = out.Family("gpusched_metrics_source_gpus", "GPUs in the source's last good fetch", MetricType::Gauge);
    auto& errors = out.Family("gpusched_metrics_source_refresh_errors_total", "Failed fetches of the metrics source",
                              MetricType::Counter);
    for (const auto& h : cache_->Health()) {
      // A source named by its URL keeps no credentials in the label.
      const ScrapeFamilies::Labels source = {{"source", common::RedactUrls(h.source)}};
      ScrapeFamilies::Sample(up, h.ok ? 1 : 0, source);
      ScrapeFamilies::Sample(failures, static_cast<double>(h.consecutive_failures), source);
      ScrapeFamilies::Sample(gpus, static_cast<double>(h.gpus), source);
      ScrapeFamilies::Sample(errors, static_cast<double>(h.refresh_errors_total), source);
    }
  }
  std::string text = out.Serialize();
  if (extra_) {
    text += extra_();
  }
  return text;
}

}  // namespace gpusched::extender
