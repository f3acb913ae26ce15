#include "gpusched/adapters/nvml/nvml_inventory.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>

#include "gpusched/adapters/nvml/xid.h"
#include "gpusched/common/log.h"

namespace gpusched::adapters::nvml {
namespace {

// ---- NVML's C ABI, declared here from k8s-gpu-protocols.md section 5.2 (no nvml.h on this machine). ----
struct nvmlDevice_st;
struct nvmlEventSet_st;
using nvmlDevice_t = nvmlDevice_st*;
using nvmlEventSet_t = nvmlEventSet_st*;
using nvmlReturn_t = int;

constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kErrorNotSupported = 3;
constexpr nvmlReturn_t kErrorInsufficientSize = 7;
constexpr nvmlReturn_t kErrorTimeout = 10;
constexpr nvmlReturn_t kErrorGpuIsLost = 15;

constexpr int kTemperatureGpu = 0;
constexpr int kClockSm = 1;
constexpr int kClockMem = 2;
constexpr int kFeatureEnabled = 1;
constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;  // NOLINT(google-runtime-int): NVML's type
constexpr unsigned int kMaxNvLinks = 64;  // loop until NVML says no; NVML_NVLINK_MAX_LINKS is 36 at API 13
constexpr unsigned int kUuidBuffer = 96;
constexpr unsigned int kNameBuffer = 96;
constexpr unsigned int kVersionBuffer = 80;
constexpr uint64_t kBytesPerMiB = 1024 * 1024;

// NOLINTBEGIN(google-runtime-int, readability-identifier-naming): mirrors the C declarations exactly.
struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
struct nvmlProcessInfo_t {  // the v2 layout, used by the _v2 and _v3 functions
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessInfo_v1_t {  // the unsuffixed function of very old drivers
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlTemperature_v1_t {
  unsigned int version;
  int sensorType;
  int temperature;
};
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
// NOLINTEND(google-runtime-int, readability-identifier-naming)

// NVML_STRUCT_VERSION(Name, v) = sizeof(struct) | (v << 24)
template <typename T>
constexpr unsigned int StructVersion(unsigned int v) {
  return static_cast<unsigned int>(sizeof(T)) | (v << 24U);
}

// The function table. Required entries are checked in Open; optional ones may be null.
struct Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_driver_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_nvml_version)(char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*get_memory_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;
  nvmlReturn_t (*get_utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*get_temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*get_temperature_v)(nvmlDevice_t, nvmlTemperature_v1_t*) = nullptr;
  nvmlReturn_t (*get_power)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*get_clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*get_pci)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*get_numa)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*get_nvlink_state)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*get_nvlink_remote_pci)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*get_common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*get_processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;        // _v3 or _v2
  nvmlReturn_t (*get_processes_v1)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*) = nullptr;  // unsuffixed
  nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
  nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
  nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;  // NOLINT
  nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned int) = nullptr;
};

// dlsym into a typed function pointer (memcpy: ISO C++ has no cast from an object pointer to a function pointer).
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn& out) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr) {
    return false;
  }
  static_assert(sizeof(Fn) == sizeof(void*));
  std::memcpy(&out, &sym, sizeof(out));
  return true;
}

// Tries each name in turn; records the first name as missing when none resolves.
template <typename Fn>
void ResolveOptional(void* handle, std::initializer_list<const char*> names, Fn& out,
                     std::vector<std::string>& missing) {
  for (const char* name : names) {
    if (Resolve(handle, name, out)) {
      return;
    }
  }
  missing.emplace_back(*names.begin());
}

std::string CString(const char* buffer, size_t size) { return {buffer, strnlen(buffer, size)}; }

common::MiB BytesToMiB(unsigned long long bytes) {  // NOLINT(google-runtime-int)
  return common::MiB(static_cast<int64_t>(bytes / kBytesPerMiB));
}

core::LinkKind CoreLinkKind(ports::GpuLink link) {
  switch (link) {
    case ports::GpuLink::kNvLink:
      return core::LinkKind::kNvlink;
    case ports::GpuLink::kSameBoard:  // two GPUs of one board (K80): as close as PCIe gets
    case ports::GpuLink::kSingleSwitch:
      return core::LinkKind::kPcieSwitch;
    case ports::GpuLink::kMultipleSwitches:
      return core::LinkKind::kPcieMultiSwitch;
    case ports::GpuLink::kHostBridge:
      return core::LinkKind::kHostBridge;
    case ports::GpuLink::kNumaNode:
      return core::LinkKind::kSameNuma;
    case ports::GpuLink::kSystem:
      return core::LinkKind::kCrossSocket;
    case ports::GpuLink::kUnknown:
      break;
  }
  return core::LinkKind::kUnknown;
}

