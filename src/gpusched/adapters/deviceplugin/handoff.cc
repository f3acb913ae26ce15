#include "gpusched/adapters/deviceplugin/handoff.h"

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/quantity.h"

namespace gpusched::adapters::deviceplugin {
namespace {

using nlohmann::json;

const json* Find(const json& object, std::string_view key) {
  if (!object.is_object()) {
    return nullptr;
  }
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

common::Result<int64_t> Count(const json& value) {
  if (value.is_string()) {
    return kube::ParseQuantity(value.get_ref<const std::string&>());
  }
  if (value.is_number_integer()) {
    return value.get<int64_t>();
  }
  return common::InvalidArgument("is not a quantity");
}

std::string JoinIds(std::span<const std::string> ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    out += (i > 0 ? ", " : "") + ids[i];
  }
  return out + "]";
}

std::vector<std::string> Sorted(std::span<const std::string> ids) {
  std::vector<std::string> out(ids.begin(), ids.end());
  std::sort(out.begin(), out.end());
  return out;
}

struct Waiting {
  const PodView* pod;
  size_t container;
  int64_t count;
  bool listed;
};

std::string Describe(const std::vector<Waiting>& waiting) {
  std::string out;
  for (size_t i = 0; i < waiting.size(); ++i) {
    const Waiting& w = waiting[i];
    out += (i > 0 ? ", " : "") + w.pod->meta.Key() + " (container " + w.pod->containers[w.container].name + ", " +
           std::to_string(w.count) + (w.listed ? ", listed by the kubelet)" : ")");
  }
  return out;
}

}  // namespace

common::Result<PodView> DecodePodView(const json& pod, const std::set<std::string, std::less<>>& resources) {
  GPUSCHED_ASSIGN_OR_RETURN(meta, kube::DecodePodMeta(pod));
  PodView out{.meta = std::move(meta)};
  const json* spec = Find(pod, "spec");
  if (spec == nullptr) {
    return out;
  }
  for (const auto& [key, init] :
       {std::pair<const char*, bool>{"initContainers", true}, std::pair<const char*, bool>{"containers", false}}) {
    const json* list = Find(*spec, key);
    if (list == nullptr || !list->is_array()) {
      continue;
    }
    for (const json& c : *list) {
      ContainerView view{.init = init};
      if (const json* name = Find(c, "name"); name != nullptr && name->is_string()) {
        view.name = name->get<std::string>();
      }
      const json* res = Find(c, "resources");
      for (const char* which : {"limits", "requests"}) {  // limits first: the kubelet reads limits
        const json* amounts = res != nullptr ? Find(*res, which) : nullptr;
        if (amounts == nullptr || !amounts->is_object()) {
          continue;
        }
        for (const auto& [resource, value] : amounts->items()) {
          if (!resources.contains(resource) || view.devices.contains(resource)) {
            continue;
          }
          auto n = Count(value);
          if (!n.ok()) {
            return common::InvalidArgument("pod " + out.meta.Key() + " container " + view.name + ": " + resource +
                                           ": " + n.status().message());
          }
          if (*n > 0) {
            view.devices[resource] = *n;
          }
        }
      }
      out.containers.push_back(std::move(view));
    }
  }
  return out;
}

void HandoffLedger::Record(Entry entry) {
  std::sort(entry.device_ids.begin(), entry.device_ids.end());
  std::erase_if(entries_, [&](const Entry& e) {
    return e.uid == entry.uid && e.container == entry.container && e.resource == entry.resource;
  });
  entries_.push_back(std::move(entry));
}

bool HandoffLedger::Holds(const common::PodUid& uid, std::string_view container, std::string_view resource) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.uid == uid && e.container == container && e.resource == resource;
  });
}

std::optional<HandoffLedger::Entry> HandoffLedger::FindByDevices(std::string_view resource,
                                                                 std::span<const std::string> ids) const {
  const std::vector<std::string> want = Sorted(ids);
  for (const Entry& e : entries_) {
    if (e.resource == resource && e.device_ids == want) {
      return e;
    }
  }
  return std::nullopt;
}

void HandoffLedger::Retain(const std::set<common::PodUid>& live) {
  std::erase_if(entries_, [&](const Entry& e) { return !live.contains(e.uid); });
}

const char* HandoffRuleName(HandoffRule rule) {
  switch (rule) {
    case HandoffRule::kOnlyWaitingPod:
      return "only waiting pod";
    case HandoffRule::kOnlyCountMatch:
      return "only waiting pod with that device count";
    case HandoffRule::kKubeletAdmitting:
      return "pod under admission (listed by the kubelet)";
  }
  return "?";
}

