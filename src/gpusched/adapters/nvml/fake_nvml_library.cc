// A stand-in libnvidia-ml.so for nvml_inventory_test: exports NVML's versioned C symbols with fixed, documented
// answers, so NvmlInventory's dlopen path (symbol resolution, units, NVLink matching, processes, XID events) is
// tested on machines without a GPU. Built twice: the full library, and with GPUSCHED_FAKE_NVML_OLD an "old
// driver" that lacks every optional symbol the inventory can do without.
//
// The machine: 4 GPUs "NVIDIA A100-SXM4-80GB", UUID GPU-00000000-0000-0000-0000-00000000000<i>, bus id
// 00000000:0<i+1>:00.0, NUMA node i/2. GPUs 0-1 and 2-3 are joined by two NVLinks each; 0-1 share a PCIe switch
// (level 10), other pairs have NUMA node (40) or system (50) as common ancestor. GPU i: 80 GiB total,
// (i+1) GiB used, utilisation 10(i+1) % / 5(i+1) %, 30+i degrees C, 100000+1000i mW, SM 1410 MHz, memory
// 1593 MHz; GPU 0 runs pid 4242 with 512 MiB.
//
// Test controls (not NVML): fakeNvmlSetInitResult, fakeNvmlInjectXid, fakeNvmlSetLost.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>

namespace {

constexpr unsigned kCount = 4;
constexpr unsigned long long kGiB = 1024ULL * 1024ULL * 1024ULL;

struct Dev {
  unsigned index;
};
Dev g_devs[kCount] = {{0}, {1}, {2}, {3}};

struct Event {
  Dev* dev;
  unsigned long long xid;
};

std::mutex g_mu;
std::condition_variable g_cv;
std::deque<Event> g_events;
int g_init_result = 0;
bool g_lost[kCount] = {};
int g_event_sets = 0;

int Index(void* dev, unsigned* out) {
  for (unsigned i = 0; i < kCount; ++i) {
    if (dev == &g_devs[i]) {
      *out = i;
      std::lock_guard lock(g_mu);
      return g_lost[i] ? 15 : 0;
    }
  }
  return 2;  // INVALID_ARGUMENT
}

struct PciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

void FillPci(unsigned i, PciInfo* pci) {
  std::memset(pci, 0, sizeof(*pci));
  pci->bus = i + 1;
  std::snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", i + 1);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", i + 1);
}

}  // namespace

extern "C" {

// ---- test controls ----
void fakeNvmlSetInitResult(int rc) { g_init_result = rc; }
void fakeNvmlInjectXid(int index, unsigned long long xid) {
  std::lock_guard lock(g_mu);
  g_events.push_back({index < 0 ? nullptr : &g_devs[index], xid});
  g_cv.notify_all();
}
void fakeNvmlSetLost(unsigned index, int lost) {
  std::lock_guard lock(g_mu);
  g_lost[index] = lost != 0;
}

// ---- required ----
int nvmlInit_v2() { return g_init_result; }
int nvmlShutdown() { return 0; }
const char* nvmlErrorString(int rc) {
  switch (rc) {
    case 0:
      return "Success";
    case 3:
      return "Not Supported";
    case 9:
      return "Driver Not Loaded";
    case 10:
      return "Timeout";
    case 15:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = kCount;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** dev) {
  if (index >= kCount) {
    return 2;
  }
  *dev = &g_devs[index];
  return 0;
}

// ---- optional, present in both variants ----
int nvmlSystemGetDriverVersion(char* v, unsigned n) {
  std::snprintf(v, n, "550.54.15");
  return 0;
}
int nvmlSystemGetNVMLVersion(char* v, unsigned n) {
  std::snprintf(v, n, "12.550.54.15");
  return 0;
}
int nvmlDeviceGetUUID(void* dev, char* out, unsigned n) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  std::snprintf(out, n, "GPU-00000000-0000-0000-0000-00000000000%u", i);
  return 0;
}
int nvmlDeviceGetName(void* dev, char* out, unsigned n) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  std::snprintf(out, n, "NVIDIA A100-SXM4-80GB");
  return 0;
}
int nvmlDeviceGetPciInfo_v3(void* dev, PciInfo* pci) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  FillPci(i, pci);
  return 0;
}
struct Memory {
  unsigned long long total, free, used;
};
int nvmlDeviceGetMemoryInfo(void* dev, Memory* m) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  m->total = 80 * kGiB;
  m->used = (i + 1) * kGiB;
  m->free = m->total - m->used;
  return 0;
}
struct Utilization {
  unsigned gpu, memory;
};
int nvmlDeviceGetUtilizationRates(void* dev, Utilization* u) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  u->gpu = 10 * (i + 1);
  u->memory = 5 * (i + 1);
  return 0;
}
int nvmlDeviceGetTemperature(void* dev, int sensor, unsigned* t) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  if (sensor != 0) {
    return 2;
  }
  *t = 30 + i;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* dev, unsigned* mw) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  *mw = 100000 + 1000 * i;
  return 0;
}
int nvmlDeviceGetClockInfo(void* dev, int type, unsigned* mhz) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  if (type == 1) {
    *mhz = 1410;
  } else if (type == 2) {
    *mhz = 1593;
  } else {
    return 2;
  }
  return 0;
}
int nvmlDeviceGetTopologyCommonAncestor(void* a, void* b, int* level) {
  unsigned i = 0;
  unsigned j = 0;
  if (Index(a, &i) != 0 || Index(b, &j) != 0) {
    return 2;
  }
  if (i / 2 == j / 2) {
    *level = (i / 2 == 0) ? 10 : 40;
  } else {
    *level = 50;
  }
  return 0;
}

