#pragma once

// CEL device selectors (DRA: DeviceClass and request selectors), the subset of CEL that Kubernetes DRA selectors
// use, evaluated by gpusched itself. docs/dra.md lists the subset for users; the short form:
//
//   device.driver (string), device.allowMultipleAllocations (bool), device.attributes["<domain>"].<id> (int, bool,
//   string or version), device.capacity["<domain>"].<id> (quantity); index form ["<id>"] too;
//   literals: int (decimal, hex), string (all CEL quotes and escapes, raw strings), bool, list literals;
//   == != < <= > >=, && || !, ?:, in (lists, maps), has() on an attribute or capacity entry;
//   startsWith endsWith contains; quantity() isQuantity() and the quantity methods compareTo isGreaterThan
//   isLessThan asInteger isInteger sign add sub; semver() isSemver() (with the optional normalize flag) and the
//   version methods compareTo isGreaterThan isLessThan major minor patch.
//
// Everything else is refused by Compile with an error that names the construct and its column (macros such as
// exists, arithmetic, matches, other functions and variables, double/uint/bytes/null literals, map literals). A
// refused selector never silently matches or fails to match.
//
// Semantics follow CEL and Kubernetes' DRA environment:
//  - A domain with no entries reads as an empty map; a missing attribute or capacity is a runtime error ("no such
//    key"), as are type errors ("no such overload"). Matches returns them as errors, never as false.
//  - && and || are commutative over errors: false && error = false, true || error = true; otherwise the error.
//  - Types are checked at Compile where they are known (device.driver == 1 is refused); attribute values are
//    dynamic, so mixing them with another type is found at evaluation: == and != of different types are false
//    (!= true), except that a version on the left of == is an error (Kubernetes' Semver), and ordering
//    operators on different types are errors.
//  - Version attributes are parsed when a selector reads them; an attribute that is not a semantic version is an
//    error then (the API server validates them, so that does not happen with real ResourceSlices).
//
// Bounds: Compile refuses expressions over 10 KiB and nesting deeper than 64 levels; evaluation recurses at most
// that deep and does no loops over input beyond one map lookup per key. Matches allocates nothing for the usual
// selectors (string literals as keys): attribute names are qualified once at Compile.
//
// Thread-safety: a Program is immutable; copies share the compiled tree, and Matches may run concurrently.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::sched::cel {

// The `device` variable of one evaluation. `device` must outlive the Matches call.
struct DeviceInput {
  std::string_view driver;
  const core::dra::Device* device = nullptr;
};

class Program {
 public:
  inline static constexpr size_t kMaxExpressionBytes = 10 * 1024;
  inline static constexpr int kMaxDepth = 64;

  // Parses and checks `expression`; errors read "CEL: <what> at column <n>" (with the line for multi-line text).
  [[nodiscard]] static common::Result<Program> Compile(std::string_view expression);

  // Whether `device` satisfies the selector; evaluation errors are errors, never false.
  [[nodiscard]] common::Result<bool> Matches(const DeviceInput& device) const;

  [[nodiscard]] const std::string& expression() const;

  struct Impl;  // the compiled tree (cel.cc)

 private:
  explicit Program(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace gpusched::sched::cel
