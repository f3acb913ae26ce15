#pragma once

// Strong identifier types: a NodeName cannot be passed where a PodUid is expected.

#include <compare>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

namespace gpusched::common {

template <typename Tag>
class Id {
 public:
  Id() = default;
  explicit Id(std::string value) : value_(std::move(value)) {}
  explicit Id(std::string_view value) : value_(value) {}
  explicit Id(const char* value) : value_(value) {}

  [[nodiscard]] const std::string& str() const { return value_; }
  [[nodiscard]] bool empty() const { return value_.empty(); }

  auto operator<=>(const Id&) const = default;

  friend std::ostream& operator<<(std::ostream& os, const Id& id) { return os << id.value_; }

 private:
  std::string value_;
};

struct NodeNameTag {};
struct GpuUuidTag {};
struct PodUidTag {};

using NodeName = Id<NodeNameTag>;
using GpuUuid = Id<GpuUuidTag>;
using PodUid = Id<PodUidTag>;

}  // namespace gpusched::common

template <typename Tag>
struct std::hash<gpusched::common::Id<Tag>> {
  size_t operator()(const gpusched::common::Id<Tag>& id) const noexcept { return std::hash<std::string>{}(id.str()); }
};
