#pragma once

// The one way gpusched runs another program: RunCommand starts it without a shell (argv[0] looked up on PATH),
// adds variables to its environment, feeds it standard input, captures its standard output and error separately
// (each up to a limit) and kills it, with everything it started in its process group, when it runs past a timeout.
// Used for the MPS control daemon (adapters/deviceplugin) and kubeconfig exec credential plugins (adapters/k8s).
//
// Thread-safe: nothing is shared between calls. It waits for its own child only (waitpid on that pid), so other
// children of the process are left to their owners. A program that starts a daemon which keeps the output pipes open
// is not waited for beyond its own exit.

#include <chrono>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::proc {

struct CommandOptions {
  std::vector<std::pair<std::string, std::string>> env;  // added to (or replacing) this process's environment
  std::string input;                                     // written to its standard input, which is then closed
  std::chrono::milliseconds timeout{5000};
  size_t max_output = 4096;  // bytes kept of each of stdout and stderr; the rest is read and dropped
};

struct CommandResult {
  int exit_code = -1;      // -1 when it did not exit by itself (killed by a signal, or at the timeout)
  bool timed_out = false;  // killed at the timeout
  std::string output;      // standard output (trailing newlines removed)
  std::string errors;      // standard error (trailing newlines removed)
};

// An error only when it could not be started (empty argv, program not found or not executable).
[[nodiscard]] common::Result<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                                       const CommandOptions& options);

}  // namespace gpusched::proc
