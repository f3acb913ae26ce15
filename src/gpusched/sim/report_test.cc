#include "gpusched/sim/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace gpusched::sim {
namespace {

RunOutcome Synthetic() {
  // 10 GPUs. Events at arrived 0.4 %, 0.6 %, 1.4 %, 3.0 % (bucket 0, 1, 1, 3).
  RunOutcome r{.workload = "w", .spec = {.policy = "fgd", .seed = 42, .tune = 1.3}, .total_gpus = 10};
  r.events = {
      {.arrived_milli = 40, .allocated_milli = 40, .frag_milli = 100, .idle_milli = 9960},
      {.arrived_milli = 60, .allocated_milli = 60, .frag_milli = 200, .idle_milli = 9940},
      {.arrived_milli = 140, .allocated_milli = 100, .frag_milli = 300, .idle_milli = 9900},
      {.arrived_milli = 300, .allocated_milli = 250, .frag_milli = 400, .idle_milli = 9750},
  };
  return r;
}

TEST(ReportTest, BucketsLikeTheReferenceScripts) {
  const Curves c = BucketCurves(Synthetic());
  // arrive = round(milli / 10 / 10): 40 -> 0.4 -> 0; 60 -> 0.6 -> 1; 140 -> 1.4 -> 1; 300 -> 3.
  // alloc: bucket 0 = 0.4; bucket 1 = mean(0.6, 1.0) = 0.8; bucket 3 = 2.5.
  EXPECT_DOUBLE_EQ(c.alloc[0], 0.4);
  EXPECT_DOUBLE_EQ(c.alloc[1], 0.8);
  // bucket 2 is empty -> events with 1 <= arrive <= 3: mean(0.6, 1.0, 2.5) = 1.3666...
  EXPECT_NEAR(c.alloc[2], (0.6 + 1.0 + 2.5) / 3, 1e-12);
  EXPECT_DOUBLE_EQ(c.alloc[3], 2.5);
  // bucket 5: nothing within 4..6 -> empty.
  EXPECT_TRUE(std::isnan(c.alloc[5]));
  // frag amount bucket 1: mean frag 250 milli -> 100 * 250 / 1000 / 10 = 2.5 %
  EXPECT_DOUBLE_EQ(c.frag_amount[1], 2.5);
  // frag ratio bucket 0: 100 * 100 / 9960
  EXPECT_NEAR(c.frag_ratio[0], 100.0 * 100 / 9960, 1e-12);
}

TEST(ReportTest, ZoomedChartCoversEightyToOneThirtyPercent) {
  // 10 GPUs filled to 90 % while 130 % arrives.
  RunOutcome r{.workload = "w", .spec = {.policy = "fgd", .seed = 42, .tune = 1.3}, .total_gpus = 10};
  for (int64_t a = 100; a <= 13000; a += 100) {
    const int64_t used = std::min<int64_t>(a, 9000);
    r.events.push_back({.arrived_milli = a, .allocated_milli = used, .frag_milli = 0, .idle_milli = 10000 - used});
  }
  const std::string dir = ::testing::TempDir() + "/gpusched-report-zoom";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteReport(dir, {r}).ok());
  ASSERT_TRUE(std::filesystem::exists(dir + "/unallocated-zoom.svg"));
  EXPECT_GT(std::filesystem::file_size(dir + "/unallocated-zoom.png"), 1000U);
  std::ifstream in(dir + "/unallocated-zoom.svg");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("80-130 % arrived"), std::string::npos);
  // One seed: no band, and the title does not claim one.
  EXPECT_EQ(ss.str().find("min-max over seeds"), std::string::npos);
  // Two seeds that part ways after 90 %: the zoom's title names the band.
  RunOutcome other = r;
  other.spec.seed = 43;
  for (auto& e : other.events) e.allocated_milli = std::min<int64_t>(e.arrived_milli, 8000);
  const std::string two = ::testing::TempDir() + "/gpusched-report-zoom-seeds";
  std::filesystem::remove_all(two);
  ASSERT_TRUE(WriteReport(two, {r, other}).ok());
  std::ifstream in2(two + "/unallocated-zoom.svg");
  std::stringstream ss2;
  ss2 << in2.rdbuf();
  EXPECT_NE(ss2.str().find("band: min-max over seeds"), std::string::npos);
}

TEST(ReportTest, WritesTheReferenceRowFormatAndPlots) {
  const std::string dir = ::testing::TempDir() + "/gpusched-report-test";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteReport(dir, {Synthetic()}).ok());
  std::ifstream in(dir + "/alloc.csv");
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_EQ(header.rfind("workload,sc_policy,tune,seed,total_gpus,0,1,2,", 0), 0U);
  EXPECT_EQ(row.rfind("w,fgd,1.3,42,10,0.4,0.8,", 0), 0U) << row;
  std::ifstream frag(dir + "/frag_amount.csv");
  std::getline(frag, header);
  EXPECT_EQ(header.rfind("workload,sc_policy,tune,seed,0,1,", 0), 0U);
  EXPECT_GT(std::filesystem::file_size(dir + "/unallocated.svg"), 1000U);
  EXPECT_GT(std::filesystem::file_size(dir + "/unallocated.png"), 1000U);
  // The synthetic run ends below 80 % arrived: no zoomed chart (nothing to show there).
  EXPECT_FALSE(std::filesystem::exists(dir + "/unallocated-zoom.png"));
  std::ostringstream summary;
  PrintSummary(summary, {Synthetic()});
  EXPECT_NE(summary.str().find("w fgd"), std::string::npos) << summary.str();
}

TEST(ReportTest, UnwritableDirectoryIsAnError) {
  EXPECT_FALSE(WriteReport("/proc/gpusched-cannot-write", {Synthetic()}).ok());
}

}  // namespace
}  // namespace gpusched::sim
