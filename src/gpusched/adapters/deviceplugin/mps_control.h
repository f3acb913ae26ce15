#pragma once

// MPS limits enforced by the control daemon, not by the client's environment (docs/device-plugin.md, "MPS").
//
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT in a container's environment only lower
// what the control daemon allows; a process that unsets them before cuInit gets the daemon's values, and those are
// NVIDIA's defaults (100 %, no memory limit) unless someone sets them. So the agent sets them through the control
// program's command interface (one `nvidia-cuda-mps-control` run per command, the command on its standard input):
//
//   set_default_active_thread_percentage <pct>             for servers started after it
//   set_default_device_pinned_mem_limit <gpu> <MiB>M        per GPU (UUID), for servers started after it
//   set_active_thread_percentage <server pid> <pct>         for that server's clients started after it
//   set_device_pinned_mem_limit <server pid> <gpu> <MiB>M   per GPU, for that server's clients started after it
//
// The control daemon starts one MPS server per Linux uid (the uid of the client process); every client of a server
// gets that server's limits. What the planner sets (PlanMpsLimits), from the MPS clients of the node (one per
// container with shared GPUs: its GPUs' milli-GPU and MiB, and its uid when known):
//   * a client's compute share is min over its shared GPUs with compute of max(1, milli / 10) percent (what
//     container_env hands it); its memory share on a GPU is its MiB there. Memory-only shares cap no compute.
//   * defaults = the smallest share over every client of the node: the first process of a server nobody has seen
//     yet (any uid) gets no more than any pod is entitled to. No client with compute: fallback_thread_percentage;
//     a GPU no client has memory on: fallback_pinned_mib (0: left as it is).
//   * a server whose uid is known: the smallest share over the clients that may run as that uid, i.e. the clients
//     of that uid and the clients whose uid is unknown (they may run as any uid). Several pods of one uid on one GPU
//     share one server, so they all get the smallest of their shares (never more than any of them is entitled to;
//     refusing the second pod instead would let a small pod of the same uid block a big one from the node).
//   * a server whose uid is unknown, or with no such client: the defaults.
// A client's uid is known when its container runs as a fixed non-root uid that it cannot leave: runAsUser (the
// container's, else the pod's) set and not 0, and allowPrivilegeEscalation false. Everyone else counts as unknown.
//
// MpsController applies a plan: it reads the servers (get_server_list, and each server's uid from the runner),
// plans, and sends only the commands whose values differ from what it set before. It notices a restarted control
// daemon (the runner's identity of it changed, or its default thread percentage is not the one set) and sets
// everything again. The device plugin calls it at Allocate with the new container among the clients, so the limits
// are in place before the container's first process starts; the agent calls it every check interval for pods that
// left and servers that appeared.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"

