#include "gpusched/kube/resources.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/kube/constraints.h"
#include "gpusched/kube/gpu_queue.h"
#include "gpusched/kube/quantity.h"

namespace gpusched::kube {
namespace {

using common::MiB;
using common::MilliGpu;
using nlohmann::json;

constexpr int64_t kMaxGpusPerContainer = 1024;
constexpr int64_t kMaxMemoryMib = int64_t{1} << 40;  // beyond any device; keeps arithmetic far from overflow

// A container's resources: requests, falling back to limits, per name (only the GPU names we know).
struct ContainerResources {
  std::string name;
  std::map<std::string, int64_t, std::less<>> gpu;  // enabled GPU resources, integer values
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::map<std::string, int64_t> other;  // ephemeral-storage, hugepages-*, extended resources (base units)
  std::vector<core::HostPort> host_ports;
};

const json* Find(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string QuantityText(const json& v) {
  if (v.is_string()) {
    return v.get<std::string>();
  }
  if (v.is_number_integer() || v.is_number_unsigned() || v.is_number_float()) {
    return v.dump();
  }
  return {};
}

common::Result<ContainerResources> ReadContainer(const json& c, const ResourceConfig& config, std::string_view kind) {
  ContainerResources out;
  if (const json* n = Find(c, "name"); n != nullptr && n->is_string()) {
    out.name = n->get<std::string>();
  }
  const std::string who = std::string(kind) + " " + (out.name.empty() ? "(unnamed)" : out.name);
  if (const json* ports = Find(c, "ports"); ports != nullptr) {
    if (!ports->is_array()) {
      return common::InvalidArgument(who + ": ports is not a list");
    }
    for (const json& p : *ports) {
      const json* host_port = Find(p, "hostPort");
      if (host_port == nullptr) {
        continue;
      }
      if (!host_port->is_number_integer() || host_port->get<int64_t>() < 0 || host_port->get<int64_t>() > 65535) {
        return common::InvalidArgument(who + ": ports[].hostPort is not a port number");
      }
      if (host_port->get<int64_t>() == 0) {
        continue;
      }
      core::HostPort hp{.port = host_port->get<int32_t>()};
      if (const json* protocol = Find(p, "protocol"); protocol != nullptr && protocol->is_string()) {
        hp.protocol = protocol->get<std::string>();
      }
      if (const json* ip = Find(p, "hostIP"); ip != nullptr && ip->is_string()) {
        hp.ip = ip->get<std::string>();
      }
      out.host_ports.push_back(std::move(hp));
    }
  }
  const json* resources = Find(c, "resources");
  if (resources == nullptr) {
    return out;
  }
  if (!resources->is_object()) {
    return common::InvalidArgument(who + ": resources is not an object");
  }
  const json* requests = Find(*resources, "requests");
  const json* limits = Find(*resources, "limits");
  for (const json* list : {limits, requests}) {  // requests win: read them last
    if (list == nullptr) {
      continue;
    }
    if (!list->is_object()) {
      return common::InvalidArgument(who + ": requests/limits is not an object");
    }
    for (const auto& [key, value] : list->items()) {
      const std::string text = QuantityText(value);
      const bool gpu = AllGpuResourceNames().contains(key);
      if (!gpu && key != "cpu" && key != "memory") {
        auto v = ParseQuantity(text);
        if (!v.ok()) {
          return common::InvalidArgument(who + ": " + key + ": " + v.status().message());
        }
        out.other[key] = *v;
        continue;
      }
      if (gpu && !config.Enabled(key)) {
        continue;
      }
      if (text.empty()) {
        return common::InvalidArgument(who + ": " + key + " is not a quantity");
      }
      if (key == "cpu") {
        auto v = ParseMilliQuantity(text);
        if (!v.ok()) {
          return common::InvalidArgument(who + ": cpu: " + v.status().message());
        }
        out.cpu_milli = *v;
      } else if (key == "memory") {
        auto v = ParseQuantity(text);
        if (!v.ok()) {
          return common::InvalidArgument(who + ": memory: " + v.status().message());
        }
        out.memory_mib = (*v + (int64_t{1} << 20) - 1) >> 20;
      } else {
        // GPU amounts are whole numbers: "1.5" GPUs or "500m" percent are mistakes, not rounding cases.
        auto milli = ParseMilliQuantity(text);
        if (!milli.ok()) {
          return common::InvalidArgument(who + ": " + key + ": " + milli.status().message());
        }
        if (*milli % 1000 != 0) {
          return common::InvalidArgument(who + ": " + key + " must be a whole number, got \"" + text + "\"");
        }
        out.gpu[key] = *milli / 1000;
      }
    }
  }
  return out;
}

std::optional<int64_t> Get(const ContainerResources& c, std::string_view name) {
  auto it = c.gpu.find(name);
  return it == c.gpu.end() ? std::nullopt : std::optional<int64_t>(it->second);
}

common::Status Positive(const std::string& who, std::string_view name, std::optional<int64_t> v, int64_t max) {
  if (!v) {
    return common::Status::Ok();
  }
  if (*v <= 0) {
    return common::InvalidArgument(who + ": " + std::string(name) + " must be positive, got " + std::to_string(*v));
  }
  if (*v > max) {
    return common::InvalidArgument(who + ": " + std::string(name) + " " + std::to_string(*v) + " is above the limit " +
                                   std::to_string(max));
  }
  return common::Status::Ok();
}

int32_t I32(int64_t v) { return static_cast<int32_t>(v); }

// The container's GPU request, or nullopt when it asks for none.
// Genius's request labels: genius/gpu-number N GPUs (default 1), each with genius/gpu-memory-each MiB or
// genius/gpu-memory-total / N (rounded up); with no memory, N whole exclusive GPUs; genius/gpu-model one model.
// nullopt when the pod carries none of them.
common::Result<std::optional<core::GpuRequest>> GeniusRequest(const json& labels, const std::string& container) {
  auto number = [&](std::string_view key, int64_t max) -> common::Result<std::optional<int64_t>> {
    const json* v = Find(labels, key);
    if (v == nullptr) {
      return std::optional<int64_t>();
    }
    int64_t n = 0;
    const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n <= 0 || n > max) {
      return common::InvalidArgument("label " + std::string(key) + " \"" + text + "\" is not a whole number in 1.." +
                                     std::to_string(max));
    }
    return std::optional<int64_t>(n);
  };
  GPUSCHED_ASSIGN_OR_RETURN(count, number(kLabelGeniusGpuNumber, kMaxGpusPerContainer));
  GPUSCHED_ASSIGN_OR_RETURN(each, number(kLabelGeniusMemoryEach, kMaxMemoryMib));
  GPUSCHED_ASSIGN_OR_RETURN(total, number(kLabelGeniusMemoryTotal, kMaxMemoryMib * kMaxGpusPerContainer));
  const json* model = Find(labels, kLabelGeniusModel);
  if (!count && !each && !total) {
    return std::optional<core::GpuRequest>();
  }
  if (each && total) {
    return common::InvalidArgument("labels " + std::string(kLabelGeniusMemoryEach) + " and " +
                                   std::string(kLabelGeniusMemoryTotal) + " are both set; use one");
  }
  core::GpuRequest r;
  r.container = container;
  r.count = static_cast<int32_t>(count.value_or(1));
  const int64_t memory = each ? *each : total ? (*total + r.count - 1) / r.count : 0;
  if (memory == 0) {
    r.exclusive = true;
    r.milli_per_gpu = MilliGpu{1000};
  } else {
    r.memory_per_gpu = MiB{memory};  // a memory share without a compute reservation, as Genius shares
  }
  if (model != nullptr && model->is_string() && !model->get<std::string>().empty()) {
    r.models.push_back(model->get<std::string>());
  }
  return std::optional<core::GpuRequest>(std::move(r));
}

common::Result<std::optional<core::GpuRequest>> GpuRequestOf(const ContainerResources& c, std::string_view kind,
                                                             const ResourceConfig& config) {
  const int64_t gpushare_unit_mib = config.gpushare_memory_unit_mib;
  if (c.gpu.empty()) {
    return std::optional<core::GpuRequest>{};
  }
  const std::string who = std::string(kind) + " " + (c.name.empty() ? "(unnamed)" : c.name);
  // Families; a container must use one (HAMi's names go with nvidia.com/gpu; KETI may take gpusched's sizes).
  const bool hami = Get(c, kResHamiMem) || Get(c, kResHamiMemPercent) || Get(c, kResHamiCores);
  const bool nvidia = Get(c, kResNvidiaGpu).has_value();
  const bool aliyun = Get(c, kResAliyunMem).has_value();
  const bool elastic = Get(c, kResElasticCore) || Get(c, kResElasticMemory) || Get(c, kResElasticCoreCom) ||
                       Get(c, kResElasticMemoryCom);
  const bool keti = Get(c, kResKetiMps).has_value();
  // gpusched.io/gpu alone beside a family without a device count of its own is that request's device count: the
  // webhook adds it so that the kubelet calls gpusched's device plugin (docs/webhook.md). It must match.
  const auto device_count = Get(c, kResGpu);
  const bool device_count_only =
      device_count && !Get(c, kResGpuMemory) && !Get(c, kResGpuCore) && !keti && !nvidia && (aliyun || elastic || hami);
  const bool ours = (device_count && !device_count_only) || Get(c, kResGpuMemory) || Get(c, kResGpuCore);
  std::vector<std::string> families;
  if (ours && !keti) families.emplace_back("gpusched.io");
  if (nvidia || hami) families.emplace_back(hami ? "HAMi (nvidia.com/gpumem, gpucores)" : "nvidia.com/gpu");
  if (aliyun) families.emplace_back("aliyun.com/gpu-mem");
  if (elastic) families.emplace_back("elasticgpu.io");
  if (keti) families.emplace_back("keti.com/mpsgpu");
  if (families.size() > 1) {
    return common::InvalidArgument(who + " mixes GPU resources of " + families[0] + " and " + families[1] +
                                   "; use one kind per container");
  }
  for (const auto& [name, value] : c.gpu) {
    const int64_t max =
        name == kResGpuMemory || name == kResHamiMem || name == kResElasticMemory || name == kResElasticMemoryCom
            ? kMaxMemoryMib
        : name == kResAliyunMem                                 ? kMaxMemoryMib / gpushare_unit_mib
        : name == kResElasticCore || name == kResElasticCoreCom ? kMaxGpusPerContainer * 100
                                                                : kMaxGpusPerContainer;
    GPUSCHED_RETURN_IF_ERROR(Positive(who, name, value, max));
  }
  auto percent = [&](std::string_view name) -> common::Result<int64_t> {
    const int64_t v = *Get(c, name);
    if (v > 100) {
      return common::InvalidArgument(who + ": " + std::string(name) + " " + std::to_string(v) +
                                     " is above 100 (percent of one GPU)");
    }
    return v;
  };
  core::GpuRequest r{.container = c.name};
  if (keti) {
    // MPS shares, never exclusive: alone, an equal share of each GPU (keti_share_percent of its compute and of its
    // memory), as KETI's device plugin splits a GPU into equal replicas; with gpusched.io/gpu-core or -memory, those.
    r.count = I32(*Get(c, kResKetiMps));
    const bool sized = Get(c, kResGpuCore).has_value() || Get(c, kResGpuMemory).has_value();
    if (!sized) {
      r.milli_per_gpu = MilliGpu{int64_t{config.keti_share_percent} * 10};
      r.memory_percent = config.keti_share_percent;
    }
    if (Get(c, kResGpuCore)) {
      GPUSCHED_ASSIGN_OR_RETURN(core, percent(kResGpuCore));
      r.milli_per_gpu = MilliGpu{core * 10};
    }
    if (auto m = Get(c, kResGpuMemory)) {
      r.memory_per_gpu = MiB{*m};
    }
    if (Get(c, kResGpu)) {
      return common::InvalidArgument(who + " asks for both keti.com/mpsgpu and gpusched.io/gpu; use one count");
    }
  } else if (ours) {
    const auto count = Get(c, kResGpu);
    const auto memory = Get(c, kResGpuMemory);
    r.count = I32(count.value_or(1));
    if (Get(c, kResGpuCore)) {
      GPUSCHED_ASSIGN_OR_RETURN(core, percent(kResGpuCore));
      r.milli_per_gpu = MilliGpu{core * 10};
      r.exclusive = core == 100 && !memory;
    } else if (!memory) {
      r.milli_per_gpu = MilliGpu{1000};
      r.exclusive = true;
    }
    r.memory_per_gpu = MiB{memory.value_or(0)};
  } else if (hami) {
    const auto memory = Get(c, kResHamiMem);
    const auto memory_percent = Get(c, kResHamiMemPercent);
    if (memory && memory_percent) {
      return common::InvalidArgument(who + " asks for both nvidia.com/gpumem and nvidia.com/gpumem-percentage");
    }
    r.count = I32(Get(c, kResNvidiaGpu).value_or(1));
    int64_t pct = 0;
    if (memory_percent) {
      GPUSCHED_ASSIGN_OR_RETURN(mem_pct, percent(kResHamiMemPercent));
      pct = mem_pct;
    }
    if (Get(c, kResHamiCores)) {
      GPUSCHED_ASSIGN_OR_RETURN(cores, percent(kResHamiCores));
      r.milli_per_gpu = MilliGpu{cores * 10};
    } else if (!memory && (pct == 0 || pct == 100)) {
      r.milli_per_gpu = MilliGpu{1000};
    }
    r.exclusive = r.milli_per_gpu == MilliGpu{1000} && !memory && (pct == 0 || pct == 100);
    if (!r.exclusive) {
      r.memory_per_gpu = MiB{memory.value_or(0)};
      r.memory_percent = I32(pct);
    }
  } else if (nvidia) {
    r.count = I32(*Get(c, kResNvidiaGpu));
    r.milli_per_gpu = MilliGpu{1000};
    r.exclusive = true;
  } else if (aliyun) {
    r.count = 1;
    r.memory_per_gpu = MiB{*Get(c, kResAliyunMem) * gpushare_unit_mib};
  } else {  // elastic-gpu
    auto core = Get(c, kResElasticCore);
    if (!core) core = Get(c, kResElasticCoreCom);
    auto memory = Get(c, kResElasticMemory);
    if (!memory) memory = Get(c, kResElasticMemoryCom);
    if (core && *core >= 100) {
      if (*core % 100 != 0) {
        return common::InvalidArgument(who + ": elasticgpu.io/gpu-core " + std::to_string(*core) +
                                       " is above 100 but not whole GPUs (a multiple of 100)");
      }
      r.count = I32(*core / 100);
      r.milli_per_gpu = MilliGpu{1000};
      r.exclusive = true;
    } else {
      r.count = 1;
      r.milli_per_gpu = MilliGpu{core.value_or(0) * 10};
      r.memory_per_gpu = MiB{memory.value_or(0)};
    }
  }
  if (r.milli_per_gpu.value() == 0 && r.memory_per_gpu.value() == 0 && r.memory_percent == 0) {
    return common::InvalidArgument(who + " asks for GPUs with neither compute nor memory");
  }
  if (device_count_only && *device_count != r.count) {
    return common::InvalidArgument(who + ": " + std::string(kResGpu) + " " + std::to_string(*device_count) +
                                   " does not match the " + std::to_string(r.count) + " GPU(s) that " + families[0] +
                                   " asks for");
  }
  return std::optional<core::GpuRequest>(std::move(r));
}

// Does `a` cover `b` (an init container's request the app container's GPUs can serve)?
bool Covers(const core::GpuRequest& a, const core::GpuRequest& b) {
  return a.count >= b.count && a.milli_per_gpu >= b.milli_per_gpu && a.memory_per_gpu >= b.memory_per_gpu &&
         a.memory_percent >= b.memory_percent && (a.exclusive || !b.exclusive);
}

}  // namespace

const std::set<std::string, std::less<>>& AllGpuResourceNames() {
  static const std::set<std::string, std::less<>> names = {
      std::string(kResGpu),           std::string(kResGpuMemory),      std::string(kResGpuCore),
      std::string(kResNvidiaGpu),     std::string(kResHamiMem),        std::string(kResHamiMemPercent),
      std::string(kResHamiCores),     std::string(kResAliyunMem),      std::string(kResElasticCore),
      std::string(kResElasticMemory), std::string(kResElasticCoreCom), std::string(kResElasticMemoryCom),
      std::string(kResKetiMps)};
  return names;
}

namespace {

// The containers listed under spec.<key> ("containers", "initContainers"); `who` prefixes errors.
common::Result<std::vector<ContainerResources>> ReadContainers(const json& spec, std::string_view key,
                                                               std::string_view kind, const ResourceConfig& config,
                                                               const std::string& who) {
  std::vector<ContainerResources> list;
  const json* cs = Find(spec, key);
  if (cs == nullptr) {
    return list;
  }
  if (!cs->is_array()) {
    return common::InvalidArgument(who + "spec." + std::string(key) + " is not a list");
  }
  list.reserve(cs->size());
  for (const auto& c : *cs) {
    auto r = ReadContainer(c, config, kind);
    if (!r.ok()) {
      return common::InvalidArgument(who + r.status().message());
    }
    list.push_back(std::move(r).value());
  }
  return list;
}

// kube-scheduler's effective request: the containers' sum, or an init container's amount where it is larger
// (init containers run one at a time); host ports of the containers.
PodResources SumResources(const std::vector<ContainerResources>& apps, const std::vector<ContainerResources>& inits) {
  PodResources out;
  int64_t cpu = 0;
  int64_t memory = 0;
  for (const auto& c : apps) {
    cpu += c.cpu_milli;
    memory += c.memory_mib;
    for (const auto& [resource, amount] : c.other) {
      out.scalars[resource] += amount;
    }
    out.host_ports.insert(out.host_ports.end(), c.host_ports.begin(), c.host_ports.end());
  }
  for (const auto& c : inits) {
    cpu = std::max(cpu, c.cpu_milli);
    memory = std::max(memory, c.memory_mib);
    for (const auto& [resource, amount] : c.other) {
      out.scalars[resource] = std::max(out.scalars[resource], amount);
    }
  }
  out.cpu = common::MilliCpu{cpu};
  out.memory = MiB{memory};
  return out;
}

}  // namespace

common::Result<PodResources> DecodePodResources(const json& pod) {
  // No GPU resource name is enabled: GPU requests are neither decoded nor refused.
  static const ResourceConfig kNoGpus{.enabled = {}};
  const json* spec = Find(pod, "spec");
  if (spec == nullptr || !spec->is_object()) {
    return common::InvalidArgument("pod has no spec");
  }
  GPUSCHED_ASSIGN_OR_RETURN(apps, ReadContainers(*spec, "containers", "container", kNoGpus, ""));
  GPUSCHED_ASSIGN_OR_RETURN(inits, ReadContainers(*spec, "initContainers", "init container", kNoGpus, ""));
  return SumResources(apps, inits);
}

common::Result<core::PodRequest> DecodePodRequest(const json& pod, const ResourceConfig& config) {
  if (!pod.is_object()) {
    return common::InvalidArgument("pod is not a JSON object");
  }
  const json* metadata = Find(pod, "metadata");
  const json* spec = Find(pod, "spec");
  if (metadata == nullptr || !metadata->is_object()) {
    return common::InvalidArgument("pod has no metadata");
  }
  if (spec == nullptr || !spec->is_object()) {
    return common::InvalidArgument("pod has no spec");
  }
  core::PodRequest out;
  const json* name = Find(*metadata, "name");
  if (name == nullptr || !name->is_string() || name->get<std::string>().empty()) {
    return common::InvalidArgument("pod has no metadata.name");
  }
  const json* ns = Find(*metadata, "namespace");
  out.name = (ns != nullptr && ns->is_string() ? ns->get<std::string>() : std::string("default")) + "/" +
             name->get<std::string>();
  if (const json* uid = Find(*metadata, "uid"); uid != nullptr && uid->is_string()) {
    out.uid = common::PodUid(uid->get<std::string>());
  }
  const std::string who = "pod " + out.name + ": ";
  if (const json* node_name = Find(*spec, "nodeName"); node_name != nullptr && node_name->is_string()) {
    out.node_name = node_name->get<std::string>();
  }
  {
    const json* selector = Find(*spec, "nodeSelector");
    const json* tolerations = Find(*spec, "tolerations");
    auto s = DecodeNodeSelector(selector != nullptr ? *selector : json());
    auto t = DecodeTolerations(tolerations != nullptr ? *tolerations : json());
    auto a = DecodeRequiredNodeAffinity(*spec);
    for (const common::Status& st : {s.status(), t.status(), a.status()}) {
      if (!st.ok()) {
        return common::InvalidArgument(who + st.message());
      }
    }
    out.node_selector = std::move(s).value();
    out.tolerations = std::move(t).value();
    out.required_node_affinity = std::move(a).value();
  }
  out.namespace_ = ns != nullptr && ns->is_string() ? ns->get<std::string>() : std::string("default");
  const json* labels = Find(*metadata, "labels");
  if (labels != nullptr && labels->is_object()) {
    for (const auto& [k, v] : labels->items()) {
      if (v.is_string()) {
        out.labels.emplace(k, v.get<std::string>());
      }
    }
  }
  if (Find(*spec, "affinity") != nullptr || Find(*spec, "topologySpreadConstraints") != nullptr) {
    auto affinity = DecodeRequiredPodAffinity(*spec, /*anti=*/false, out.labels);
    auto anti = DecodeRequiredPodAffinity(*spec, /*anti=*/true, out.labels);
    auto spread = DecodeTopologySpread(*spec, out.labels);
    for (const common::Status& st : {affinity.status(), anti.status(), spread.status()}) {
      if (!st.ok()) {
        return common::InvalidArgument(who + st.message());
      }
    }
    out.pod_affinity = std::move(affinity).value();
    out.pod_anti_affinity = std::move(anti).value();
    out.spread = std::move(spread).value();
  }

  GPUSCHED_ASSIGN_OR_RETURN(apps, ReadContainers(*spec, "containers", "container", config, who));
  GPUSCHED_ASSIGN_OR_RETURN(inits, ReadContainers(*spec, "initContainers", "init container", config, who));
  {
    PodResources sum = SumResources(apps, inits);
    out.cpu = sum.cpu;
    out.memory = sum.memory;
    out.scalars = std::move(sum.scalars);
    out.host_ports = std::move(sum.host_ports);
  }
  for (const auto& c : apps) {
    auto r = GpuRequestOf(c, "container", config);
    if (!r.ok()) {
      return common::InvalidArgument(who + r.status().message());
    }
    if (r->has_value()) {
      out.containers.push_back(std::move(**r));
    }
  }
  const size_t app_gpu_containers = out.containers.size();
  for (const auto& c : inits) {
    auto r = GpuRequestOf(c, "init container", config);
    if (!r.ok()) {
      return common::InvalidArgument(who + r.status().message());
    }
    if (!r->has_value()) {
      continue;
    }
    core::GpuRequest& init = **r;
    const bool covered =
        std::any_of(out.containers.begin(), out.containers.begin() + static_cast<ptrdiff_t>(app_gpu_containers),
                    [&](const core::GpuRequest& a) { return Covers(a, init); });
    if (!covered) {
      init.container = "init:" + init.container;
      out.containers.push_back(std::move(init));
    }
  }
  // Genius's labels, for a pod that asks for no GPU resource, or only for the device count gpusched.io/gpu on its
  // first container (what the webhook adds so that the kubelet calls gpusched's device plugin): then it must match
  // genius/gpu-number, and the labels say what each GPU is.
  if (labels != nullptr && labels->is_object() && config.genius_labels) {
    const bool device_count_only = out.containers.size() == 1 && app_gpu_containers == 1 && !apps.empty() &&
                                   apps.front().gpu.size() == 1 && apps.front().gpu.contains(kResGpu) &&
                                   out.containers.front().container == apps.front().name;
    if (out.containers.empty() || device_count_only) {
      GPUSCHED_ASSIGN_OR_RETURN(genius, GeniusRequest(*labels, apps.empty() ? "main" : apps.front().name));
      if (genius.has_value() && device_count_only) {
        if (out.containers.front().count != genius->count) {
          return common::InvalidArgument(who + "container " + apps.front().name + ": " + std::string(kResGpu) + " " +
                                         std::to_string(out.containers.front().count) + " does not match the " +
                                         std::to_string(genius->count) + " GPU(s) that label " +
                                         std::string(kLabelGeniusGpuNumber) + " asks for");
        }
        out.containers.clear();
      }
      if (genius.has_value()) {
        out.containers.push_back(std::move(*genius));
      }
    }
  }

  // Models and priority.
  if (const json* annotations = Find(*metadata, "annotations"); annotations != nullptr && annotations->is_object()) {
    if (const json* m = Find(*annotations, kAnnotationGpuModel); m != nullptr && m->is_string()) {
      std::vector<std::string> models;
      std::string_view s = m->get_ref<const std::string&>();
      while (!s.empty()) {
        const size_t bar = s.find('|');
        std::string_view part = s.substr(0, bar);
        while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
        while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
        if (!part.empty()) {
          models.emplace_back(part);
        }
        if (bar == std::string_view::npos) {
          break;
        }
        s.remove_prefix(bar + 1);
      }
      if (models.empty()) {
        return common::InvalidArgument(who + "annotation " + std::string(kAnnotationGpuModel) + " names no model");
      }
      for (auto& c : out.containers) {
        c.models = models;
      }
    }
  }
  out.app = DecodePodApp(pod, config.app_label);
  if (const json* annotations = Find(*metadata, "annotations"); annotations != nullptr && annotations->is_object()) {
    if (const json* t = Find(*annotations, kAnnotationTopology); t != nullptr) {
      const std::string v = t->is_string() ? t->get<std::string>() : "";
      if (v == "required") {
        out.topology = core::TopologyNeed::kRequired;
      } else if (v == "none") {
        out.topology = core::TopologyNeed::kNone;
      } else if (v != "preferred") {
        return common::InvalidArgument(who + "annotation " + std::string(kAnnotationTopology) +
                                       " must be required, preferred or none, not " + t->dump());
      }
    }
  }
  if (const json* p = Find(*spec, "preemptionPolicy"); p != nullptr && !p->is_null()) {
    if (!p->is_string() || (*p != "Never" && *p != "PreemptLowerPriority")) {
      return common::InvalidArgument(who + "spec.preemptionPolicy is not Never or PreemptLowerPriority");
    }
    out.preempt_never = *p == "Never";
  }
  auto priority = DecodePodPriority(pod, config.genius_labels);
  if (!priority.ok()) {
    return common::InvalidArgument(who + priority.status().message());
  }
  out.priority = *priority;
  auto group = DecodePodGroup(pod);
  if (!group.ok()) {
    return common::InvalidArgument(who + group.status().message());
  }
  out.pod_group = std::move(group->name);
  out.min_available = group->min_available;
  const core::ShareGroup share = core::ShareGroupOf(config.share_within, out.namespace_, QueueLabel(out.labels));
  for (core::GpuRequest& c : out.containers) {
    c.share_group = share;
  }
  return out;
}

common::Result<int32_t> DecodePodPriority(const json& pod, bool genius_labels) {
  // The Priority admission plugin sets spec.priority on every pod (0 when it names no PriorityClass and none is the
  // global default; it then also writes the default's name to spec.priorityClassName). So a class named decides,
  // and the labels apply to a pod that names none.
  const json* spec = Find(pod, "spec");
  const json* priority = spec != nullptr ? Find(*spec, "priority") : nullptr;
  const int32_t from_spec = priority != nullptr && priority->is_number_integer() ? priority->get<int32_t>() : 0;
  const json* class_name = spec != nullptr ? Find(*spec, "priorityClassName") : nullptr;
  if (class_name != nullptr && class_name->is_string() && !class_name->get_ref<const std::string&>().empty()) {
    return from_spec;
  }
  const json* metadata = Find(pod, "metadata");
  const json* labels = metadata != nullptr ? Find(*metadata, "labels") : nullptr;
  const json* l = labels != nullptr ? Find(*labels, kLabelPriority) : nullptr;
  if (l == nullptr && genius_labels && labels != nullptr) {
    l = Find(*labels, kLabelGeniusPriority);
  }
  if (l == nullptr || !l->is_string()) {
    return from_spec;
  }
  try {
    return std::stoi(l->get<std::string>());
  } catch (const std::exception&) {
    const bool ours = Find(*labels, kLabelPriority) != nullptr;
    return common::InvalidArgument("label " + std::string(ours ? kLabelPriority : kLabelGeniusPriority) +
                                   " is not an integer");
  }
}

std::string DecodePodApp(const json& pod, std::string_view app_label) {
  const json* metadata = Find(pod, "metadata");
  if (metadata == nullptr) {
    return {};
  }
  auto value = [&](std::string_view list, std::string_view key) -> std::string {
    const json* m = Find(*metadata, list);
    const json* v = m != nullptr ? Find(*m, key) : nullptr;
    return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
  };
  std::string app = value("annotations", kAnnotationApp);
  if (app.empty() && !app_label.empty()) {
    app = value("labels", app_label);
  }
  return app;
}

common::Result<PodGroupRef> DecodePodGroup(const json& pod) {
  const json* metadata = Find(pod, "metadata");
  if (metadata == nullptr) {
    return PodGroupRef{};
  }
  auto value = [&](std::string_view list, std::string_view key) -> const json* {
    const json* m = Find(*metadata, list);
    return m != nullptr && m->is_object() ? Find(*m, key) : nullptr;
  };
  PodGroupRef group;
  bool by_label = false;
  for (const auto& [list, key] :
       {std::pair{"annotations", kAnnotationPodGroup}, std::pair{"labels", kLabelCoschedulingPodGroup}}) {
    if (const json* v = value(list, key); v != nullptr && v->is_string() && !v->get_ref<const std::string&>().empty()) {
      group.name = v->get<std::string>();
      by_label = key == kLabelCoschedulingPodGroup;
      break;
    }
  }
  const json* min = value("annotations", kAnnotationMinAvailable);
  if (min == nullptr || min->is_null()) {
    group.min_available = group.name.empty() ? 0 : 1;
    group.coscheduling = by_label;
    return group;
  }
  const std::string what = "annotation " + std::string(kAnnotationMinAvailable);
  if (group.name.empty()) {
    return common::InvalidArgument(what + " is set but the pod names no group (annotation " +
                                   std::string(kAnnotationPodGroup) + ")");
  }
  const std::string text = min->is_string() ? min->get<std::string>() : min->dump();
  int64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxMinAvailable) {
    return common::InvalidArgument(what + " is \"" + text + "\", must be an integer from 1 to " +
                                   std::to_string(kMaxMinAvailable));
  }
  group.min_available = static_cast<int32_t>(n);
  return group;
}

