#include "gpusched/sim/queue_why.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

namespace gpusched::sim {
namespace {

std::string Ordinal(int64_t n) {
  const int64_t tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return std::to_string(n) + suffix;
}

std::string SchedulerOf(const QueuedPodView& p) {
  return p.scheduler_name.empty() ? std::string("default-scheduler") : p.scheduler_name;
}

// The scheduler's order within a queue: higher priority, then older, then by key.
auto Order(const QueuedPodView& p) { return std::make_tuple(-p.priority, p.created, p.key); }

std::string Amount(const core::GpuAmount& a) {
  return a == core::GpuAmount::Unlimited() ? std::string("unlimited") : core::ToString(a);
}

}  // namespace

QueueWhy ExplainQueue(const std::vector<core::QueueSpec>& specs, const core::GpuAmount& capacity,
                      const std::vector<QueuedPodView>& pods, const QueuedPodView& pod) {
  sched::GpuQueues queues(capacity);
  (void)queues.SetQueues(specs);
  for (const QueuedPodView& p : pods) {
    const std::string q = queues.QueueOf(p.namespace_, p.queue_label);
    if (p.placed) {
      queues.Charge(p.uid, q, p.demand);
    } else if (p.uid != pod.uid) {
      queues.SetPending(p.uid, q, p.demand);
    }
  }
  QueueWhy why;
  why.queue = queues.QueueOf(pod.namespace_, pod.queue_label);
  // Admission as the scheduler asks it: the queue's holdings with this pod added.
  why.admission = queues.Admit(why.queue, pod.demand);
  queues.SetPending(pod.uid, why.queue, pod.demand);
  if (auto st = queues.Status(why.queue); st.has_value()) {
    why.status = *st;
  }
  std::vector<const QueuedPodView*> mine;
  for (const QueuedPodView& p : pods) {
    if (!p.placed && SchedulerOf(p) == SchedulerOf(pod) && queues.QueueOf(p.namespace_, p.queue_label) == why.queue) {
      mine.push_back(&p);
    }
  }
  std::sort(mine.begin(), mine.end(), [](const auto* a, const auto* b) { return Order(*a) < Order(*b); });
  why.pending = static_cast<int64_t>(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i]->uid == pod.uid) {
      why.position = static_cast<int64_t>(i) + 1;
      for (size_t j = i; j > 0 && why.ahead.size() < 3; --j) {
        why.ahead.push_back(fmt::format("{} (priority {})", mine[j - 1]->key, mine[j - 1]->priority));
      }
    }
  }
  return why;
}

std::string FormatQueueWhy(const QueueWhy& why) {
  std::string out = fmt::format(
      "GPU queue {}: {} of {} pending pod(s) (the scheduler takes them by priority, then "
      "age)",
      why.queue, Ordinal(why.position), why.pending);
  if (!why.ahead.empty()) {
    out += "; ahead of it: ";
    for (size_t i = 0; i < why.ahead.size(); ++i) {
      out += (i == 0 ? "" : ", ") + why.ahead[i];
    }
    if (why.position - 1 > static_cast<int64_t>(why.ahead.size())) {
      out += fmt::format(" and {} more", why.position - 1 - static_cast<int64_t>(why.ahead.size()));
    }
  }
  out += "\n";
  const sched::QueueStatus& st = why.status;
  out += fmt::format(
      "  the queue holds {} ({} running); guaranteed {}, limit {}, fair share {} (rank {:.2f}: "
      "queues furthest below their fair share are tried first)\n",
      core::ToString(st.allocated), st.running_pods, core::ToString(st.guaranteed), Amount(st.limit),
      core::ToString(st.fair_share), st.rank);
  if (!why.admission.admitted) {
    out += "  quota: not admitted now: " + why.admission.reason +
           " (it waits until the queue's pods free that much, or the limit is raised)\n";
  } else {
    out += std::string("  quota: admitted") +
           (why.admission.within_guarantee ? " (within the queue's guarantee: it may reclaim GPUs lent to others)\n"
                                           : " (beyond the queue's guarantee: it borrows idle GPUs)\n");
  }
  return out;
}

}  // namespace gpusched::sim
