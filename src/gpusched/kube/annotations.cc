#include "gpusched/kube/annotations.h"

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;

common::Result<json> ParseJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return common::InvalidArgument("not valid JSON");
  }
  return j;
}

// Reads an integer member within [lo, hi]; absent -> fallback when given.
common::Result<int64_t> Int(const json& obj, const char* key, int64_t lo, int64_t hi, std::optional<int64_t> fallback,
                            const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback) {
      return *fallback;
    }
    return common::InvalidArgument(where + "missing \"" + key + "\"");
  }
  if (!it->is_number_integer() && !it->is_number_unsigned()) {
    return common::InvalidArgument(where + "\"" + key + "\" is not an integer");
  }
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return common::InvalidArgument(where + "\"" + key + "\" = " + std::to_string(it->get<uint64_t>()) +
                                   " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) {
    return common::InvalidArgument(where + "\"" + key + "\" = " + std::to_string(v) + " is out of range [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

common::Result<std::string> Str(const json& obj, const char* key, bool required, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) {
      return common::InvalidArgument(where + "missing \"" + key + "\"");
    }
    return std::string();
  }
  if (!it->is_string()) {
    return common::InvalidArgument(where + "\"" + key + "\" is not a string");
  }
  return it->get<std::string>();
}

constexpr int64_t kMaxGpus = 1024;
constexpr int64_t kMaxMemory = int64_t{1} << 40;
constexpr int64_t kMaxSharers = 1000;
constexpr int64_t kMaxNuma = 1024;  // the device plugin advertises at most 1000 ids per GPU

}  // namespace

std::string EncodeAllocation(const core::Allocation& allocation) {
  json containers = json::array();
  for (const auto& c : allocation.containers) {
    json gpus = json::array();
    for (const auto& g : c.gpus) {
      json gpu = {{"index", g.index},
                  {"uuid", g.uuid.str()},
                  {"milli", g.milli.value()},
                  {"memory_mib", g.memory.value()},
                  {"exclusive", g.exclusive}};
      if (g.numa_node >= 0) {
        gpu["numa"] = g.numa_node;
      }
      gpus.push_back(std::move(gpu));
    }
    containers.push_back({{"name", c.container}, {"gpus", std::move(gpus)}});
  }
  json j = {{"node", allocation.node.str()}, {"id", allocation.id}, {"containers", std::move(containers)}};
  return j.dump();
}

common::Result<core::Allocation> DecodeAllocation(std::string_view text, const common::PodUid& pod) {
  GPUSCHED_ASSIGN_OR_RETURN(j, ParseJson(text));
  if (!j.is_object()) {
    return common::InvalidArgument("allocation is not a JSON object");
  }
  core::Allocation a;
  a.pod = pod;
  GPUSCHED_ASSIGN_OR_RETURN(node, Str(j, "node", true, "allocation: "));
  if (node.empty()) {
    return common::InvalidArgument("allocation: empty \"node\"");
  }
  a.node = common::NodeName(node);
  GPUSCHED_ASSIGN_OR_RETURN(id, Int(j, "id", 0, std::numeric_limits<int64_t>::max(), 0, "allocation: "));
  a.id = static_cast<uint64_t>(id);
  auto cs = j.find("containers");
  if (cs == j.end() || !cs->is_array()) {
    return common::InvalidArgument("allocation: \"containers\" is missing or not a list");
  }
  for (const auto& c : *cs) {
    if (!c.is_object()) {
      return common::InvalidArgument("allocation: a container is not an object");
    }
    core::ContainerAllocation ca;
    GPUSCHED_ASSIGN_OR_RETURN(container_name, Str(c, "name", false, "allocation: container: "));
    ca.container = std::move(container_name);
    const std::string where = "allocation: container " + ca.container + ": ";
    auto gpus = c.find("gpus");
    if (gpus == c.end() || !gpus->is_array()) {
      return common::InvalidArgument(where + "\"gpus\" is missing or not a list");
    }
    for (const auto& g : *gpus) {
      if (!g.is_object()) {
        return common::InvalidArgument(where + "a GPU is not an object");
      }
      core::GpuShare s;
      GPUSCHED_ASSIGN_OR_RETURN(index, Int(g, "index", 0, kMaxGpus - 1, std::nullopt, where));
      GPUSCHED_ASSIGN_OR_RETURN(milli, Int(g, "milli", 0, 1000, std::nullopt, where));
      GPUSCHED_ASSIGN_OR_RETURN(memory, Int(g, "memory_mib", 0, kMaxMemory, 0, where));
      GPUSCHED_ASSIGN_OR_RETURN(uuid, Str(g, "uuid", false, where));
      GPUSCHED_ASSIGN_OR_RETURN(numa, Int(g, "numa", -1, kMaxNuma, -1, where));
      s.index = static_cast<int32_t>(index);
      s.numa_node = static_cast<int32_t>(numa);
      s.milli = common::MilliGpu{milli};
      s.memory = common::MiB{memory};
      s.uuid = common::GpuUuid(uuid);
      if (auto e = g.find("exclusive"); e != g.end() && !e->is_null()) {
        if (!e->is_boolean()) {
          return common::InvalidArgument(where + "\"exclusive\" is not a boolean");
        }
        s.exclusive = e->get<bool>();
      }
      ca.gpus.push_back(std::move(s));
    }
    a.containers.push_back(std::move(ca));
  }
  return a;
}

