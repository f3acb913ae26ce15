#include "gpusched/kube/gpu_queue.h"

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;

// The integer at `key` of `amounts` (nullopt when absent), or an error naming `path`.
common::Result<std::optional<int64_t>> Amount(const json& amounts, const char* key, const std::string& path) {
  auto it = amounts.find(key);
  if (it == amounts.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return common::InvalidArgument(path + "." + key + ": want a non-negative integer, got " + it->dump());
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

struct Amounts {
  std::optional<int64_t> gpus, milli, memory;
};

common::Result<Amounts> ReadAmounts(const json& spec, const char* field) {
  Amounts a;
  auto it = spec.find(field);
  if (it == spec.end() || it->is_null()) return a;
  const std::string path = std::string("spec.") + field;
  if (!it->is_object()) return common::InvalidArgument(path + ": want an object, got " + it->dump());
  auto gpus = Amount(*it, "gpus", path);
  if (!gpus.ok()) return gpus.status();
  auto milli = Amount(*it, "gpuMilli", path);
  if (!milli.ok()) return milli.status();
  auto memory = Amount(*it, "gpuMemoryMiB", path);
  if (!memory.ok()) return memory.status();
  a.gpus = *gpus;
  a.milli = *milli;
  a.memory = *memory;
  if (!a.milli && a.gpus) a.milli = *a.gpus * 1000;
  return a;
}

}  // namespace

common::Result<std::string> GpuQueueName(const json& object) {
  const auto meta = object.is_object() ? object.find("metadata") : object.end();
  if (meta == object.end() || !meta->is_object() || !meta->contains("name") || !(*meta)["name"].is_string() ||
      (*meta)["name"].get_ref<const std::string&>().empty()) {
    return common::InvalidArgument("a GpuQueue needs metadata.name");
  }
  return (*meta)["name"].get<std::string>();
}

common::Result<core::QueueSpec> DecodeGpuQueue(const json& object) {
  if (!object.is_object()) return common::InvalidArgument("a GpuQueue must be an object");
  GPUSCHED_ASSIGN_OR_RETURN(name, GpuQueueName(object));
  core::QueueSpec s;
  s.name = std::move(name);
  static const json kEmpty = json::object();
  const auto found = object.find("spec");
  const json& spec = found != object.end() && !found->is_null() ? *found : kEmpty;
  if (!spec.is_object()) return common::InvalidArgument("GpuQueue " + s.name + ": spec: want an object");
  auto fail = [&](const common::Status& st) {
    return common::InvalidArgument("GpuQueue " + s.name + ": " + st.message());
  };
  if (auto p = spec.find("parent"); p != spec.end() && !p->is_null()) {
    if (!p->is_string()) return fail(common::InvalidArgument("spec.parent: want a string, got " + p->dump()));
    s.parent = p->get<std::string>();
  }
  if (auto n = spec.find("namespaces"); n != spec.end() && !n->is_null()) {
    if (!n->is_array()) return fail(common::InvalidArgument("spec.namespaces: want a list, got " + n->dump()));
    for (const auto& ns : *n) {
      if (!ns.is_string() || ns.get<std::string>().empty()) {
        return fail(common::InvalidArgument("spec.namespaces: want names, got " + ns.dump()));
      }
      s.namespaces.push_back(ns.get<std::string>());
    }
  }
  if (auto w = spec.find("weight"); w != spec.end() && !w->is_null()) {
    if (!w->is_number() || !(w->get<double>() > 0) || !std::isfinite(w->get<double>())) {
      return fail(common::InvalidArgument("spec.weight: want a number > 0, got " + w->dump()));
    }
    s.weight = w->get<double>();
  }
  auto guaranteed = ReadAmounts(spec, "guaranteed");
  if (!guaranteed.ok()) return fail(guaranteed.status());
  auto limit = ReadAmounts(spec, "limit");
  if (!limit.ok()) return fail(limit.status());
  constexpr int64_t kAll = core::GpuAmount::kUnlimited;
  s.limit = {limit->gpus.value_or(kAll), limit->milli.value_or(kAll), limit->memory.value_or(kAll)};
  s.guaranteed = {guaranteed->gpus.value_or(0), guaranteed->milli.value_or(0),
                  guaranteed->memory.value_or(limit->memory ? 0 : kAll)};
  return s;
}

json GpuQueueStatus(const core::QueueStatus* st, const std::string& error) {
  auto amounts = [](const core::GpuAmount& a) {
    json out = json::object();
    for (const auto& [key, v] :
         {std::pair{"gpus", a.gpus}, std::pair{"gpuMilli", a.milli}, std::pair{"gpuMemoryMiB", a.memory_mib}}) {
      if (v != core::GpuAmount::kUnlimited) {
        out[key] = v;
      }
    }
    return out;
  };
  json status = json::object();
  if (error.empty() && st != nullptr) {
    status = {{"allocated", amounts(st->allocated)}, {"guaranteed", amounts(st->guaranteed)},
              {"limit", amounts(st->limit)},         {"fairShare", amounts(st->fair_share)},
              {"runningPods", st->running_pods},     {"pendingPods", st->pending_pods},
              {"reclaimedPods", st->reclaimed_pods}};
    status["conditions"] = json::array({{{"type", "Valid"},
                                         {"status", "True"},
                                         {"reason", "Accepted"},
                                         {"message", "the scheduler accounts this queue"}}});
    return status;
  }
  const std::string why = !error.empty() ? error : "not known to the scheduler";
  // A merge patch: null removes what an earlier, valid version of the queue reported.
  for (const char* stale :
       {"allocated", "guaranteed", "limit", "fairShare", "runningPods", "pendingPods", "reclaimedPods"}) {
    status[stale] = nullptr;
  }
  status["conditions"] = json::array({{{"type", "Valid"},
                                       {"status", "False"},
                                       {"reason", "Invalid"},
                                       {"message", "left out (its pods go to the default queue): " + why}}});
  return status;
}

}  // namespace gpusched::kube
