#include "gpusched/common/units.h"

#include <gtest/gtest.h>

#include <sstream>

namespace gpusched::common {
namespace {

TEST(UnitsTest, ArithmeticStaysInTheUnit) {
  MilliGpu a{300};
  MilliGpu b{450};
  EXPECT_EQ((a + b).value(), 750);
  EXPECT_EQ((b - a).value(), 150);
  EXPECT_EQ((a * 3).value(), 900);
  a += b;
  EXPECT_EQ(a, MilliGpu{750});
  a -= MilliGpu{50};
  EXPECT_EQ(a.value(), 700);
  EXPECT_LT(MiB{1}, MiB{2});
}

TEST(UnitsTest, PrintsWithSuffix) {
  std::ostringstream os;
  os << MiB{4096} << " " << MilliCpu{1500} << " " << kGpuMilli;
  EXPECT_EQ(os.str(), "4096MiB 1500m-cpu 1000m-gpu");
}

}  // namespace
}  // namespace gpusched::common
