#include "gpusched/doctor/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::doctor {
namespace {

TEST(ReportTest, LinesPadTheSeverityAndLeaveTheFixOffOkLines) {
  EXPECT_EQ(FormatLine(Ok("crd", "gpuqueues.gpusched.io present")), "ok    crd: gpuqueues.gpusched.io present");
  EXPECT_EQ(FormatLine(Warn("rbac", "could not check", "run as admin")),
            "warn  rbac: could not check; fix: run as admin");
  EXPECT_EQ(FormatLine(Fail("leader-lease", "expired", "restart it")), "FAIL  leader-lease: expired; fix: restart it");
}

TEST(ReportTest, TextIsOneLinePerFindingInOrder) {
  Report r{.mode = "agent"};
  r.Add(Ok("api-server", "reachable"));
  r.Add(std::vector<Finding>{Warn("a", "b", "c"), Fail("d", "e", "f")});
  EXPECT_EQ(FormatText(r), "ok    api-server: reachable\nwarn  a: b; fix: c\nFAIL  d: e; fix: f\n");
}

TEST(ReportTest, ExitCodeIsOneOnlyWhenSomethingFailed) {
  Report r;
  EXPECT_EQ(ExitCode(r), 0);  // nothing checked, nothing failed
  r.Add(Ok("a", "b"));
  r.Add(Warn("c", "d", "e"));
  EXPECT_EQ(ExitCode(r), 0);  // warnings do not fail
  r.Add(Fail("f", "g", "h"));
  EXPECT_EQ(ExitCode(r), 1);
}

TEST(ReportTest, JsonCountsAndListsEveryFinding) {
  Report r{.mode = "scheduler"};
  r.Add(Ok("api-server", "reachable"));
  r.Add(Fail("crd", "gpuqueues.gpusched.io not found", "install it"));
  const nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["kind"], "GpuschedDoctorReport");
  EXPECT_EQ(j["mode"], "scheduler");
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["counts"], (nlohmann::json{{"ok", 1}, {"warn", 0}, {"fail", 1}}));
  ASSERT_EQ(j["findings"].size(), 2u);
  EXPECT_EQ(j["findings"][1], (nlohmann::json{{"severity", "fail"},
                                              {"check", "crd"},
                                              {"finding", "gpuqueues.gpusched.io not found"},
                                              {"fix", "install it"}}));
  EXPECT_EQ(j["findings"][0]["fix"], "");
}

}  // namespace
}  // namespace gpusched::doctor
