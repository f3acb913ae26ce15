#include "gpusched/scheduler/event_writer.h"

#include <chrono>
#include <ctime>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/common/log.h"

namespace gpusched::scheduler {
namespace {

std::string NowRfc3339() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

EventWriter::EventWriter(adapters::k8s::ApiClient& client, std::string component, size_t max_queued,
                         std::chrono::milliseconds repeat_window)
    : client_(client), component_(std::move(component)), max_queued_(max_queued), repeat_window_(repeat_window) {
  thread_ = std::thread([this] { Run(); });
}

EventWriter::~EventWriter() { Stop(); }

void EventWriter::SetStillPending(std::function<bool(const std::string& uid)> still_pending) {
  std::lock_guard lock(mu_);
  still_pending_ = std::move(still_pending);
}

void EventWriter::Push(PodEvent event) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || queue_.size() >= max_queued_) {
      ++stats_.dropped;
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (auto it = last_.find(event.uid); it != last_.end() && it->second.reason == event.reason &&
                                         it->second.message == event.message && now - it->second.at < repeat_window_) {
      ++stats_.repeats;
      return;
    }
    if (last_.size() >= 10000) {
      last_.clear();
    }
    last_.insert_or_assign(event.uid, Last{.reason = event.reason, .message = event.message, .at = now});
    queue_.push_back(std::move(event));
  }
  cv_.notify_one();
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

void EventWriter::Run() {
  for (;;) {
    PodEvent event;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) {
        return;
      }
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    Write(event);
  }
}

void EventWriter::Write(const PodEvent& event) {
  bool ok = true;
  common::Status s = client_.CreateEvent(adapters::k8s::EventSpec{.namespace_ = event.namespace_,
                                                                  .pod_name = event.name,
                                                                  .pod_uid = event.uid,
                                                                  .reason = event.reason,
                                                                  .message = event.message,
                                                                  .type = event.type,
                                                                  .component = component_});
  if (!s.ok()) {
    ok = false;
    common::Log(common::LogLevel::kWarn, "gpusched scheduler: event " + event.reason + " for pod " + event.namespace_ +
                                             "/" + event.name + ": " + s.message());
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
      common::Log(common::LogLevel::kWarn, "gpusched scheduler: PodScheduled condition of pod " + event.namespace_ +
                                               "/" + event.name + ": " + r.status().message());
    }
  }
  std::lock_guard lock(mu_);
  (ok ? stats_.written : stats_.failed) += 1;
}

}  // namespace gpusched::scheduler