std::string LinkName(const core::GpuLink& l) {
  switch (l.kind) {
    case core::LinkKind::kNvSwitch:
      return "NVS" + std::to_string(l.nvlinks);
    case core::LinkKind::kNvlink:
      return "NV" + std::to_string(l.nvlinks);
    case core::LinkKind::kPcieSwitch:
      return "PIX";
    case core::LinkKind::kPcieMultiSwitch:
      return "PXB";
    case core::LinkKind::kHostBridge:
      return "PHB";
    case core::LinkKind::kSameNuma:
      return "NODE";
    case core::LinkKind::kCrossSocket:
      return "SYS";
    case core::LinkKind::kUnknown:
      break;
  }
  return "";
}

std::optional<core::GpuLink> ParseLinkName(int32_t peer, std::string_view name) {
  core::GpuLink l{.peer = peer};
  auto links_after = [&](size_t prefix) -> std::optional<int32_t> {
    int32_t n = 0;
    const std::string_view digits = name.substr(prefix);
    if (digits.empty() || digits.size() > 3) {
      return std::nullopt;
    }
    for (const char c : digits) {
      if (c < '0' || c > '9') {
        return std::nullopt;
      }
      n = n * 10 + (c - '0');
    }
    return n;
  };
  if (name.starts_with("NVS")) {
    const auto n = links_after(3);
    if (!n) {
      return std::nullopt;
    }
    l.kind = core::LinkKind::kNvSwitch;
    l.nvlinks = *n;
  } else if (name.starts_with("NV")) {
    const auto n = links_after(2);
    if (!n) {
      return std::nullopt;
    }
    l.kind = core::LinkKind::kNvlink;
    l.nvlinks = *n;
  } else if (name == "PIX") {
    l.kind = core::LinkKind::kPcieSwitch;
  } else if (name == "PXB") {
    l.kind = core::LinkKind::kPcieMultiSwitch;
  } else if (name == "PHB") {
    l.kind = core::LinkKind::kHostBridge;
  } else if (name == "NODE") {
    l.kind = core::LinkKind::kSameNuma;
  } else if (name == "SYS") {
    l.kind = core::LinkKind::kCrossSocket;
  } else {
    return std::nullopt;
  }
  return l;
}

std::string EncodeGpuInventory(const std::vector<core::Gpu>& gpus) {
  json list = json::array();
  for (const auto& g : gpus) {
    json j = {{"uuid", g.uuid.str()}, {"index", g.index}, {"model", g.model}, {"memory_mib", g.memory.value()}};
    if (g.numa_node >= 0) {
      j["numa"] = g.numa_node;
    }
    if (!g.nvlink_peers.empty()) {
      j["nvlink_peers"] = g.nvlink_peers;
    }
    if (!g.links.empty()) {
      json links = json::object();
      for (const core::GpuLink& l : g.links) {
        if (const std::string name = LinkName(l); !name.empty()) {
          links[std::to_string(l.peer)] = name;
        }
      }
      j["links"] = std::move(links);
    }
    j["healthy"] = g.healthy;
    if (g.max_sharers > 0) {
      j["sharers"] = g.max_sharers;
    }
    list.push_back(std::move(j));
  }
  return list.dump();
}

