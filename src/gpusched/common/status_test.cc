#include "gpusched/common/status.h"

#include <gtest/gtest.h>

namespace gpusched::common {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) {
    return InvalidArgument("odd: " + std::to_string(x));
  }
  return x / 2;
}

Status Chain(int x) {
  GPUSCHED_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(StatusTest, ResultCarriesValueOrError) {
  EXPECT_EQ(Half(8).value(), 4);
  auto bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().ToString(), "INVALID_ARGUMENT: odd: 3");
}

TEST(StatusTest, ReturnIfErrorPropagates) {
  EXPECT_TRUE(Chain(2).ok());
  EXPECT_EQ(Chain(5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpusched::common
