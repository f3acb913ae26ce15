#include "gpusched/sched/cel.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusched::sched::cel {
namespace {

namespace dra = core::dra;

constexpr const char* kDriver = "gpu.gpusched.io";

dra::DeviceCapacity Cap(const char* text) {
  auto q = dra::ParseQuantity(text);
  EXPECT_TRUE(q.ok()) << text;
  return dra::DeviceCapacity{.value = q.ok() ? *q : dra::Quantity{}};
}

// One shareable A100 as gpusched's driver publishes it, plus one attribute of another domain.
dra::Device A100() {
  dra::Device d;
  d.name = "gpu-3";
  d.attributes = {
      {"gpu.gpusched.io/model", dra::AttributeValue::String("A100-80GB")},
      {"gpu.gpusched.io/family", dra::AttributeValue::String("ampere")},
      {"gpu.gpusched.io/uuid", dra::AttributeValue::String("GPU-1234-abcd")},
      {"gpu.gpusched.io/slice", dra::AttributeValue::String("10Gi")},      // a quantity as text
      {"gpu.gpusched.io/firmware", dra::AttributeValue::String("1.4.0")},  // a version as text
      {"gpu.gpusched.io/index", dra::AttributeValue::Int(3)},
      {"gpu.gpusched.io/mig", dra::AttributeValue::Bool(true)},
      {"gpu.gpusched.io/driverVersion", dra::AttributeValue::Version("535.104.5")},
      {"gpu.gpusched.io/cudaVersion", dra::AttributeValue::Version("12.2.0")},
      {"gpu.gpusched.io/badVersion", dra::AttributeValue::Version("not-a-version")},
      {"dra.example.com/something", dra::AttributeValue::Bool(true)},
  };
  d.capacity = {
      {"gpu.gpusched.io/memory", Cap("80Gi")},
      {"gpu.gpusched.io/multiprocessors", Cap("108")},
      {"gpu.gpusched.io/power", Cap("1500m")},
  };
  d.allow_multiple_allocations = true;
  return d;
}

struct MatchCase {
  const char* name;
  std::string expr;
  bool want;
};

void ExpectMatches(const std::vector<MatchCase>& cases) {
  const dra::Device device = A100();
  for (const auto& c : cases) {
    auto program = Program::Compile(c.expr);
    ASSERT_TRUE(program.ok()) << c.name << ": " << program.status();
    auto got = program->Matches({.driver = kDriver, .device = &device});
    ASSERT_TRUE(got.ok()) << c.name << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.name << ": " << c.expr;
  }
}

struct ErrorCase {
  const char* name;
  std::string expr;
  std::string want;  // in the message
};

void ExpectRuntimeErrors(const std::vector<ErrorCase>& cases) {
  const dra::Device device = A100();
  for (const auto& c : cases) {
    auto program = Program::Compile(c.expr);
    ASSERT_TRUE(program.ok()) << c.name << ": " << program.status();
    auto got = program->Matches({.driver = kDriver, .device = &device});
    ASSERT_FALSE(got.ok()) << c.name << ": matched as " << *got << " instead of an error: " << c.expr;
    EXPECT_NE(got.status().message().find(c.want), std::string::npos) << c.name << ": " << got.status();
    EXPECT_EQ(got.status().message().rfind("CEL: ", 0), 0U) << c.name << ": " << got.status();
  }
}

void ExpectRefused(const std::vector<ErrorCase>& cases) {
  for (const auto& c : cases) {
    auto program = Program::Compile(c.expr);
    ASSERT_FALSE(program.ok()) << c.name << ": compiled: " << c.expr;
    EXPECT_NE(program.status().message().find(c.want), std::string::npos) << c.name << ": " << program.status();
    EXPECT_EQ(program.status().message().rfind("CEL: ", 0), 0U) << c.name << ": " << program.status();
  }
}

// Selectors as the Kubernetes DRA documentation and DRA's own CEL tests write them (rewritten for gpusched's
// driver), against the A100 above.
TEST(CelTest, MatchesDraSelectors) {
  ExpectMatches({
      {"driver name", R"(device.driver == "gpu.gpusched.io")", true},
      {"another driver", R"(device.driver == "dra.example.com")", false},
      {"string attribute, field form", R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB")", true},
      {"string attribute, index form", R"(device.attributes["gpu.gpusched.io"]["model"] == "A100-80GB")", true},
      {"string attribute differs", R"(device.attributes["gpu.gpusched.io"].model == "H100-80GB")", false},
      {"bool attribute alone", R"(device.attributes["gpu.gpusched.io"].mig)", true},
      {"int attribute ordering", R"(device.attributes["gpu.gpusched.io"].index > 0)", true},  // 3 > 0
      {"int attribute range", R"(device.attributes["gpu.gpusched.io"].index >= 3 &&
                                 device.attributes["gpu.gpusched.io"]["index"] < 4)",
       true},
      {"qualified name of another domain", R"(device.attributes["dra.example.com"].something)", true},
      // 80Gi >= 40Gi
      {"the typical selector", R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB" &&
          device.capacity["gpu.gpusched.io"].memory.compareTo(quantity("40Gi")) >= 0)",
       true},
      {"capacity equal is not greater", R"(device.capacity["gpu.gpusched.io"].memory.isGreaterThan(quantity("80Gi")))",
       false},
      {"capacity less than", R"(device.capacity["gpu.gpusched.io"].memory.isLessThan(quantity("81Gi")))", true},
      {"capacity index form", R"(device.capacity["gpu.gpusched.io"]["memory"].compareTo(quantity("80Gi")) == 0)", true},
      {"capacity counts", R"(device.capacity["gpu.gpusched.io"].multiprocessors.asInteger() == 108)", true},
      {"attribute domain present", R"("gpu.gpusched.io" in device.attributes)", true},
      {"attribute domain absent", R"("no-such-domain" in device.attributes)", false},
      {"capacity domain present", R"("gpu.gpusched.io" in device.capacity)", true},
      {"a domain with attributes only has no capacity", R"("dra.example.com" in device.capacity)", false},
      {"a domain prefix is not a domain", R"("gpu.gpusched" in device.attributes)", false},
      {"attribute key present", R"("model" in device.attributes["gpu.gpusched.io"])", true},
      {"attribute key absent", R"("nvlink" in device.attributes["gpu.gpusched.io"])", false},
      // DRA's check-negative scenario: the guard keeps the missing capacity from being read.
      {"absent key guards a lookup", R"(!("name" in device.capacity["dra.example.com"]) ||
          device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki")))",
       true},
      {"present key guards a lookup", R"("memory" in device.capacity["gpu.gpusched.io"] &&
          device.capacity["gpu.gpusched.io"].memory.isGreaterThan(quantity("1Ki")))",
       true},
      {"has on an attribute", R"(has(device.attributes["gpu.gpusched.io"].model))", true},
      {"has on a missing attribute", R"(has(device.attributes["gpu.gpusched.io"].nvlink))", false},
      {"has in an empty domain", R"(has(device.attributes["no-such-domain"].model))", false},
      {"has on capacity", R"(has(device.capacity["gpu.gpusched.io"].memory))", true},
      {"has with the domain from the driver", R"(has(device.attributes[device.driver].model))", true},
      {"model in a list", R"(device.attributes["gpu.gpusched.io"].model in ["H100-80GB", "A100-80GB"])", true},
      {"model not in a list", R"(device.attributes["gpu.gpusched.io"].model in ["H100-80GB"])", false},
      {"empty list", R"(device.attributes["gpu.gpusched.io"].model in [])", false},
      {"int in a list", R"(device.attributes["gpu.gpusched.io"].index in [1, 2, 3,])", true},
      // "3" is not equal to 3 (no conversion), the int 3 is.
      {"mixed list by CEL equality", R"(device.attributes["gpu.gpusched.io"].index in ["3", 3])", true},
      {"startsWith", R"(device.attributes["gpu.gpusched.io"].model.startsWith("A100"))", true},
      {"endsWith", R"(device.attributes["gpu.gpusched.io"].model.endsWith("40GB"))", false},
      {"contains", R"(device.attributes["gpu.gpusched.io"].uuid.contains("1234"))", true},
      {"allowMultipleAllocations", "device.allowMultipleAllocations", true},
      {"allowMultipleAllocations compared", "device.allowMultipleAllocations == false", false},
      {"conditional", R"(device.attributes["gpu.gpusched.io"].mig ? device.attributes["gpu.gpusched.io"].index == 3
                                                                   : false)",
       true},
      {"domain from the driver", R"(device.attributes[device.driver].model == "A100-80GB")", true},
      {"domain from the driver, key from an attribute",
       R"(device.attributes[device.driver][device.attributes[device.driver].family] == "x" || true)", true},
      {"different types are unequal", R"(device.attributes["gpu.gpusched.io"].index == "3")", false},
      {"different types are not-equal", R"(device.attributes["gpu.gpusched.io"].model != 1)", true},
      {"quantity never equals an int", R"(quantity("3") == device.attributes["gpu.gpusched.io"].index)", false},
      {"string ordering", R"(device.attributes["gpu.gpusched.io"].family < "blackwell")", true},  // a < b
      {"bool ordering", "false < true", true},
      {"relations chain left to right", "1 == 1 == true", true},
      {"negative literal", "-1 < 0", true},
      {"smallest int literal", "-9223372036854775808 < 0", true},
      {"hex literal", "0x10 == 16", true},
      {"comment", "device.driver == \"gpu.gpusched.io\" // the GPU driver\n", true},
      {"double negation", "!!device.allowMultipleAllocations", true},
      // DRA's "all" scenario: every attribute type in both forms.
      {"every type in both forms", R"(
device.capacity["gpu.gpusched.io"].memory.isGreaterThan(quantity("1Ki")) &&
device.attributes["gpu.gpusched.io"].mig &&
device.attributes["gpu.gpusched.io"].index > 0 &&
device.attributes["gpu.gpusched.io"].family == "ampere" &&
device.attributes["gpu.gpusched.io"].cudaVersion.isGreaterThan(semver("0.0.1")) &&
device.capacity["gpu.gpusched.io"]["memory"].isGreaterThan(quantity("1Ki")) &&
device.attributes["gpu.gpusched.io"]["mig"] &&
device.attributes["gpu.gpusched.io"]["index"] > 0 &&
device.attributes["gpu.gpusched.io"]["family"] == "ampere" &&
device.attributes["gpu.gpusched.io"]["cudaVersion"].isGreaterThan(semver("0.0.1"))
)",
       true},
  });
}

