// NvmlInventory against fake_nvml_library.cc (a stand-in libnvidia-ml.so with documented answers; see its header
// comment for the machine it describes), and against libraries that are missing or are not NVML.
#include "gpusched/adapters/nvml/nvml_inventory.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <filesystem>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace gpusched::adapters::nvml {
namespace {

using common::StatusCode;
using ports::GpuLink;
using ::testing::Contains;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kDeadline{10000};

bool WaitFor(const std::function<bool()>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The fake library's test controls, reached through our own dlopen of the same file (the loader hands
// NvmlInventory the same handle, so both see one set of globals).
class FakeNvml {
 public:
  explicit FakeNvml(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ != nullptr) {
      set_init_ = reinterpret_cast<void (*)(int)>(dlsym(handle_, "fakeNvmlSetInitResult"));
      inject_xid_ = reinterpret_cast<void (*)(int, unsigned long long)>(dlsym(handle_, "fakeNvmlInjectXid"));
      set_lost_ = reinterpret_cast<void (*)(unsigned, int)>(dlsym(handle_, "fakeNvmlSetLost"));
    }
  }
  ~FakeNvml() {
    if (handle_ != nullptr) {
      set_init_(0);
      for (unsigned i = 0; i < 4; ++i) {
        set_lost_(i, 0);
      }
      dlclose(handle_);
    }
  }
  bool ok() const { return handle_ != nullptr && set_init_ && inject_xid_ && set_lost_; }
  void SetInitResult(int rc) { set_init_(rc); }
  void InjectXid(int index, unsigned long long xid) { inject_xid_(index, xid); }
  void SetLost(unsigned index, bool lost) { set_lost_(index, lost ? 1 : 0); }

 private:
  void* handle_;
  void (*set_init_)(int) = nullptr;
  void (*inject_xid_)(int, unsigned long long) = nullptr;
  void (*set_lost_)(unsigned, int) = nullptr;
};

TEST(NvmlInventoryTest, MissingLibraryIsAClearError) {
  auto inv = NvmlInventory::Open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("cannot load /nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(inv.status().message(), HasSubstr("--fake-gpus"));
}

TEST(NvmlInventoryTest, LibraryThatIsNotNvml) {
  auto inv = NvmlInventory::Open("libc.so.6");
  ASSERT_FALSE(inv.ok());
  EXPECT_THAT(inv.status().message(), HasSubstr("libc.so.6 has no symbol nvmlInit_v2"));
}

TEST(NvmlInventoryTest, InitFailureCarriesNvmlErrorString) {
  FakeNvml fake(GPUSCHED_FAKE_NVML_LIB);
  ASSERT_TRUE(fake.ok()) << dlerror();
  fake.SetInitResult(9);
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_LIB);
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(inv.status().message(), HasSubstr("nvmlInit_v2 failed"));
  EXPECT_THAT(inv.status().message(), HasSubstr("Driver Not Loaded (9)"));
  EXPECT_THAT(inv.status().message(), HasSubstr(GPUSCHED_FAKE_NVML_LIB));
}

TEST(NvmlInventoryTest, ReadsEveryValueWithUnitsConverted) {
  FakeNvml fake(GPUSCHED_FAKE_NVML_LIB);
  ASSERT_TRUE(fake.ok());
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_LIB, {.watch_xid_events = false});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ((*inv)->Describe(), "NVML 12.550.54.15, driver 550.54.15, 4 GPUs");
  EXPECT_TRUE((*inv)->missing_symbols().empty());
  auto samples = (*inv)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  ASSERT_EQ(samples->size(), 4u);
  for (int32_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const auto& s = (*samples)[static_cast<size_t>(i)];
    EXPECT_EQ(s.index, i);
    EXPECT_EQ(s.uuid.str(), "GPU-00000000-0000-0000-0000-00000000000" + std::to_string(i));
    EXPECT_EQ(s.name, "NVIDIA A100-SXM4-80GB");
    EXPECT_EQ(s.model, "A100-SXM4-80GB");
    EXPECT_EQ(s.pci_bus_id, "00000000:0" + std::to_string(i + 1) + ":00.0");
    EXPECT_EQ(s.numa_node, i / 2);
    // memory_v2 in bytes: total 80 GiB = 81920 MiB, used (i+1) GiB, reserved 512 MiB: free = 81920 - 1024(i+1) - 512
    EXPECT_EQ(s.memory_total.value(), 81920);
    EXPECT_EQ(s.memory_used.value(), 1024 * (i + 1));
    EXPECT_EQ(s.memory_free.value(), 81920 - 1024 * (i + 1) - 512);
    EXPECT_EQ(s.gpu_utilization, 10 * (i + 1));
    EXPECT_EQ(s.memory_utilization, 5 * (i + 1));
    EXPECT_EQ(s.temperature_c, 30 + i);
    EXPECT_EQ(s.power_w, 100 + i);  // (100000 + 1000 i) mW
    EXPECT_EQ(s.sm_clock_mhz, 1410);
    EXPECT_EQ(s.memory_clock_mhz, 1593);
    EXPECT_EQ(s.nvlink_peers, (std::vector<int32_t>{i ^ 1}));
    // Links: two active NVLinks to the pair partner, the PCIe level to the others (the fake's level 50: SYS).
    ASSERT_EQ(s.links.size(), 3u);
    for (const core::GpuLink& l : s.links) {
      if (l.peer == (i ^ 1)) {
        EXPECT_EQ(l.kind, core::LinkKind::kNvlink);
        EXPECT_EQ(l.nvlinks, 2);
      } else {
        EXPECT_EQ(l.kind, core::LinkKind::kCrossSocket);
        EXPECT_EQ(l.nvlinks, 0);
      }
    }
    EXPECT_TRUE(s.healthy);
  }
  ASSERT_EQ((*samples)[0].processes.size(), 1u);
  EXPECT_EQ((*samples)[0].processes[0].pid, 4242u);
  EXPECT_EQ((*samples)[0].processes[0].used_memory.value(), 512);
  EXPECT_TRUE((*samples)[1].processes.empty());

