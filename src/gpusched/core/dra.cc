#include "gpusched/core/dra.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>

namespace gpusched::core::dra {
namespace {

__extension__ typedef __int128 Int;  // NOLINT(modernize-use-using): __extension__ keeps -Wpedantic quiet

constexpr Int kMaxMilli = std::numeric_limits<int64_t>::max();
// More significant digits than this cannot be an int64 count of milli-units that is also exact; refusing them
// keeps every intermediate below 2^127.
constexpr int kMaxSignificantDigits = 36;

struct Suffix {
  std::string_view text;
  int pow10 = 0;
  int pow2 = 0;
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"n", -9, 0},
    {"u", -6, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
    {"", 0, 0},
}};

common::Status BadQuantity(std::string_view text, std::string_view why) {
  return common::InvalidArgument("quantity \"" + std::string(text) + "\": " + std::string(why));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Reads the suffix: a fixed one, or an exponent ([eE][+-]?digits, which is how resource.Quantity tells "1E" (exa)
// from "1E3" (10^3)).
bool ParseSuffix(std::string_view s, int& pow10, int& pow2) {
  for (const Suffix& suffix : kSuffixes) {
    if (s == suffix.text) {
      pow10 = suffix.pow10;
      pow2 = suffix.pow2;
      return true;
    }
  }
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) {
    return false;
  }
  std::string_view digits = s.substr(1);
  bool negative = false;
  if (digits.front() == '+' || digits.front() == '-') {
    negative = digits.front() == '-';
    digits.remove_prefix(1);
  }
  if (digits.empty()) {
    return false;
  }
  int64_t e = 0;
  for (char c : digits) {
    if (!IsDigit(c)) {
      return false;
    }
    e = std::min<int64_t>(e * 10 + (c - '0'), 1000000);  // far beyond any exact int64 either way
  }
  pow10 = static_cast<int>(negative ? -e : e);
  pow2 = 0;
  return true;
}

Int Pow(Int base, int n) {
  Int r = 1;
  for (int i = 0; i < n; ++i) {
    r *= base;
  }
  return r;
}

// Multiplies by base^n while the product stays within kMaxMilli; false on overflow.
bool MulPow(Int& v, Int base, int n) {
  for (int i = 0; i < n; ++i) {
    v *= base;
    if (v > kMaxMilli) {
      return false;
    }
  }
  return true;
}

common::Status BadSemver(std::string_view text, std::string_view why) {
  return common::InvalidArgument("semantic version \"" + std::string(text) + "\": " + std::string(why));
}

bool IsIdentChar(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-'; }

bool AllDigits(std::string_view s) {
  for (char c : s) {
    if (!IsDigit(c)) {
      return false;
    }
  }
  return true;
}

// A MAJOR, MINOR or PATCH number: digits, no leading zero, within uint64.
bool ParseNumber(std::string_view s, uint64_t& out) {
  if (s.empty() || !AllDigits(s) || (s.size() > 1 && s[0] == '0')) {
    return false;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Checks dot-separated identifiers; `prerelease` adds the rule that numeric identifiers have no leading zero
// (and fit uint64, as the Kubernetes library compares them as numbers).
common::Status CheckIdentifiers(std::string_view text, std::string_view ids, bool prerelease) {
  const std::string_view what = prerelease ? "prerelease" : "build metadata";
  size_t start = 0;
  while (true) {
    const size_t dot = ids.find('.', start);
    const std::string_view id = ids.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (id.empty()) {
      return BadSemver(text, std::string(what) + " has an empty identifier");
    }
    for (char c : id) {
      if (!IsIdentChar(c)) {
        return BadSemver(
            text, std::string(what) + " identifier \"" + std::string(id) + "\" has a character outside [0-9A-Za-z-]");
      }
    }
    if (prerelease && AllDigits(id)) {
      uint64_t unused = 0;
      if (id.size() > 1 && id[0] == '0') {
        return BadSemver(text, "numeric prerelease identifier \"" + std::string(id) + "\" has a leading zero");
      }
      if (!ParseNumber(id, unused)) {
        return BadSemver(text, "numeric prerelease identifier \"" + std::string(id) + "\" is beyond uint64");
      }
    }
    if (dot == std::string_view::npos) {
      return common::Status::Ok();
    }
    start = dot + 1;
  }
}

// Splits a dot-separated list lazily: the next identifier from `pos`, advancing it past the dot.
std::string_view NextIdentifier(std::string_view s, size_t& pos) {
  const size_t dot = s.find('.', pos);
  std::string_view id = s.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos);
  pos = dot == std::string_view::npos ? s.size() + 1 : dot + 1;
  return id;
}

std::weak_ordering ComparePrereleaseIdentifier(std::string_view a, std::string_view b) {
  const bool a_num = AllDigits(a);
  const bool b_num = AllDigits(b);
  if (a_num && b_num) {
    // No leading zeros (checked by the parser): the longer number is the larger.
    if (a.size() != b.size()) {
      return a.size() < b.size() ? std::weak_ordering::less : std::weak_ordering::greater;
    }
    const int c = a.compare(b);
    return c < 0 ? std::weak_ordering::less : c > 0 ? std::weak_ordering::greater : std::weak_ordering::equivalent;
  }
  if (a_num != b_num) {
    return a_num ? std::weak_ordering::less : std::weak_ordering::greater;  // numeric < alphanumeric
  }
  const int c = a.compare(b);
  return c < 0 ? std::weak_ordering::less : c > 0 ? std::weak_ordering::greater : std::weak_ordering::equivalent;
}

}  // namespace

common::Result<Quantity> ParseQuantity(std::string_view text) {
  std::string_view s = text;
  if (s.empty()) {
    return BadQuantity(text, "empty");
  }
  bool negative = false;
  if (s.front() == '+' || s.front() == '-') {
    negative = s.front() == '-';
    s.remove_prefix(1);
  }
  // The number: D x 10^exp10, D the significant digits.
  Int d = 0;
  int significant = 0;
  int exp10 = 0;
  int digits = 0;
  int pending_zeros = 0;
  bool point = false;
  size_t i = 0;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '.' && !point) {
      point = true;
      continue;
    }
    if (!IsDigit(c)) {
      break;
    }
    ++digits;
    if (point) {
      --exp10;
    }
    if (c == '0') {
      if (d != 0) {
        ++pending_zeros;  // trailing unless a non-zero digit follows
      }
      continue;
    }
    significant += pending_zeros + 1;
    if (significant > kMaxSignificantDigits) {
      return BadQuantity(text, "more than 36 significant digits");
    }
    for (; pending_zeros > 0; --pending_zeros) {
      d *= 10;
    }
    d = d * 10 + (c - '0');
  }
  exp10 += pending_zeros;
  if (digits == 0) {
    return BadQuantity(text, "no digits (want e.g. \"4\", \"1500m\", \"80Gi\")");
  }
  int pow10 = 0;
  int pow2 = 0;
  if (!ParseSuffix(s.substr(i), pow10, pow2)) {
    return BadQuantity(text, "unknown suffix \"" + std::string(s.substr(i)) +
                                 "\" (want one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or an exponent like e3)");
  }
  if (d == 0) {
    return Quantity{0};
  }
  // milli = D x 10^(exp10 + pow10 + 3) x 2^pow2 = D x 5^n5 x 2^n2.
  while (d % 10 == 0) {
    d /= 10;
    ++exp10;
  }
  const int64_t n5 = static_cast<int64_t>(exp10) + pow10 + 3;
  const int64_t n2 = n5 + pow2;
  if (n5 > 40 || n2 > 130) {
    return BadQuantity(text, "beyond int64 milli-units (at most 9223372036854775807m)");
  }
  const std::string_view finer = "finer than a milli-unit (gpusched keeps quantities exact in thousandths)";
  if (n5 < 0) {
    // D has at most 36 digits < 5^52, so a larger power cannot divide it.
    if (n5 < -52 || d % Pow(5, static_cast<int>(-n5)) != 0) {
      return BadQuantity(text, finer);
    }
    d /= Pow(5, static_cast<int>(-n5));
  }
  if (n2 < 0) {
    if (n2 < -120 || d % Pow(2, static_cast<int>(-n2)) != 0) {
      return BadQuantity(text, finer);
    }
    d /= Pow(2, static_cast<int>(-n2));
  }
  if (d > kMaxMilli || (n5 > 0 && !MulPow(d, 5, static_cast<int>(n5))) ||
      (n2 > 0 && !MulPow(d, 2, static_cast<int>(n2)))) {
    return BadQuantity(text, "beyond int64 milli-units (at most 9223372036854775807m)");
  }
  const auto milli = static_cast<int64_t>(d);
  return Quantity{negative ? -milli : milli};
}

std::string FormatQuantity(Quantity q) {
  if (q.milli == 0) {
    return "0";
  }
  const bool negative = q.milli < 0;
  // |milli| as unsigned: also right for INT64_MIN.
  const uint64_t abs_milli = negative ? uint64_t{0} - static_cast<uint64_t>(q.milli) : static_cast<uint64_t>(q.milli);
  std::string out = negative ? "-" : "";
  if (abs_milli % 1000 != 0) {
    return out + std::to_string(abs_milli) + "m";
  }
  uint64_t units = abs_milli / 1000;
  static constexpr std::array<std::string_view, 6> kBinary{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
  static constexpr std::array<std::string_view, 6> kDecimal{"k", "M", "G", "T", "P", "E"};
  std::string_view suffix;
  if (units % 1024 == 0) {
    for (size_t k = 0; k < kBinary.size() && units % 1024 == 0; ++k) {
      units /= 1024;
      suffix = kBinary[k];
    }
  } else {
    for (size_t k = 0; k < kDecimal.size() && units % 1000 == 0; ++k) {
      units /= 1000;
      suffix = kDecimal[k];
    }
  }
  return out + std::to_string(units) + std::string(suffix);
}

common::Result<Semver> ParseSemver(std::string_view text) {
  if (text.empty()) {
    return BadSemver(text, "empty");
  }
  std::string_view rest = text;
  Semver v;
  const size_t plus = rest.find('+');
  if (plus != std::string_view::npos) {
    const std::string_view build = rest.substr(plus + 1);
    GPUSCHED_RETURN_IF_ERROR(CheckIdentifiers(text, build, /*prerelease=*/false));
    v.build = std::string(build);
    rest = rest.substr(0, plus);
  }
  // The prerelease starts at the first "-" after MAJOR.MINOR. (identifiers may hold "-" too).
  const size_t dot1 = rest.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? std::string_view::npos : rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) {
    return BadSemver(text, "want MAJOR.MINOR.PATCH");
  }
  const size_t dash = rest.find('-', dot2 + 1);
  if (dash != std::string_view::npos) {
    const std::string_view pre = rest.substr(dash + 1);
    GPUSCHED_RETURN_IF_ERROR(CheckIdentifiers(text, pre, /*prerelease=*/true));
    v.prerelease = std::string(pre);
    rest = rest.substr(0, dash);
  }
  const std::string_view parts[3] = {rest.substr(0, dot1), rest.substr(dot1 + 1, dot2 - dot1 - 1),
                                     rest.substr(dot2 + 1)};
  uint64_t* fields[3] = {&v.major, &v.minor, &v.patch};
  static constexpr std::array<std::string_view, 3> kNames{"major", "minor", "patch"};
  for (size_t k = 0; k < 3; ++k) {
    if (!ParseNumber(parts[k], *fields[k])) {
      return BadSemver(text, std::string(kNames[k]) + " version \"" + std::string(parts[k]) +
                                 "\" is not a number without leading zeros (within uint64)");
    }
  }
  return v;
}

std::weak_ordering CompareSemver(const Semver& a, const Semver& b) {
  if (a.major != b.major) {
    return a.major < b.major ? std::weak_ordering::less : std::weak_ordering::greater;
  }
  if (a.minor != b.minor) {
    return a.minor < b.minor ? std::weak_ordering::less : std::weak_ordering::greater;
  }
  if (a.patch != b.patch) {
    return a.patch < b.patch ? std::weak_ordering::less : std::weak_ordering::greater;
  }
  if (a.prerelease.empty() || b.prerelease.empty()) {
    if (a.prerelease.empty() == b.prerelease.empty()) {
      return std::weak_ordering::equivalent;
    }
    return a.prerelease.empty() ? std::weak_ordering::greater : std::weak_ordering::less;
  }
  size_t pa = 0;
  size_t pb = 0;
  const std::string_view sa = a.prerelease;
  const std::string_view sb = b.prerelease;
  while (pa <= sa.size() && pb <= sb.size()) {
    const std::weak_ordering c = ComparePrereleaseIdentifier(NextIdentifier(sa, pa), NextIdentifier(sb, pb));
    if (c != std::weak_ordering::equivalent) {
      return c;
    }
  }
  if (pa <= sa.size()) {
    return std::weak_ordering::greater;  // a has more identifiers
  }
  if (pb <= sb.size()) {
    return std::weak_ordering::less;
  }
  return std::weak_ordering::equivalent;
}

std::string FormatSemver(const Semver& v) {
  std::string out = std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
  if (!v.prerelease.empty()) {
    out += "-" + v.prerelease;
  }
  if (!v.build.empty()) {
    out += "+" + v.build;
  }
  return out;
}

}  // namespace gpusched::core::dra
