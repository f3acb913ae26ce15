#include "gpusched/adapters/deviceplugin/device_ids.h"

#include <string>

namespace gpusched::adapters::deviceplugin {
namespace {

size_t Digits(int value) {
  size_t n = 1;
  while (value >= 10) {
    value /= 10;
    ++n;
  }
  return n;
}

}  // namespace

std::string GpuKey(const ports::GpuSample& gpu, int replicas) {
  const std::string& uuid = gpu.uuid.str();
  const size_t suffix = replicas > 1 ? kReplicaSeparator.size() + Digits(replicas - 1) : 0;
  if (!uuid.empty() && uuid.size() + suffix <= kMaxDeviceIdLength &&
      uuid.find(kReplicaSeparator) == std::string::npos) {
    return uuid;
  }
  return "gpu" + std::to_string(gpu.index);
}

std::vector<std::string> DeviceIdsFor(const ports::GpuSample& gpu, int replicas) {
  const std::string key = GpuKey(gpu, replicas);
  if (replicas <= 1) {
    return {key};
  }
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(replicas));
  for (int k = 0; k < replicas; ++k) {
    ids.push_back(key + std::string(kReplicaSeparator) + std::to_string(k));
  }
  return ids;
}

std::string_view GpuKeyOf(std::string_view device_id) {
  const size_t at = device_id.rfind(kReplicaSeparator);
  return at == std::string_view::npos ? device_id : device_id.substr(0, at);
}

}  // namespace gpusched::adapters::deviceplugin
