// common::Nearest: typos get the name they meant; unrelated words get none.

#include "gpusched/common/nearest.h"

#include <gtest/gtest.h>

namespace gpusched::common {
namespace {

TEST(NearestTest, ATypoGetsTheNameItMeantAndAnUnrelatedWordNone) {
  const std::vector<std::string> commands = {"simulate", "scheduler", "extender", "agent", "webhook", "status"};
  EXPECT_EQ(Nearest("simulte", commands), "simulate");     // a letter left out
  EXPECT_EQ(Nearest("shceduler", commands), "scheduler");  // two letters swapped
  EXPECT_EQ(Nearest("agnet", commands), "agent");
  EXPECT_EQ(Nearest("stauts", commands), "status");
  EXPECT_EQ(Nearest("kubernetes", commands), "");
  EXPECT_EQ(Nearest("x", commands), "");
  EXPECT_EQ(EditDistance("fgd", "fgd-scarcity"), 9U);
  EXPECT_EQ(Nearest("fgd-scarcty", {"fgd", "fgd-scarcity", "bestfit"}), "fgd-scarcity");
  EXPECT_EQ(Nearest("binpak", {"binpack", "bestfit"}), "binpack");
  EXPECT_EQ(NearestAndKnown("binpak", {"binpack", "bestfit"}), "; did you mean 'binpack'? (known: binpack, bestfit)");
  EXPECT_EQ(NearestAndKnown("zzz", {"binpack"}), " (known: binpack)");
}

}  // namespace
}  // namespace gpusched::common
