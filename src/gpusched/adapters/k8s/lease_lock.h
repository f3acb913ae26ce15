#pragma once

// LeaseLock: ports::LeaderLock on a coordination.k8s.io/v1 Lease, as kube-scheduler's leader election uses one
// (spec.holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions). Updates carry the
// resourceVersion this lock last read or wrote, so the API server refuses (409 -> Aborted) a write from a replica
// that has not seen the latest one. RBAC: get, create and update on leases in the lease's namespace.
//
// Thread-safety: one caller at a time (the elector's thread).

#include <string>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/kube/objects.h"
#include "gpusched/ports/leader_lock.h"

namespace gpusched::adapters::k8s {

class LeaseLock final : public ports::LeaderLock {
 public:
  LeaseLock(ApiClient& client, std::string ns, std::string name);

  common::Result<ports::LeaderRecord> Get() override;
  common::Status Create(const ports::LeaderRecord& record) override;
  common::Status Update(const ports::LeaderRecord& record) override;
  std::string Describe() const override;

 private:
  nlohmann::json ToLease(const ports::LeaderRecord& record) const;
  // Remembers the server's resourceVersion of what it answered with.
  common::Result<ports::LeaderRecord> Remember(const nlohmann::json& lease);

  ApiClient& client_;
  const std::string ns_;
  const std::string name_;
  std::string resource_version_;
};

// MicroTime as the API writes it, and back (kube/objects.h).
using kube::FormatMicroTime;
using kube::ParseMicroTime;

}  // namespace gpusched::adapters::k8s
