#include "gpusched/monitor/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "gpusched/monitor/runner.h"
#include "gpusched/monitor/source.h"

// cairo keeps fontconfig patterns for the life of the process (see plot/line_chart_test.cc).
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace gpusched::monitor {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ReportTest, SummaryArithmetic) {
  // Power 100 W for 10 s then 200 W for 10 s, sampled every second: trapezoids give 100*10 + 150*1 + 200*9 = 2950 J.
  std::vector<Sample> power;
  for (int t = 0; t <= 20; ++t) {
    power.push_back({.t = static_cast<double>(t), .value = t <= 10 ? 100.0 : 200.0});
  }
  const Stats st = Summarize(power, /*is_power=*/true, 2.5);
  EXPECT_EQ(st.count, 21u);
  EXPECT_NEAR(st.mean, (11 * 100.0 + 10 * 200.0) / 21, 1e-9);
  EXPECT_EQ(st.max, 200);
  EXPECT_EQ(st.p95, 200);  // rank ceil(0.95 * 21) = 20 of 21
  ASSERT_TRUE(st.energy_j.has_value());
  EXPECT_NEAR(*st.energy_j, 100 * 10 + 150 * 1 + 200 * 9, 1e-9);
  // A hole longer than the gap bound adds nothing; p95 by nearest rank.
  const std::vector<Sample> holed = {{0, 50}, {1, 50}, {10, 50}, {11, 50}};
  EXPECT_NEAR(*Summarize(holed, true, 2.5).energy_j, 100, 1e-9);
  std::vector<Sample> ramp;
  for (int i = 1; i <= 100; ++i) {
    ramp.push_back({.t = static_cast<double>(i), .value = static_cast<double>(i)});
  }
  EXPECT_EQ(Summarize(ramp, false, 2).p95, 95);
  EXPECT_FALSE(Summarize(ramp, false, 2).energy_j.has_value());
  EXPECT_EQ(Summarize({}, true, 2).count, 0u);
}

TEST(ReportTest, MetricList) {
  auto got = ParseMetricList("util, power,DCGM_FI_PROF_SM_ACTIVE");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].dcgm, "DCGM_FI_DEV_GPU_UTIL");
  EXPECT_EQ((*got)[1].unit, "W");
  EXPECT_EQ((*got)[2].name, "DCGM_FI_PROF_SM_ACTIVE");
  EXPECT_TRUE((*got)[2].influx.empty());
  EXPECT_THAT(ParseMetricList("util,bogus").status().message(), HasSubstr("unknown metric \"bogus\""));
  EXPECT_THAT(ParseMetricList("util,,temp").status().message(), HasSubstr("empty entry"));
  EXPECT_THAT(ParseMetricList("util,util").status().message(), HasSubstr("twice"));
  EXPECT_TRUE(ParseMetricList(DefaultMetricList()).ok());
}

TEST(ReportTest, Durations) {
  EXPECT_EQ(ParseDuration("1s")->count(), 1000);
  EXPECT_EQ(ParseDuration("500ms")->count(), 500);
  EXPECT_EQ(ParseDuration("1h30m")->count(), 5400000);
  EXPECT_EQ(ParseDuration("2.5")->count(), 2500);
  EXPECT_FALSE(ParseDuration("").ok());
  EXPECT_THAT(ParseDuration("3d").status().message(), HasSubstr("unknown unit \"d\""));
  EXPECT_FALSE(ParseDuration("s").ok());
  EXPECT_FALSE(ParseDuration("1m2").ok());
}

TEST(ReportTest, UuidRegexEscapes) {
  EXPECT_EQ(UuidRegex({"GPU-ab12", "GPU-cd34"}), "GPU-ab12|GPU-cd34");
  EXPECT_EQ(UuidRegex({"GPU.1"}), "GPU\\\\.1");
}

RunReport TwoGpuReport() {
  RunReport r;
  r.facts = RunFacts{.workload = "train <a&b>",
                     .file = "train.yaml",
                     .run_id = "gm-1",
                     .ns = "default",
                     .objects = {"Pod default/train"},
                     .source = "prometheus http://127.0.0.1:9090",
                     .outcome = "succeeded",
                     .succeeded = true,
                     .created_utc = "2026-11-27T12:00:00Z",
                     .started_utc = "2026-11-27T12:00:02Z",
                     .ended_utc = "2026-11-27T12:00:06Z",
                     .wait_s = 1.5,
                     .duration_s = 4,
                     .step_s = 1,
                     .notes = {}};
  r.metrics = *ParseMetricList("util,power,temp");
  r.gpus = {GpuRef{.ns = "default", .pod = "train", .container = "main", .node = "n1", .uuid = "GPU-a", .index = 0},
            GpuRef{.ns = "default", .pod = "train", .container = "main", .node = "n1", .uuid = "GPU-b", .index = 1}};
  for (int t = 0; t <= 4; ++t) {
    r.samples["util"]["GPU-a"].push_back({.t = static_cast<double>(t), .value = 37});
    r.samples["util"]["GPU-b"].push_back({.t = static_cast<double>(t), .value = 71});
    r.samples["power"]["GPU-a"].push_back({.t = static_cast<double>(t), .value = 100});
  }
  r.samples["util"]["GPU-not-ours"].push_back({.t = 0, .value = 99});
  return r;
}

