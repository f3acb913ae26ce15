#include "gpusched/core/node_index.h"

#include <functional>
#include <utility>

#include "gpusched/common/check.h"

namespace gpusched::core {
namespace {

uint64_t Hash(std::string_view name) { return std::hash<std::string_view>{}(name); }
uint32_t Tag(uint64_t hash) { return static_cast<uint32_t>(hash >> 32); }

}  // namespace

size_t NodeIndex::Probe(std::string_view name, uint64_t hash) const {
  const size_t mask = table_.size() - 1;
  const uint32_t tag = Tag(hash);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Entry& e = table_[i];
    if (e.slot == kEmpty || (e.tag == tag && names_[e.slot] == name)) {
      return i;
    }
  }
}

std::optional<size_t> NodeIndex::Find(std::string_view name) const {
  if (size_ == 0) {
    return std::nullopt;
  }
  const Entry& e = table_[Probe(name, Hash(name))];
  if (e.slot == kEmpty) {
    return std::nullopt;
  }
  return e.slot;
}

bool NodeIndex::Insert(std::string_view name, size_t slot) {
  GPUSCHED_CHECK(slot < kEmpty, "node slot out of the index's range");
  if ((size_ + 1) * 2 > table_.size()) {
    Grow();
  }
  const uint64_t hash = Hash(name);
  Entry& e = table_[Probe(name, hash)];
  if (e.slot != kEmpty) {
    return false;
  }
  if (names_.size() <= slot) {
    names_.resize(slot + 1);
  }
  names_[slot] = std::string(name);
  e = Entry{.tag = Tag(hash), .slot = static_cast<uint32_t>(slot)};
  ++size_;
  return true;
}

bool NodeIndex::Erase(std::string_view name) {
  if (size_ == 0) {
    return false;
  }
  const size_t mask = table_.size() - 1;
  size_t hole = Probe(name, Hash(name));
  if (table_[hole].slot == kEmpty) {
    return false;
  }
  names_[table_[hole].slot].clear();
  table_[hole] = Entry{};
  --size_;
  // Backward shift: move up every entry of the run after the hole that may live at the hole (its home bucket is
  // not cyclically within (hole, position]), so no probe ever stops early at the hole.
  for (size_t i = (hole + 1) & mask; table_[i].slot != kEmpty; i = (i + 1) & mask) {
    const size_t home = Hash(names_[table_[i].slot]) & mask;
    const bool stays = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (!stays) {
      table_[hole] = table_[i];
      table_[i] = Entry{};
      hole = i;
    }
  }
  return true;
}

void NodeIndex::Grow() {
  std::vector<Entry> old = std::exchange(table_, std::vector<Entry>(table_.empty() ? 16 : table_.size() * 2));
  const size_t mask = table_.size() - 1;
  for (const Entry& e : old) {
    if (e.slot == kEmpty) {
      continue;
    }
    size_t i = Hash(names_[e.slot]) & mask;
    while (table_[i].slot != kEmpty) {
      i = (i + 1) & mask;
    }
    table_[i] = e;
  }
}

}  // namespace gpusched::core
