#include "gpusched/cli/simulate_command.h"

#include <gtest/gtest.h>

namespace gpusched::cli {
namespace {

TEST(ParseSeedsTest, RangesAndLists) {
  std::vector<unsigned long long> s;
  EXPECT_EQ(ParseSeeds("42-45", s), "");
  EXPECT_EQ(s, (std::vector<unsigned long long>{42, 43, 44, 45}));
  s.clear();
  EXPECT_EQ(ParseSeeds("7,9,11-12", s), "");
  EXPECT_EQ(s, (std::vector<unsigned long long>{7, 9, 11, 12}));
}

TEST(ParseSeedsTest, BadInputNamesTheItem) {
  for (const std::string bad : {"", "x", "5-3", "1,,2", "4-", "1-2-3"}) {
    SCOPED_TRACE(bad);
    std::vector<unsigned long long> s;
    EXPECT_NE(ParseSeeds(bad, s), "");
  }
}

}  // namespace
}  // namespace gpusched::cli
