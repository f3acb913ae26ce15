#include "gpusched/cli/election_loop.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <utility>

#include "gpusched/common/log.h"

namespace gpusched::cli {

std::string LeaderIdentity(const std::string& fallback) {
  char host[256] = {};
  std::string name = gethostname(host, sizeof host - 1) == 0 && host[0] != '\0' ? std::string(host) : fallback;
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", rd());
  return name + "_" + suffix;
}

common::Result<Election> MakeElection(adapters::k8s::ApiClient& client, const daemon::LeaderElectionConfig& config,
                                      const std::string& fallback) {
  std::string ns = config.namespace_;
  if (ns.empty()) {
    const char* pod_ns = std::getenv("POD_NAMESPACE");
    ns = pod_ns != nullptr && pod_ns[0] != '\0' ? pod_ns : "kube-system";
  }
  const sched::LeaderElectionOptions options{.identity = LeaderIdentity(fallback),
                                             .lease_duration_ms = int64_t{config.lease_duration_seconds} * 1000,
                                             .renew_deadline_ms = int64_t{config.renew_deadline_seconds} * 1000,
                                             .retry_period_ms = int64_t{config.retry_period_seconds} * 1000,
                                             .settle_ms = int64_t{config.retry_period_seconds} * 1000};
  if (auto s = sched::ValidateLeaderElection(options); !s.ok()) {
    return s;
  }
  Election e;
  e.lease = std::make_unique<adapters::k8s::LeaseLock>(client, ns, config.name);
  e.elector = std::make_shared<sched::LeaderElector>(
      *e.lease, common::SystemClock::Instance(),
      [] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
      },
      options);
  client.SetWriteFence([weak = std::weak_ptr<sched::LeaderElector>(e.elector)]() -> int64_t {
    const std::shared_ptr<sched::LeaderElector> elector = weak.lock();
    return elector == nullptr ? 0 : elector->ActBudgetMs();
  });
  return e;
}

ElectionLoop::ElectionLoop(sched::LeaderElector& elector, std::string who, std::function<void(bool, uint64_t)> on_tick)
    : elector_(elector), who_(std::move(who)), on_tick_(std::move(on_tick)) {
  thread_ = std::thread([this] { Run(); });
}

ElectionLoop::~ElectionLoop() { Stop(); }

void ElectionLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void ElectionLoop::Run() {
  bool was_leader = false;
  bool first = true;
  std::string last_error;
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    const bool leads = elector_.Tick();
    if (on_tick_) {
      on_tick_(leads, elector_.transitions_seen());
    }
    if (first && !leads) {
      const std::string holder = elector_.Holder();
      common::Log(common::LogLevel::kInfo, who_ + ": standing by; the leader is " +
                                               (holder.empty() ? std::string("nobody yet") : "\"" + holder + "\""));
    }
    first = false;
    if (leads != was_leader) {
      common::Log(common::LogLevel::kInfo,
                  leads ? who_ + ": became leader (" + elector_.options().identity + ")"
                        : who_ + ": not leader any more; the leader is \"" + elector_.Holder() + "\"");
      was_leader = leads;
    }
    if (std::string e = elector_.LastError(); e != last_error) {
      if (!e.empty()) {
        common::Log(common::LogLevel::kWarn, who_ + ": leader election: " + e);
      }
      last_error = e;
    }
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(elector_.options().retry_period_ms), [this] { return stop_; });
  }
}

}  // namespace gpusched::cli