TEST(CelTest, EmptyDriverName) {
  const dra::Device device;
  auto program = Program::Compile(R"(device.driver == "")");
  ASSERT_TRUE(program.ok()) << program.status();
  auto got = program->Matches({.driver = "", .device = &device});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got);
}

// `nvlink` is not an attribute of the A100, so reading it is an error; && and || absorb it where CEL does.
TEST(CelTest, AndOrAreCommutativeOverErrors) {
  const std::string err = R"(device.attributes["gpu.gpusched.io"].nvlink)";
  const std::string index = R"(device.attributes["gpu.gpusched.io"].index)";  // an int: not a bool operand
  ExpectMatches({
      {"true || error", "true || " + err, true},
      {"error || true", err + " || true", true},
      {"false && error", "false && " + err, false},
      {"error && false", err + " && false", false},
      {"error in the middle of a false chain", "true && " + err + " && false", false},
      {"error among ors", "false || " + err + " || true", true},
      {"unchosen branch is not evaluated", "true ? true : " + err, true},
      {"has guards the lookup", "has(" + err + ") && " + err + " > 1", false},
      {"a non-bool operand is absorbed like an error", index + " || true", true},
  });
  ExpectRuntimeErrors({
      {"error || false", err + " || false", "no such key: nvlink"},
      {"false || error", "false || " + err, "no such key: nvlink"},
      {"true && error", "true && " + err, "no such key: nvlink"},
      {"error && true", err + " && true", "no such key: nvlink"},
      {"not error", "!" + err, "no such key: nvlink"},
      {"chosen branch errs", "false ? true : " + err, "no such key: nvlink"},
      {"condition errs", err + " ? true : false", "no such key: nvlink"},
      {"a non-bool operand of &&", index + " && true", "no such overload: \"&&\" applied to (int)"},
  });
}

