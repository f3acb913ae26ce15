#pragma once

// An in-memory ports::LeaderLock: one LeaseStore stands for the API server's Lease, each FakeLeaderLock for one
// replica's client of it, with the API server's optimistic concurrency (an update from a client that has not seen
// the latest write is Aborted). A store can be made unreachable to play a partition.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "gpusched/ports/leader_lock.h"

namespace gpusched::testing {

class LeaseStore {
 public:
  std::optional<ports::LeaderRecord> record() const {
    std::lock_guard lock(mu_);
    return record_;
  }
  uint64_t writes() const {
    std::lock_guard lock(mu_);
    return version_;
  }

 private:
  friend class FakeLeaderLock;
  mutable std::mutex mu_;
  std::optional<ports::LeaderRecord> record_;
  uint64_t version_ = 0;
};

class FakeLeaderLock final : public ports::LeaderLock {
 public:
  explicit FakeLeaderLock(LeaseStore& store) : store_(store) {}

  // While set, every call fails with Unavailable (this replica cannot reach the API server).
  void SetUnreachable(bool unreachable) { unreachable_ = unreachable; }
  // Runs at the start of each Get, before the record is read (a slow API server: advance a clock, let another
  // replica write meanwhile). Not under the store's lock.
  void SetBeforeGet(std::function<void()> hook) { before_get_ = std::move(hook); }

  common::Result<ports::LeaderRecord> Get() override {
    if (before_get_) {
      before_get_();
    }
    if (unreachable_) {
      return common::Unavailable("lease: connection refused");
    }
    std::lock_guard lock(store_.mu_);
    if (!store_.record_) {
      return common::NotFound("lease not found");
    }
    seen_ = store_.version_;
    ports::LeaderRecord r = *store_.record_;
    r.version = std::to_string(store_.version_);
    return r;
  }
  common::Status Create(const ports::LeaderRecord& record) override {
    if (unreachable_) {
      return common::Unavailable("lease: connection refused");
    }
    std::lock_guard lock(store_.mu_);
    if (store_.record_) {
      return common::AlreadyExists("lease exists");
    }
    store_.record_ = record;
    seen_ = ++store_.version_;
    return common::Status::Ok();
  }
  common::Status Update(const ports::LeaderRecord& record) override {
    if (unreachable_) {
      return common::Unavailable("lease: connection refused");
    }
    std::lock_guard lock(store_.mu_);
    if (!store_.record_ || store_.version_ != seen_) {
      return common::Aborted("lease: the object has been modified");
    }
    store_.record_ = record;
    seen_ = ++store_.version_;
    return common::Status::Ok();
  }
  std::string Describe() const override { return "fake lease"; }

 private:
  LeaseStore& store_;
  bool unreachable_ = false;
  uint64_t seen_ = 0;
  std::function<void()> before_get_;
};

}  // namespace gpusched::testing