#ifndef GPUSCHED_FAKE_NVML_OLD
// ---- optional, only in the full variant ----
struct MemoryV2 {
  unsigned version;
  unsigned long long total, reserved, free, used;
};
int nvmlDeviceGetMemoryInfo_v2(void* dev, MemoryV2* m) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  if (m->version != (static_cast<unsigned>(sizeof(MemoryV2)) | (2U << 24U))) {
    return 2;
  }
  m->total = 80 * kGiB;
  m->reserved = kGiB / 2;
  m->used = (i + 1) * kGiB;
  m->free = m->total - m->used - m->reserved;
  return 0;
}
int nvmlDeviceGetNumaNodeId(void* dev, unsigned* node) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  *node = i / 2;
  return 0;
}
int nvmlDeviceGetNvLinkState(void* dev, unsigned link, int* active) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  if (link >= 4) {
    return 2;  // INVALID_ARGUMENT past the last link
  }
  *active = link < 2 ? 1 : 0;  // links 2, 3 exist but are down
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* dev, unsigned link, PciInfo* pci) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  if (link >= 2) {
    return 2;
  }
  FillPci(i ^ 1U, pci);  // 0<->1, 2<->3
  // Lower-case hex and a 4-digit domain, as some drivers write it: the inventory must still match.
  std::snprintf(pci->busId, sizeof(pci->busId), "0000:%02x:00.0", (i ^ 1U) + 1);
  return 0;
}
struct ProcessInfo {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
};
int nvmlDeviceGetComputeRunningProcesses_v3(void* dev, unsigned* count, ProcessInfo* infos) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  const unsigned n = i == 0 ? 1 : 0;
  if (*count < n) {
    *count = n;
    return 7;  // INSUFFICIENT_SIZE
  }
  *count = n;
  if (n == 1) {
    infos[0] = {4242, 512ULL * 1024 * 1024, 0xFFFFFFFFU, 0xFFFFFFFFU};
  }
  return 0;
}
struct Temperature {
  unsigned version;
  int sensorType;
  int temperature;
};
int nvmlDeviceGetTemperatureV(void* dev, Temperature* t) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  t->temperature = 30 + static_cast<int>(i);
  return 0;
}
int nvmlEventSetCreate(void** set) {
  std::lock_guard lock(g_mu);
  ++g_event_sets;
  *set = &g_event_sets;
  return 0;
}
int nvmlEventSetFree(void*) { return 0; }
int nvmlDeviceRegisterEvents(void* dev, unsigned long long types, void*) {
  unsigned i = 0;
  if (int rc = Index(dev, &i); rc != 0) {
    return rc;
  }
  return (types & 0x8ULL) != 0 ? 0 : 3;
}
struct EventData {
  void* device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};
int nvmlEventSetWait_v2(void*, EventData* data, unsigned timeout_ms) {
  std::unique_lock lock(g_mu);
  if (!g_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [] { return !g_events.empty(); })) {
    return 10;  // TIMEOUT
  }
  const Event e = g_events.front();
  g_events.pop_front();
  data->device = e.dev;
  data->eventType = 0x8ULL;
  data->eventData = e.xid;
  data->gpuInstanceId = 0xFFFFFFFFU;
  data->computeInstanceId = 0xFFFFFFFFU;
  return 0;
}
#endif  // GPUSCHED_FAKE_NVML_OLD

}  // extern "C"
