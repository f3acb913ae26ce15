#include "gpusched/adapters/deviceplugin/mps_daemon.h"

#include <filesystem>
#include <thread>

#include "gpusched/common/log.h"
#include "gpusched/proc/subprocess.h"

namespace gpusched::adapters::deviceplugin {

using proc::RunCommand;
using Clock = std::chrono::steady_clock;

namespace {

// What a run printed, for a message: stdout then stderr, at most 200 bytes.
std::string Said(const proc::CommandResult& r) {
  std::string said = r.output;
  if (!r.errors.empty()) {
    said += (said.empty() ? "" : "; ") + r.errors;
  }
  return said.substr(0, 200);
}

}  // namespace

MpsDaemon::MpsDaemon(MpsDaemonOptions options) : options_(std::move(options)) {}

MpsDaemon::~MpsDaemon() { Stop(); }

std::vector<std::pair<std::string, std::string>> MpsDaemon::Env() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", options_.pipe_dir}, {"CUDA_MPS_LOG_DIRECTORY", options_.log_dir}};
}

common::Status MpsDaemon::Probe() const {
  auto r =
      RunCommand({options_.control},
                 proc::CommandOptions{.env = Env(), .input = "get_server_list\n", .timeout = options_.command_timeout});
  if (!r.ok()) {
    return r.status();
  }
  if (r->exit_code == 0) {
    return common::Status::Ok();
  }
  std::string why = options_.control + " (pipe directory " + options_.pipe_dir + ") ";
  why += r->timed_out ? "did not answer within " + std::to_string(options_.command_timeout.count()) + " ms"
                      : "exited with " + std::to_string(r->exit_code);
  if (const std::string said = Said(*r); !said.empty()) {
    why += ": " + said;
  }
  return common::Unavailable(why);
}

common::Status MpsDaemon::Launch() {
  std::error_code ec;
  for (const std::string& dir : {options_.pipe_dir, options_.log_dir}) {
    std::filesystem::create_directories(dir, ec);
    if (ec) {
      return common::Unavailable("cannot create " + dir + ": " + ec.message());
    }
  }
  auto r =
      RunCommand({options_.control, "-d"}, proc::CommandOptions{.env = Env(), .timeout = options_.command_timeout});
  {
    std::lock_guard lock(mu_);
    ++launches_;
  }
  if (!r.ok()) {
    return r.status();
  }
  if (r->exit_code != 0) {
    return common::Unavailable(
        options_.control + " -d " +
        (r->timed_out ? std::string("did not return") : "exited with " + std::to_string(r->exit_code)) +
        (r->output.empty() ? "" : ": " + r->output.substr(0, 200)));
  }
  return common::Status::Ok();
}

void MpsDaemon::CheckNow() {
  std::lock_guard round(round_mu_);
  common::Status s = Probe();
  if (!s.ok() && options_.manage) {
    const std::string how =
        " (" + options_.control + " -d, pipes " + options_.pipe_dir + ", logs " + options_.log_dir + ")";
    if (launches() == 0) {
      common::Log(common::LogLevel::kInfo, "MPS: starting the control daemon" + how);
    } else {
      common::Log(common::LogLevel::kWarn,
                  "MPS: the control daemon stopped answering (" + s.message() + "); starting it again" + how);
    }
    if (common::Status launched = Launch(); !launched.ok()) {
      s = launched;
    } else {
      // `-d` returns once the daemon forked; it answers as soon as its pipe exists.
      const auto until = Clock::now() + options_.command_timeout;
      do {
        s = Probe();
        if (s.ok()) {
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      } while (Clock::now() < until);
    }
  }
  std::lock_guard lock(mu_);
  if (s.ok() != status_.ok()) {
    common::Log(s.ok() ? common::LogLevel::kInfo : common::LogLevel::kError,
                s.ok() ? "MPS: the control daemon answers on " + options_.pipe_dir
                       : "MPS: no control daemon: " + s.message() +
                             " (containers with MPS limits are refused until it answers)");
  }
  status_ = std::move(s);
}

common::Status MpsDaemon::Start() {
  if (options_.control.empty()) {
    return common::InvalidArgument("MPS: no control binary given");
  }
  if (options_.pipe_dir.empty() || options_.pipe_dir[0] != '/' || options_.log_dir.empty() ||
      options_.log_dir[0] != '/') {
    return common::InvalidArgument("MPS: the pipe and log directories must be absolute paths (got \"" +
                                   options_.pipe_dir + "\", \"" + options_.log_dir + "\")");
  }
  if (options_.check_interval.count() <= 0 || options_.command_timeout.count() <= 0) {
    return common::InvalidArgument("MPS: the check interval and command timeout must be positive");
  }
  CheckNow();
  worker_.Start([this] {
    while (!worker_.WaitFor(options_.check_interval)) {
      CheckNow();
    }
  });
  return common::Status::Ok();
}

void MpsDaemon::Stop() { worker_.Stop(); }

common::Status MpsDaemon::Status() const {
  std::lock_guard lock(mu_);
  return status_;
}

bool MpsDaemon::up() const {
  std::lock_guard lock(mu_);
  return status_.ok();
}

uint64_t MpsDaemon::launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}

uint64_t MpsDaemon::restarts() const {
  std::lock_guard lock(mu_);
  return launches_ == 0 ? 0 : launches_ - 1;
}

}  // namespace gpusched::adapters::deviceplugin