common::Result<HandoffTarget> FindTarget(const HandoffRequest& request, std::span<const PodView> pods,
                                         std::span<const KubeletPod> kubelet, const HandoffLedger& ledger) {
  const std::string resource(request.resource);
  const auto n = static_cast<int64_t>(request.device_ids.size());
  const std::string what = std::to_string(n) + " " + resource + " device(s) " + JoinIds(request.device_ids);
  if (n == 0) {
    return common::InvalidArgument("Allocate for " + resource + " without device ids");
  }
  std::map<std::string, const KubeletPod*> listed;
  for (const KubeletPod& p : kubelet) {
    listed[p.Key()] = &p;
  }

  std::vector<Waiting> waiting;
  for (const PodView& pod : pods) {
    if (pod.meta.Terminal() || (!pod.meta.node_name.empty() && pod.meta.node_name != request.node)) {
      continue;
    }
    auto lit = listed.find(pod.meta.Key());
    const KubeletPod* kp = lit == listed.end() ? nullptr : lit->second;
    auto held = [&](const ContainerView& c) {
      if (ledger.Holds(pod.meta.uid, c.name, resource)) {
        return true;
      }
      if (kp == nullptr) {
        return false;
      }
      for (const KubeletContainer& kc : kp->containers) {
        if (kc.name == c.name) {
          auto d = kc.devices.find(resource);
          return d != kc.devices.end() && !d->second.empty();
        }
      }
      return false;
    };
    size_t first = 0;  // containers before the last one holding devices are done
    for (size_t i = 0; i < pod.containers.size(); ++i) {
      if (held(pod.containers[i])) {
        first = i + 1;
      }
    }
    for (size_t i = first; i < pod.containers.size(); ++i) {
      auto d = pod.containers[i].devices.find(resource);
      if (d != pod.containers[i].devices.end()) {
        waiting.push_back(Waiting{.pod = &pod, .container = i, .count = d->second, .listed = kp != nullptr});
        break;
      }
    }
  }

  auto pick = [&](const Waiting& w, HandoffRule rule) -> common::Result<HandoffTarget> {
    if (w.count != n) {
      return common::FailedPrecondition("kubelet passed " + what + " but container " +
                                        w.pod->containers[w.container].name + " of pod " + w.pod->meta.Key() +
                                        " requests " + std::to_string(w.count));
    }
    return HandoffTarget{.pod = w.pod, .container = w.container, .rule = rule};
  };

  if (waiting.empty()) {
    return common::NotFound("no pod bound to node " + std::string(request.node) + " waits for " + resource +
                            ": cannot place " + what +
                            " (every pod on the node requests none or already holds its devices)");
  }
  if (waiting.size() == 1) {
    return pick(waiting[0], HandoffRule::kOnlyWaitingPod);
  }
  std::vector<Waiting> same_count;
  std::copy_if(waiting.begin(), waiting.end(), std::back_inserter(same_count),
               [&](const Waiting& w) { return w.count == n; });
  if (same_count.empty()) {
    return common::FailedPrecondition("kubelet passed " + what + " but no waiting pod asks for " + std::to_string(n) +
                                      ": " + Describe(waiting));
  }
  if (same_count.size() == 1) {
    return pick(same_count[0], HandoffRule::kOnlyCountMatch);
  }
  std::vector<Waiting> admitting;
  std::copy_if(same_count.begin(), same_count.end(), std::back_inserter(admitting),
               [](const Waiting& w) { return w.listed; });
  if (admitting.size() == 1) {
    return pick(admitting[0], HandoffRule::kKubeletAdmitting);
  }
  return common::Aborted("ambiguous handoff of " + what + " on node " + std::string(request.node) + ": pods " +
                         Describe(same_count) + " all wait for it and the kubelet lists " +
                         std::to_string(admitting.size()) +
                         " of them as under admission; refusing to guess (docs/device-plugin.md)");
}

common::Result<std::vector<core::GpuShare>> SharesFor(const HandoffRequest& request, const PodView& pod,
                                                      const ContainerView& container) {
  const std::string who = "pod " + pod.meta.Key() + " container " + container.name;
  const size_t n = request.device_ids.size();
  const std::string* text = pod.meta.Annotation(kube::kAnnotationAllocation);
  if (text == nullptr) {
    return common::FailedPrecondition(who + " requests " + std::string(request.resource) + " but the pod has no " +
                                      std::string(kube::kAnnotationAllocation) +
                                      " annotation (was it scheduled by gpusched? schedulerName \"" +
                                      pod.meta.scheduler_name + "\")");
  }
  auto allocation = kube::DecodeAllocation(*text, pod.meta.uid);
  if (!allocation.ok()) {
    return common::InvalidArgument("pod " + pod.meta.Key() + ": " + std::string(kube::kAnnotationAllocation) + ": " +
                                   allocation.status().message());
  }
  if (allocation->node.str() != request.node) {
    return common::FailedPrecondition("pod " + pod.meta.Key() + ": its allocation is for node " +
                                      allocation->node.str() + ", this is node " + std::string(request.node));
  }
  const core::ContainerAllocation* entry = nullptr;
  bool covering = false;
  const std::string own = container.init ? "init:" + container.name : container.name;
  for (const auto& c : allocation->containers) {
    if (c.container == own) {
      entry = &c;
    }
  }
  if (entry == nullptr && container.init) {
    for (const auto& c : allocation->containers) {
      if (!c.container.starts_with("init:") && c.gpus.size() >= n) {
        entry = &c;
        covering = true;
        break;
      }
    }
  }
  if (entry == nullptr || entry->gpus.empty()) {
    return common::FailedPrecondition(who + ": the allocation names no GPUs for it (" +
                                      std::string(kube::kAnnotationAllocation) + ": " + *text + ")");
  }
  if (!covering && entry->gpus.size() != n) {
    std::string uuids;
    for (const auto& g : entry->gpus) {
      uuids += (uuids.empty() ? "" : ", ") + g.uuid.str();
    }
    return common::FailedPrecondition(who + ": kubelet passed " + std::to_string(n) + " device(s) " +
                                      JoinIds(request.device_ids) + " but the allocation names " +
                                      std::to_string(entry->gpus.size()) + " GPU(s) [" + uuids + "]");
  }
  return std::vector<core::GpuShare>(entry->gpus.begin(), entry->gpus.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace gpusched::adapters::deviceplugin
