#include "gpusched/testing/processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;  // NOLINT: POSIX

namespace gpusched::testing {

using std::chrono::milliseconds;

bool WaitFor(const std::function<bool()>& pred, milliseconds timeout, milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(poll);
  }
  return true;
}

std::string FindBinary(const std::string& name) {
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe): test set-up
  std::string dirs = std::string(path != nullptr ? path : "") + ":/usr/bin:/usr/sbin:/usr/local/bin";
  std::istringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) {
      continue;
    }
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Child::Start(const std::vector<std::string>& argv, const std::string& log) {
  log_ = log;
  std::vector<char*> args;
  for (const auto& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  const int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    pid_ = -1;
    return false;
  }
  return true;
}

bool Child::Running() {
  if (pid_ <= 0) {
    return false;
  }
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Child::Stop() {
  if (pid_ <= 0) {
    return;
  }
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  pid_ = -1;
}

int StartInfluxd(Child& child, const std::string& binary, const std::string& dir, milliseconds deadline,
                 std::string* error) {
  const int rpc = FreePort();
  const int http = FreePort();
  const std::string conf = dir + "/influxdb.conf";
  std::ofstream(conf) << "reporting-disabled = true\n"
                      << "bind-address = \"127.0.0.1:" << rpc << "\"\n"
                      << "[meta]\n  dir = \"" << dir << "/meta\"\n"
                      << "[data]\n  dir = \"" << dir << "/data\"\n  wal-dir = \"" << dir
                      << "/wal\"\n  query-log-enabled = false\n"
                      << "[http]\n  enabled = true\n  bind-address = \"127.0.0.1:" << http
                      << "\"\n  log-enabled = false\n"
                      << "[monitor]\n  store-enabled = false\n"
                      << "[continuous_queries]\n  enabled = false\n";
  if (!child.Start({binary, "run", "-config", conf}, dir + "/influxd.log")) {
    *error = "cannot start " + binary;
    return -1;
  }
  bool died = false;
  const bool up = WaitFor(
      [&] {
        died = !child.Running();
        httplib::Client client("127.0.0.1", http);
        const auto res = client.Get("/ping");
        return died || (res && res->status == 204);
      },
      deadline);
  if (!up || died) {
    *error = std::string(died ? "influxd exited" : "influxd did not answer /ping in time") + ":\n" + child.Log();
    return -1;
  }
  return http;
}

}  // namespace gpusched::testing
