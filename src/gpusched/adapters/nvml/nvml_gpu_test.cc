// NvmlInventory against the real libnvidia-ml.so.1 (ctest label `gpu`: `ctest -L gpu`). Skipped, with the reason,
// on machines where the library cannot be loaded or NVML cannot start (no NVIDIA driver, no GPU).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "gpusched/adapters/nvml/nvml_inventory.h"

namespace gpusched::adapters::nvml {
namespace {

TEST(NvmlGpuTest, ReadsTheRealGpus) {
  auto inv = NvmlInventory::Open("libnvidia-ml.so.1", {.event_wait = std::chrono::milliseconds(100)});
  if (!inv.ok()) {
    GTEST_SKIP() << "no usable NVML on this machine: " << inv.status();
  }
  std::printf("%s; missing optional symbols: %zu; XID events: %s\n", (*inv)->Describe().c_str(),
              (*inv)->missing_symbols().size(), (*inv)->watching_xid_events() ? "yes" : "no");
  auto samples = (*inv)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status();
  if (samples->empty()) {
    GTEST_SKIP() << "NVML started but sees no GPU: " << (*inv)->Describe();
  }
  for (const auto& s : *samples) {
    SCOPED_TRACE(s.index);
    std::printf(
        "GPU %d %s %s bus %s numa %d: %lld/%lld MiB used, util %.0f%%/%.0f%%, %.0f C, %.1f W, SM %lld MHz, "
        "mem %lld MHz, %zu NVLink peers, %zu links, %zu processes, healthy %d\n",
        s.index, s.uuid.str().c_str(), s.name.c_str(), s.pci_bus_id.c_str(), s.numa_node,
        static_cast<long long>(s.memory_used.value()), static_cast<long long>(s.memory_total.value()),
        s.gpu_utilization, s.memory_utilization, s.temperature_c, s.power_w, static_cast<long long>(s.sm_clock_mhz),
        static_cast<long long>(s.memory_clock_mhz), s.nvlink_peers.size(), s.links.size(), s.processes.size(),
        s.healthy ? 1 : 0);
    EXPECT_EQ(s.uuid.str().rfind("GPU-", 0), 0u);
    EXPECT_FALSE(s.name.empty());
    EXPECT_FALSE(s.pci_bus_id.empty());
    EXPECT_GT(s.memory_total.value(), 1024);
    EXPECT_GE(s.memory_used.value(), 0);
    EXPECT_LE(s.memory_used.value(), s.memory_total.value());
    EXPECT_GE(s.memory_free.value(), 0);
    if (s.gpu_utilization != -1) {
      EXPECT_GE(s.gpu_utilization, 0);
      EXPECT_LE(s.gpu_utilization, 100);
    }
    if (s.power_w != -1) {
      EXPECT_GT(s.power_w, 1);     // watts, not milliwatts ...
      EXPECT_LT(s.power_w, 2000);  // ... and not kilowatts
    }
    if (s.temperature_c != -1) {
      EXPECT_GT(s.temperature_c, 0);
      EXPECT_LT(s.temperature_c, 120);
    }
    EXPECT_TRUE(s.healthy);
  }
}

}  // namespace
}  // namespace gpusched::adapters::nvml
