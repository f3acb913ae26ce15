#pragma once

// Helpers for tests that run real servers (prometheus, influxd, ...) as child processes on loopback.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace gpusched::testing {

// Polls `pred` every `poll` until it holds (true) or `timeout` passes (false).
bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
             std::chrono::milliseconds poll = std::chrono::milliseconds(100));

// The executable `name` on PATH (or in /usr/bin, /usr/sbin, /usr/local/bin), or "".
std::string FindBinary(const std::string& name);

// A loopback port nobody listens on right now (bound then released; the race is harmless in a test), or -1.
int FreePort();

// The whole file, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// A child process with stdout and stderr appended to `log`; stopped with SIGTERM (then SIGKILL after 10 s) and
// reaped, also by the destructor.
class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(); }

  bool Start(const std::vector<std::string>& argv, const std::string& log);
  // True while the child has not exited.
  bool Running();
  void Stop();
  [[nodiscard]] std::string Log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

// Starts influxd (`binary`, InfluxDB 1.x) in `child` on loopback ports with its data, configuration and log under
// `dir`, and waits up to `deadline` for /ping to answer. Returns the HTTP port, or -1 with the reason (and the
// server's log) in *error.
int StartInfluxd(Child& child, const std::string& binary, const std::string& dir, std::chrono::milliseconds deadline,
                 std::string* error);

}  // namespace gpusched::testing