// Scenarios of Kubernetes' CEL quantity library tests, and capacity arithmetic.
TEST(CelTest, Quantities) {
  ExpectMatches({
      {"equal across suffixes", R"(quantity("200M") == quantity("0.2G"))", true},
      {"binary equals decimal bytes", R"(quantity("1Gi") == quantity("1073741824"))", true},
      {"unequal", R"(quantity("200M") == quantity("0.3G"))", false},
      {"compare less", R"(quantity("50M").compareTo(quantity("50Mi")) == -1)", true},
      {"compare greater", R"(quantity("50Mi").compareTo(quantity("50M")) == 1)", true},
      {"compare equal", R"(quantity("200M").compareTo(quantity("0.2G")) == 0)", true},
      {"less than", R"(quantity("50M").isLessThan(quantity("100M")))", true},
      {"not greater than", R"(quantity("50M").isGreaterThan(quantity("100M")))", false},
      {"add a quantity", R"(quantity("50k").add(quantity("20")) == quantity("50.02k"))", true},
      {"add an int", R"(quantity("50k").add(20).isLessThan(quantity("50020")))", false},  // equal
      {"sub a quantity", R"(quantity("50k").sub(quantity("20")) == quantity("49.98k"))", true},
      {"sub an int", R"(quantity("50k").sub(20) == quantity("49980"))", true},
      // 50000 + 20 - 100000 + 50000 = 20
      {"arithmetic chain", R"(quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20)", true},
      {"asInteger", R"(quantity("50k").asInteger() == 50000)", true},
      {"isInteger whole", R"(quantity("50").isInteger())", true},
      {"isInteger fraction", R"(quantity("1500m").isInteger())", false},
      {"sign negative", R"(quantity("-5").sign() == -1)", true},
      {"sign zero", R"(quantity("0").sign() == 0)", true},
      {"sign positive", R"(quantity("1m").sign() == 1)", true},
      {"sign as a function", R"(sign(device.capacity["gpu.gpusched.io"].memory) == 1)", true},
      {"isQuantity binary", R"(isQuantity("1.3Gi"))", true},
      {"isQuantity upper-case K", R"(isQuantity("200K"))", false},
      {"isQuantity comma", R"(isQuantity("1,3G"))", false},
      {"isQuantity of an attribute", R"(isQuantity(device.attributes["gpu.gpusched.io"].model))", false},
      // 80Gi - 40Gi = 40Gi
      {"capacity minus a request", R"(device.capacity["gpu.gpusched.io"].memory.sub(quantity("40Gi"))
                                         .compareTo(quantity("40Gi")) == 0)",
       true},
      {"fractional capacity", R"(device.capacity["gpu.gpusched.io"].power == quantity("1.5"))", true},
      {"quantity parsed from an attribute",
       R"(quantity(device.attributes["gpu.gpusched.io"].slice) == quantity("10Gi"))", true},
  });
}

