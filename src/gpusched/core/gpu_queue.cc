#include "gpusched/core/gpu_queue.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <sstream>

namespace gpusched::core {
namespace {

constexpr std::array<int64_t GpuAmount::*, 3> kDims = {&GpuAmount::gpus, &GpuAmount::milli, &GpuAmount::memory_mib};
constexpr std::array<const char*, 3> kDimNames = {"gpus", "milli", "memory"};

std::string Amount(int64_t v) { return v == GpuAmount::kUnlimited ? "∞" : std::to_string(v); }

std::string Number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

}  // namespace

GpuAmount& GpuAmount::operator+=(const GpuAmount& o) {
  for (auto d : kDims) {
    if (this->*d == kUnlimited || o.*d == kUnlimited || this->*d > kUnlimited - o.*d) {
      this->*d = kUnlimited;
    } else {
      this->*d += o.*d;
    }
  }
  return *this;
}

GpuAmount& GpuAmount::operator-=(const GpuAmount& o) {
  for (auto d : kDims) {
    if (this->*d != kUnlimited) this->*d -= o.*d;
  }
  return *this;
}

GpuAmount operator+(GpuAmount a, const GpuAmount& b) { return a += b; }
GpuAmount operator-(GpuAmount a, const GpuAmount& b) { return a -= b; }

std::string ToString(const GpuAmount& a) {
  return "gpus=" + Amount(a.gpus) + " milli=" + Amount(a.milli) + " memory=" + Amount(a.memory_mib) + "Mi";
}

GpuAmount DemandOf(const PodRequest& pod) {
  GpuAmount d;
  for (const auto& c : pod.containers) {
    const int64_t count = c.count;
    if (c.exclusive || c.milli_per_gpu >= common::kGpuMilli) {  // whole GPUs, charged whole
      d.gpus += count;
      d.milli += count * common::kGpuMilli.value();
    } else {
      d.milli += count * c.milli_per_gpu.value();
      d.memory_mib += count * c.memory_per_gpu.value();
    }
  }
  return d;
}

GpuAmount DemandOf(const Allocation& allocation) {
  GpuAmount d;
  for (const auto& c : allocation.containers) {
    for (const auto& g : c.gpus) {
      if (g.exclusive || g.milli >= common::kGpuMilli) {
        ++d.gpus;
        d.milli += common::kGpuMilli.value();
      } else {
        d.milli += g.milli.value();
        d.memory_mib += g.memory.value();
      }
    }
  }
  return d;
}

std::map<std::string, std::string> ValidateQueues(const std::vector<QueueSpec>& specs) {
  std::map<std::string, std::string> rejected;
  std::map<std::string, const QueueSpec*> by_name;
  for (const auto& s : specs) {
    if (s.name.empty()) {
      rejected["<unnamed>"] = "a queue needs a name";
      continue;
    }
    if (by_name.contains(s.name)) {
      rejected[s.name] = "declared twice";
      continue;
    }
    by_name[s.name] = &s;
  }
  auto reject = [&](const std::string& name, std::string why) {
    if (!rejected.contains(name)) rejected[name] = std::move(why);
  };
  std::map<std::string, std::vector<const QueueSpec*>> children;
  for (const auto& [name, s] : by_name) {
    if (!(s->weight > 0) || !std::isfinite(s->weight)) reject(name, "weight " + Number(s->weight) + " is not > 0");
    for (size_t i = 0; i < kDims.size(); ++i) {
      const auto d = kDims[i];
      if (s->guaranteed.*d < 0 || s->limit.*d < 0) reject(name, std::string(kDimNames[i]) + " is negative");
      if (s->guaranteed.*d > s->limit.*d) {
        reject(name, "guaranteed " + std::string(kDimNames[i]) + " " + Amount(s->guaranteed.*d) +
                         " exceeds its limit " + Amount(s->limit.*d));
      }
    }
    if (!s->parent.empty()) {
      auto p = by_name.find(s->parent);
      if (s->parent == name) {
        reject(name, "is its own parent");
      } else if (p == by_name.end()) {
        reject(name, "parent " + s->parent + " does not exist");
      } else if (!p->second->parent.empty()) {
        reject(name, "parent " + s->parent + " has a parent itself (queues nest " + std::to_string(kMaxQueueDepth) +
                         " levels at most)");
      } else {
        children[s->parent].push_back(s);
      }
    }
  }
  for (const auto& [parent, kids] : children) {
    const QueueSpec& p = *by_name[parent];
    GpuAmount sum;
    for (const auto* k : kids) {
      if (!rejected.contains(k->name)) sum += k->guaranteed;
    }
    if (!sum.FitsIn(p.guaranteed)) {
      reject(parent,
             "its children's guarantees (" + ToString(sum) + ") exceed its own (" + ToString(p.guaranteed) + ")");
    }
  }
  // A rejected parent takes its children with it.
  for (const auto& [parent, kids] : children) {
    if (!rejected.contains(parent)) continue;
    for (const auto* k : kids) reject(k->name, "parent " + parent + " is rejected");
  }
  std::map<std::string, std::string> served;
  for (const auto& [name, s] : by_name) {
    if (rejected.contains(name)) continue;
    for (const auto& ns : s->namespaces) {
      auto [it, fresh] = served.emplace(ns, name);
      if (!fresh) reject(name, "namespace " + ns + " is served by queue " + it->second + " already");
    }
  }
  return rejected;
}

std::string QueueJoinRefusal(std::string_view queue, const QueueSpec* spec, const QueueSpec* parent,
                             std::string_view serving, std::string_view namespace_) {
  const std::string head =
      "pods of namespace " + std::string(namespace_) + " may not join queue " + std::string(queue) + ": ";
  if (spec == nullptr) {
    return queue == kDefaultQueue && !serving.empty()
               ? head + "namespace " + std::string(namespace_) + " is served by queue " + std::string(serving)
               : std::string();
  }
  auto lists = [&](const QueueSpec& q) {
    return std::find(q.namespaces.begin(), q.namespaces.end(), namespace_) != q.namespaces.end();
  };
  if (lists(*spec) || (parent != nullptr && lists(*parent)) || (queue == kDefaultQueue && serving.empty())) {
    return {};
  }
  std::vector<std::string> admitted = spec->namespaces;
  if (parent != nullptr) {
    admitted.insert(admitted.end(), parent->namespaces.begin(), parent->namespaces.end());
  }
  if (admitted.empty()) {
    return head + "it admits no namespace (list " + std::string(namespace_) + " in its spec.namespaces" +
           (parent != nullptr ? " or its parent's" : "") + ")";
  }
  std::string names;
  for (const auto& n : admitted) {
    names += (names.empty() ? "" : ", ") + n;
  }
  return head + "it admits namespaces " + names + " only";
}

}  // namespace gpusched::core
