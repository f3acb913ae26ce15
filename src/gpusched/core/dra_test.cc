#include "gpusched/core/dra.h"

#include <gtest/gtest.h>

#include <string>

namespace gpusched::core::dra {
namespace {

struct ParseCase {
  const char* name;
  const char* text;
  int64_t milli;
};

TEST(DraQuantityTest, ParsesResourceQuantitySyntaxIntoMilliUnits) {
  const ParseCase cases[] = {
      {"plain integer", "4", 4000},
      {"zero", "0", 0},
      {"negative zero is zero", "-0", 0},
      {"explicit plus", "+7", 7000},
      {"negative", "-3", -3000},
      {"fraction", "1.5", 1500},
      {"fraction without integer part", ".5", 500},
      {"trailing point", "2.", 2000},
      {"milli suffix", "1500m", 1500},
      {"micro suffix in whole millis", "2000u", 2},    // 2000 x 10^-6 = 0.002 units = 2 milli
      {"nano suffix in whole millis", "3000000n", 3},  // 3 x 10^6 x 10^-9 = 0.003
      {"kilo", "20k", 20000000},
      {"mega", "12M", 12000000000},
      {"giga fraction", "1.5G", 1500000000000},
      {"tera", "1T", 1000000000000000},
      {"peta", "2P", 2000000000000000000},
      {"exa fraction", "0.001E", 1000000000000000000},  // 10^15 units
      {"kibi", "1Ki", 1024000},
      {"mebi", "64Mi", 67108864000},
      {"gibi", "80Gi", 85899345920000},  // 80 x 2^30 x 1000
      {"tebi", "1Ti", 1099511627776000},
      {"pebi", "8Pi", 9007199254740992000},  // 2^53 units: within int64 milli
      {"binary with a fraction that stays exact", "0.5Ki", 512000},
      {"binary rescues digits finer than a milli", "0.0005Ki", 512},  // 0.512 units
      {"exponent lower case", "129e6", 129000000000},
      {"exponent upper case", "1E3", 1000000},
      {"exponent with plus", "1e+3", 1000000},
      {"negative exponent", "5e-3", 5},
      {"E alone is exa, not an exponent", "0.005E", 5000000000000000000},
      {"leading zeros", "007", 7000},
      {"trailing fraction zeros beyond 36 digits", "1.0000000000000000000000000000000000000000", 1000},
      {"long integer with zeros", "9000000000000000", 9000000000000000000},
      {"largest exact value", "9223372036854775807m", 9223372036854775807},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_TRUE(q.ok()) << c.name << ": " << q.status();
    EXPECT_EQ(q->milli, c.milli) << c.name << " (" << c.text << ")";
  }
}

struct RefuseCase {
  const char* name;
  const char* text;
  const char* want;  // in the message
};

TEST(DraQuantityTest, RefusesMalformedInexactAndOversizedValues) {
  const RefuseCase cases[] = {
      {"empty", "", "empty"},
      {"sign alone", "+", "no digits"},
      {"point alone", ".", "no digits"},
      {"suffix alone", "Mi", "no digits"},
      {"upper-case K is not a suffix", "200K", "unknown suffix \"K\""},
      {"bytes-style suffix", "1KiB", "unknown suffix \"KiB\""},
      {"exponent without digits", "1e", "unknown suffix \"e\""},
      {"exponent sign without digits", "1e+", "unknown suffix"},
      {"two points", "1.2.3", "unknown suffix \".3\""},
      {"space inside", "1 k", "unknown suffix"},
      {"comma decimal", "1,5", "unknown suffix"},
      {"finer than a milli", "0.0001", "finer than a milli"},
      {"nano", "1n", "finer than a milli"},
      {"micro", "1u", "finer than a milli"},
      {"negative exponent too fine", "1e-4", "finer than a milli"},
      {"beyond int64 milli", "9223372036854775808m", "beyond int64"},
      {"exa beyond int64 milli", "10E", "beyond int64"},
      {"exbi", "1Ei", "beyond int64"},
      {"one exa", "1E", "beyond int64"},
      {"huge exponent", "1e999999999", "beyond int64"},
      {"too many digits", "1234567890123456789012345678901234567", "significant digits"},
  };
  for (const auto& c : cases) {
    auto q = ParseQuantity(c.text);
    ASSERT_FALSE(q.ok()) << c.name << ": \"" << c.text << "\" parsed as " << q->milli;
    EXPECT_NE(q.status().message().find(c.want), std::string::npos) << c.name << ": " << q.status();
    EXPECT_NE(q.status().message().find("quantity \"" + std::string(c.text) + "\""), std::string::npos)
        << c.name << ": the message names the text: " << q.status();
  }
}

struct FormatCase {
  const char* name;
  int64_t milli;
  const char* want;
};

TEST(DraQuantityTest, FormatsCanonicallyAndReadsBackTheSameValue) {
  const FormatCase cases[] = {
      {"zero", 0, "0"},
      {"whole units", 4000, "4"},
      {"fraction in millis", 1500, "1500m"},
      {"negative fraction", -1500, "-1500m"},
      {"gibibytes", 85899345920000, "80Gi"},
      {"mebibytes when not whole gibibytes", 1536LL * 1048576 * 1000, "1536Mi"},
      {"decimal kilo", 20000000, "20k"},
      {"decimal mega", 12000000000, "12M"},
      {"not a multiple of 1000 or 1024", 1001000, "1001"},
      {"binary preferred over decimal", 1024000, "1Ki"},
      {"negative binary", -2048000, "-2Ki"},
      {"largest", 9223372036854775807, "9223372036854775807m"},
      {"smallest", -9223372036854775807 - 1, "-9223372036854775808m"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(FormatQuantity(Quantity{c.milli}), c.want) << c.name;
    if (c.milli != -9223372036854775807 - 1) {  // -2^63 milli is one beyond what the parser accepts
      auto back = ParseQuantity(FormatQuantity(Quantity{c.milli}));
      ASSERT_TRUE(back.ok()) << c.name << ": " << back.status();
      EXPECT_EQ(back->milli, c.milli) << c.name;
    }
  }
}

struct SemverCase {
  const char* name;
  const char* text;
  uint64_t major, minor, patch;
  const char* prerelease;
  const char* build;
};

TEST(SemverTest, ParsesSemver2) {
  const SemverCase cases[] = {
      {"release", "1.2.3", 1, 2, 3, "", ""},
      {"zeros", "0.0.0", 0, 0, 0, "", ""},
      {"prerelease", "1.0.0-alpha.1", 1, 0, 0, "alpha.1", ""},
      {"prerelease with hyphens", "1.0.0-x-y-z.--", 1, 0, 0, "x-y-z.--", ""},
      {"build", "1.0.0+20130313144700", 1, 0, 0, "", "20130313144700"},
      {"build may have leading zeros", "1.0.0+001.exp-sha", 1, 0, 0, "", "001.exp-sha"},
      {"prerelease and build", "1.0.0-beta+exp.sha.5114f85", 1, 0, 0, "beta", "exp.sha.5114f85"},
      {"large numbers", "18446744073709551615.0.1", 18446744073709551615ULL, 0, 1, "", ""},
  };
  for (const auto& c : cases) {
    auto v = ParseSemver(c.text);
    ASSERT_TRUE(v.ok()) << c.name << ": " << v.status();
    EXPECT_EQ(v->major, c.major) << c.name;
    EXPECT_EQ(v->minor, c.minor) << c.name;
    EXPECT_EQ(v->patch, c.patch) << c.name;
    EXPECT_EQ(v->prerelease, c.prerelease) << c.name;
    EXPECT_EQ(v->build, c.build) << c.name;
    EXPECT_EQ(FormatSemver(*v), c.text) << c.name;
  }
}

TEST(SemverTest, RefusesWhatSemver2Refuses) {
  const RefuseCase cases[] = {
      {"empty", "", "empty"},
      {"v prefix", "v1.0.0", "major version \"v1\""},
      {"two parts", "1.0", "MAJOR.MINOR.PATCH"},
      {"four parts", "1.0.0.0", "patch version \"0.0\""},
      {"leading zero", "01.0.0", "major version \"01\""},
      {"leading zero in minor", "1.02.0", "minor version \"02\""},
      {"empty prerelease", "1.0.0-", "prerelease has an empty identifier"},
      {"empty prerelease identifier", "1.0.0-a..b", "prerelease has an empty identifier"},
      {"numeric prerelease leading zero", "1.0.0-01", "leading zero"},
      {"bad prerelease character", "1.0.0-a_b", "outside [0-9A-Za-z-]"},
      {"empty build", "1.0.0+", "build metadata has an empty identifier"},
      {"bad build character", "1.0.0+a/b", "outside [0-9A-Za-z-]"},
      {"space", "1.0.0 ", "patch version"},
      {"beyond uint64", "18446744073709551616.0.0", "within uint64"},
      {"word", "Three", "MAJOR.MINOR.PATCH"},
  };
  for (const auto& c : cases) {
    auto v = ParseSemver(c.text);
    ASSERT_FALSE(v.ok()) << c.name << ": \"" << c.text << "\" parsed";
    EXPECT_NE(v.status().message().find(c.want), std::string::npos) << c.name << ": " << v.status();
  }
}

struct OrderCase {
  const char* name;
  const char* a;
  const char* b;
  int want;  // sign of a <=> b
};

int Sign(std::weak_ordering o) { return o < 0 ? -1 : o > 0 ? 1 : 0; }

TEST(SemverTest, OrdersByPrecedence) {
  const OrderCase cases[] = {
      {"major", "2.0.0", "1.9.9", 1},
      {"minor", "1.2.0", "1.10.0", -1},  // numeric, not lexical
      {"patch", "1.0.10", "1.0.9", 1},
      {"equal", "1.2.3", "1.2.3", 0},
      {"build ignored", "1.0.0+a", "1.0.0+b", 0},
      {"prerelease is lower than release", "1.0.0-rc.1", "1.0.0", -1},
      {"release is higher than prerelease", "1.0.0", "1.0.0-rc.1", 1},
      // The chain from semver.org: alpha < alpha.1 < alpha.beta < beta < beta.2 < beta.11 < rc.1 < release.
      {"shorter prefix is lower", "1.0.0-alpha", "1.0.0-alpha.1", -1},
      {"numeric lower than alphanumeric", "1.0.0-alpha.1", "1.0.0-alpha.beta", -1},
      {"alphanumeric by ASCII", "1.0.0-alpha.beta", "1.0.0-beta", -1},
      {"more identifiers", "1.0.0-beta", "1.0.0-beta.2", -1},
      {"numeric identifiers numerically", "1.0.0-beta.2", "1.0.0-beta.11", -1},
      {"beta before rc", "1.0.0-beta.11", "1.0.0-rc.1", -1},
      {"ASCII: upper case before lower case", "1.0.0-Z", "1.0.0-a", -1},
      {"hyphen in identifier is alphanumeric", "1.0.0-1", "1.0.0-1-a", -1},
  };
  for (const auto& c : cases) {
    auto a = ParseSemver(c.a);
    auto b = ParseSemver(c.b);
    ASSERT_TRUE(a.ok() && b.ok()) << c.name;
    EXPECT_EQ(Sign(CompareSemver(*a, *b)), c.want) << c.name;
    EXPECT_EQ(Sign(CompareSemver(*b, *a)), -c.want) << c.name << " (reversed)";
  }
}

}  // namespace
}  // namespace gpusched::core::dra
