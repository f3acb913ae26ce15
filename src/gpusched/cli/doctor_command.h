#pragma once

// `gpusched doctor` (as a kubectl plugin: `kubectl gpusched doctor`): checks a cluster's setup for one install
// mode of deploy/ and says what to fix (doctor/doctor.h). Read-only. Wiring and formatting only.
//
// Exit status: 0 when no check failed (warnings allowed), 1 when one did, 2 on a usage error (CLI11's, or a
// kubeconfig that cannot be loaded).

#include <string>

namespace CLI {
class App;
}

namespace gpusched::cli {

struct DoctorFlags {
  std::string mode = "scheduler";  // scheduler, extender, agent
  std::string output;              // "" (one line per finding) or "json"
  std::string namespace_ = "default";
  int timeout_s = 10;
  std::string kubeconfig, context;
};

void AddDoctorCommand(CLI::App& app, DoctorFlags& flags, int& exit_code);

}  // namespace gpusched::cli
