#pragma once

// A common::Clock that moves only when told to: tests of time windows and expiry run without sleeping.

#include <atomic>
#include <cstdint>

#include "gpusched/common/clock.h"

namespace gpusched::testing {

class FakeClock final : public common::Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_ms_(start_ms) {}

  [[nodiscard]] int64_t NowMs() const override { return now_ms_.load(); }
  // Moves time forward (steady time never goes back).
  void AdvanceMs(int64_t ms) { now_ms_.fetch_add(ms > 0 ? ms : 0); }

 private:
  std::atomic<int64_t> now_ms_;
};

}  // namespace gpusched::testing