common::Result<CoschedulingPodGroup> DecodeCoschedulingPodGroup(const json& object) {
  CoschedulingPodGroup out;
  const json* metadata = Find(object, "metadata");
  const json* name = metadata != nullptr && metadata->is_object() ? Find(*metadata, "name") : nullptr;
  const json* ns = metadata != nullptr && metadata->is_object() ? Find(*metadata, "namespace") : nullptr;
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return common::InvalidArgument("PodGroup: metadata.name is missing");
  }
  out.name = name->get<std::string>();
  if (ns == nullptr || !ns->is_string() || ns->get_ref<const std::string&>().empty()) {
    return common::InvalidArgument("PodGroup " + out.name + ": metadata.namespace is missing");
  }
  out.namespace_ = ns->get<std::string>();
  const json* spec = Find(object, "spec");
  const json* min = spec != nullptr && spec->is_object() ? Find(*spec, "minMember") : nullptr;
  if (min == nullptr || min->is_null()) {
    return out;
  }
  if (!min->is_number_integer() || min->get<int64_t>() < 0 || min->get<int64_t>() > kMaxMinAvailable) {
    return common::InvalidArgument("PodGroup " + out.namespace_ + "/" + out.name + ": spec.minMember is " +
                                   min->dump() + ", must be an integer from 0 to " + std::to_string(kMaxMinAvailable));
  }
  out.min_member = std::max<int32_t>(1, static_cast<int32_t>(min->get<int64_t>()));
  return out;
}

common::Result<std::optional<core::GpuRequest>> DecodeContainerGpuRequest(const json& container,
                                                                          const ResourceConfig& config) {
  GPUSCHED_ASSIGN_OR_RETURN(c, ReadContainer(container, config, "container"));
  return GpuRequestOf(c, "container", config);
}

bool RequestsGpuResource(const json& pod, const ResourceConfig& config) {
  const json* spec = Find(pod, "spec");
  if (spec == nullptr) {
    return false;
  }
  for (const char* key : {"containers", "initContainers"}) {
    const json* cs = Find(*spec, key);
    if (cs == nullptr || !cs->is_array()) {
      continue;
    }
    for (const auto& c : *cs) {
      const json* resources = Find(c, "resources");
      if (resources == nullptr) {
        continue;
      }
      for (const char* list : {"requests", "limits"}) {
        const json* l = Find(*resources, list);
        if (l == nullptr || !l->is_object()) {
          continue;
        }
        for (const auto& [name, value] : l->items()) {
          if (config.Enabled(name)) {
            return true;
          }
        }
      }
    }
  }
  return false;
}

}  // namespace gpusched::kube
