#include "gpusched/core/gpu_request.h"

#include <algorithm>

namespace gpusched::core {
namespace {
bool ModelIn(const std::vector<std::string>& models, std::string_view model) {
  return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
}
}  // namespace

bool GpuRequest::AllowsModel(std::string_view model) const { return ModelIn(models, model); }

common::MiB GpuRequest::MemoryOn(const Gpu& gpu) const {
  if (memory_percent > 0) {
    return common::MiB{(gpu.memory.value() * memory_percent + 99) / 100};
  }
  return memory_per_gpu;
}

bool PodShape::AllowsModel(std::string_view model) const { return models == nullptr || ModelIn(*models, model); }

int32_t PodRequest::GpuCount() const {
  int32_t n = 0;
  for (const auto& c : containers) {
    n += c.count;
  }
  return n;
}

common::MilliGpu PodRequest::TotalGpuMilli() const {
  common::MilliGpu total{0};
  for (const auto& c : containers) {
    total += c.milli_per_gpu * c.count;
  }
  return total;
}

PodShape ShapeOf(const PodRequest& pod) {
  PodShape s{.cpu = pod.cpu};
  for (const auto& c : pod.containers) {
    s.gpu_count += c.count;
    s.gpu_milli = std::max(s.gpu_milli, c.milli_per_gpu);
    if (!c.models.empty()) {
      s.models = &c.models;
    }
  }
  if (s.gpu_count > 1 || (s.gpu_count == 1 && pod.containers.front().exclusive)) {
    s.gpu_milli = common::kGpuMilli;  // whole GPUs
  }
  return s;
}

}  // namespace gpusched::core