  EXPECT_EQ((*inv)->Link(0, 1), GpuLink::kNvLink);
  EXPECT_EQ((*inv)->Link(3, 2), GpuLink::kNvLink);
  EXPECT_EQ((*inv)->Link(0, 2), GpuLink::kSystem);
  EXPECT_EQ((*inv)->Link(0, 0), GpuLink::kUnknown);
  EXPECT_EQ((*inv)->Link(0, 9), GpuLink::kUnknown);
}

TEST(NvmlInventoryTest, OldDriverWithoutOptionalSymbols) {
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_OLD_LIB, {.sysfs_pci_devices = "/nonexistent-sysfs"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  const auto& missing = (*inv)->missing_symbols();
  EXPECT_THAT(missing, Contains("nvmlDeviceGetNumaNodeId"));
  EXPECT_THAT(missing, Contains("nvmlDeviceGetMemoryInfo_v2"));
  EXPECT_THAT(missing, Contains("nvmlDeviceGetTemperatureV"));
  EXPECT_THAT(missing, Contains("nvmlDeviceGetComputeRunningProcesses_v3"));
  EXPECT_THAT(missing, Contains("nvmlEventSetCreate"));
  EXPECT_FALSE((*inv)->watching_xid_events());
  auto samples = (*inv)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  const auto& s = (*samples)[2];
  EXPECT_EQ(s.numa_node, -1);                             // unknown (and no sysfs entry here), not an error
  EXPECT_TRUE(s.nvlink_peers.empty());                    // no NVLink symbols
  EXPECT_EQ(s.memory_free.value(), 81920 - 3072);         // v1: used includes reserved
  EXPECT_EQ(s.temperature_c, 32);                         // the deprecated call
  EXPECT_EQ((*inv)->Link(0, 1), GpuLink::kSingleSwitch);  // PCIe only: topology level 10
  EXPECT_EQ((*inv)->Link(2, 3), GpuLink::kNumaNode);      // level 40
  ASSERT_EQ(s.links.size(), 3u);                          // GPU 2: 3 over NODE, 0 and 1 over SYS
  EXPECT_EQ(s.links[2].peer, 3);
  EXPECT_EQ(s.links[2].kind, core::LinkKind::kSameNuma);
  EXPECT_EQ((*samples)[0].links[0].kind, core::LinkKind::kPcieSwitch);  // 0-1: one switch (level 10)
}

// A driver without nvmlDeviceGetNumaNodeId: the kernel's NUMA node from sysfs, found by the PCI bus id with the
// kernel's 4-digit domain.
TEST(NvmlInventoryTest, NumaNodeFromSysfsWhenNvmlHasNone) {
  const std::string root = ::testing::TempDir() + "gpusched-sysfs-pci";
  std::filesystem::remove_all(root);
  for (int i = 0; i < 4; ++i) {
    const std::string dir = root + "/0000:0" + std::to_string(i + 1) + ":00.0";
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/numa_node") << (i == 3 ? "-1\n" : std::to_string(i % 2) + "\n");
  }
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_OLD_LIB, {.watch_xid_events = false, .sysfs_pci_devices = root});
  ASSERT_TRUE(inv.ok()) << inv.status();
  auto samples = (*inv)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ((*samples)[0].numa_node, 0);
  EXPECT_EQ((*samples)[1].numa_node, 1);
  EXPECT_EQ((*samples)[2].numa_node, 0);
  EXPECT_EQ((*samples)[3].numa_node, -1);  // the kernel does not know either
  std::filesystem::remove_all(root);
}