// Version attributes and semver(), as in Kubernetes' semver library and DRA's version scenarios.
TEST(CelTest, Versions) {
  const std::string driver_version = R"(device.attributes["gpu.gpusched.io"].driverVersion)";
  const std::string cuda = R"(device.attributes["gpu.gpusched.io"].cudaVersion)";
  ExpectMatches({
      {"attribute greater than", driver_version + R"(.isGreaterThan(semver("500.0.0")))", true},
      {"attribute compared equal", driver_version + R"(.compareTo(semver("535.104.5")) == 0)", true},
      {"release above its prerelease", cuda + R"(.isLessThan(semver("12.2.0-rc.1")))", false},
      {"attribute major", cuda + ".major() >= 12", true},
      {"minor numerically", R"(semver("1.10.0").isGreaterThan(semver("1.9.0")))", true},
      {"shorter prerelease is lower", R"(semver("1.0.0-alpha").isLessThan(semver("1.0.0-alpha.1")))", true},
      {"build metadata ignored", R"(semver("1.0.0+build.1") == semver("1.0.0+build.2"))", true},
      {"major minor patch", R"(semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 &&
                               semver("1.2.3").patch() == 3)",
       true},
      {"isSemver", R"(isSemver("1.0.0"))", true},
      {"isSemver refuses a v prefix", R"(isSemver("v1.0"))", false},
      {"isSemver normalizing", R"(isSemver("v1.0", true))", true},
      {"normalize drops v", R"(semver("v0.0.1", true).compareTo(semver("0.0.1")) == 0)", true},
      {"normalize drops leading zeros", R"(semver("01.01.01", true) == semver("1.1.1"))", true},
      {"normalize keeps a short version's prerelease out", R"(isSemver("1.0-rc", true))", false},
      {"normalize flag false is strict", R"(isSemver("v1.0.0", false))", false},
      {"version attribute equals a version", driver_version + R"( == semver("535.104.5"))", true},
      // A string on the left of == compares unequal to a version (no conversion).
      {"string equals a version attribute", R"("535.104.5" == )" + driver_version, false},
      // Five versions parsed in one evaluation: more than the evaluator keeps in place.
      {"many versions in one evaluation",
       driver_version + ".isGreaterThan(semver(" + R"(device.attributes["gpu.gpusched.io"].firmware)" + ")) && " +
           cuda + ".isGreaterThan(semver(" + R"(device.attributes["gpu.gpusched.io"].firmware)" + ")) && " +
           driver_version + ".major() == 535",
       true},
      {"semver parsed from an attribute",
       R"(semver(device.attributes["gpu.gpusched.io"].firmware).isLessThan(semver("2.0.0")))", true},
      {"isSemver of an attribute", R"(isSemver(device.attributes["gpu.gpusched.io"].model))", false},
  });
}

