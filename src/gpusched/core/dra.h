#pragma once

// Dynamic Resource Allocation (resource.k8s.io/v1) as the scheduler and the agent's driver see it: devices a driver
// publishes in ResourceSlices, the classes and claims that ask for them, and what an allocation records. Plain
// values with no Kubernetes JSON in them (kube/dra.h converts both ways); the CEL selectors stay text here and are
// compiled by sched/cel.h.
//
// Names. Attribute and capacity names are always stored fully qualified, "<domain>/<id>": a ResourceSlice may
// publish "model" unqualified, which means "<driver>/model" (the API's rule), and kube/dra.h qualifies it on the
// way in. CEL sees them grouped by domain (device.attributes["gpu.gpusched.io"].model).
//
// Quantities are exact integers in milli-units of their base unit (bytes, counts, cores): resource.Quantity's
// value x 1000. That is exact for every quantity a DRA driver publishes up to 9.2e15 base units (8 PiB); the
// parser refuses anything larger or finer than a milli instead of rounding it.

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"

namespace gpusched::core::dra {

struct Quantity {
  int64_t milli = 0;  // value x 1000 in the base unit

  [[nodiscard]] static constexpr Quantity FromUnits(int64_t units) { return Quantity{units * 1000}; }
  auto operator<=>(const Quantity&) const = default;
};

// Reads resource.Quantity's syntax: [+-] digits [. digits] suffix, where suffix is one of "" n u m k M G T P E
// (decimal), Ki Mi Gi Ti Pi Ei (binary) or an exponent e<int> / E<int> ("1e3", "5E-3"). Exact: a value finer
// than a milli-unit ("1n", "0.0001") or beyond int64 milli-units (about 9.2e15 base units) is an error naming the
// text, never rounded. Stricter than the API server in one corner: it needs at least one digit ("+" and "."
// alone, which resource.Quantity reads as zero, are refused).
[[nodiscard]] common::Result<Quantity> ParseQuantity(std::string_view text);

// A canonical text the API server accepts and reads back to the same value: "0"; "<n>m" when the value is not a
// whole number of units ("1500m"); otherwise the largest binary suffix that divides it exactly ("80Gi",
// "1536Mi"), else the largest decimal one ("20k", "4"). Negative values carry a leading "-".
[[nodiscard]] std::string FormatQuantity(Quantity q);

// A semantic version (https://semver.org 2.0.0), parsed as strictly as the Kubernetes semver library DRA uses:
// exactly MAJOR.MINOR.PATCH, numbers without leading zeros, an optional -prerelease of dot-separated identifiers
// ([0-9A-Za-z-]+, numeric ones without leading zeros) and an optional +build of dot-separated identifiers
// ([0-9A-Za-z-]+). No "v" prefix, no spaces.
struct Semver {
  uint64_t major = 0;
  uint64_t minor = 0;
  uint64_t patch = 0;
  std::string prerelease;  // without the "-"; empty: none
  std::string build;       // without the "+"; empty: none; ignored by precedence

  bool operator==(const Semver&) const = default;  // identical text, build included; precedence: CompareSemver
};

[[nodiscard]] common::Result<Semver> ParseSemver(std::string_view text);

// Semver precedence: major, minor, patch numerically; a version with a prerelease is lower than the same version
// without; prereleases compare identifier by identifier (numeric ones numerically and lower than alphanumeric
// ones, alphanumeric ones by ASCII), and a shorter prefix is lower. Build metadata is ignored, hence weak:
// 1.0.0+a and 1.0.0+b are equivalent but not equal.
[[nodiscard]] std::weak_ordering CompareSemver(const Semver& a, const Semver& b);

// "1.2.3-rc.1+build.5".
[[nodiscard]] std::string FormatSemver(const Semver& v);

// The four attribute types of the API (DeviceAttribute: int, bool, string, version). A version is a semantic
// version (semver 2.0.0) kept as its text; sched/cel.h parses and orders it.
enum class AttributeKind : int8_t { kInt, kBool, kString, kVersion };

struct AttributeValue {
  AttributeKind kind = AttributeKind::kString;
  int64_t int_value = 0;
  bool bool_value = false;
  std::string string_value;  // kString and kVersion

  [[nodiscard]] static AttributeValue Int(int64_t v) {
    AttributeValue a;
    a.kind = AttributeKind::kInt;
    a.int_value = v;
    return a;
  }
  [[nodiscard]] static AttributeValue Bool(bool v) {
    AttributeValue a;
    a.kind = AttributeKind::kBool;
    a.bool_value = v;
    return a;
  }
  [[nodiscard]] static AttributeValue String(std::string v) {
    AttributeValue a;
    a.string_value = std::move(v);
    return a;
  }
  [[nodiscard]] static AttributeValue Version(std::string v) {
    AttributeValue a;
    a.kind = AttributeKind::kVersion;
    a.string_value = std::move(v);
    return a;
  }
  bool operator==(const AttributeValue&) const = default;
};

// How much of a shareable device's capacity one allocation may consume (CapacityRequestPolicy): a default taken
// when a request names none, and either a range (min, optional max, optional step counted from min) or a list of
// valid values. A request between steps is rounded up to the next step; one outside the range cannot be served.
struct CapacityRequestPolicy {
  std::optional<Quantity> default_value;
  std::optional<Quantity> min;
  std::optional<Quantity> max;
  std::optional<Quantity> step;
  std::vector<Quantity> valid_values;  // ascending; when set, min/max/step are unset

