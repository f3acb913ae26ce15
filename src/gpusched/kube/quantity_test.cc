#include "gpusched/kube/quantity.h"

#include <gtest/gtest.h>

namespace gpusched::kube {
namespace {

struct Case {
  const char* text;
  int64_t value;  // Value(), rounded up
  int64_t milli;  // MilliValue(), rounded up
};

TEST(QuantityTest, ParsesTheKubernetesGrammar) {
  const Case cases[] = {
      {"0", 0, 0},
      {"1", 1, 1000},
      {"+7", 7, 7000},
      {"20k", 20000, 20000000},  // gpusched.io/gpu-memory: 20000 as kube-scheduler sends it
      {"10k", 10000, 10000000},
      {"100m", 1, 100},  // 0.1 rounds up to 1
      {"2500m", 3, 2500},
      {"1.5", 2, 1500},
      {"0.25", 1, 250},
      {"64Mi", 67108864, 67108864000},
      {"8Gi", 8589934592, 8589934592000},
      {"1Ki", 1024, 1024000},
      {"128974848", 128974848, 128974848000},
      {"129e6", 129000000, 129000000000},
      {"129E6", 129000000, 129000000000},
      {"1e-3", 1, 1},
      {"12M", 12000000, 12000000000},
      {"1T", 1000000000000, 1000000000000000},
  };
  for (const auto& c : cases) {
    auto v = ParseQuantity(c.text);
    ASSERT_TRUE(v.ok()) << c.text << ": " << v.status();
    EXPECT_EQ(*v, c.value) << c.text;
    auto m = ParseMilliQuantity(c.text);
    ASSERT_TRUE(m.ok()) << c.text << ": " << m.status();
    EXPECT_EQ(*m, c.milli) << c.text;
  }
}

TEST(QuantityTest, RejectsWhatKubernetesRejects) {
  for (const char* bad : {"", "-1", "abc", "1x", "1KiB", "k", ".", "1e", "1e+", "1ee3", "1.2.3", "1 k", "99E18"}) {
    auto v = ParseQuantity(bad);
    EXPECT_FALSE(v.ok()) << "'" << bad << "' parsed as " << (v.ok() ? *v : 0);
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("quantity"), std::string::npos) << v.status();
    }
  }
}

TEST(QuantityTest, LongMantissasRoundUpWithoutOverflow) {
  // Found by quantity_fuzz: 45 fractional digits used to overflow the 128-bit divisor.
  EXPECT_EQ(*ParseQuantity(".0000000000000000000149879795587979553013148"), 1);
  EXPECT_EQ(*ParseQuantity("1.00000000000000000000000001"), 2);  // a non-zero digit beyond 20 digits still counts
  EXPECT_EQ(*ParseQuantity("2.00000000000000000000000000"), 2);
  EXPECT_EQ(*ParseMilliQuantity("0.0015"), 2);
  EXPECT_EQ(*ParseQuantity("0.5Ki"), 512);
  // Also found by quantity_fuzz: a 20-digit mantissa times 2^60 used to overflow.
  EXPECT_FALSE(ParseQuantity("55.55555999999999999955554Ei").ok());
  EXPECT_FALSE(ParseQuantity("9999995559999999999955554Ei").ok());  // ... and then times 10^5
  EXPECT_EQ(*ParseQuantity("0.000000000000000001Ei"), 2);           // 10^-18 x 2^60 = 1.15, rounded up
}

TEST(QuantityTest, OverflowIsAnErrorNotAWrap) {
  EXPECT_TRUE(ParseQuantity("9223372036854775807").ok());
  EXPECT_FALSE(ParseQuantity("9223372036854775808").ok());
  EXPECT_FALSE(ParseMilliQuantity("9223372036854775807").ok());
  EXPECT_FALSE(ParseQuantity("100Ei").ok());
  EXPECT_FALSE(ParseQuantity("1e999").ok());
}

TEST(QuantityTest, ExactMilliRefusesWhatWouldBeRounded) {
  struct Exact {
    const char* text;
    int64_t milli;  // -1: refused
  };
  const Exact cases[] = {
      {"80Gi", 85899345920000},  // 80 x 2^30 bytes, x 1000
      {"100", 100000},
      {"1m", 1},
      {"0.001", 1},
      {"1.5", 1500},
      {"0", 0},
      {"0.0005", -1},  // half a milli
      {"1e-4", -1},
      {"1.00000000000000000000000001", -1},  // a digit beyond the 20 kept ones is still not dropped silently
  };
  for (const auto& c : cases) {
    auto m = ParseExactMilliQuantity(c.text);
    if (c.milli < 0) {
      ASSERT_FALSE(m.ok()) << c.text << " parsed as " << *m;
      EXPECT_NE(m.status().message().find(c.text), std::string::npos) << m.status();
    } else {
      ASSERT_TRUE(m.ok()) << c.text << ": " << m.status();
      EXPECT_EQ(*m, c.milli) << c.text;
    }
  }
}

}  // namespace
}  // namespace gpusched::kube
