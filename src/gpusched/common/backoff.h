#pragma once

// Exponential backoff, one rule for every retry loop: the first delay `initial`, doubled after each failure up to
// `max`, back to `initial` after a success. Not thread-safe (each loop keeps its own).

#include <algorithm>
#include <chrono>

namespace gpusched::common {

class ExponentialBackoff {
 public:
  using Duration = std::chrono::milliseconds;
  ExponentialBackoff(Duration initial, Duration max)
      : initial_(initial), max_(std::max(initial, max)), next_(initial) {}

  // The delay before the next try; the one after is twice as long (at most max).
  Duration Next() {
    const Duration now = next_;
    next_ = std::min(next_ * 2, max_);
    return now;
  }
  void Reset() { next_ = initial_; }

  // The delay after the `attempts`-th failure in a row (1: initial), without state.
  [[nodiscard]] static Duration After(int attempts, Duration initial, Duration max) {
    Duration d = initial;
    for (int i = 1; i < attempts && d < max; ++i) {
      d *= 2;
    }
    return std::min(d, std::max(initial, max));
  }

 private:
  Duration initial_, max_, next_;
};

}  // namespace gpusched::common
