#pragma once

// Quantities as integers with the unit in the type. One GPU = 1000 MilliGpu of compute, memory in MiB,
// CPU in milli-cores. Arithmetic is only allowed between values of the same unit, so a MiB can never be added
// to a MilliCpu by mistake; scaling by a plain integer is allowed.

#include <compare>
#include <cstdint>
#include <ostream>

namespace gpusched::common {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t value) : value_(value) {}

  [[nodiscard]] constexpr int64_t value() const { return value_; }

  constexpr auto operator<=>(const Quantity&) const = default;

  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator-() const { return Quantity(-value_); }
  constexpr Quantity operator*(int64_t k) const { return Quantity(value_ * k); }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }

  friend std::ostream& operator<<(std::ostream& os, Quantity q) { return os << q.value_ << Tag::kSuffix; }

 private:
  int64_t value_ = 0;
};

struct MilliGpuTag {
  static constexpr const char* kSuffix = "m-gpu";
};
struct MiBTag {
  static constexpr const char* kSuffix = "MiB";
};
struct MilliCpuTag {
  static constexpr const char* kSuffix = "m-cpu";
};

using MilliGpu = Quantity<MilliGpuTag>;
using MiB = Quantity<MiBTag>;
using MilliCpu = Quantity<MilliCpuTag>;

// One whole GPU of compute.
inline constexpr MilliGpu kGpuMilli{1000};

}  // namespace gpusched::common
