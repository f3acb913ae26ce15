#include "gpusched/proc/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

extern char** environ;

namespace gpusched::proc {
namespace {

using Clock = std::chrono::steady_clock;

void CloseFd(int& fd) {
  if (fd >= 0) {
    close(fd);
    fd = -1;
  }
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

// One output pipe being read: what it gave so far, up to `limit` bytes kept.
struct Stream {
  int fd = -1;
  std::string* into = nullptr;
  size_t limit = 0;

  // Reads what is there; false once the pipe is closed (or broken).
  bool ReadSome() {
    char buf[4096];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      if (into->size() < limit) {
        into->append(buf, std::min(static_cast<size_t>(n), limit - into->size()));
      }
      return true;
    }
    return n < 0 && (errno == EINTR || errno == EAGAIN);
  }
};

// write() to a pipe whose reader is gone raises SIGPIPE in the writing thread, which would end the daemon: block it in
// this thread for the write, and take a SIGPIPE it raised off the pending set before unblocking. EPIPE remains.
ssize_t WriteNoSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t old;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  sigset_t pending_before;
  sigpending(&pending_before);
  const ssize_t w = write(fd, data, size);
  const int saved = errno;
  if (w < 0 && saved == EPIPE && sigismember(&pending_before, SIGPIPE) == 0) {
    const timespec zero{.tv_sec = 0, .tv_nsec = 0};
    sigtimedwait(&pipe_only, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return w;
}

}  // namespace

common::Result<CommandResult> RunCommand(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty() || argv[0].empty()) {
    return common::InvalidArgument("no command to run");
  }
  std::map<std::string, std::string> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    if (const size_t eq = kv.find('='); eq != std::string::npos) {
      vars[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  for (const auto& [k, v] : options.env) {
    vars[k] = v;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(vars.size());
  for (const auto& [k, v] : vars) {
    env_strings.push_back(k + "=" + v);
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
  }
  envp.push_back(nullptr);
  std::vector<std::string> args(argv);
  std::vector<char*> argp;
  for (auto& a : args) {
    argp.push_back(a.data());
  }
  argp.push_back(nullptr);

  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) {
      CloseFd(*fd);
    }
    return common::Internal("pipe: " + why);
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills whatever it started too; default signal handling in the child.
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0].c_str(), &fa, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  CloseFd(in[0]);
  CloseFd(out[1]);
  CloseFd(err[1]);
  if (rc != 0) {
    CloseFd(in[1]);
    CloseFd(out[0]);
    CloseFd(err[0]);
    return common::Unavailable("cannot run " + args[0] + ": " + std::strerror(rc));
  }

  CommandResult result;
  const std::string& input = options.input;
  size_t written = 0;
  if (input.empty()) {
    CloseFd(in[1]);
  } else {
    fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
  }
  Stream streams[2] = {{.fd = out[0], .into = &result.output, .limit = options.max_output},
                       {.fd = err[0], .into = &result.errors, .limit = options.max_output}};
  const auto deadline = Clock::now() + options.timeout;
  int status = 0;
  bool exited = false;
  while (true) {
    pollfd fds[3];
    nfds_t n = 0;
    for (const Stream& s : streams) {
      if (s.fd >= 0) {
        fds[n++] = pollfd{.fd = s.fd, .events = POLLIN, .revents = 0};
      }
    }
    if (in[1] >= 0) {
      fds[n++] = pollfd{.fd = in[1], .events = POLLOUT, .revents = 0};
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 20));
    if (n > 0) {
      poll(fds, n, wait_ms);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::max(1, wait_ms)));
    }
    for (nfds_t i = 0; i < n; ++i) {
      if (fds[i].revents == 0) {
        continue;
      }
      if (fds[i].fd == in[1]) {
        const ssize_t w = WriteNoSigpipe(in[1], input.data() + written, input.size() - written);
        if (w > 0) {
          written += static_cast<size_t>(w);
        }
        if (written == input.size() || (w < 0 && errno != EAGAIN && errno != EINTR) ||
            (fds[i].revents & (POLLERR | POLLHUP)) != 0) {
          CloseFd(in[1]);
        }
        continue;
      }
      for (Stream& s : streams) {
        if (s.fd == fds[i].fd && !s.ReadSome()) {
          CloseFd(s.fd);
        }
      }
    }
    if (!exited) {
      const pid_t w = waitpid(pid, &status, WNOHANG);
      exited = w == pid;
    }
    const bool drained = streams[0].fd < 0 && streams[1].fd < 0;
    if (exited && (drained || Clock::now() >= deadline)) {
      break;
    }
    if (exited && !drained) {
      // It exited; something it started may hold the pipes open (a daemon): take what is there now and stop.
      for (Stream& s : streams) {
        if (s.fd >= 0) {
          pollfd p{.fd = s.fd, .events = POLLIN, .revents = 0};
          while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0 && s.ReadSome()) {
          }
          CloseFd(s.fd);
        }
      }
      break;
    }
    if (Clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      exited = true;
      break;
    }
  }
  CloseFd(in[1]);
  for (Stream& s : streams) {
    CloseFd(s.fd);
  }
  if (exited && !result.timed_out && WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.output = TrimEnd(std::move(result.output));
  result.errors = TrimEnd(std::move(result.errors));
  return result;
}

}  // namespace gpusched::proc