TEST(CelTest, RuntimeErrorsAreErrorsNotFalse) {
  ExpectRuntimeErrors({
      {"missing attribute", R"(device.attributes["gpu.gpusched.io"].nvlink == 1)", "no such key: nvlink"},
      // DRA's runtime-error-lookup scenarios: an unknown domain is an empty map.
      {"missing attribute in an unknown domain",
       R"(device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0")))", "no such key: noSuchAttr"},
      {"missing attribute, index form",
       R"(device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0")))", "no such key: noSuchAttr"},
      {"missing capacity", R"(device.capacity["gpu.gpusched.io"].bandwidth.isGreaterThan(quantity("1")))",
       "no such key: bandwidth"},
      {"missing attribute, domain from the driver", R"(device.attributes[device.driver].nvlink)",
       "no such key: nvlink"},
      {"the message names the domain", R"(device.capacity["gpu.gpusched.io"].bandwidth.sign() == 1)",
       "device.capacity[\"gpu.gpusched.io\"] has no entry \"bandwidth\""},
      {"string ordered against an int", R"(device.attributes["gpu.gpusched.io"].model > 1)",
       "no such overload: \">\" applied to (string, int)"},
      {"bool ordered against an int", R"(device.attributes["gpu.gpusched.io"].mig < 1)", "no such overload"},
      {"version on the left of == with a string",
       R"(device.attributes["gpu.gpusched.io"].driverVersion == "535.104.5")",
       "no such overload: \"==\" applied to (semver, string)"},
      {"version method on a string", R"(device.attributes["gpu.gpusched.io"].model.isGreaterThan(semver("1.0.0")))",
       "no such overload: isGreaterThan applied to (string, semver)"},
      {"string method on an int", R"(device.attributes["gpu.gpusched.io"].index.startsWith("3"))",
       "no such overload: startsWith applied to (int, string)"},
      {"version method on an int", R"(device.attributes["gpu.gpusched.io"].index.major() == 1)",
       "no such overload: major"},
      {"non-bool result", R"(device.attributes["gpu.gpusched.io"].model)", "evaluated to string, not bool"},
      {"quantity that does not parse", R"(quantity("10Mo").isGreaterThan(quantity("1")))",
       "quantity \"10Mo\": unknown suffix"},
      {"version that does not parse", R"(semver("1.0").major() == 1)", "semantic version \"1.0\""},
      {"asInteger of a fraction", R"(device.capacity["gpu.gpusched.io"].power.asInteger() == 1)",
       "cannot convert value to integer"},
      {"version attribute that is not a version", R"(device.attributes["gpu.gpusched.io"].badVersion.major() == 1)",
       "attribute gpu.gpusched.io/badVersion: semantic version \"not-a-version\""},
      {"field of a scalar", R"(device.attributes["gpu.gpusched.io"].model.length == 1)", "no such field: length"},
      {"index of a scalar", R"(device.attributes["gpu.gpusched.io"].model["x"] == "y")", "no such overload: \"[]\""},
      {"in on a scalar", R"("A" in device.attributes["gpu.gpusched.io"].model)", "no such overload: \"in\""},
      {"int key of a domain map", R"(device.attributes[device.attributes["gpu.gpusched.io"].index].x)",
       "no such overload: \"[]\" applied to (map, int)"},
      {"quantity overflow", R"(quantity("9223372036854775807m").add(quantity("1m")).sign() == 1)",
       "add: quantity beyond int64 milli-units"},
      {"int too large for a quantity", R"(quantity("1").add(9223372036854775807).sign() == 1)",
       "beyond int64 milli-units"},
  });
}

