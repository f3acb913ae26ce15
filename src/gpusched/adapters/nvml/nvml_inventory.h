#pragma once

// NvmlInventory: the node's GPUs read through NVML, loaded at run time with dlopen("libnvidia-ml.so.1") so that
// the agent builds and starts on machines without the NVIDIA driver (there is no NVML header or stub library
// here: the types and prototypes are declared in nvml_inventory.cc from k8s-gpu-protocols.md section 5.2).
//
// What is read when:
//   Open():   the library, nvmlInit_v2, the driver and NVML versions, and per GPU the static facts: UUID, name, PCI
//             bus id, NUMA node, NVLink peers (active links whose remote PCI bus id is another of our GPUs) and
//             the pairwise topology (nvmlDeviceGetTopologyCommonAncestor). A GPU's static facts do not change while
//             the driver stays loaded. Each sample carries them: links holds, for every other GPU, NVLink with the
//             number of active links to it, else the PCIe level (topology level 0 and 10: one switch [PIX], 20 [PXB],
//             30 [PHB], 40 [NODE], 50 [SYS]). Without NVML's NUMA node, the kernel's (sysfs) is used.
//   Sample(): per GPU the live values: memory (bytes -> MiB), utilisation, temperature, power (mW -> W), SM and
//             memory clocks, running compute processes, and the health kept by the XID thread.
//   XID thread (optional): nvmlEventSetWait_v2 on nvmlEventTypeXidCriticalError for every GPU that supports it.
//             A critical XID (xid.h) makes that GPU unhealthy until the agent restarts; application XIDs are only
//             recorded as the last XID.
//
// Every symbol other than nvmlInit_v2, nvmlShutdown, nvmlErrorString, nvmlDeviceGetCount_v2 and
// nvmlDeviceGetHandleByIndex_v2 is optional: when an old driver lacks it, or a call fails (NOT_SUPPORTED on a
// GeForce card, no permission), that value stays unknown (-1 or empty) and the agent leaves the metric out.
//
// Thread-safety: Sample(), Describe() and Link() may be called from any thread; NVML itself is thread-safe.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::adapters::nvml {

struct NvmlInventoryOptions {
  // Run the XID event thread. Without it every GPU stays healthy unless NVML reports it lost.
  bool watch_xid_events = true;
  // How long one nvmlEventSetWait_v2 call blocks; the destructor waits up to this long for the thread.
  std::chrono::milliseconds event_wait{500};
  // Where a GPU's NUMA node is read when NVML does not say (nvmlDeviceGetNumaNodeId missing or failing, as on some
  // virtual machines): <sysfs_pci_devices>/<bus id>/numa_node, the kernel's answer (-1 = none).
  std::string sysfs_pci_devices = "/sys/bus/pci/devices";
};

class NvmlInventory : public ports::DeviceInventory {
 public:
  // Loads `library` (a file name searched by the dynamic loader, or a path) and initialises NVML. Errors:
  // Unavailable naming the library and dlerror() when it cannot be loaded or lacks a required symbol;
  // Unavailable with NVML's error string when nvmlInit_v2 or the device enumeration fails.
  [[nodiscard]] static common::Result<std::unique_ptr<NvmlInventory>> Open(
      const std::string& library = "libnvidia-ml.so.1", NvmlInventoryOptions options = {});

  // Stops the XID thread, then nvmlShutdown and dlclose.
  ~NvmlInventory() override;
  NvmlInventory(const NvmlInventory&) = delete;
  NvmlInventory& operator=(const NvmlInventory&) = delete;

  [[nodiscard]] common::Result<std::vector<ports::GpuSample>> Sample() override;
  // "NVML 12.550.54.15, driver 550.54.15, 8 GPUs"
  [[nodiscard]] std::string Describe() const override;

  // How GPUs a and b are connected: kNvLink when they share an NVLink, else the PCIe common ancestor; kUnknown for
  // a == b, an index out of range, or when NVML cannot say.
  [[nodiscard]] ports::GpuLink Link(int32_t a, int32_t b) const;
  // The NVIDIA driver's version as nvmlSystemGetDriverVersion says it ("535.104.05"); empty when it does not.
  [[nodiscard]] const std::string& driver_version() const;
  // Optional symbols this library lacks, for a start-up log line.
  [[nodiscard]] const std::vector<std::string>& missing_symbols() const;
  // False when the XID thread could not be started (no event support); health then comes from NVML errors only.
  [[nodiscard]] bool watching_xid_events() const;

 private:
  struct Impl;
  explicit NvmlInventory(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::adapters::nvml