common::Result<std::vector<core::Gpu>> DecodeGpuInventory(std::string_view text) {
  GPUSCHED_ASSIGN_OR_RETURN(j, ParseJson(text));
  if (!j.is_array()) {
    return common::InvalidArgument("GPU inventory is not a JSON list");
  }
  if (static_cast<int64_t>(j.size()) > kMaxGpus) {
    return common::InvalidArgument("GPU inventory lists more than 1024 GPUs");
  }
  std::vector<core::Gpu> gpus;
  for (const auto& g : j) {
    if (!g.is_object()) {
      return common::InvalidArgument("GPU inventory: an entry is not an object");
    }
    const std::string where = "GPU inventory entry " + std::to_string(gpus.size()) + ": ";
    core::Gpu gpu;
    GPUSCHED_ASSIGN_OR_RETURN(index, Int(g, "index", 0, kMaxGpus - 1, std::nullopt, where));
    GPUSCHED_ASSIGN_OR_RETURN(memory, Int(g, "memory_mib", 0, kMaxMemory, std::nullopt, where));
    GPUSCHED_ASSIGN_OR_RETURN(numa, Int(g, "numa", -1, kMaxNuma, -1, where));
    GPUSCHED_ASSIGN_OR_RETURN(sharers, Int(g, "sharers", 0, kMaxSharers, 0, where));
    GPUSCHED_ASSIGN_OR_RETURN(uuid, Str(g, "uuid", false, where));
    GPUSCHED_ASSIGN_OR_RETURN(model, Str(g, "model", false, where));
    gpu.model = std::move(model);
    gpu.index = static_cast<int32_t>(index);
    gpu.memory = common::MiB{memory};
    gpu.numa_node = static_cast<int32_t>(numa);
    gpu.max_sharers = static_cast<int32_t>(sharers);
    gpu.uuid = common::GpuUuid(uuid);
    if (auto h = g.find("healthy"); h != g.end() && !h->is_null()) {
      if (!h->is_boolean()) {
        return common::InvalidArgument(where + "\"healthy\" is not a boolean");
      }
      gpu.healthy = h->get<bool>();
    }
    if (auto p = g.find("nvlink_peers"); p != g.end() && !p->is_null()) {
      if (!p->is_array()) {
        return common::InvalidArgument(where + "\"nvlink_peers\" is not a list");
      }
      for (const auto& peer : *p) {
        if (!peer.is_number_integer() || peer.get<int64_t>() < 0 || peer.get<int64_t>() >= kMaxGpus) {
          return common::InvalidArgument(where + "\"nvlink_peers\" holds a bad index");
        }
        gpu.nvlink_peers.push_back(peer.get<int32_t>());
      }
    }
    if (auto l = g.find("links"); l != g.end() && !l->is_null()) {
      if (!l->is_object()) {
        return common::InvalidArgument(where + "\"links\" is not an object of peer index -> link");
      }
      for (const auto& [key, value] : l->items()) {
        int64_t peer = -1;
        if (key.empty() || key.size() > 4 ||
            !std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          return common::InvalidArgument(where + "\"links\" has a key that is not a GPU index: \"" + key + "\"");
        }
        peer = std::stoll(key);
        if (peer >= static_cast<int64_t>(j.size()) || peer == index) {
          return common::InvalidArgument(where + "\"links\" names GPU " + key +
                                         ", which is not another GPU of the node");
        }
        if (!value.is_string()) {
          return common::InvalidArgument(where + "\"links\"[" + key + "] is not a string");
        }
        // A link name this version does not know is left out (a newer agent may know more kinds).
        if (auto link = ParseLinkName(static_cast<int32_t>(peer), value.get<std::string>())) {
          gpu.links.push_back(*link);
        }
      }
      std::sort(gpu.links.begin(), gpu.links.end(),
                [](const core::GpuLink& a, const core::GpuLink& b) { return a.peer < b.peer; });
    }
    gpus.push_back(std::move(gpu));
  }
  std::sort(gpus.begin(), gpus.end(), [](const core::Gpu& a, const core::Gpu& b) { return a.index < b.index; });
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].index != static_cast<int32_t>(i)) {
      return common::InvalidArgument("GPU inventory: indices must be 0.." + std::to_string(gpus.size() - 1) +
                                     ", found " + std::to_string(gpus[i].index) + " at position " + std::to_string(i));
    }
  }
  return gpus;
}

}  // namespace gpusched::kube
