#pragma once

// Which XID errors mean the GPU itself is broken. NVML reports every XID as nvmlEventTypeXidCriticalError; like
// NVIDIA's k8s-device-plugin we treat the ones caused by an application (a bad kernel, a page fault in user code, a
// preempted or killed context) as harmless for the device: the GPU stays healthy and only the XID is recorded.

#include <cstdint>
#include <string>
#include <string_view>

#include "gpusched/core/gpu_model.h"

namespace gpusched::adapters::nvml {

// 13 graphics engine exception, 31 GPU memory page fault, 43 GPU stopped processing, 45 preemptive cleanup,
// 68 video processor exception, 109 context switch timeout: all raised by user code, not by failing hardware.
[[nodiscard]] constexpr bool IsApplicationXid(int64_t xid) {
  return xid == 13 || xid == 31 || xid == 43 || xid == 45 || xid == 68 || xid == 109;
}

// True when an XID should make the GPU unhealthy.
[[nodiscard]] constexpr bool IsCriticalXid(int64_t xid) { return xid != 0 && !IsApplicationXid(xid); }

// gpusched's model name from NVML's product name (core::GpuModelName: "NVIDIA A100-SXM4-80GB" -> "A100-SXM4-80GB").
[[nodiscard]] inline std::string ModelFromName(std::string_view name) { return core::GpuModelName(name); }

}  // namespace gpusched::adapters::nvml