TEST(CelTest, RuntimeErrorsNameTheColumn) {
  const dra::Device device = A100();
  auto program = Program::Compile("true &&\n  device.attributes[\"gpu.gpusched.io\"].nvlink");
  ASSERT_TRUE(program.ok()) << program.status();
  auto got = program->Matches({.driver = kDriver, .device = &device});
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("at line 2, column 40"), std::string::npos) << got.status();
}

TEST(CelTest, NoDeviceIsAnError) {
  auto program = Program::Compile("true");
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE(program->Matches({.driver = kDriver, .device = nullptr}).ok());
}

// Each refusal names the construct; none compiles into a selector that quietly matches or not.
TEST(CelTest, RefusesWhatItDoesNotSupportByName) {
  ExpectRefused({
      {"exists macro", R"(device.attributes["gpu.gpusched.io"].exists(x, x == "model"))",
       "unsupported macro \"exists\""},
      {"all macro", R"(["a"].all(x, x == "a"))", "unsupported macro \"all\""},
      {"exists_one macro", R"(device.attributes.exists_one(x, x == "gpu.gpusched.io"))",
       "unsupported macro \"exists_one\""},
      {"map macro", R"(["a"].map(x, x) == ["a"])", "unsupported macro \"map\""},
      {"filter macro", R"(["a"].filter(x, true) == [])", "unsupported macro \"filter\""},
      {"matches", R"(device.attributes["gpu.gpusched.io"].model.matches("^A100"))", "unsupported function \"matches\""},
      {"cel.bind", R"(cel.bind(g, device.attributes["gpu.gpusched.io"], g.mig))", "unsupported function \"cel.bind\""},
      {"size function", R"(size(device.attributes["gpu.gpusched.io"].model) > 0)", "unsupported function \"size\""},
      {"size method", R"(device.attributes["gpu.gpusched.io"].model.size() > 0)", "unsupported method \"size\""},
      {"split", R"(device.attributes["gpu.gpusched.io"].uuid.split("-").size() >= 2)", "unsupported method \"split\""},
      {"includes", R"(device.attributes["gpu.gpusched.io"].model.includes("A100"))", "unsupported method \"includes\""},
      {"asApproximateFloat", R"(quantity("1").asApproximateFloat() > 0)", "unsupported method \"asApproximateFloat\""},
      {"quantity mul", R"(quantity("1").mul(2) == quantity("2"))", "unsupported method \"mul\""},
      {"dyn", "dyn(1) == 1", "unsupported function \"dyn\""},
      {"int conversion", R"(int("1") == 1)", "unsupported function \"int\""},
      {"type", "type(1) == type(2)", "unsupported function \"type\""},
      {"addition", R"(device.attributes["gpu.gpusched.io"].index + 1 > 3)", "unsupported operator \"+\""},
      {"multiplication", R"(device.attributes["gpu.gpusched.io"].index * 2 > 3)", "unsupported operator \"*\""},
      {"subtraction", "3 - 1 == 2", "unsupported operator \"-\" (arithmetic)"},
      {"modulo", "3 % 2 == 1", "unsupported operator \"%\""},
      {"negation of an expression", R"(-device.attributes["gpu.gpusched.io"].index < 0)", "unsupported operator \"-\""},
      {"double literal", "1.5 > 1", "unsupported double literal 1.5"},
      {"double with exponent", "1e3 > 1", "unsupported double literal 1e3"},
      {"double without integer part", ".5 > 0", "unsupported double literal .5"},
      {"unsigned literal", "1u == 1u", "unsupported unsigned integer literal 1u"},
      {"bytes literal", R"(b"abc" == b"abc")", "unsupported bytes literal"},
      {"null", "null == null", "unsupported null literal"},
      {"map literal", R"({"a": 1}["a"] == 1)", "unsupported map literal"},
      {"other variable", R"(request.name == "x")", "unsupported variable \"request\""},
      {"root-scoped name", R"(.device.driver == "x")", "unsupported leading \".\""},
      {"has on a domain", "has(device.attributes.example)", "unsupported has() on map(domain, attributes)"},
      {"has on a device field", "has(device.driver)", "unsupported has() on device"},
      {"comparing lists", "[1, 2] == [1, 2]", "unsupported comparison of lists"},
      {"comparing maps", R"(device.attributes["a"] == device.attributes["b"])", "unsupported comparison of maps"},
      {"list indexing", "[1, 2][0] == 1", "unsupported list indexing"},
      {"nested list", "[1] in [[1]]", "unsupported list element of type list"},
      {"list in a branch", "1 in (true ? [1] : [2])", "unsupported list in a branch"},
  });
}