  bool operator==(const CapacityRequestPolicy&) const = default;
};

struct DeviceCapacity {
  Quantity value;
  std::optional<CapacityRequestPolicy> request_policy;

  bool operator==(const DeviceCapacity&) const = default;
};

// A device taint (DeviceTaint); effect "None", "NoSchedule" or "NoExecute". time_added is RFC 3339 as the API
// wrote it (the server sets it on create or update when the driver leaves it out); empty: not set.
struct DeviceTaint {
  std::string key;
  std::string value;
  std::string effect;
  std::string time_added;

  bool operator==(const DeviceTaint&) const = default;
};

// A toleration of device taints (DeviceToleration): operator "Exists" or "Equal"; an empty key with Exists
// tolerates every taint; an empty effect tolerates both effects.
struct DeviceToleration {
  std::string key;
  std::string op = "Equal";
  std::string value;
  std::string effect;

  bool operator==(const DeviceToleration&) const = default;
};

struct Device {
  std::string name;                                  // unique within its pool
  std::map<std::string, AttributeValue> attributes;  // fully qualified names
  std::map<std::string, DeviceCapacity> capacity;    // fully qualified names
  // Several claims may each consume part of the capacity (consumable capacity); false: one claim holds it whole.
  bool allow_multiple_allocations = false;
  std::vector<DeviceTaint> taints;

  bool operator==(const Device&) const = default;
};

// One ResourceSlice's devices: a driver's pool on one node (gpusched's driver publishes one pool per node, named
// after it). `generation` is the pool's generation: slices of an older generation are stale and ignored.
struct DevicePool {
  std::string driver;
  std::string pool;
  common::NodeName node;  // empty: not node-local (allNodes or a node selector); gpusched allocates node-local only
  int64_t generation = 0;
  std::vector<Device> devices;

  bool operator==(const DevicePool&) const = default;
};

// A DeviceClass: its selectors apply to every request that names it (ANDed with the request's own), and its
// extendedResourceName lets pods that ask for that extended resource be served by DRA.
struct DeviceClass {
  std::string name;
  std::vector<std::string> selectors;  // CEL expressions
  std::string extended_resource_name;  // empty: none

  bool operator==(const DeviceClass&) const = default;
};

enum class AllocationMode : int8_t { kExactCount, kAll };

// One way of satisfying a request: a class, selectors, how many devices and how much capacity of each.
struct DeviceSubRequest {
  std::string name;  // the request's name, or "<request>/<subrequest>" for a firstAvailable alternative
  std::string device_class;
  std::vector<std::string> selectors;  // CEL expressions, ANDed with the class's
  AllocationMode mode = AllocationMode::kExactCount;
  int64_t count = 1;  // kExactCount only
  // Consumable capacity asked of each device (fully qualified capacity name -> amount); only shareable devices
  // (allow_multiple_allocations) can serve a request that names capacity.
  std::map<std::string, Quantity> capacity;
  std::vector<DeviceToleration> tolerations;

  bool operator==(const DeviceSubRequest&) const = default;
};

// A request of a claim: exactly one way (`exactly`), or alternatives in order of preference (`first_available`).
struct DeviceRequest {
  std::string name;
  std::optional<DeviceSubRequest> exactly;
  std::vector<DeviceSubRequest> first_available;
  bool admin_access = false;  // exactly only; needs the namespace label resource.kubernetes.io/admin-access=true

  bool operator==(const DeviceRequest&) const = default;
};

// All devices of the named requests (empty: every request) share the value of match_attribute, or have pairwise
// distinct values of distinct_attribute. A device without the attribute fails the constraint.
struct DeviceConstraint {
  std::vector<std::string> requests;
  std::string match_attribute;     // fully qualified; empty: none
  std::string distinct_attribute;  // fully qualified; empty: none

  bool operator==(const DeviceConstraint&) const = default;
};

// One allocated device of a claim (DeviceRequestAllocationResult).
struct DeviceResult {
  std::string request;  // "<request>" or "<request>/<subrequest>"
  std::string driver;
  std::string pool;
  std::string device;
  bool admin_access = false;
  std::map<std::string, Quantity> consumed_capacity;  // shareable devices only
  std::string share_id;                               // shareable devices only: unique among the device's sharers

  bool operator==(const DeviceResult&) const = default;
};

struct ClaimAllocation {
  std::vector<DeviceResult> devices;
  common::NodeName node;  // the node selector pins the claim to this node

  bool operator==(const ClaimAllocation&) const = default;
};

struct ResourceClaim {
  std::string namespace_;
  std::string name;
  std::string uid;
  std::vector<DeviceRequest> requests;
  std::vector<DeviceConstraint> constraints;
  std::optional<ClaimAllocation> allocation;  // status.allocation
  std::vector<common::PodUid> reserved_for;   // status.reservedFor (pods)
  bool deallocation_requested = false;        // metadata.deletionTimestamp set, or being deallocated

  bool operator==(const ResourceClaim&) const = default;
};

}  // namespace gpusched::core::dra
