#include "gpusched/doctor/report.h"

#include <nlohmann/json.hpp>

#include <utility>

namespace gpusched::doctor {

std::string_view SeverityWord(Severity severity) {
  switch (severity) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarn:
      return "warn";
    case Severity::kFail:
      return "FAIL";
  }
  return "FAIL";
}

Finding Ok(std::string check, std::string finding) {
  return {.severity = Severity::kOk, .check = std::move(check), .finding = std::move(finding), .fix = ""};
}
Finding Warn(std::string check, std::string finding, std::string fix) {
  return {.severity = Severity::kWarn, .check = std::move(check), .finding = std::move(finding), .fix = std::move(fix)};
}
Finding Fail(std::string check, std::string finding, std::string fix) {
  return {.severity = Severity::kFail, .check = std::move(check), .finding = std::move(finding), .fix = std::move(fix)};
}

std::string FormatLine(const Finding& f) {
  std::string line(SeverityWord(f.severity));
  line.resize(4, ' ');
  line += "  " + f.check + ": " + f.finding;
  if (!f.fix.empty()) {
    line += "; fix: " + f.fix;
  }
  return line;
}

std::string FormatText(const Report& report) {
  std::string out;
  for (const Finding& f : report.findings) {
    out += FormatLine(f) + "\n";
  }
  return out;
}

nlohmann::json ToJson(const Report& report) {
  nlohmann::json findings = nlohmann::json::array();
  int ok = 0, warn = 0, fail = 0;
  for (const Finding& f : report.findings) {
    (f.severity == Severity::kOk ? ok : f.severity == Severity::kWarn ? warn : fail) += 1;
    findings.push_back({{"severity", f.severity == Severity::kFail ? "fail" : std::string(SeverityWord(f.severity))},
                        {"check", f.check},
                        {"finding", f.finding},
                        {"fix", f.fix}});
  }
  return {{"kind", "GpuschedDoctorReport"},
          {"mode", report.mode},
          {"ok", fail == 0},
          {"counts", {{"ok", ok}, {"warn", warn}, {"fail", fail}}},
          {"findings", std::move(findings)}};
}

int ExitCode(const Report& report) {
  for (const Finding& f : report.findings) {
    if (f.severity == Severity::kFail) {
      return 1;
    }
  }
  return 0;
}

}  // namespace gpusched::doctor
