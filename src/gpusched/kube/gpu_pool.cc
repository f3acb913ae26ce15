#include "gpusched/kube/gpu_pool.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

namespace gpusched::kube {
namespace {

using core::dra::AttributeValue;
using core::dra::Quantity;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kMinSharedMemoryMiB = 256;

std::string Qualified(std::string_view id) { return std::string(kGpuDriverName) + "/" + std::string(id); }

// Attribute strings are at most 64 characters in the API.
std::string Clamp(std::string s) {
  if (s.size() > 64) {
    s.resize(64);
  }
  return s;
}

// The groups of GPUs joined by NVLink or NVSwitch: index -> smallest index of its connected component.
std::map<int32_t, int32_t> LinkGroups(std::span<const PoolGpu> gpus) {
  std::map<int32_t, int32_t> parent;
  for (const auto& g : gpus) {
    parent[g.gpu.index] = g.gpu.index;
  }
  auto find = [&parent](int32_t x) {
    while (parent[x] != x) {
      parent[x] = parent[parent[x]];
      x = parent[x];
    }
    return x;
  };
  auto join = [&](int32_t a, int32_t b) {
    if (!parent.contains(a) || !parent.contains(b)) {
      return;  // a peer that is not in the inventory
    }
    const int32_t ra = find(a);
    const int32_t rb = find(b);
    parent[std::max(ra, rb)] = std::min(ra, rb);
  };
  for (const auto& g : gpus) {
    for (const int32_t peer : g.gpu.nvlink_peers) {
      join(g.gpu.index, peer);
    }
    for (const auto& link : g.gpu.links) {
      if (link.kind == core::LinkKind::kNvlink || link.kind == core::LinkKind::kNvSwitch) {
        join(g.gpu.index, link.peer);
      }
    }
  }
  std::map<int32_t, int32_t> out;
  for (const auto& [index, unused] : parent) {
    out[index] = find(index);
  }
  return out;
}

}  // namespace

std::string GpuDeviceName(int32_t index) { return "gpu-" + std::to_string(index); }

std::optional<std::string> NormaliseVersion(std::string_view version) {
  std::vector<std::string> numbers;
  size_t start = 0;
  for (;;) {
    const size_t dot = version.find('.', start);
    const std::string_view part =
        version.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return std::nullopt;
    }
    const size_t first = std::min(part.find_first_not_of('0'), part.size() - 1);
    const std::string_view digits = part.substr(first);
    if (digits.size() > 10 || (digits.size() == 10 && digits > "2147483647")) {
      return std::nullopt;
    }
    numbers.emplace_back(digits);
    if (dot == std::string_view::npos) {
      break;
    }
    start = dot + 1;
  }
  while (numbers.size() < 3) {
    numbers.emplace_back("0");
  }
  std::string out = numbers[0] + "." + numbers[1] + "." + numbers[2];
  for (size_t i = 3; i < numbers.size(); ++i) {
    out += (i == 3 ? "+" : ".") + numbers[i];
  }
  return out;
}

core::dra::DevicePool GpuDevicePool(const common::NodeName& node, std::span<const PoolGpu> gpus,
                                    const GpuPoolOptions& options) {
  core::dra::DevicePool pool{.driver = std::string(kGpuDriverName), .pool = node.str(), .node = node};
  const std::map<int32_t, int32_t> groups = LinkGroups(gpus);
  const std::optional<std::string> driver_version = NormaliseVersion(options.driver_version);
  const std::optional<std::string> cuda_version = NormaliseVersion(options.cuda_version);
  std::vector<const PoolGpu*> sorted;
  for (const auto& g : gpus) {
    sorted.push_back(&g);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const PoolGpu* a, const PoolGpu* b) { return a->gpu.index < b->gpu.index; });
  for (const PoolGpu* pg : sorted) {
    const core::Gpu& g = pg->gpu;
    core::dra::Device d;
    d.name = GpuDeviceName(g.index);
    d.attributes[Qualified("uuid")] = AttributeValue::String(Clamp(g.uuid.str()));
    d.attributes[Qualified("index")] = AttributeValue::Int(g.index);
    d.attributes[Qualified("model")] = AttributeValue::String(Clamp(g.model));
    if (!pg->product_name.empty()) {
      d.attributes[Qualified("productName")] = AttributeValue::String(Clamp(pg->product_name));
    }
    if (g.numa_node >= 0) {
      d.attributes[Qualified("numaNode")] = AttributeValue::Int(g.numa_node);
    }
    d.attributes[Qualified("linkGroup")] = AttributeValue::Int(groups.at(g.index));
    if (driver_version.has_value()) {
      d.attributes[Qualified("driverVersion")] = AttributeValue::Version(*driver_version);
    }
    if (cuda_version.has_value()) {
      d.attributes[Qualified("cudaVersion")] = AttributeValue::Version(*cuda_version);
    }
    d.attributes[Qualified("healthy")] = AttributeValue::Bool(g.healthy);

    const bool shared = !options.whole_gpus_only;
    d.allow_multiple_allocations = shared;
    if (g.memory.value() > 0) {
      const int64_t bytes = g.memory.value() * kMiB;
      core::dra::DeviceCapacity memory{.value = Quantity::FromUnits(bytes)};
      if (shared) {
        core::dra::CapacityRequestPolicy policy{.default_value = memory.value};
        if (g.memory.value() > kMinSharedMemoryMiB) {
          policy.min = Quantity::FromUnits(kMinSharedMemoryMiB * kMiB);
          policy.max = memory.value;
          policy.step = Quantity::FromUnits(kMiB);
        }
        memory.request_policy = policy;
      }
      d.capacity[Qualified("memory")] = memory;
    }
    core::dra::DeviceCapacity compute{.value = Quantity::FromUnits(100)};
    if (shared) {
      compute.request_policy = core::dra::CapacityRequestPolicy{.default_value = Quantity::FromUnits(100),
                                                                .min = Quantity::FromUnits(1),
                                                                .max = Quantity::FromUnits(100),
                                                                .step = Quantity::FromUnits(1)};
    }
    d.capacity[Qualified("compute")] = compute;
    if (!g.healthy) {
      d.taints.push_back(core::dra::DeviceTaint{.key = std::string(kUnhealthyTaintKey),
                                                .value = pg->last_xid > 0 ? "xid-" + std::to_string(pg->last_xid) : "",
                                                .effect = "NoSchedule"});
    }
    pool.devices.push_back(std::move(d));
  }
  return pool;
}

}  // namespace gpusched::kube