ports::GpuLink LinkFromTopologyLevel(int level) {
  switch (level) {
    case 0:
      return ports::GpuLink::kSameBoard;
    case 10:
      return ports::GpuLink::kSingleSwitch;
    case 20:
      return ports::GpuLink::kMultipleSwitches;
    case 30:
      return ports::GpuLink::kHostBridge;
    case 40:
      return ports::GpuLink::kNumaNode;
    case 50:
      return ports::GpuLink::kSystem;
    default:
      return ports::GpuLink::kUnknown;
  }
}

// PCI bus ids compare case-insensitively; NVML writes "00000000:07:00.0" but older drivers use 4-digit domains.
std::string NormalizeBusId(std::string bus_id) {
  std::transform(bus_id.begin(), bus_id.end(), bus_id.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  const size_t colon = bus_id.find(':');
  if (colon != std::string::npos && colon < 8) {
    bus_id.insert(0, 8 - colon, '0');
  }
  return bus_id;
}

}  // namespace

struct NvmlInventory::Impl {
  struct Device {
    nvmlDevice_t handle = nullptr;
    ports::GpuSample facts;  // index, uuid, name, model, pci_bus_id, numa_node, nvlink_peers
  };

  void* library = nullptr;
  std::string library_name;
  NvmlInventoryOptions options;
  Api api;
  std::vector<std::string> missing;
  std::string driver_version;
  std::string nvml_version;
  std::vector<Device> devices;
  std::vector<std::vector<ports::GpuLink>> links;  // [a][b]
  bool initialised = false;

  std::mutex mu;
  std::vector<bool> unhealthy;    // GUARDED_BY(mu) by index: a critical XID or a lost GPU
  std::vector<int64_t> last_xid;  // GUARDED_BY(mu) by index

  nvmlEventSet_t event_set = nullptr;
  std::thread event_thread;
  std::atomic<bool> stop{false};
  std::chrono::milliseconds event_wait{500};

  ~Impl() {
    stop = true;
    if (event_thread.joinable()) {
      event_thread.join();
    }
    if (event_set != nullptr && api.event_set_free != nullptr) {
      api.event_set_free(event_set);
    }
    if (initialised) {
      api.shutdown();
    }
    if (library != nullptr) {
      dlclose(library);
    }
  }

  std::string Error(nvmlReturn_t rc) const {
    const char* s = api.error_string != nullptr ? api.error_string(rc) : nullptr;
    return (s != nullptr ? std::string(s) : std::string("unknown error")) + " (" + std::to_string(rc) + ")";
  }

  void ReadFacts(Device& d, unsigned int index) {
    d.facts.index = static_cast<int32_t>(index);
    std::array<char, kUuidBuffer> uuid{};
    if (api.get_uuid != nullptr && api.get_uuid(d.handle, uuid.data(), kUuidBuffer) == kSuccess) {
      d.facts.uuid = common::GpuUuid(CString(uuid.data(), uuid.size()));
    }
    std::array<char, kNameBuffer> name{};
    if (api.get_name != nullptr && api.get_name(d.handle, name.data(), kNameBuffer) == kSuccess) {
      d.facts.name = CString(name.data(), name.size());
      d.facts.model = ModelFromName(d.facts.name);
    }
    nvmlPciInfo_t pci{};
    if (api.get_pci != nullptr && api.get_pci(d.handle, &pci) == kSuccess) {
      d.facts.pci_bus_id = CString(pci.busId, sizeof(pci.busId));
    }
    unsigned int numa = 0;
    if (api.get_numa != nullptr && api.get_numa(d.handle, &numa) == kSuccess) {
      d.facts.numa_node = static_cast<int32_t>(numa);
    } else {
      d.facts.numa_node = SysfsNumaNode(d.facts.pci_bus_id);
    }
    nvmlMemory_t memory{};
    if (api.get_memory != nullptr && api.get_memory(d.handle, &memory) == kSuccess) {
      d.facts.memory_total = BytesToMiB(memory.total);
    }
  }

