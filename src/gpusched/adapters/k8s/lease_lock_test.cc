#include "gpusched/adapters/k8s/lease_lock.h"

#include <gtest/gtest.h>

namespace gpusched::adapters::k8s {
namespace {

TEST(MicroTimeTest, FormatsAndParsesTheApisForm) {
  const int64_t t = 1'795'000'000'123;  // 2026-11-18T...
  const std::string text = FormatMicroTime(t);
  EXPECT_EQ(text.size(), std::string("2026-11-18T08:26:40.123000Z").size()) << text;
  EXPECT_TRUE(text.ends_with(".123000Z")) << text;
  auto back = ParseMicroTime(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, t);
  EXPECT_EQ(*ParseMicroTime("1970-01-01T00:00:01Z"), 1000);
  EXPECT_EQ(*ParseMicroTime("1970-01-01T00:00:01.5Z"), 1500);
  EXPECT_EQ(*ParseMicroTime("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(*ParseMicroTime("1970-01-01T00:00:00-00:30"), 30 * 60 * 1000);
  for (const char* bad : {"", "yesterday", "1970-01-01", "1970-01-01T00:00:00Zjunk", "1970-01-01 00:00:00Z"}) {
    EXPECT_FALSE(ParseMicroTime(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace gpusched::adapters::k8s
