#pragma once

// NodeIndex: node name -> slot, the lookup every scheduling request makes once per candidate node (5000 per
// extender request with all names). A flat open-addressing table (linear probing, load at most 1/2) of 8-byte
// entries, each a 32-bit tag of the name's hash and the slot, with the names kept by slot in one vector: a lookup
// touches one table entry and one name, where std::unordered_map walks a bucket list of separately allocated nodes
// (two to three cache misses, a quarter of an extender filter's time at 5000 nodes).
//
// Erase shifts the entries that follow back (no tombstones), so lookups stay short after any churn of nodes.
// Slots are the caller's (ClusterState's slot numbers): at most 2^32 - 2.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusched::core {

class NodeIndex {
 public:
  [[nodiscard]] std::optional<size_t> Find(std::string_view name) const;
  // Adds name -> slot; false (nothing changed) when the name is present.
  bool Insert(std::string_view name, size_t slot);
  // Removes the name; false when it was absent.
  bool Erase(std::string_view name);
  [[nodiscard]] size_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Entry {
    uint32_t tag = 0;
    uint32_t slot = kEmpty;
  };
  // Position in table_ of the name, or of the empty entry where it would go.
  [[nodiscard]] size_t Probe(std::string_view name, uint64_t hash) const;
  void Grow();

  std::vector<Entry> table_;        // size a power of two (or 0)
  std::vector<std::string> names_;  // by slot; "" where no name points at the slot
  size_t size_ = 0;
};

}  // namespace gpusched::core
