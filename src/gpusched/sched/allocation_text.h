#pragma once

// How an allocation's GPUs read in an Event or a log line: "GPUs 0,1" (whole GPUs), "GPU 2 (30%)" (a share),
// "" (no GPU). The scheduler's Scheduled event and the extender's GPUsAssigned event say it the same way.

#include <cstdint>
#include <string>

#include "gpusched/common/units.h"
#include "gpusched/core/allocation.h"

namespace gpusched::sched {

[[nodiscard]] inline std::string DescribeGpus(const core::Allocation& allocation) {
  std::string gpus;
  int32_t count = 0;
  for (const core::ContainerAllocation& c : allocation.containers) {
    for (const core::GpuShare& g : c.gpus) {
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g.index);
      if (!g.exclusive && g.milli < common::kGpuMilli) {
        gpus += " (" + std::to_string(g.milli.value() / 10) + "%)";
      }
      ++count;
    }
  }
  if (count == 0) {
    return "";
  }
  return (count == 1 ? "GPU " : "GPUs ") + gpus;
}

}  // namespace gpusched::sched
