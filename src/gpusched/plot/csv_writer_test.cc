#include "gpusched/plot/csv_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace gpusched::plot {
namespace {

using common::StatusCode;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "gpusched_csv_writer_test_" + name; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(EscapeCsvFieldTest, QuotesOnlyWhenNeeded) {
  struct Case {
    std::string name;
    std::string field;
    std::string want;
  };
  const std::vector<Case> cases = {
      {.name = "plain text unchanged", .field = "best_fit", .want = "best_fit"},
      {.name = "empty unchanged", .field = "", .want = ""},
      {.name = "spaces are not special", .field = " a b ", .want = " a b "},
      {.name = "comma quoted", .field = "a,b", .want = "\"a,b\""},
      // one quote inside -> doubled, then the field is wrapped: 6 chars + 1 doubled + 2 wrapping
      {.name = "quote doubled and quoted", .field = "say \"hi\"", .want = "\"say \"\"hi\"\"\""},
      {.name = "lone quote", .field = "\"", .want = "\"\"\"\""},
      {.name = "LF quoted", .field = "two\nlines", .want = "\"two\nlines\""},
      {.name = "CR quoted", .field = "a\rb", .want = "\"a\rb\""},
      {.name = "semicolon is not special", .field = "a;b", .want = "a;b"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(EscapeCsvField(c.field), c.want);
  }
}

TEST(CsvWriterTest, WritesRowsWithLfByDefault) {
  const std::string path = TempPath("lf.csv");
  auto writer = CsvWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(writer->WriteRow({"time_s", "policy", "note"}).ok());
  const std::vector<std::string> row = {"1.5", "best_fit", "a, \"b\""};
  EXPECT_TRUE(writer->WriteRow(row).ok());
  const std::vector<std::string> one_empty = {""};
  EXPECT_TRUE(writer->WriteRow(one_empty).ok());  // "" so it is not a blank line
  EXPECT_TRUE(writer->WriteRow({"", ""}).ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_EQ(ReadFile(path), "time_s,policy,note\n1.5,best_fit,\"a, \"\"b\"\"\"\n\"\"\n,\n");
  std::filesystem::remove(path);
}

TEST(CsvWriterTest, CrLfOption) {
  const std::string path = TempPath("crlf.csv");
  auto writer = CsvWriter::Open(path, {.line_ending = LineEnding::kCrLf});
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_TRUE(writer->WriteRow({"a", "b"}).ok());
  EXPECT_TRUE(writer->WriteRow({"1", "x\ny"}).ok());
  EXPECT_TRUE(writer->Close().ok());
  EXPECT_EQ(ReadFile(path), "a,b\r\n1,\"x\ny\"\r\n");
  std::filesystem::remove(path);
}

TEST(CsvWriterTest, UseAfterCloseIsFailedPrecondition) {
  const std::string path = TempPath("closed.csv");
  auto writer = CsvWriter::Open(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(writer->Close().ok());
  EXPECT_EQ(writer->WriteRow({"a"}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Flush().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Close().code(), StatusCode::kFailedPrecondition);
  std::filesystem::remove(path);
}

TEST(CsvWriterTest, UnwritablePathIsUnavailableNamingThePath) {
  const std::string path = "/nonexistent-dir/x.csv";
  auto writer = CsvWriter::Open(path);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(writer.status().message().find(path), std::string::npos) << writer.status();
}

TEST(CsvWriterTest, WriteErrorIsReportedByClose) {
  // /dev/full accepts the open and fails every write with ENOSPC; buffered rows fail at the latest on Close.
  if (!std::filesystem::exists("/dev/full")) {
    GTEST_SKIP() << "no /dev/full here";
  }
  auto writer = CsvWriter::Open("/dev/full");
  ASSERT_TRUE(writer.ok()) << writer.status();
  common::Status first_error;
  for (int i = 0; i < 10 && first_error.ok(); ++i) {
    first_error = writer->WriteRow({"some", "row"});
  }
  if (first_error.ok()) {
    first_error = writer->Close();
  }
  EXPECT_EQ(first_error.code(), StatusCode::kUnavailable);
  EXPECT_NE(first_error.message().find("/dev/full"), std::string::npos) << first_error;
}

TEST(CsvWriterTest, MovedWriterKeepsWriting) {
  const std::string path = TempPath("moved.csv");
  auto opened = CsvWriter::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status();
  CsvWriter writer = std::move(opened).value();
  EXPECT_TRUE(writer.WriteRow({"x"}).ok());
  EXPECT_TRUE(writer.Close().ok());
  EXPECT_EQ(ReadFile(path), "x\n");
  std::filesystem::remove(path);
}

TEST(FormatNumberTest, PrintsLikePythonReprOfRound) {
  constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
  constexpr double kInf = std::numeric_limits<double>::infinity();
  struct Case {
    std::string name;
    double v;
    int max_decimals;
    std::string want;  // Python: repr(round(v, max_decimals)), or repr(v) for -1
  };
  const std::vector<Case> cases = {
      {.name = "integral keeps .0", .v = 12.0, .max_decimals = -1, .want = "12.0"},
      {.name = "integral rounded keeps .0", .v = 12.0, .max_decimals = 3, .want = "12.0"},
      {.name = "short fraction", .v = 0.25, .max_decimals = -1, .want = "0.25"},
      {.name = "shortest round trip", .v = 14.015918367346941, .max_decimals = -1, .want = "14.015918367346941"},
      {.name = "rounded to 2", .v = 14.015918367346941, .max_decimals = 2, .want = "14.02"},
      {.name = "rounded to 2, large", .v = 1234.5678, .max_decimals = 2, .want = "1234.57"},
      // 2.5 and 0.125 are exact ties in binary -> to even
      {.name = "tie to even, down", .v = 2.5, .max_decimals = 0, .want = "2.0"},
      {.name = "tie to even, up", .v = 3.5, .max_decimals = 0, .want = "4.0"},
      {.name = "tie to even at 2 places", .v = 0.125, .max_decimals = 2, .want = "0.12"},
      // 2.675 is stored as 2.67499999999999982236431605997495353221893310546875 -> down
      {.name = "binary value below the tie", .v = 2.675, .max_decimals = 2, .want = "2.67"},
      {.name = "rounds to negative zero", .v = -0.4, .max_decimals = 0, .want = "-0.0"},
      {.name = "negative zero", .v = -0.0, .max_decimals = -1, .want = "-0.0"},
      {.name = "zero", .v = 0.0, .max_decimals = 2, .want = "0.0"},
      {.name = "float noise shown", .v = 0.1 + 0.2, .max_decimals = -1, .want = "0.30000000000000004"},
      {.name = "float noise rounded away", .v = 0.1 + 0.2, .max_decimals = 6, .want = "0.3"},
      {.name = "1e-4 is still fixed", .v = 0.0001, .max_decimals = -1, .want = "0.0001"},
      {.name = "1e-5 goes scientific", .v = 1e-5, .max_decimals = -1, .want = "1e-05"},
      {.name = "scientific with fraction", .v = 1.5e-7, .max_decimals = -1, .want = "1.5e-07"},
      {.name = "1e15 is still fixed", .v = 1e15, .max_decimals = -1, .want = "1000000000000000.0"},
      {.name = "largest fixed", .v = 9999999999999998.0, .max_decimals = -1, .want = "9999999999999998.0"},
      {.name = "1e16 goes scientific", .v = 1e16, .max_decimals = -1, .want = "1e+16"},
      {.name = "three-digit exponent", .v = 1e100, .max_decimals = -1, .want = "1e+100"},
      {.name = "largest double", .v = 1.7976931348623157e308, .max_decimals = 0, .want = "1.7976931348623157e+308"},
      {.name = "smallest subnormal", .v = 5e-324, .max_decimals = -1, .want = "5e-324"},
      {.name = "smallest subnormal, many places", .v = 5e-324, .max_decimals = 400, .want = "5e-324"},
      {.name = "tiny rounds to zero", .v = 1e-20, .max_decimals = 17, .want = "0.0"},
      {.name = "NaN is an empty cell", .v = kNan, .max_decimals = 2, .want = ""},
      {.name = "infinity", .v = kInf, .max_decimals = -1, .want = "inf"},
      {.name = "negative infinity", .v = -kInf, .max_decimals = 3, .want = "-inf"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(FormatNumber(c.v, c.max_decimals), c.want);
  }
}

}  // namespace
}  // namespace gpusched::plot
