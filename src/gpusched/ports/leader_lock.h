#pragma once

// LeaderLock: the shared record that replicas of a daemon compete for (in Kubernetes a coordination.k8s.io Lease),
// read and written with optimistic concurrency. sched::LeaderElector decides what to write; an implementation only
// stores the record. Times in the record are wall-clock milliseconds since the epoch (what the Lease shows to
// people); the elector never compares them with its own clock, it times what it observes (as client-go does), so
// clock skew between replicas cannot make two of them leader.

#include <cstdint>
#include <string>

#include "gpusched/common/status.h"

namespace gpusched::ports {

struct LeaderRecord {
  std::string holder;  // identity of the leader; "" = released
  int64_t lease_duration_ms = 0;
  int64_t acquire_wall_ms = 0;
  int64_t renew_wall_ms = 0;
  int32_t transitions = 0;  // how many times the holder changed
  // The store's version of the record (a Lease's metadata.resourceVersion), set by Get and ignored on writes: a
  // renewal changes it even where the wall clock did not move, so a standby sees the leader is alive.
  std::string version;

  bool operator==(const LeaderRecord&) const = default;
};

class LeaderLock {
 public:
  virtual ~LeaderLock() = default;
  // The record as stored now; NotFound when there is none yet.
  [[nodiscard]] virtual common::Result<LeaderRecord> Get() = 0;
  // Creates the record; AlreadyExists when another replica created it first.
  [[nodiscard]] virtual common::Status Create(const LeaderRecord& record) = 0;
  // Replaces the record only if nobody wrote it since this lock last read or wrote it; Aborted when somebody did.
  [[nodiscard]] virtual common::Status Update(const LeaderRecord& record) = 0;
  // "Lease kube-system/gpusched-extender", for logs.
  [[nodiscard]] virtual std::string Describe() const = 0;
};

}  // namespace gpusched::ports
