#pragma once

// The time source of code that measures intervals (how long ago something happened), injected so that tests move
// time by hand (testing/fake_clock.h) instead of sleeping. Steady time: only differences between two readings
// mean anything; it never goes back and is not wall-clock time.

#include <chrono>
#include <cstdint>

namespace gpusched::common {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds of steady time. Thread-safe.
  [[nodiscard]] virtual int64_t NowMs() const = 0;
};

// std::chrono::steady_clock. Stateless: one shared instance serves everyone.
class SystemClock final : public Clock {
 public:
  [[nodiscard]] int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  [[nodiscard]] static const SystemClock& Instance() {
    static const SystemClock clock;
    return clock;
  }
};

}  // namespace gpusched::common
