#include "gpusched/adapters/k8s/event_writer.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"

namespace gpusched::adapters::k8s {
namespace {

constexpr size_t kMaxTracked = 10000;  // series and buckets kept; past it the stale ones go

std::string NowRfc3339() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ObjectKey(const ports::PodEvent& e) { return e.uid.empty() ? e.namespace_ + "/" + e.name : e.uid; }

std::string SeriesKey(const ports::PodEvent& e) {
  return ObjectKey(e) + '\x1f' + e.type + '\x1f' + e.reason + '\x1f' + e.message;
}

}  // namespace

EventWriter::EventWriter(ApiClient& client, std::string component, EventWriterOptions options,
                         const common::Clock* clock)
    : client_(client),
      component_(std::move(component)),
      options_(options),
      clock_(clock != nullptr ? clock : &common::SystemClock::Instance()) {
  thread_ = std::thread([this] { Run(); });
}

EventWriter::~EventWriter() { Stop(); }

int64_t EventWriter::NowMs() const { return clock_->NowMs(); }

void EventWriter::SetStillPending(std::function<bool(const std::string& uid)> still_pending) {
  std::lock_guard lock(mu_);
  still_pending_ = std::move(still_pending);
}

bool EventWriter::TakeToken(const std::string& object, int64_t now_ms) {
  const double burst = std::max(1, options_.burst);
  auto [it, fresh] = buckets_.try_emplace(object, Bucket{.tokens = burst, .at_ms = now_ms});
  Bucket& b = it->second;
  if (!fresh && options_.refill.count() > 0) {
    b.tokens = std::min(
        burst, b.tokens + static_cast<double>(now_ms - b.at_ms) / static_cast<double>(options_.refill.count()));
    b.at_ms = now_ms;
  }
  if (b.tokens < 1) {
    return false;
  }
  b.tokens -= 1;
  return true;
}

void EventWriter::Prune(int64_t now_ms) {
  if (series_.size() >= kMaxTracked) {
    std::erase_if(series_, [&](const auto& kv) {
      return !kv.second.patch_queued && now_ms - kv.second.last_seen_ms >= options_.repeat_window.count();
    });
    if (series_.size() >= kMaxTracked) {
      std::erase_if(series_, [](const auto& kv) { return !kv.second.patch_queued; });
    }
  }
  if (buckets_.size() >= kMaxTracked) {
    // A bucket refilled to the burst is the same as none.
    const double burst = std::max(1, options_.burst);
    std::erase_if(buckets_, [&](const auto& kv) {
      return options_.refill.count() <= 0 || kv.second.tokens + static_cast<double>(now_ms - kv.second.at_ms) /
                                                                    static_cast<double>(options_.refill.count()) >=
                                                 burst;
    });
    if (buckets_.size() >= kMaxTracked) {
      buckets_.clear();
    }
  }
}

void EventWriter::Record(ports::PodEvent event) {
  {
    std::lock_guard lock(mu_);
    if (stop_) {
      ++stats_.dropped;
      return;
    }
    const int64_t now = NowMs();
    std::string key = SeriesKey(event);
    if (auto it = series_.find(key);
        it != series_.end() && now - it->second.last_seen_ms < options_.repeat_window.count()) {
      Series& s = it->second;
      ++s.count;
      s.last_seen_ms = now;
      s.last_seen_wall = std::chrono::system_clock::now();
      ++stats_.aggregated;
      const bool due = !s.last_patch_ms.has_value() || now - *s.last_patch_ms >= options_.patch_interval.count();
      if (!s.event_name.empty() && !s.patch_queued && due && queue_.size() < options_.max_queued) {
        s.patch_queued = true;
        dirty_.erase(key);
        queue_.push_back(Job{.series = std::move(key), .patch = true});
      } else {
        dirty_.insert(std::move(key));  // written when due (PromoteDirty), or by the patch already queued
      }
      cv_.notify_one();
      return;
    }
    Prune(now);
    if (queue_.size() >= options_.max_queued) {
      ++stats_.dropped;
      return;
    }
    if (!TakeToken(ObjectKey(event), now)) {
      ++stats_.rate_limited;
      return;
    }
    series_.insert_or_assign(key, Series{.ns = event.namespace_, .last_seen_ms = now});
    queue_.push_back(Job{.event = std::move(event), .series = std::move(key)});
  }
  cv_.notify_one();
}

void EventWriter::PromoteDirty(bool all) {
  const int64_t now = NowMs();
  for (auto it = dirty_.begin(); it != dirty_.end();) {
    auto s = series_.find(*it);
    if (s == series_.end() || (s->second.count <= s->second.written_count && !s->second.patch_queued)) {
      it = dirty_.erase(it);  // gone, or nothing left to write
      continue;
    }
    Series& x = s->second;
    const bool due = all || !x.last_patch_ms.has_value() || now - *x.last_patch_ms >= options_.patch_interval.count();
    if (x.event_name.empty() || x.patch_queued || !due || queue_.size() >= options_.max_queued) {
      ++it;
      continue;
    }
    x.patch_queued = true;
    queue_.push_back(Job{.series = *it, .patch = true});
    it = dirty_.erase(it);
  }
}

void EventWriter::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

EventWriter::Stats EventWriter::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string EventWriter::RenderMetrics(const std::string& name) const {
  const Stats s = stats();
  std::string out = "# HELP " + name +
                    " Kubernetes Events by outcome (written: created; aggregated: a repeat counted "
                    "into an earlier Event; patched: a count update written; failed: refused or unanswered; "
                    "dropped: the queue was full; rate_limited: past the pod's limit)\n# TYPE " +
                    name + " counter\n";
  for (const auto& [result, n] :
       {std::pair{"written", s.written}, std::pair{"aggregated", s.aggregated}, std::pair{"patched", s.patched},
        std::pair{"failed", s.failed}, std::pair{"dropped", s.dropped}, std::pair{"rate_limited", s.rate_limited}}) {
    out += name + "{result=\"" + result + "\"} " + std::to_string(n) + "\n";
  }
  return out;
}

void EventWriter::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        PromoteDirty(/*all=*/stop_);
        if (!queue_.empty() || stop_) {
          break;
        }
        if (dirty_.empty()) {
          cv_.wait(lock);
        } else {
          cv_.wait_for(lock, std::chrono::milliseconds(250));
        }
      }
      if (queue_.empty()) {
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    if (job.patch) {
      Patch(job);
    } else {
      Create(job);
    }
  }
}

