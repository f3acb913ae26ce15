#pragma once

// ResourceSlices (resource.k8s.io/v1) to and from core::dra::DevicePool. Pure; no I/O. The agent's publisher
// encodes the node's pool with it, the scheduler decodes every driver's slices with it, and the fake API server
// validates what it is sent with it.
//
// ValidateResourceSlice: what kube-apiserver checks on create and update (pkg/apis/resource/validation), for the
// whole v1 shape, fields gpusched does not model included:
//   metadata.name (or generateName) a DNS subdomain of at most 253 characters;
//   spec.driver a DNS subdomain of at most 63 characters; spec.pool.name at most 253 characters, DNS subdomains
//   joined by '/'; pool.generation >= 0; pool.resourceSliceCount > 0;
//   exactly one of nodeName (a DNS subdomain), nodeSelector (exactly one term), allNodes (true),
//   perDeviceNodeSelection (true); not both devices and sharedCounters (at most 8 counter sets);
//   at most 128 devices, 64 when any device has taints, consumes counters or has list attributes; device names
//   DNS labels, unique in the slice; per device at most 32 attributes and capacities together, at most 48
//   attribute values (list items counted one by one), at most 16 taints, 2 counter consumptions, 4 binding
//   conditions and 4 binding failure conditions;
//   attribute and capacity names a C identifier of at most 32 characters, optionally after "<domain>/" (a domain
//   of at most 63 characters); each attribute exactly one of int, bool, string, version, ints, bools, strings,
//   versions (no empty list); strings and versions at most 64 characters, versions semver 2.0.0;
//   a capacity's requestPolicy only with allowMultipleAllocations: true; validValues (at most 10, ascending, none
//   above the capacity, default among them) or validRange (min required and at most the capacity; default within
//   [min, max]; max at most the capacity; step > 0, min + step at most the capacity, default and max reachable from
//   min in steps); a default is required with either;
//   taints: key a label name, value a label value, effect None, NoSchedule or NoExecute, timeAdded RFC 3339.
// The errors name the field ("spec.devices[2].capacity[memory].requestPolicy.validRange.step: ...") and all
// problems found are listed, joined by "; ".
//
// DecodeResourceSlice: validates, then converts. Attribute and capacity names are qualified with the driver's name
// when they have no domain (the API's rule: "model" in a slice of driver d is "d/model"); a name given both ways is
// an error. Quantities are kept exactly in milli-units (a value finer than a milli-unit is an error). Fields of the
// v1 shape that core::dra does not model are refused with an error naming the field, never dropped, because an
// allocator that ignored them would hand out devices wrongly: sharedCounters and consumesCounters (partitionable
// devices), perDeviceNodeSelection and per-device nodeName/nodeSelector/allNodes, bindsToNode: true,
// bindingConditions, bindingFailureConditions, nodeAllocatableResources, partitionTypeAttribute,
// skipNodeOperations and list-typed attributes. A pool that is not node-local (nodeSelector, allNodes) decodes with
// an empty node and node_local false: gpusched allocates node-local devices only, so the selector is not kept.
//
// EncodeResourceSliceSpecs: the pool as the specs of its slices, in order, split so that no slice holds more devices
// than the API allows (128; 64 in a slice where a device has taints): devices stay in the pool's order, each slice
// takes as many as fit, and every slice carries pool.resourceSliceCount = the number of slices and the pool's
// generation. A pool without devices is one slice without devices (so that consumers see the pool and know it is
// empty). Names in the driver's own domain are written without it. Every slice is checked with
// ValidateResourceSlice before it is returned; a device over the 32 attributes-and-capacities limit is refused with
// an error naming it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"

namespace gpusched::kube {

inline constexpr std::string_view kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
inline constexpr std::string_view kDeviceClassesPath = "/apis/resource.k8s.io/v1/deviceclasses";

// Limits of resource.k8s.io/v1 (k8s.io/api/resource/v1 types.go).
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxDevicesPerSliceWithTaints = 64;  // also with counters or list attributes
inline constexpr size_t kMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr size_t kMaxAttributeValuesPerDevice = 48;
inline constexpr size_t kMaxTaintsPerDevice = 16;
inline constexpr size_t kMaxAttributeValueLength = 64;
inline constexpr size_t kMaxIdentifierLength = 32;  // the <id> of "<domain>/<id>"
inline constexpr size_t kMaxDriverNameLength = 63;
inline constexpr size_t kMaxPoolNameLength = 253;
inline constexpr size_t kMaxObjectNameLength = 253;
inline constexpr size_t kMaxValidValues = 10;

// What one slice holds, decoded.
struct ResourceSliceInfo {
  std::string name;              // metadata.name
  std::string resource_version;  // metadata.resourceVersion
  int64_t resource_slice_count = 1;
  bool node_local = true;      // false: spec.allNodes or spec.nodeSelector (pool.node is then empty)
  core::dra::DevicePool pool;  // driver, pool name, node, generation, and this slice's devices only
};

[[nodiscard]] common::Status ValidateResourceSlice(const nlohmann::json& slice);
[[nodiscard]] common::Result<ResourceSliceInfo> DecodeResourceSlice(const nlohmann::json& slice);

// A pool as a consumer sees it from its slices (the API's rule): only the slices of the highest generation count;
// the pool is usable when all resourceSliceCount of them are there and no device name repeats.
struct AssembledPool {
  core::dra::DevicePool pool;  // the devices of the highest generation's slices, in slice-name order
  bool node_local = true;
  std::string problem;  // "": complete; else why the pool must not be allocated from yet
};
// Pools by (driver, pool name), in that order.
[[nodiscard]] std::vector<AssembledPool> AssemblePools(const std::vector<ResourceSliceInfo>& slices);

// The specs ({"driver", "pool", "nodeName", "devices"}) of the pool's slices; node-local pools only (pool.node
// set). The caller adds metadata (ResourceSliceName, owner references).
[[nodiscard]] common::Result<std::vector<nlohmann::json>> EncodeResourceSliceSpecs(const core::dra::DevicePool& pool);

// A stable name for a node's `index`-th slice of `driver`: "<node>-<driver>-<index>", a valid object name for every
// node name (one too long is cut and given a hash of the whole, so that two long names do not collide).
[[nodiscard]] std::string ResourceSliceName(std::string_view node, std::string_view driver, size_t index);

// Quantities as the API writes them: "<n>m" when not whole, else the largest binary suffix that is exact
// ("80Gi", "256Mi"), else the plain integer.
[[nodiscard]] std::string FormatDraQuantity(core::dra::Quantity q);
// A resource.Quantity (JSON string or number), exactly, in milli-units.
[[nodiscard]] common::Result<core::dra::Quantity> ParseDraQuantity(const nlohmann::json& value);

// Name rules shared with the DeviceClass and the publisher.
[[nodiscard]] bool IsDnsLabel(std::string_view s);
[[nodiscard]] bool IsDnsSubdomain(std::string_view s);
// A semantic version (semver 2.0.0), as the API checks version attributes.
[[nodiscard]] bool IsSemver(std::string_view s);

}  // namespace gpusched::kube