namespace gpusched::adapters::deviceplugin {

struct MpsClient {
  std::string pod_key;    // namespace/name
  std::string container;  // its allocation entry ("main", "init:setup")
  std::optional<int64_t> uid;
  std::vector<core::GpuShare> gpus;  // exclusive shares are skipped; UUIDs required
};

struct MpsServer {
  int64_t pid = 0;
  std::optional<int64_t> uid;  // unknown when the runner cannot tell
};

struct MpsLimits {
  int64_t thread_percentage = 100;
  std::map<std::string, int64_t> pinned_mib;  // GPU UUID -> MiB
  auto operator<=>(const MpsLimits&) const = default;
};

struct MpsPlanOptions {
  std::vector<std::string> gpus;             // the node's GPU UUIDs (every GPU gets a memory default)
  int64_t fallback_thread_percentage = 100;  // 1..100
  int64_t fallback_pinned_mib = 0;           // >= 0; 0: no memory default on GPUs no client has memory on
};

struct MpsPlan {
  MpsLimits defaults;
  std::map<int64_t, MpsLimits> servers;  // by pid
  auto operator<=>(const MpsPlan&) const = default;
};

// Pure. Clients without any shared GPU are ignored.
[[nodiscard]] MpsPlan PlanMpsLimits(std::span<const MpsClient> clients, std::span<const MpsServer> servers,
                                    const MpsPlanOptions& options);

// The control commands that take `from` (what is set; nullopt: nothing known, so everything) to `to`, defaults
// first, then servers by pid.
[[nodiscard]] std::vector<std::string> MpsCommands(const std::optional<MpsPlan>& from, const MpsPlan& to);

// The uid a container of `pod` (API JSON) runs as, when known in the sense above; `container` is an allocation
// entry name ("main", "init:setup").
[[nodiscard]] std::optional<int64_t> ContainerUid(const nlohmann::json& pod, std::string_view container);

// The MPS clients of a node from its pods (API JSON): every container entry of a live pod's gpusched.io/allocation
// for `node` with a shared GPU. Pods without an allocation, of another node or terminal are skipped; an allocation
// that does not decode is skipped too (the device plugin refuses such pods).
[[nodiscard]] std::vector<MpsClient> MpsClientsFromPods(std::span<const nlohmann::json> pods, std::string_view node);

// How the controller talks to the control daemon and reads the servers' uids.
class MpsControlRunner {
 public:
  virtual ~MpsControlRunner() = default;
  // Runs the control program with `command` on its standard input; its standard output, or an error naming the
  // command (it could not run, timed out, or exited non-zero).
  [[nodiscard]] virtual common::Result<std::string> Run(std::string_view command) = 0;
  // The uid of process `pid`, when it can be read.
  [[nodiscard]] virtual std::optional<int64_t> ProcessUid(int64_t pid) = 0;
  // Something that changes when the control daemon restarts (its pid file); "" when unknown.
  [[nodiscard]] virtual std::string DaemonIdentity() = 0;
};

struct ProcessMpsRunnerOptions {
  std::string control = "nvidia-cuda-mps-control";
  std::string pipe_dir;            // CUDA_MPS_PIPE_DIRECTORY; its nvidia-cuda-mps-control.pid is the daemon's identity
  std::string log_dir;             // CUDA_MPS_LOG_DIRECTORY
  std::string proc_dir = "/proc";  // where server pids are looked up (<proc_dir>/<pid>/status, the Uid: line)
  std::chrono::milliseconds timeout{5000};
};

// The real runner: proc::RunCommand, bounded by the timeout, output kept up to 4 KiB.
[[nodiscard]] std::unique_ptr<MpsControlRunner> NewProcessMpsRunner(ProcessMpsRunnerOptions options);

class MpsController {
 public:
  // `runner` must outlive the controller. Errors in the options: ValidateOptions().
  MpsController(MpsControlRunner& runner, MpsPlanOptions options);

  [[nodiscard]] common::Status ValidateOptions() const;

  // One round (see above). An error names the command that failed; the next round then sends everything again
  // (what the daemon holds is no longer known). Thread-safe: rounds are serialised.
  [[nodiscard]] common::Status Apply(std::span<const MpsClient> clients);

  // The node's GPU UUIDs (each gets a memory default when fallback_pinned_mib is set); from the inventory.
  void SetGpus(std::vector<std::string> gpus);

  [[nodiscard]] std::optional<MpsPlan> applied() const;
  [[nodiscard]] uint64_t commands_sent() const;
  [[nodiscard]] uint64_t restarts_seen() const;  // control daemon restarts noticed (limits set again)
  [[nodiscard]] uint64_t failures() const;

 private:
  [[nodiscard]] common::Status ApplyLocked(std::span<const MpsClient> clients);

  MpsControlRunner& runner_;
  MpsPlanOptions options_;
  mutable std::mutex mu_;
  std::optional<MpsPlan> applied_;  // what the daemon has, as far as this controller set it
  std::string identity_;
  uint64_t commands_sent_ = 0;
  uint64_t restarts_seen_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace gpusched::adapters::deviceplugin