void EventWriter::Create(const Job& job) {
  const ports::PodEvent& event = job.event;
  bool ok = true;
  auto created = client_.CreateEvent(EventSpec{.namespace_ = event.namespace_,
                                               .pod_name = event.name,
                                               .pod_uid = event.uid,
                                               .reason = event.reason,
                                               .message = event.message,
                                               .type = event.type,
                                               .component = component_});
  if (!created.ok()) {
    ok = false;
    common::Log(common::LogLevel::kWarn, component_ + ": event " + event.reason + " for pod " + event.namespace_ + "/" +
                                             event.name + ": " + created.status().message());
  }
  bool pending = true;
  if (event.unschedulable_condition) {
    std::function<bool(const std::string&)> check;
    {
      std::lock_guard lock(mu_);
      check = still_pending_;
    }
    pending = !check || check(event.uid);
  }
  if (event.unschedulable_condition && pending) {
    const nlohmann::json patch = {{"status",
                                   {{"conditions", nlohmann::json::array({{{"type", "PodScheduled"},
                                                                           {"status", "False"},
                                                                           {"reason", "Unschedulable"},
                                                                           {"message", event.message},
                                                                           {"lastTransitionTime", NowRfc3339()}}})}}}};
    auto r = client_.Request("PATCH", "/api/v1/namespaces/" + event.namespace_ + "/pods/" + event.name + "/status",
                             patch.dump(), "application/strategic-merge-patch+json");
    if (!r.ok() && r.status().code() != common::StatusCode::kNotFound) {
      ok = false;
      common::Log(common::LogLevel::kWarn, component_ + ": PodScheduled condition of pod " + event.namespace_ + "/" +
                                               event.name + ": " + r.status().message());
    }
  }
  std::lock_guard lock(mu_);
  (ok ? stats_.written : stats_.failed) += 1;
  if (created.ok()) {
    if (auto it = series_.find(job.series); it != series_.end()) {
      Series& s = it->second;
      s.event_name = *created;
      s.written_count = 1;
      // Repeats while the create was queued: their count goes out now.
      if (s.count > 1 && !s.patch_queued && !stop_) {
        s.patch_queued = true;
        queue_.push_back(Job{.series = job.series, .patch = true});
      }
    }
  } else {
    series_.erase(job.series);  // the next occurrence tries to create it again
  }
}

void EventWriter::Patch(const Job& job) {
  std::string ns, name;
  int64_t count = 0;
  std::chrono::system_clock::time_point last;
  {
    std::lock_guard lock(mu_);
    auto it = series_.find(job.series);
    if (it == series_.end()) {
      return;
    }
    Series& s = it->second;
    s.patch_queued = false;
    s.last_patch_ms = NowMs();
    ns = s.ns;
    name = s.event_name;
    count = s.count;
    last = s.last_seen_wall;
  }
  common::Status patched = client_.PatchEventCount(ns, name, count, last);
  std::lock_guard lock(mu_);
  if (patched.ok()) {
    ++stats_.patched;
    if (auto it = series_.find(job.series); it != series_.end()) {
      it->second.written_count = std::max(it->second.written_count, count);
      if (it->second.count > it->second.written_count) {
        dirty_.insert(job.series);  // repeats while the patch was on its way
      }
    }
    return;
  }
  ++stats_.failed;
  if (patched.code() == common::StatusCode::kNotFound) {
    series_.erase(job.series);  // it expired: the next occurrence is a new Event
    return;
  }
  common::Log(common::LogLevel::kWarn, component_ + ": count of event " + ns + "/" + name + " (" +
                                           std::to_string(count) + "): " + patched.message());
}

}  // namespace gpusched::adapters::k8s
