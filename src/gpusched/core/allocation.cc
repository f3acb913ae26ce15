#include "gpusched/core/allocation.h"

namespace gpusched::core {

int32_t Allocation::GpuCount() const {
  int32_t n = 0;
  for (const auto& c : containers) {
    n += static_cast<int32_t>(c.gpus.size());
  }
  return n;
}

common::MilliGpu Allocation::TotalMilli() const {
  common::MilliGpu total{0};
  for (const auto& c : containers) {
    for (const auto& g : c.gpus) {
      total += g.milli;
    }
  }
  return total;
}

int32_t Allocation::ShapeTag() const {
  const int32_t n = GpuCount();
  if (n == 0) {
    return -1;
  }
  if (n == 1 && TotalMilli() < common::kGpuMilli) {
    return 0;
  }
  return n;
}

}  // namespace gpusched::core
