#include "gpusched/common/backoff.h"

#include <gtest/gtest.h>

namespace gpusched::common {
namespace {

using std::chrono::milliseconds;

TEST(ExponentialBackoffTest, DoublesUpToTheMaximumAndResets) {
  ExponentialBackoff b(milliseconds(200), milliseconds(1000));
  EXPECT_EQ(b.Next(), milliseconds(200));
  EXPECT_EQ(b.Next(), milliseconds(400));
  EXPECT_EQ(b.Next(), milliseconds(800));
  EXPECT_EQ(b.Next(), milliseconds(1000));
  EXPECT_EQ(b.Next(), milliseconds(1000));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(200));
  ExponentialBackoff inverted(milliseconds(500), milliseconds(100));
  EXPECT_EQ(inverted.Next(), milliseconds(500)) << "a maximum below the start is the start";
  EXPECT_EQ(inverted.Next(), milliseconds(500));
}

TEST(ExponentialBackoffTest, AfterTheNthFailure) {
  EXPECT_EQ(ExponentialBackoff::After(1, milliseconds(1000), milliseconds(10000)), milliseconds(1000));
  EXPECT_EQ(ExponentialBackoff::After(2, milliseconds(1000), milliseconds(10000)), milliseconds(2000));
  EXPECT_EQ(ExponentialBackoff::After(4, milliseconds(1000), milliseconds(10000)), milliseconds(8000));
  EXPECT_EQ(ExponentialBackoff::After(5, milliseconds(1000), milliseconds(10000)), milliseconds(10000));
  EXPECT_EQ(ExponentialBackoff::After(1000, milliseconds(1000), milliseconds(10000)), milliseconds(10000));
  EXPECT_EQ(ExponentialBackoff::After(0, milliseconds(1000), milliseconds(10000)), milliseconds(1000));
}

}  // namespace
}  // namespace gpusched::common