  // NVLink peers by remote PCI bus id, then the pairwise links.
  void ReadTopology() {
    const size_t n = devices.size();
    links.assign(n, std::vector<ports::GpuLink>(n, ports::GpuLink::kUnknown));
    std::vector<std::vector<int32_t>> nvlinks(n, std::vector<int32_t>(n, 0));
    for (size_t i = 0; i < n; ++i) {
      if (api.get_nvlink_state == nullptr || api.get_nvlink_remote_pci == nullptr) {
        break;
      }
      for (unsigned int link = 0; link < kMaxNvLinks; ++link) {
        int active = 0;
        if (api.get_nvlink_state(devices[i].handle, link, &active) != kSuccess) {
          break;  // past the last link (or no NVLink at all)
        }
        if (active != kFeatureEnabled) {
          continue;
        }
        nvmlPciInfo_t remote{};
        if (api.get_nvlink_remote_pci(devices[i].handle, link, &remote) != kSuccess) {
          continue;
        }
        const std::string bus = NormalizeBusId(CString(remote.busId, sizeof(remote.busId)));
        for (size_t j = 0; j < n; ++j) {
          if (j != i && !devices[j].facts.pci_bus_id.empty() && NormalizeBusId(devices[j].facts.pci_bus_id) == bus) {
            auto& peers = devices[i].facts.nvlink_peers;
            const auto peer = static_cast<int32_t>(j);
            if (std::find(peers.begin(), peers.end(), peer) == peers.end()) {
              peers.push_back(peer);
            }
            links[i][j] = ports::GpuLink::kNvLink;
            ++nvlinks[i][j];
          }
        }
      }
      std::sort(devices[i].facts.nvlink_peers.begin(), devices[i].facts.nvlink_peers.end());
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) {
        if (i == j || links[i][j] == ports::GpuLink::kNvLink || api.get_common_ancestor == nullptr) {
          continue;
        }
        int level = -1;
        if (api.get_common_ancestor(devices[i].handle, devices[j].handle, &level) == kSuccess) {
          links[i][j] = LinkFromTopologyLevel(level);
        }
      }
    }
    for (size_t i = 0; i < n; ++i) {
      auto& out = devices[i].facts.links;
      out.clear();
      for (size_t j = 0; j < n; ++j) {
        const core::LinkKind kind = CoreLinkKind(links[i][j]);
        if (i != j && kind != core::LinkKind::kUnknown) {
          out.push_back(core::GpuLink{.peer = static_cast<int32_t>(j), .kind = kind, .nvlinks = nvlinks[i][j]});
        }
      }
    }
  }

  // The kernel's NUMA node of a GPU (sysfs), for when NVML does not give one.
  int32_t SysfsNumaNode(const std::string& bus_id) const {
    if (bus_id.empty()) {
      return -1;
    }
    std::string sysfs = NormalizeBusId(bus_id);  // 8-digit domain, lower case: "00000000:07:00.0"
    if (sysfs.size() > 4 && sysfs.find(':') == 8) {
      sysfs.erase(0, 4);  // the kernel's names have a 4-digit domain: "0000:07:00.0"
    }
    std::ifstream in(options.sysfs_pci_devices + "/" + sysfs + "/numa_node");
    int value = -1;
    if (in >> value && value >= 0) {
      return static_cast<int32_t>(value);
    }
    return -1;
  }

  void StartEventThread() {
    if (api.event_set_create == nullptr || api.register_events == nullptr || api.event_set_wait == nullptr) {
      return;
    }
    if (const nvmlReturn_t rc = api.event_set_create(&event_set); rc != kSuccess) {
      common::Log(common::LogLevel::kWarn, "nvml: no XID events (nvmlEventSetCreate: " + Error(rc) + ")");
      event_set = nullptr;
      return;
    }
    int registered = 0;
    for (const Device& d : devices) {
      const nvmlReturn_t rc = api.register_events(d.handle, kEventTypeXidCriticalError, event_set);
      if (rc == kSuccess) {
        ++registered;
      } else {
        common::Log(common::LogLevel::kWarn, "nvml: GPU " + std::to_string(d.facts.index) + " (" + d.facts.uuid.str() +
                                                 ") reports no XID events: " + Error(rc));
      }
    }
    if (registered == 0) {
      return;
    }
    event_thread = std::thread([this] { EventLoop(); });
  }

  void EventLoop() {
    const auto timeout = static_cast<unsigned int>(std::max<int64_t>(1, event_wait.count()));
    while (!stop) {
      nvmlEventData_t data{};
      const nvmlReturn_t rc = api.event_set_wait(event_set, &data, timeout);
      if (rc == kErrorTimeout) {
        continue;
      }
      if (rc != kSuccess) {
        common::Log(common::LogLevel::kWarn, "nvml: nvmlEventSetWait_v2: " + Error(rc));
        if (rc == kErrorGpuIsLost || rc == kErrorNotSupported) {
          return;
        }
        std::this_thread::sleep_for(event_wait);  // do not spin on a persistent error
        continue;
      }
      if ((data.eventType & kEventTypeXidCriticalError) == 0) {
        continue;
      }
      OnXid(data.device, static_cast<int64_t>(data.eventData));
    }
  }

  // An XID for a device we do not know (NVML may send a null device) marks every GPU, as NVIDIA's plugin does.
  void OnXid(nvmlDevice_t device, int64_t xid) {
    std::lock_guard lock(mu);
    bool matched = false;
    for (size_t i = 0; i < devices.size(); ++i) {
      if (device == devices[i].handle) {
        matched = true;
        last_xid[i] = xid;
        if (IsCriticalXid(xid)) {
          unhealthy[i] = true;
        }
      }
    }
    if (!matched) {
      for (size_t i = 0; i < devices.size(); ++i) {
        last_xid[i] = xid;
        if (IsCriticalXid(xid)) {
          unhealthy[i] = true;
        }
      }
    }
    common::Log(IsCriticalXid(xid) ? common::LogLevel::kError : common::LogLevel::kWarn,
                "nvml: XID " + std::to_string(xid) + (IsCriticalXid(xid) ? " (critical)" : " (application error)"));
  }

  // Fills the live values of one GPU; returns false when the GPU did not answer at all (lost, driver gone).
  bool ReadLive(const Device& d, ports::GpuSample& s) const {
    bool answered = false;
    bool lost = false;
    auto note = [&](nvmlReturn_t rc) {
      if (rc == kSuccess) {
        answered = true;
      } else if (rc == kErrorGpuIsLost) {
        lost = true;
      }
      return rc == kSuccess;
    };
    nvmlMemory_v2_t m2{};
    m2.version = StructVersion<nvmlMemory_v2_t>(2);
    nvmlMemory_t m1{};
    if (api.get_memory_v2 != nullptr && note(api.get_memory_v2(d.handle, &m2))) {
      s.memory_total = BytesToMiB(m2.total);
      s.memory_used = BytesToMiB(m2.used);
      s.memory_free = BytesToMiB(m2.free);
    } else if (api.get_memory != nullptr && note(api.get_memory(d.handle, &m1))) {
      s.memory_total = BytesToMiB(m1.total);
      s.memory_used = BytesToMiB(m1.used);
      s.memory_free = BytesToMiB(m1.free);
    }
    nvmlUtilization_t u{};
    if (api.get_utilization != nullptr && note(api.get_utilization(d.handle, &u))) {
      s.gpu_utilization = u.gpu;
      s.memory_utilization = u.memory;
    }
    nvmlTemperature_v1_t tv{};
    tv.version = StructVersion<nvmlTemperature_v1_t>(1);
    tv.sensorType = kTemperatureGpu;
    unsigned int t = 0;
    if (api.get_temperature_v != nullptr && note(api.get_temperature_v(d.handle, &tv))) {
      s.temperature_c = tv.temperature;
    } else if (api.get_temperature != nullptr && note(api.get_temperature(d.handle, kTemperatureGpu, &t))) {
      s.temperature_c = t;
    }
    unsigned int mw = 0;
    if (api.get_power != nullptr && note(api.get_power(d.handle, &mw))) {
      s.power_w = mw / 1000.0;
    }
    unsigned int mhz = 0;
    if (api.get_clock != nullptr && note(api.get_clock(d.handle, kClockSm, &mhz))) {
      s.sm_clock_mhz = mhz;
    }
    if (api.get_clock != nullptr && note(api.get_clock(d.handle, kClockMem, &mhz))) {
      s.memory_clock_mhz = mhz;
    }
    ReadProcesses(d, s);
    if (lost) {
      s.healthy = false;
    }
    return answered;
  }

  // Asks for the count first, then reads with some slack: processes come and go between the two calls.
  void ReadProcesses(const Device& d, ports::GpuSample& s) const {
    for (int attempt = 0; attempt < 3; ++attempt) {
      unsigned int count = 0;
      nvmlReturn_t rc = kSuccess;
      if (api.get_processes != nullptr) {
        rc = api.get_processes(d.handle, &count, nullptr);
      } else if (api.get_processes_v1 != nullptr) {
        rc = api.get_processes_v1(d.handle, &count, nullptr);
      } else {
        return;
      }
      if (rc == kSuccess) {
        return;  // nothing running
      }
      if (rc != kErrorInsufficientSize) {
        return;
      }
      count += 8;
      s.processes.clear();
      if (api.get_processes != nullptr) {
        std::vector<nvmlProcessInfo_t> infos(count);
        rc = api.get_processes(d.handle, &count, infos.data());
        if (rc == kSuccess) {
          for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
            s.processes.push_back({.pid = infos[i].pid, .used_memory = BytesToMiB(infos[i].usedGpuMemory)});
          }
          return;
        }
      } else {
        std::vector<nvmlProcessInfo_v1_t> infos(count);
        rc = api.get_processes_v1(d.handle, &count, infos.data());
        if (rc == kSuccess) {
          for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
            s.processes.push_back({.pid = infos[i].pid, .used_memory = BytesToMiB(infos[i].usedGpuMemory)});
          }
          return;
        }
      }
      if (rc != kErrorInsufficientSize) {
        return;
      }
    }
  }
};

