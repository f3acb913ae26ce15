#pragma once

// What `gpusched doctor` found: one Finding per line, each with a severity, the check it belongs to, what was found
// and what to do about it. Printed as text, one line each:
//   ok    crd: gpuqueues.gpusched.io present and Established
//   FAIL  leader-lease: kube-system/gpusched-scheduler ...; fix: ...
// (an ok line has no fix), or as one JSON document for machines:
//   {"kind":"GpuschedDoctorReport","mode":"scheduler","ok":false,"counts":{"ok":7,"warn":1,"fail":1},
//    "findings":[{"severity":"ok","check":"crd","finding":"...","fix":""}, ...]}
// The exit status is 0 when nothing failed (warnings allowed) and 1 when something did.

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpusched::doctor {

enum class Severity { kOk, kWarn, kFail };

// "ok", "warn", "FAIL" (the text output's column; lower-case "fail" in JSON).
[[nodiscard]] std::string_view SeverityWord(Severity severity);

struct Finding {
  Severity severity = Severity::kOk;
  std::string check;    // a stable name: api-server, crd, webhook-config, webhook-ca, webhook-dry-run, ...
  std::string finding;  // what was found, naming the object
  std::string fix;      // what to do; empty for ok
};

[[nodiscard]] Finding Ok(std::string check, std::string finding);
[[nodiscard]] Finding Warn(std::string check, std::string finding, std::string fix);
[[nodiscard]] Finding Fail(std::string check, std::string finding, std::string fix);

struct Report {
  std::string mode;  // scheduler, extender or agent
  std::vector<Finding> findings;

  void Add(Finding f) { findings.push_back(std::move(f)); }
  void Add(std::vector<Finding> fs) {
    for (auto& f : fs) {
      findings.push_back(std::move(f));
    }
  }
};

// One line per finding: the severity padded to four columns, two spaces, "<check>: <finding>", then "; fix: <fix>"
// unless the fix is empty.
[[nodiscard]] std::string FormatText(const Report& report);
[[nodiscard]] std::string FormatLine(const Finding& finding);
[[nodiscard]] nlohmann::json ToJson(const Report& report);
// 1 when any finding is kFail, else 0.
[[nodiscard]] int ExitCode(const Report& report);

}  // namespace gpusched::doctor
