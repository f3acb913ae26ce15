#pragma once

// Leader election for the daemons (extender, scheduler): ticks a sched::LeaderElector every retry period on its
// own thread, logs changes of leadership and of the last error, and reports each tick to `on_tick` (metrics).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <memory>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/lease_lock.h"
#include "gpusched/common/status.h"
#include "gpusched/daemon/config.h"
#include "gpusched/sched/leader_elector.h"

namespace gpusched::cli {

// hostname_<8 hex digits>: unique per process, readable in the Lease. `fallback` when there is no host name.
[[nodiscard]] std::string LeaderIdentity(const std::string& fallback);

// The Lease and the elector of a leaderElection config: the Lease in its namespace (else $POD_NAMESPACE, else
// kube-system), an identity from the host name (`fallback` without one), settle time one retry period. Bad timings
// are an error. It fences `client`'s writes by the elector (ApiClient::SetWriteFence, LeaderElector::ActBudgetMs):
// no Binding, eviction or status write is sent after this replica's renew deadline, nor given longer than that to
// complete; once the elector is gone (shutdown) no write is sent at all.
struct Election {
  std::unique_ptr<adapters::k8s::LeaseLock> lease;
  std::shared_ptr<sched::LeaderElector> elector;
};
[[nodiscard]] common::Result<Election> MakeElection(adapters::k8s::ApiClient& client,
                                                    const daemon::LeaderElectionConfig& config,
                                                    const std::string& fallback);

class ElectionLoop {
 public:
  // `who` prefixes the log lines ("gpusched extender"); on_tick(leads, times this replica became leader).
  ElectionLoop(sched::LeaderElector& elector, std::string who, std::function<void(bool, uint64_t)> on_tick);
  ~ElectionLoop();  // Stop
  ElectionLoop(const ElectionLoop&) = delete;
  ElectionLoop& operator=(const ElectionLoop&) = delete;
  // Stops ticking (the caller then releases the lease). Idempotent.
  void Stop();

 private:
  void Run();

  sched::LeaderElector& elector_;
  const std::string who_;
  const std::function<void(bool, uint64_t)> on_tick_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // GUARDED_BY(mu_)
  std::thread thread_;
};

}  // namespace gpusched::cli