TEST(CelTest, RefusalsNameTheColumnAndTheSubset) {
  const std::string expr = R"(device.attributes["gpu.gpusched.io"].exists(x, true))";
  auto program = Program::Compile(expr);
  ASSERT_FALSE(program.ok());
  const std::string want = "CEL: unsupported macro \"exists\" at column " + std::to_string(expr.find("exists") + 1) +
                           " (gpusched evaluates the subset in docs/dra.md)";
  EXPECT_EQ(program.status().message(), want);
}

TEST(CelTest, RefusesTypeErrorsAtCompile) {
  ExpectRefused({
      {"string compared with an int", "device.driver == 1", "no matching overload for \"==\" applied to (string, int)"},
      {"int result", "1", "must evaluate to bool, not int"},
      {"map result", R"(device.attributes["gpu.gpusched.io"])", "must evaluate to bool, not map(id, attribute)"},
      {"ordering quantities", R"(quantity("1") < quantity("2"))", "compare quantity values with compareTo"},
      {"ordering versions", R"(semver("1.0.0") > semver("0.1.0"))", "compare semver values with compareTo"},
      {"ordering a version attribute with a version", R"(device.attributes["d"].v > semver("0.1.0"))",
       "compare semver values"},
      {"unknown device field", "device.name == \"gpu-3\"", "undefined field \"name\" of device"},
      {"device alone", "device == device", "the variable device is read through its fields"},
      {"version method on a string", R"(device.driver.compareTo(semver("1.0.0")) == 0)",
       "no matching overload for compareTo(semver) on string"},
      {"quantity of an int", "quantity(1).sign() == 1", "no matching overload for quantity(int)"},
      {"add a string", R"(device.capacity["d"].memory.add("1").sign() == 1)",
       "no matching overload for add(string) on quantity"},
      {"version method on a quantity", R"(device.capacity["d"].memory.major() == 1)",
       "no matching overload for major() on quantity"},
      {"comparing a quantity with a version", R"(quantity("1").compareTo(semver("1.0.0")) == 0)",
       "no matching overload for compareTo(semver) on quantity"},
      {"semver with two strings", R"(isSemver("1.0.0", "yes"))", "no matching overload for isSemver(string, string)"},
      {"int operand of &&", "1 && true", "no matching overload for \"&&\" applied to (int)"},
      {"not of an int", "!1", "no matching overload for \"!\" applied to (int)"},
      {"int in a list of strings", R"(1 in ["a"])", "no matching overload for \"in\" applied to (int, list)"},
      {"int key in domains", "1 in device.attributes", "no matching overload for \"in\""},
      {"string condition", R"("a" ? true : false)", "no matching overload for \"?:\" applied to (string)"},
      {"branches of different types", R"(true ? 1 : "a")", "the branches of \"?:\" have different types (int, string)"},
      {"indexing a string", "device.driver[0] == \"g\"", "type string does not support indexing"},
      {"field of a string", "device.driver.length == 1", "type string has no field \"length\""},
      {"int key of domains", "device.attributes[1].x", "no matching overload for \"[]\" applied to"},
      {"int literal out of range", "9223372036854775808 > 0", "out of int64 range"},
      {"negative int literal out of range", "-9223372036854775809 < 0", "out of int64 range"},
      {"has of an index", R"(has(device.attributes["d"]["model"]))", "invalid argument to has()"},
      {"has of two arguments", R"(has(device.attributes["d"].a, device.attributes["d"].b))",
       "invalid argument to has()"},
  });
}

TEST(CelTest, RefusesSyntaxErrors) {
  ExpectRefused({
      {"DRA's syntax-error scenario", "?!", "syntax error at column 1"},
      {"empty", "", "unexpected end of the expression"},
      {"assignment", R"(device.driver = "x")", "\"=\" is not an operator"},
      {"single ampersand", "true & false", "\"&\" is not an operator (use &&)"},
      {"unbalanced parenthesis", "(true", "expected \")\", got the end of the expression"},
      {"unterminated string", R"(device.driver == "gpu)", "unterminated string literal"},
      {"newline in a string", "device.driver == \"a\nb\"", "newline in a string literal"},
      {"invalid escape", R"("\q" == "q")", "invalid escape sequence \\q"},
      {"short unicode escape", R"("\u12" == "q")", "wants 4 hexadecimal digits"},
      {"surrogate escape", R"("\ud800" == "q")", "not a Unicode scalar value"},
      {"two expressions", "true false", "after the end of the expression"},
      {"reserved word", "if == 1", "\"if\" is a reserved word"},
      {"field name missing", "device. == 1", "expected a field or method name"},
      {"malformed number", "12abc == 1", "malformed number \"12a\""},
      {"stray character", "true # false", "unexpected character \"#\""},
      {"hex without digits", "0x == 1", "hexadecimal literal without digits"},
  });
}

