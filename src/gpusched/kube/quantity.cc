#include "gpusched/kube/quantity.h"

#include <array>
#include <limits>
#include <string>

namespace gpusched::kube {
namespace {

__extension__ typedef __int128 Int;  // NOLINT(modernize-use-using): __extension__ keeps -Wpedantic quiet

constexpr Int kMax = std::numeric_limits<int64_t>::max();

struct Suffix {
  std::string_view text;
  int32_t pow10 = 0;
  int32_t pow2 = 0;
};

constexpr std::array<Suffix, 13> kSuffixes{{
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
}};

common::Status Bad(std::string_view text, std::string_view why) {
  return common::InvalidArgument("quantity \"" + std::string(text) + "\": " + std::string(why));
}

// value = mantissa * 10^pow10 * 2^pow2 * scale, rounded up; error beyond int64. With `exact`, a value that would be
// rounded is an error instead.
common::Result<int64_t> Parse(std::string_view text, int32_t scale_pow10, bool exact = false) {
  std::string_view s = text;
  if (s.empty()) {
    return Bad(text, "empty");
  }
  if (s.front() == '+') {
    s.remove_prefix(1);
  } else if (s.front() == '-') {
    return Bad(text, "negative");
  }
  // The mantissa keeps 20 significant digits (beyond int64 anyway); a dropped non-zero digit makes the value
  // "a little more" (sticky), which matters only for rounding up.
  constexpr Int kCap = static_cast<Int>(10000000000) * 10000000000;  // 10^20
  Int mantissa = 0;
  int32_t pow10 = scale_pow10;
  size_t digits = 0;
  bool point = false;
  bool sticky = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (c < '0' || c > '9') {
      break;
    }
    ++digits;
    if (mantissa >= kCap / 10) {  // one more digit would reach 10^20
      sticky = sticky || c != '0';
      if (!point) {
        ++pow10;
      }
      continue;
    }
    mantissa = mantissa * 10 + (c - '0');
    if (point) {
      --pow10;
    }
  }
  if (digits == 0) {
    return Bad(text, "no digits");
  }
  const std::string_view suffix = s.substr(i);
  int32_t pow2 = 0;
  if (!suffix.empty()) {
    bool found = false;
    for (const auto& sf : kSuffixes) {
      if (suffix == sf.text) {
        pow10 += sf.pow10;
        pow2 = sf.pow2;
        found = true;
        break;
      }
    }
    if (!found) {
      if (suffix.front() != 'e' && suffix.front() != 'E') {
        return Bad(text, "unknown suffix \"" + std::string(suffix) + "\"");
      }
      std::string_view e = suffix.substr(1);
      bool negative = false;
      if (!e.empty() && (e.front() == '+' || e.front() == '-')) {
        negative = e.front() == '-';
        e.remove_prefix(1);
      }
      if (e.empty() || e.size() > 3) {
        return Bad(text, "bad exponent");
      }
      int32_t exp = 0;
      for (char c : e) {
        if (c < '0' || c > '9') {
          return Bad(text, "bad exponent");
        }
        exp = exp * 10 + (c - '0');
      }
      pow10 += negative ? -exp : exp;
    }
  }
  if (mantissa == 0) {
    return int64_t{0};
  }
  Int value = mantissa;  // < 10^20
  for (int32_t k = 0; k < pow2; ++k) {
    value *= 2;  // pow2 <= 60: value < 10^20 * 2^60 < 1.2e38, inside __int128
  }
  for (; pow10 > 0; --pow10) {
    if (value > kMax) {  // checked before the multiplication, which could otherwise leave __int128
      return Bad(text, "too large");
    }
    value *= 10;
  }
  if (pow10 < -38) {
    if (exact) {
      return Bad(text, "finer than the smallest unit");
    }
    return int64_t{1};  // value < 10^39: a positive value far below one unit rounds up to 1
  }
  Int divisor = 1;
  for (; pow10 < 0; ++pow10) {
    divisor *= 10;  // <= 10^38
  }
  Int rounded = value / divisor;
  if (value % divisor != 0 || sticky) {
    if (exact) {
      return Bad(text, "finer than the smallest unit");
    }
    rounded += 1;
  }
  if (rounded > kMax) {
    return Bad(text, "too large");
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

common::Result<int64_t> ParseQuantity(std::string_view text) { return Parse(text, 0); }

common::Result<int64_t> ParseMilliQuantity(std::string_view text) { return Parse(text, 3); }

common::Result<int64_t> ParseExactMilliQuantity(std::string_view text) { return Parse(text, 3, /*exact=*/true); }

}  // namespace gpusched::kube