NvmlInventory::NvmlInventory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NvmlInventory::~NvmlInventory() = default;

common::Result<std::unique_ptr<NvmlInventory>> NvmlInventory::Open(const std::string& library,
                                                                   NvmlInventoryOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->library_name = library;
  impl->event_wait = options.event_wait;
  impl->options = options;
  dlerror();
  impl->library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (impl->library == nullptr) {
    const char* err = dlerror();
    return common::Unavailable("NVML: cannot load " + library + ": " + (err != nullptr ? err : "unknown error") +
                               " (is the NVIDIA driver installed? use --fake-gpus on machines without a GPU)");
  }
  void* h = impl->library;
  Api& api = impl->api;
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", Resolve(h, "nvmlInit_v2", api.init)},
      {"nvmlShutdown", Resolve(h, "nvmlShutdown", api.shutdown)},
      {"nvmlErrorString", Resolve(h, "nvmlErrorString", api.error_string)},
      {"nvmlDeviceGetCount_v2", Resolve(h, "nvmlDeviceGetCount_v2", api.get_count)},
      {"nvmlDeviceGetHandleByIndex_v2", Resolve(h, "nvmlDeviceGetHandleByIndex_v2", api.get_handle)},
  };
  for (const auto& [name, found] : required) {
    if (!found) {
      return common::Unavailable("NVML: " + library + " has no symbol " + name +
                                 " (driver too old or not libnvidia-ml)");
    }
  }
  auto& missing = impl->missing;
  ResolveOptional(h, {"nvmlSystemGetDriverVersion"}, api.get_driver_version, missing);
  ResolveOptional(h, {"nvmlSystemGetNVMLVersion"}, api.get_nvml_version, missing);
  ResolveOptional(h, {"nvmlDeviceGetUUID"}, api.get_uuid, missing);
  ResolveOptional(h, {"nvmlDeviceGetName"}, api.get_name, missing);
  ResolveOptional(h, {"nvmlDeviceGetMemoryInfo"}, api.get_memory, missing);
  ResolveOptional(h, {"nvmlDeviceGetMemoryInfo_v2"}, api.get_memory_v2, missing);
  ResolveOptional(h, {"nvmlDeviceGetUtilizationRates"}, api.get_utilization, missing);
  ResolveOptional(h, {"nvmlDeviceGetTemperature"}, api.get_temperature, missing);
  ResolveOptional(h, {"nvmlDeviceGetTemperatureV"}, api.get_temperature_v, missing);
  ResolveOptional(h, {"nvmlDeviceGetPowerUsage"}, api.get_power, missing);
  ResolveOptional(h, {"nvmlDeviceGetClockInfo"}, api.get_clock, missing);
  ResolveOptional(h, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, api.get_pci, missing);
  ResolveOptional(h, {"nvmlDeviceGetNumaNodeId"}, api.get_numa, missing);
  ResolveOptional(h, {"nvmlDeviceGetNvLinkState"}, api.get_nvlink_state, missing);
  ResolveOptional(h, {"nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo"},
                  api.get_nvlink_remote_pci, missing);
  ResolveOptional(h, {"nvmlDeviceGetTopologyCommonAncestor"}, api.get_common_ancestor, missing);
  ResolveOptional(h, {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
                  api.get_processes, missing);
  if (api.get_processes == nullptr) {
    Resolve(h, "nvmlDeviceGetComputeRunningProcesses", api.get_processes_v1);
  }
  ResolveOptional(h, {"nvmlEventSetCreate"}, api.event_set_create, missing);
  ResolveOptional(h, {"nvmlEventSetFree"}, api.event_set_free, missing);
  ResolveOptional(h, {"nvmlDeviceRegisterEvents"}, api.register_events, missing);
  ResolveOptional(h, {"nvmlEventSetWait_v2", "nvmlEventSetWait"}, api.event_set_wait, missing);

  if (const nvmlReturn_t rc = api.init(); rc != kSuccess) {
    return common::Unavailable("NVML: nvmlInit_v2 failed in " + library + ": " + impl->Error(rc));
  }
  impl->initialised = true;

  std::array<char, kVersionBuffer> version{};
  if (api.get_driver_version != nullptr && api.get_driver_version(version.data(), kVersionBuffer) == kSuccess) {
    impl->driver_version = CString(version.data(), version.size());
  }
  version.fill('\0');
  if (api.get_nvml_version != nullptr && api.get_nvml_version(version.data(), kVersionBuffer) == kSuccess) {
    impl->nvml_version = CString(version.data(), version.size());
  }

  unsigned int count = 0;
  if (const nvmlReturn_t rc = api.get_count(&count); rc != kSuccess) {
    return common::Unavailable("NVML: nvmlDeviceGetCount_v2 failed: " + impl->Error(rc));
  }
  impl->devices.resize(count);
  for (unsigned int i = 0; i < count; ++i) {
    Impl::Device& d = impl->devices[i];
    if (const nvmlReturn_t rc = api.get_handle(i, &d.handle); rc != kSuccess) {
      return common::Unavailable("NVML: nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) +
                                 ") failed: " + impl->Error(rc));
    }
    impl->ReadFacts(d, i);
  }
  impl->ReadTopology();
  impl->unhealthy.assign(count, false);
  impl->last_xid.assign(count, 0);
  if (options.watch_xid_events) {
    impl->StartEventThread();
  }
  return std::unique_ptr<NvmlInventory>(new NvmlInventory(std::move(impl)));
}

