#include "gpusched/kube/objects.h"

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/core/gpu_model.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/constraints.h"
#include "gpusched/kube/quantity.h"
#include "gpusched/kube/resources.h"

namespace gpusched::kube {
namespace {

using nlohmann::json;

const json* Find(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string String(const json* j, std::string_view key) {
  if (j == nullptr) {
    return {};
  }
  const json* v = Find(*j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

void StringMap(const json* j, std::string_view key, std::map<std::string, std::string>& out) {
  if (j == nullptr) {
    return;
  }
  const json* m = Find(*j, key);
  if (m == nullptr || !m->is_object()) {
    return;
  }
  for (const auto& [k, v] : m->items()) {
    if (v.is_string()) {
      out.emplace(k, v.get<std::string>());
    }
  }
}

common::Result<int64_t> Quantity(const json* list, std::string_view key, bool milli) {
  if (list == nullptr) {
    return int64_t{0};
  }
  const json* v = Find(*list, key);
  if (v == nullptr) {
    return int64_t{0};
  }
  const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
  return milli ? ParseMilliQuantity(text) : ParseQuantity(text);
}

}  // namespace

const std::string* PodMeta::Annotation(std::string_view key) const {
  auto it = annotations.find(std::string(key));
  return it == annotations.end() ? nullptr : &it->second;
}

common::Result<PodMeta> DecodePodMeta(const json& pod) {
  const json* metadata = Find(pod, "metadata");
  if (metadata == nullptr || !metadata->is_object()) {
    return common::InvalidArgument("pod has no metadata");
  }
  PodMeta m;
  m.name = String(metadata, "name");
  if (m.name.empty()) {
    return common::InvalidArgument("pod has no metadata.name");
  }
  m.namespace_ = String(metadata, "namespace");
  if (m.namespace_.empty()) {
    m.namespace_ = "default";
  }
  m.uid = common::PodUid(String(metadata, "uid"));
  m.resource_version = String(metadata, "resourceVersion");
  m.creation_timestamp = String(metadata, "creationTimestamp");
  m.deleting = Find(*metadata, "deletionTimestamp") != nullptr;
  StringMap(metadata, "annotations", m.annotations);
  StringMap(metadata, "labels", m.labels);
  const json* spec = Find(pod, "spec");
  m.node_name = String(spec, "nodeName");
  m.scheduler_name = String(spec, "schedulerName");
  m.phase = String(Find(pod, "status"), "phase");
  return m;
}

common::Result<core::Node> DecodeNode(const json& node) {
  const json* metadata = Find(node, "metadata");
  if (metadata == nullptr) {
    return common::InvalidArgument("node has no metadata");
  }
  core::Node out;
  out.name = common::NodeName(String(metadata, "name"));
  if (out.name.empty()) {
    return common::InvalidArgument("node has no metadata.name");
  }
  const std::string who = "node " + out.name.str() + ": ";
  const json* status = Find(node, "status");
  const json* allocatable = status != nullptr ? Find(*status, "allocatable") : nullptr;
  const json* capacity = status != nullptr ? Find(*status, "capacity") : nullptr;
  auto cpu = Quantity(allocatable, "cpu", true);
  auto memory = Quantity(allocatable, "memory", false);
  if (!cpu.ok() || !memory.ok()) {
    return common::InvalidArgument(
        who + "bad allocatable: " + (cpu.ok() ? memory.status().message() : cpu.status().message()));
  }
  out.cpu = common::MilliCpu{*cpu};
  out.memory = common::MiB{*memory >> 20};
  auto pods = Quantity(allocatable, "pods", false);
  if (!pods.ok() || *pods < 0 || *pods > INT32_MAX) {
    return common::InvalidArgument(who + "bad allocatable: pods: " +
                                   (pods.ok() ? std::to_string(*pods) + " is out of range" : pods.status().message()));
  }
  out.max_pods = static_cast<int32_t>(*pods);
  if (allocatable != nullptr && allocatable->is_object()) {
    for (const auto& [name, value] : allocatable->items()) {
      if (name == "cpu" || name == "memory" || name == "pods" || AllGpuResourceNames().contains(name)) {
        continue;
      }
      auto amount = Quantity(allocatable, name, false);
      if (!amount.ok()) {
        return common::InvalidArgument(who + "bad allocatable: " + name + ": " + amount.status().message());
      }
      out.scalar_resources.emplace(name, *amount);
    }
  }

  std::map<std::string, std::string> annotations;
  std::map<std::string, std::string> labels;
  StringMap(metadata, "annotations", annotations);
  StringMap(metadata, "labels", labels);
  out.labels = labels;
  if (const json* spec = Find(node, "spec"); spec != nullptr) {
    if (const json* taints = Find(*spec, "taints"); taints != nullptr) {
      auto decoded = DecodeTaints(*taints);
      if (!decoded.ok()) {
        return common::InvalidArgument(who + decoded.status().message());
      }
      out.taints = std::move(decoded).value();
    }
    if (const json* cordoned = Find(*spec, "unschedulable"); cordoned != nullptr) {
      if (!cordoned->is_boolean()) {
        return common::InvalidArgument(who + "spec.unschedulable is not a boolean");
      }
      out.unschedulable = cordoned->get<bool>();
    }
  }
  if (auto it = annotations.find(std::string(kAnnotationGpus)); it != annotations.end()) {
    auto gpus = DecodeGpuInventory(it->second);
    if (!gpus.ok()) {
      return common::InvalidArgument(who + "annotation " + std::string(kAnnotationGpus) + ": " +
                                     gpus.status().message());
    }
    out.gpus = std::move(gpus).value();
    return out;
  }
  // Fall back to the device plugin's count and GPU feature discovery's labels.
  auto count = Quantity(capacity, "nvidia.com/gpu", false);
  if (!count.ok()) {
    return common::InvalidArgument(who + "capacity nvidia.com/gpu: " + count.status().message());
  }
  if (*count > 1024) {
    return common::InvalidArgument(who + "capacity nvidia.com/gpu " + std::to_string(*count) + " is implausible");
  }
  int64_t memory_mib = 0;
  if (auto it = labels.find(std::string(kLabelGpuMemory)); it != labels.end()) {
    auto m = ParseQuantity(it->second);
    if (!m.ok()) {
      return common::InvalidArgument(who + "label " + std::string(kLabelGpuMemory) + ": " + m.status().message());
    }
    memory_mib = *m;
  }
  const auto product = labels.find(std::string(kLabelGpuProduct));
  for (int64_t i = 0; i < *count; ++i) {
    out.gpus.push_back(core::Gpu{.index = static_cast<int32_t>(i),
                                 .model = product == labels.end() ? std::string() : core::GpuModelName(product->second),
                                 .memory = common::MiB{memory_mib}});
  }
  return out;
}

std::string FormatMicroTime(int64_t wall_ms) {
  const time_t secs = static_cast<time_t>(wall_ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((wall_ms % 1000) * 1000));
  return buf;
}

common::Result<int64_t> ParseMicroTime(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return common::InvalidArgument("not an RFC 3339 time: \"" + text + "\"");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  size_t i = 19;
  if (i < text.size() && text[i] == '.') {
    int64_t frac = 0;
    int digits = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (digits < 3) {
        frac = frac * 10 + (text[i] - '0');
      }
    }
    for (int d = digits; d < 3; ++d) {
      frac *= 10;
    }
    ms += frac;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-') && i + 6 == text.size()) {
    const int hours = (text[i + 1] - '0') * 10 + (text[i + 2] - '0');
    const int minutes = (text[i + 4] - '0') * 10 + (text[i + 5] - '0');
    const int64_t offset = (int64_t{hours} * 60 + minutes) * 60 * 1000;
    ms += text[i] == '+' ? -offset : offset;
    i = text.size();
  } else if (i < text.size() && text[i] == 'Z') {
    ++i;
  }
  if (i != text.size()) {
    return common::InvalidArgument("not an RFC 3339 time: \"" + text + "\"");
  }
  return ms;
}

}  // namespace gpusched::kube
