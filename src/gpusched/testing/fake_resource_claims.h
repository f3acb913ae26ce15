#pragma once

// FakeResourceClaims: a ports::ResourceClaimReader with state, for DRA kubelet plugin tests. Claims are kept by
// namespace/name and can be added, changed and deleted while a plugin reads them; an error can be injected for every
// Get (or for one claim). It also counts Gets and the most that ran at once (with an optional delay inside each Get,
// so a test can see whether its caller serialises them).
//
// Threading: every method is thread-safe.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"
#include "gpusched/ports/resource_claims.h"

namespace gpusched::testing {

class FakeResourceClaims final : public ports::ResourceClaimReader {
 public:
  common::Result<core::dra::ResourceClaim> Get(std::string_view namespace_, std::string_view name) override {
    const std::string key = Key(namespace_, name);
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard lock(mu_);
      ++gets_;
      ++in_flight_;
      max_in_flight_ = std::max(max_in_flight_, in_flight_);
      delay = delay_;
    }
    if (delay.count() > 0) {
      std::this_thread::sleep_for(delay);
    }
    std::lock_guard lock(mu_);
    --in_flight_;
    if (error_.has_value()) {
      return *error_;
    }
    if (auto e = claim_errors_.find(key); e != claim_errors_.end()) {
      return e->second;
    }
    auto it = claims_.find(key);
    if (it == claims_.end()) {
      return common::NotFound("resourceclaims \"" + std::string(name) + "\" not found in namespace " +
                              std::string(namespace_));
    }
    return it->second;
  }

  // Adds or replaces the claim (by namespace/name).
  void Upsert(core::dra::ResourceClaim claim) {
    std::lock_guard lock(mu_);
    claims_[Key(claim.namespace_, claim.name)] = std::move(claim);
  }
  void Delete(std::string_view namespace_, std::string_view name) {
    std::lock_guard lock(mu_);
    claims_.erase(Key(namespace_, name));
  }
  // Every Get fails with `error` until cleared (std::nullopt).
  void SetError(std::optional<common::Status> error) {
    std::lock_guard lock(mu_);
    error_ = std::move(error);
  }
  // Gets of this one claim fail with `error` until cleared.
  void SetClaimError(std::string_view namespace_, std::string_view name, std::optional<common::Status> error) {
    std::lock_guard lock(mu_);
    if (error.has_value()) {
      claim_errors_[Key(namespace_, name)] = *std::move(error);
    } else {
      claim_errors_.erase(Key(namespace_, name));
    }
  }
  void SetDelay(std::chrono::milliseconds delay) {
    std::lock_guard lock(mu_);
    delay_ = delay;
  }
  [[nodiscard]] int64_t gets() const {
    std::lock_guard lock(mu_);
    return gets_;
  }
  [[nodiscard]] int64_t max_in_flight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }

 private:
  static std::string Key(std::string_view ns, std::string_view name) {
    return std::string(ns) + "/" + std::string(name);
  }

  mutable std::mutex mu_;
  std::map<std::string, core::dra::ResourceClaim> claims_;  // GUARDED_BY(mu_)
  std::map<std::string, common::Status> claim_errors_;      // GUARDED_BY(mu_)
  std::optional<common::Status> error_;                     // GUARDED_BY(mu_)
  std::chrono::milliseconds delay_{0};                      // GUARDED_BY(mu_)
  int64_t gets_ = 0;                                        // GUARDED_BY(mu_)
  int64_t in_flight_ = 0;                                   // GUARDED_BY(mu_)
  int64_t max_in_flight_ = 0;                               // GUARDED_BY(mu_)
};

}  // namespace gpusched::testing