TEST(ReportTest, CsvIsLongFormatForTheRunsGpusOnly) {
  const std::string csv = RunCsv(TwoGpuReport());
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "time_s,pod,container,node,gpu_uuid,gpu_index,metric,value,unit");
  std::getline(in, line);
  EXPECT_EQ(line, "0.0,train,main,n1,GPU-a,0,util,37.0,%");
  EXPECT_THAT(csv, HasSubstr("4.0,train,main,n1,GPU-b,1,util,71.0,%\n"));
  EXPECT_THAT(csv, HasSubstr("2.0,train,main,n1,GPU-a,0,power,100.0,W\n"));
  EXPECT_THAT(csv, Not(HasSubstr("GPU-not-ours")));
  size_t rows = 0;
  while (std::getline(in, line)) {
    ++rows;
  }
  EXPECT_EQ(rows + 1, 15u);  // 5 samples x (2 util + 1 power)
}

TEST(ReportTest, PageIsSelfContainedAndEscaped) {
  const std::string dir = ::testing::TempDir() + "gpusched_monitor_report";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteRun(TwoGpuReport(), dir).ok());
  for (const char* f : {"metrics.csv", "util.png", "util.svg", "power.png", "power.svg", "temp.png", "index.html"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  }
  std::ifstream in(dir + "/index.html");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  EXPECT_THAT(html, HasSubstr("<h1>train &lt;a&amp;b&gt;</h1>"));
  EXPECT_THAT(html, Not(HasSubstr("<a&b>")));
  EXPECT_THAT(html, HasSubstr("<svg"));             // charts inline
  EXPECT_THAT(html, Not(HasSubstr("<?xml")));       // declarations stripped
  EXPECT_THAT(html, Not(HasSubstr("src=\"http")));  // nothing from the network
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, HasSubstr("n1/GPU 0 (train)"));
  EXPECT_THAT(html, HasSubstr(">400.0<"));  // energy: 100 W for 4 s
  EXPECT_THAT(html, HasSubstr("no data"));  // temperature had no samples
  // Tags balance: every opened table/figure closes.
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t p = html.find(s); p != std::string::npos; p = html.find(s, p + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("<table"), count("</table>"));
  EXPECT_EQ(count("<figure>"), count("</figure>"));
  EXPECT_EQ(count("<svg"), 3u);
  // Each chart's ids are its own: cairo numbers glyphs the same way in every file.
  EXPECT_THAT(html, HasSubstr("id=\"chart-util-"));
  EXPECT_THAT(html, HasSubstr("href=\"#chart-power-"));
  EXPECT_THAT(html, Not(HasSubstr("href=\"#glyph")));
  std::filesystem::remove_all(dir);
}

TEST(ReportTest, SummaryOfSeveralRuns) {
  const std::string dir = ::testing::TempDir() + "gpusched_monitor_summary";
  std::filesystem::remove_all(dir);
  RunReport a = TwoGpuReport();
  RunReport b = TwoGpuReport();
  b.facts.workload = "serve";
  b.facts.outcome = "failed: main: Error (exit code 1)";
  b.facts.succeeded = false;
  const RunSummary sa = SummarizeRun(a, "train-1");
  EXPECT_EQ(sa.gpus, 2u);
  EXPECT_NEAR(*sa.mean_util, (37 + 71) / 2.0, 1e-9);
  EXPECT_NEAR(*sa.energy_j, 400, 1e-9);
  ASSERT_TRUE(WriteSummary({sa, SummarizeRun(b, "serve-1")}, dir).ok());
  std::ifstream in(dir + "/summary.csv");
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(),
            "workload,outcome,duration_s,wait_s,gpus,mean_util_pct,energy_j,dir\n"
            "train <a&b>,succeeded,4.0,1.5,2,54.0,400.0,train-1\n"
            "serve,failed: main: Error (exit code 1),4.0,1.5,2,54.0,400.0,serve-1\n");
  EXPECT_TRUE(std::filesystem::exists(dir + "/index.html"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpusched::monitor