TEST(NvmlInventoryTest, XidEventsSetHealth) {
  FakeNvml fake(GPUSCHED_FAKE_NVML_LIB);
  ASSERT_TRUE(fake.ok());
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_LIB, {.event_wait = std::chrono::milliseconds(20)});
  ASSERT_TRUE(inv.ok()) << inv.status();
  ASSERT_TRUE((*inv)->watching_xid_events());
  auto sample = [&] { return *(*inv)->Sample(); };

  fake.InjectXid(1, 13);  // application error: recorded, GPU stays healthy
  ASSERT_TRUE(WaitFor([&] { return sample()[1].last_xid == 13; }));
  EXPECT_TRUE(sample()[1].healthy);

  fake.InjectXid(2, 79);  // fell off the bus: unhealthy
  ASSERT_TRUE(WaitFor([&] { return !sample()[2].healthy; }));
  EXPECT_EQ(sample()[2].last_xid, 79);
  EXPECT_TRUE(sample()[0].healthy);
  EXPECT_TRUE(sample()[3].healthy);

  fake.InjectXid(-1, 48);  // an event without a device: every GPU
  ASSERT_TRUE(WaitFor([&] {
    const auto s = sample();
    return !s[0].healthy && !s[1].healthy && !s[3].healthy;
  }));
}

TEST(NvmlInventoryTest, LostGpuIsUnhealthyAndAllLostIsAnError) {
  FakeNvml fake(GPUSCHED_FAKE_NVML_LIB);
  ASSERT_TRUE(fake.ok());
  auto inv = NvmlInventory::Open(GPUSCHED_FAKE_NVML_LIB, {.watch_xid_events = false});
  ASSERT_TRUE(inv.ok()) << inv.status();
  fake.SetLost(3, true);
  auto s = (*inv)->Sample();
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)[3].healthy);
  EXPECT_EQ((*s)[3].gpu_utilization, -1);  // unknown
  EXPECT_EQ((*s)[3].memory_used.value(), -1);
  EXPECT_TRUE((*s)[2].healthy);
  for (unsigned i = 0; i < 4; ++i) {
    fake.SetLost(i, true);
  }
  auto all = (*inv)->Sample();
  ASSERT_FALSE(all.ok());
  EXPECT_THAT(all.status().message(), HasSubstr("no GPU answered"));
}

}  // namespace
}  // namespace gpusched::adapters::nvml
