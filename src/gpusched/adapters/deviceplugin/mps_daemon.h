#pragma once

// MpsDaemon: the node's MPS control daemon (nvidia-cuda-mps-control), which enforces the limits the device plugin
// hands shared containers (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT; container_env.h).
// Without it those variables are ignored and a "30 %" container gets the whole GPU, so the device plugin asks
// Status() before it hands out MPS limits and refuses the container when the daemon does not answer.
//
// Two modes:
//   manage = true   ("--mps run")      start `<control> -d` with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY
//                                       set, check it every check_interval and start it again when it stopped
//                                       answering (restarts() counts those);
//   manage = false  ("--mps external")  someone else runs it (another container, the host): only check it.
// The check runs `<control>` as a client with the command `get_server_list` on its standard input, which answers
// (exit 0) only while the control daemon listens on the pipe directory. Each run is bounded by command_timeout and
// killed after it.
//
// Threading: Start() makes the first check (and launch) before it returns, then a supervisor thread repeats it;
// Status(), up() and restarts() are safe from any thread. Stop() joins the thread and leaves a managed daemon
// running (a new agent process finds it answering; in a container, though, it ends with the container).

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/common/worker_thread.h"

namespace gpusched::adapters::deviceplugin {

struct MpsDaemonOptions {
  std::string control = "nvidia-cuda-mps-control";  // a path, or a name looked up on PATH
  std::string pipe_dir = "/tmp/nvidia-mps";
  std::string log_dir = "/var/log/nvidia-mps";
  bool manage = true;
  std::chrono::milliseconds check_interval{5000};
  std::chrono::milliseconds command_timeout{5000};
};

class MpsDaemon {
 public:
  explicit MpsDaemon(MpsDaemonOptions options);
  ~MpsDaemon();  // Stop()
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // Checks the options (absolute directories, positive intervals), creates the directories when managing, makes the
  // first check (and launch), and starts the supervisor. A daemon that does not come up is not an error here:
  // Status() says why, and the supervisor keeps trying.
  [[nodiscard]] common::Status Start();
  void Stop();

  // OK while the last check found the daemon answering; else why not (the command, its exit, its output).
  [[nodiscard]] common::Status Status() const;
  [[nodiscard]] bool up() const;
  [[nodiscard]] uint64_t restarts() const;  // launches after the first one
  [[nodiscard]] uint64_t launches() const;
  [[nodiscard]] const MpsDaemonOptions& options() const { return options_; }

  // One supervision round now: check, and launch when managing and it does not answer. For tests and Start().
  void CheckNow();

 private:
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> Env() const;
  [[nodiscard]] common::Status Probe() const;
  [[nodiscard]] common::Status Launch();

  MpsDaemonOptions options_;
  mutable std::mutex mu_;
  common::Status status_ = common::Unavailable("MPS control daemon not checked yet");
  uint64_t launches_ = 0;
  std::mutex round_mu_;  // one round at a time
  common::WorkerThread worker_;
};

}  // namespace gpusched::adapters::deviceplugin
