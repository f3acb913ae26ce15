#pragma once

// FakeInventory: GPUs that do not exist, for machines without a GPU (`gpusched agent --fake-gpus 4xA100-80GB`), for
// demos, and for tests. Its metrics move over time like a busy node's, deterministically: every value is a pure
// function of (seed, GPU index, elapsed time on the injected clock) until a test scripts it.
//
// Specs:
//   "4xA100-80GB"             four GPUs of a known model (table below)
//   "2xH100-80GB,1xT4"        groups are concatenated in order: indices 0,1 are H100s, 2 is the T4; "1x" may be left
//   out "2xFoo:24GB"              an unknown model needs its memory (GB = GiB = 1024 MiB; MiB also accepted); a known
//                             model may override its memory the same way
//   a path ending in .yaml/.yml: a list of {model, memory_mib, numa, nvlink_peers, utilization, memory_used_mib}
//                             (memory_mib required for unknown models; the rest optional; utilization (0..100) and
//                             memory_used_mib pin those values from the start, as a script would)
// Known models (spec name -> NVML product name, MiB, TDP W, max SM / memory clock MHz):
//   A100-80GB, A100-40GB, H100-80GB, H200-141GB, V100-32GB, T4, L4, A10.
//
// Topology of spec-built nodes: GPUs of an SXM model (A100, H100, H200, V100) in one group are all NVLinked to each
// other (an NVSwitch board); the first half of all GPUs is on NUMA node 0, the second half on NUMA node 1.
// UUIDs are "GPU-fake-<node name>-<index>" (or "GPU-fake-<seed>-<index>" without a node name): stable per node.
//
// Synthetic motion (unscripted GPUs): utilisation u(t) = base + amplitude * sin(2 pi t / period + phase) plus a
// small step noise that changes every second, clamped to [0, 100]; base, amplitude, period and phase are drawn per
// GPU from the seed. Memory used follows u slowly; memory-copy utilisation is 0.6 u; temperature and power are
// linear in u between idle and full load; the SM clock is the model's maximum when u > 0, else its idle clock.
//
// Scripting overrides the motion per GPU and lasts until changed: SetUtilization pins u (temperature, power and
// clocks follow it), SetMemoryUsed pins memory, SetHealthy / InjectXid set health, SetProcesses the process list.
// Freeze() stops time for every unscripted value (they keep the value at the moment of the call).
//
// Thread-safety: every method may be called from any thread (one mutex).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::nvml {

struct FakeInventoryOptions {
  // Names the UUIDs; empty: the seed does.
  std::string node_name;
  uint64_t seed = 1;
  // Time source for the synthetic motion; the default is std::chrono::steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

// One fake GPU as a spec or YAML file describes it.
struct FakeGpuSpec {
  std::string model;  // spec model name, e.g. "A100-80GB" or "Foo"
  common::MiB memory{0};
  int32_t numa_node = -1;
  std::vector<int32_t> nvlink_peers;
  // Pinned from the start, as SetUtilization / SetMemoryUsed would (YAML `utilization`, `memory_used_mib`).
  std::optional<double> utilization;
  std::optional<common::MiB> memory_used;
};

class FakeInventory : public ports::DeviceInventory {
 public:
  // A spec string or a YAML file path (see above). Errors name the spec and what is wrong with it.
  [[nodiscard]] static common::Result<std::unique_ptr<FakeInventory>> Create(const std::string& spec_or_path,
                                                                             FakeInventoryOptions options = {});
  // Parses a spec string into GPUs (exposed for tests and for --fake-gpus validation).
  [[nodiscard]] static common::Result<std::vector<FakeGpuSpec>> ParseSpec(const std::string& spec);
  [[nodiscard]] static common::Result<std::vector<FakeGpuSpec>> LoadYaml(const std::string& path);

  FakeInventory(std::vector<FakeGpuSpec> gpus, std::string description, FakeInventoryOptions options);
  FakeInventory(const FakeInventory&) = delete;
  FakeInventory& operator=(const FakeInventory&) = delete;

  [[nodiscard]] common::Result<std::vector<ports::GpuSample>> Sample() override;
  // "fake 4xA100-80GB"
  [[nodiscard]] std::string Describe() const override;

  // Scripting. Each returns InvalidArgument for an index out of range or a value out of range.
  common::Status SetUtilization(int32_t index, double percent);   // 0..100
  common::Status SetMemoryUsed(int32_t index, common::MiB used);  // 0..total
  common::Status SetHealthy(int32_t index, bool healthy);         // true also clears the last XID
  // Records the XID; a critical one (xid.h) makes the GPU unhealthy, an application one does not.
  common::Status InjectXid(int32_t index, int64_t xid);
  common::Status SetProcesses(int32_t index, std::vector<ports::GpuProcess> processes);
  // Makes Sample() fail with Unavailable (as NVML does when the driver is gone) until cleared with Status::Ok().
  void SetSampleError(common::Status status);
  // Stops the synthetic motion at the current time.
  void Freeze();

  [[nodiscard]] size_t size() const { return gpus_.size(); }

 private:
  struct Gpu {
    FakeGpuSpec spec;
    std::string name;  // NVML-style product name
    // The model's behaviour between idle and full load.
    double idle_w = 0, tdp_w = 0;
    int64_t sm_idle_mhz = 0, sm_max_mhz = 0, memory_clock_mhz = 0;
    common::GpuUuid uuid;
    std::string pci_bus_id;
    // Motion parameters drawn from the seed.
    double base = 0, amplitude = 0, period_s = 1, phase = 0, memory_share = 0;
    uint64_t noise_seed = 0;
    // Script.
    std::optional<double> utilization;
    std::optional<common::MiB> memory_used;
    std::vector<ports::GpuProcess> processes;
    bool healthy = true;
    int64_t last_xid = 0;
  };

  [[nodiscard]] common::Status CheckIndex(int32_t index) const;
  [[nodiscard]] double ElapsedSeconds() const;  // REQUIRES(mu_)
  [[nodiscard]] ports::GpuSample SampleOne(const Gpu& gpu, double t) const;

  const std::string description_;
  const FakeInventoryOptions options_;
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::vector<Gpu> gpus_;            // GUARDED_BY(mu_) for the script fields; the size is fixed
  std::optional<double> frozen_at_;  // GUARDED_BY(mu_) elapsed seconds when frozen
  common::Status sample_error_;      // GUARDED_BY(mu_)
};

}  // namespace gpusched::adapters::nvml