common::Result<std::vector<ports::GpuSample>> NvmlInventory::Sample() {
  std::vector<ports::GpuSample> out;
  out.reserve(impl_->devices.size());
  size_t answered = 0;
  std::vector<bool> lost(impl_->devices.size(), false);
  for (size_t i = 0; i < impl_->devices.size(); ++i) {
    const Impl::Device& d = impl_->devices[i];
    ports::GpuSample s = d.facts;
    if (impl_->ReadLive(d, s)) {
      ++answered;
    }
    lost[i] = !s.healthy;
    out.push_back(std::move(s));
  }
  if (!out.empty() && answered == 0) {
    return common::Unavailable("NVML: no GPU answered (driver unloaded or every GPU lost)");
  }
  std::lock_guard lock(impl_->mu);
  for (size_t i = 0; i < out.size(); ++i) {
    if (lost[i]) {
      impl_->unhealthy[i] = true;
    }
    out[i].healthy = !impl_->unhealthy[i];
    out[i].last_xid = impl_->last_xid[i];
  }
  return out;
}

const std::string& NvmlInventory::driver_version() const { return impl_->driver_version; }

std::string NvmlInventory::Describe() const {
  return "NVML " + (impl_->nvml_version.empty() ? std::string("?") : impl_->nvml_version) + ", driver " +
         (impl_->driver_version.empty() ? std::string("?") : impl_->driver_version) + ", " +
         std::to_string(impl_->devices.size()) + " GPUs";
}

ports::GpuLink NvmlInventory::Link(int32_t a, int32_t b) const {
  const auto n = static_cast<int32_t>(impl_->devices.size());
  if (a < 0 || b < 0 || a >= n || b >= n || a == b) {
    return ports::GpuLink::kUnknown;
  }
  return impl_->links[static_cast<size_t>(a)][static_cast<size_t>(b)];
}

const std::vector<std::string>& NvmlInventory::missing_symbols() const { return impl_->missing; }

bool NvmlInventory::watching_xid_events() const { return impl_->event_thread.joinable(); }

}  // namespace gpusched::adapters::nvml
