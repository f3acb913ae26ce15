#include "gpusched/daemon/metric_families.h"

#include <prometheus/text_serializer.h>

namespace gpusched::daemon {

ScrapeFamilies::ScrapeFamilies(std::vector<prometheus::MetricFamily> collected) : collected_(std::move(collected)) {}

prometheus::MetricFamily& ScrapeFamilies::Family(std::string name, std::string help, prometheus::MetricType type) {
  prometheus::MetricFamily& f = added_.emplace_back();
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void ScrapeFamilies::Sample(prometheus::MetricFamily& family, double value, Labels labels) {
  prometheus::ClientMetric m;
  for (auto& [name, v] : labels) {
    m.label.push_back(prometheus::ClientMetric::Label{std::move(name), std::move(v)});
  }
  (family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value) = value;
  family.metric.push_back(std::move(m));
}

void ScrapeFamilies::GpuQueues(const std::vector<core::QueueStatus>& queues) {
  using prometheus::MetricType;
  auto& allocated =
      Family("gpusched_queue_allocated", "What a GPU queue's placed pods hold, by resource", MetricType::Gauge);
  auto& guaranteed =
      Family("gpusched_queue_guaranteed", "A GPU queue's guaranteed quota, by resource", MetricType::Gauge);
  auto& limit =
      Family("gpusched_queue_limit", "A GPU queue's limit, by resource (absent: unlimited)", MetricType::Gauge);
  auto& fair = Family("gpusched_queue_fair_share",
                      "A GPU queue's fair share of the cluster now (guarantee up to demand, then idle GPUs by weight)",
                      MetricType::Gauge);
  auto& pending =
      Family("gpusched_queue_pending_pods", "Pods of a GPU queue waiting to be scheduled", MetricType::Gauge);
  auto& reclaimed = Family("gpusched_queue_reclaimed_pods_total",
                           "Pods of a GPU queue evicted to give another queue its guarantee back", MetricType::Counter);
  auto amount = [](prometheus::MetricFamily& f, const std::string& queue, const core::GpuAmount& a) {
    for (const auto& [resource, v] :
         {std::pair{"gpus", a.gpus}, std::pair{"milli", a.milli}, std::pair{"memory_mib", a.memory_mib}}) {
      if (v != core::GpuAmount::kUnlimited) {
        Sample(f, static_cast<double>(v), {{"queue", queue}, {"resource", resource}});
      }
    }
  };
  for (const core::QueueStatus& st : queues) {
    amount(allocated, st.name, st.allocated);
    amount(guaranteed, st.name, st.guaranteed);
    amount(limit, st.name, st.limit);
    amount(fair, st.name, st.fair_share);
    Sample(pending, static_cast<double>(st.pending_pods), {{"queue", st.name}});
    Sample(reclaimed, static_cast<double>(st.reclaimed_pods), {{"queue", st.name}});
  }
}

std::string ScrapeFamilies::Serialize() const {
  std::vector<prometheus::MetricFamily> all = collected_;
  all.insert(all.end(), added_.begin(), added_.end());
  return prometheus::TextSerializer().Serialize(all);
}

}  // namespace gpusched::daemon
