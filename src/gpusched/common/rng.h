#pragma once

// The only source of randomness: a seeded generator injected where randomness is needed, so that every run
// repeats exactly for a given seed.

#include <cstdint>
#include <random>

namespace gpusched::common {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // Uniform integer in [0, n). n must be > 0.
  uint64_t Uniform(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(engine_); }
  // Uniform double in [0, 1).
  double UniformDouble() { return std::uniform_real_distribution<double>(0.0, 1.0)(engine_); }

  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

}  // namespace gpusched::common
