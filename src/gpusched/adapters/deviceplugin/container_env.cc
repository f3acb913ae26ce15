#include "gpusched/adapters/deviceplugin/container_env.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

namespace gpusched::adapters::deviceplugin {

ContainerEnv BuildContainerEnv(std::span<const core::GpuShare> gpus, const MpsOptions& options) {
  std::vector<core::GpuShare> sorted(gpus.begin(), gpus.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const core::GpuShare& a, const core::GpuShare& b) { return a.index < b.index; });

  ContainerEnv out;
  std::string visible;
  std::string mem_limit;
  int64_t min_milli = std::numeric_limits<int64_t>::max();
  bool shared = false;
  for (size_t ordinal = 0; ordinal < sorted.size(); ++ordinal) {
    const core::GpuShare& g = sorted[ordinal];
    if (!visible.empty()) {
      visible += ",";
    }
    visible += g.uuid.str();
    if (g.exclusive) {
      continue;
    }
    shared = true;
    if (g.milli.value() > 0) {
      min_milli = std::min(min_milli, g.milli.value());
    }
    if (g.memory.value() > 0) {
      if (!mem_limit.empty()) {
        mem_limit += ",";
      }
      mem_limit += std::to_string(ordinal) + "=" + std::to_string(g.memory.value()) + "M";
    }
  }
  out.envs[std::string(kEnvVisibleDevices)] = visible;
  std::set<int32_t> numa;
  for (const core::GpuShare& g : sorted) {
    if (g.numa_node >= 0) {
      numa.insert(g.numa_node);
    }
  }
  if (!numa.empty()) {
    std::string nodes;
    for (int32_t n : numa) {
      nodes += (nodes.empty() ? "" : ",") + std::to_string(n);
    }
    out.envs[std::string(kEnvNumaNodes)] = nodes;
  }
  if (!shared || !options.enabled) {
    return out;
  }
  if (min_milli != std::numeric_limits<int64_t>::max()) {
    out.envs[std::string(kEnvMpsThreadPercentage)] = std::to_string(std::max<int64_t>(1, min_milli / 10));
  }
  if (!mem_limit.empty()) {
    out.envs[std::string(kEnvMpsMemLimit)] = mem_limit;
    out.envs[std::string(kEnvCudaDeviceOrder)] = "PCI_BUS_ID";
  }
  out.envs[std::string(kEnvMpsPipeDirectory)] = options.pipe_container_dir;
  out.mounts.push_back(MountSpec{.container_path = options.pipe_container_dir,
                                 .host_path = options.pipe_host_dir,
                                 .read_only = options.pipe_read_only});
  if (!options.shm_host_dir.empty()) {
    out.mounts.push_back(
        MountSpec{.container_path = options.shm_container_dir, .host_path = options.shm_host_dir, .read_only = false});
  }
  return out;
}

common::Result<DeviceListStrategy> ParseDeviceListStrategy(std::string_view name) {
  for (auto s : {DeviceListStrategy::kEnvvar, DeviceListStrategy::kVolumeMounts, DeviceListStrategy::kCdiAnnotations,
                 DeviceListStrategy::kCdiCri}) {
    if (name == DeviceListStrategyName(s)) {
      return s;
    }
  }
  return common::InvalidArgument("unknown device-list strategy \"" + std::string(name) +
                                 "\" (choose envvar, volume-mounts, cdi-annotations or cdi-cri)");
}

const char* DeviceListStrategyName(DeviceListStrategy strategy) {
  switch (strategy) {
    case DeviceListStrategy::kEnvvar:
      return "envvar";
    case DeviceListStrategy::kVolumeMounts:
      return "volume-mounts";
    case DeviceListStrategy::kCdiAnnotations:
      return "cdi-annotations";
    case DeviceListStrategy::kCdiCri:
      return "cdi-cri";
  }
  return "?";
}

std::string CdiAnnotationKey(std::string_view resource) {
  std::string name(resource);
  std::replace(name.begin(), name.end(), '/', '-');
  std::replace(name.begin(), name.end(), '.', '-');
  return "cdi.k8s.io/gpusched_" + name;
}

void ApplyDeviceList(ContainerEnv& env, std::span<const core::GpuShare> gpus, std::string_view resource,
                     const DeviceListOptions& options) {
  std::vector<core::GpuShare> sorted(gpus.begin(), gpus.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const core::GpuShare& a, const core::GpuShare& b) { return a.index < b.index; });
  const std::string visible(kEnvVisibleDevices);
  switch (options.strategy) {
    case DeviceListStrategy::kEnvvar:
      return;  // BuildContainerEnv's NVIDIA_VISIBLE_DEVICES
    case DeviceListStrategy::kVolumeMounts:
      env.envs[visible] = std::string(kVolumeMountsRoot);
      for (const core::GpuShare& g : sorted) {
        env.mounts.push_back(MountSpec{.container_path = std::string(kVolumeMountsRoot) + "/" + g.uuid.str(),
                                       .host_path = "/dev/null",
                                       .read_only = true});
      }
      return;
    case DeviceListStrategy::kCdiAnnotations:
    case DeviceListStrategy::kCdiCri: {
      env.envs[visible] = "void";
      std::string joined;
      for (const core::GpuShare& g : sorted) {
        std::string name = options.cdi_kind + "=" + g.uuid.str();
        joined += (joined.empty() ? "" : ",") + name;
        if (options.strategy == DeviceListStrategy::kCdiCri) {
          env.cdi_devices.push_back(std::move(name));
        }
      }
      if (options.strategy == DeviceListStrategy::kCdiAnnotations) {
        env.annotations[CdiAnnotationKey(resource)] = joined;
      }
      return;
    }
  }
}

}  // namespace gpusched::adapters::deviceplugin