TEST(CelTest, ReadsCelStringLiterals) {
  ExpectMatches({
      {"tab escape and unicode escape", R"("a\tb" == "a\u0009b")", true},
      {"single and double quotes", R"('single' == "single")", true},
      {"triple quotes hold quotes and newlines", "'''a \"quoted\"\nline''' == \"a \\\"quoted\\\"\\nline\"", true},
      {"raw string keeps backslashes", R"(r"\d+" == "\\d+")", true},
      {"hex, octal, \\u and \\U escapes", R"("\x41\101\u0041\U00000041" == "AAAA")", true},
      {"UTF-8 text equals its escape", "\"\xc3\xa9\" == \"\\u00e9\"", true},
      {"escaped quotes", R"("\"" == '"' && '\'' == "'")", true},
      {"string ordering by bytes", R"("Z" < "a")", true},
  });
}

TEST(CelTest, BoundsTheWork) {
  // Exactly 10 KiB compiles; one byte more does not.
  std::string padded = "true" + std::string(Program::kMaxExpressionBytes - 4, ' ');
  ASSERT_EQ(padded.size(), 10240U);
  EXPECT_TRUE(Program::Compile(padded).ok());
  auto too_long = Program::Compile(padded + " ");
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("10241 bytes, more than the 10240"), std::string::npos)
      << too_long.status();

  // Parentheses: 63 inside the top level are 64 levels; 64 are one too many.
  const auto parens = [](int n) {
    return std::string(static_cast<size_t>(n), '(') + "true" + std::string(static_cast<size_t>(n), ')');
  };
  EXPECT_TRUE(Program::Compile(parens(63)).ok());
  auto deep = Program::Compile(parens(64));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 64 levels"), std::string::npos) << deep.status();
  // Long chains of ! and of method calls are depth too, refused without recursing through all of them.
  auto nots = Program::Compile(std::string(5000, '!') + "true");
  ASSERT_FALSE(nots.ok());
  EXPECT_NE(nots.status().message().find("nested deeper than 64 levels"), std::string::npos) << nots.status();
  std::string chain = R"(quantity("1"))";
  for (int k = 0; k < 70; ++k) {
    chain += ".add(1)";
  }
  auto calls = Program::Compile(chain + ".sign() == 1");
  ASSERT_FALSE(calls.ok());
  EXPECT_NE(calls.status().message().find("nested deeper than 64 levels"), std::string::npos) << calls.status();

  // A long && chain is wide, not deep: 400 conditions compile and evaluate.
  std::string wide = R"(device.attributes["gpu.gpusched.io"].index == 3)";
  for (int k = 0; k < 399; ++k) {
    wide += " && true";
  }
  ASSERT_LT(wide.size(), Program::kMaxExpressionBytes);
  auto program = Program::Compile(wide);
  ASSERT_TRUE(program.ok()) << program.status();
  const dra::Device device = A100();
  auto got = program->Matches({.driver = kDriver, .device = &device});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got);
}

TEST(CelTest, ProgramsAreSharedValues) {
  auto compiled = Program::Compile(R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB")");
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const Program copy = *compiled;  // shares the tree
  EXPECT_EQ(copy.expression(), R"(device.attributes["gpu.gpusched.io"].model == "A100-80GB")");
  dra::Device other = A100();
  other.attributes["gpu.gpusched.io/model"] = dra::AttributeValue::String("H100-80GB");
  const dra::Device device = A100();
  EXPECT_TRUE(*copy.Matches({.driver = kDriver, .device = &device}));
  EXPECT_FALSE(*copy.Matches({.driver = kDriver, .device = &other}));
  EXPECT_TRUE(*compiled->Matches({.driver = kDriver, .device = &device}));
}

}  // namespace
}  // namespace gpusched::sched::cel
