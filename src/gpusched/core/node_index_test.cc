#include "gpusched/core/node_index.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpusched::core {
namespace {

TEST(NodeIndexTest, FindsWhatWasInsertedAndNothingElse) {
  NodeIndex index;
  EXPECT_EQ(index.Find("a"), std::nullopt);
  EXPECT_TRUE(index.Insert("a", 0));
  EXPECT_TRUE(index.Insert("node-b.example.internal.long-name", 7));
  EXPECT_FALSE(index.Insert("a", 3));  // present: unchanged
  EXPECT_EQ(index.Find("a"), 0U);
  EXPECT_EQ(index.Find("node-b.example.internal.long-name"), 7U);
  EXPECT_EQ(index.Find("b"), std::nullopt);
  EXPECT_EQ(index.Find(""), std::nullopt);
  EXPECT_EQ(index.size(), 2U);
  EXPECT_TRUE(index.Erase("a"));
  EXPECT_FALSE(index.Erase("a"));
  EXPECT_EQ(index.Find("a"), std::nullopt);
  EXPECT_EQ(index.size(), 1U);
  EXPECT_TRUE(index.Insert("a", 0));  // a slot is reused after its name went
  EXPECT_EQ(index.Find("a"), 0U);
}

// Random inserts and erases (slots reused as ClusterState reuses them) agree with std::unordered_map at every
// step, through growth and the backward shifts of erase in long probe runs.
TEST(NodeIndexTest, AgreesWithAHashMapUnderChurn) {
  for (uint64_t seed : {1U, 2U, 3U}) {
    std::mt19937_64 rng(seed);
    NodeIndex index;
    std::unordered_map<std::string, size_t> model;
    std::vector<size_t> free_slots;
    size_t next_slot = 0;
    auto name = [](uint64_t n) { return "gpu-node-" + std::to_string(n); };
    for (int step = 0; step < 20000; ++step) {
      const std::string n = name(rng() % 3000);
      if (rng() % 3 != 0) {
        if (model.contains(n)) {
          EXPECT_FALSE(index.Insert(n, 999999));
          continue;
        }
        size_t slot = next_slot;
        if (!free_slots.empty()) {
          slot = free_slots.back();
          free_slots.pop_back();
        } else {
          ++next_slot;
        }
        ASSERT_TRUE(index.Insert(n, slot));
        model[n] = slot;
      } else {
        auto it = model.find(n);
        ASSERT_EQ(index.Erase(n), it != model.end());
        if (it != model.end()) {
          free_slots.push_back(it->second);
          model.erase(it);
        }
      }
      if (step % 97 == 0) {
        ASSERT_EQ(index.size(), model.size());
        for (uint64_t k = 0; k < 3000; ++k) {
          auto it = model.find(name(k));
          const auto got = index.Find(name(k));
          ASSERT_EQ(got.has_value(), it != model.end()) << name(k) << " at step " << step;
          if (got) {
            ASSERT_EQ(*got, it->second);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpusched::core
