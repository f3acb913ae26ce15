#include "gpusched/adapters/deviceplugin/handoff.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
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

const ports::GpuSample* FindGpu(const core::GpuShare& share, std::span<const ports::GpuSample> gpus) {
  for (const ports::GpuSample& g : gpus) {
    if (share.uuid.empty() ? g.index == share.index : g.uuid == share.uuid) {
      return &g;
    }
  }
  return nullptr;
}

std::string GpuName(const ports::GpuSample& gpu) {
  return "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid.str() + ")";
}

// One pod's claim on one GPU (handoff.h, "Forged allocations").
struct Claim {
  int64_t milli = 0;
  int64_t mib = 0;
  int shares = 0;
  bool exclusive = false;
  bool holds = false;    // a container of an entry naming the GPU holds devices
  bool checked = false;  // an entry naming the GPU comes from the ledger: this plugin handed it out
};

struct PodClaims {
  const PodView* pod = nullptr;
  uint64_t allocation_id = 0;
  std::map<int32_t, Claim> gpus;  // by GPU index
};

struct Rival {
  const PodClaims* pod;
  Claim claim;
};

// The pod's claims on this node's GPUs: its allocation entries, those handed out replaced by the ledger's record
// (and handed-out entries the annotation no longer names added), and `self`'s entry replaced by `self`.
PodClaims ClaimsOf(const PodView& pod, std::string_view node, const KubeletPod* listed, const HandoffLedger& ledger,
                   std::span<const ports::GpuSample> gpus, const ContainerShares* self) {
  struct Entry {
    std::string name;
    std::vector<core::GpuShare> gpus;
    bool checked = false;
  };
  PodClaims out{.pod = &pod};
  std::vector<Entry> entries;
  if (const std::string* text = pod.meta.Annotation(kube::kAnnotationAllocation); text != nullptr) {
    auto allocation = kube::DecodeAllocation(*text, pod.meta.uid);
    if (allocation.ok() && allocation->node.str() == node) {
      out.allocation_id = allocation->id;
      for (auto& c : allocation->containers) {
        entries.push_back(Entry{.name = std::move(c.container), .gpus = std::move(c.gpus)});
      }
    }
  }
  auto replace = [&](const std::string& name, const std::vector<core::GpuShare>& shares, bool checked) {
    auto first = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.name == name; });
    if (first == entries.end()) {
      entries.push_back(Entry{.name = name, .gpus = shares, .checked = checked});
      return;
    }
    first->gpus = shares;
    first->checked = checked;
    entries.erase(std::remove_if(std::next(first), entries.end(), [&](const Entry& e) { return e.name == name; }),
                  entries.end());
  };
  std::map<std::string, const HandoffLedger::Entry*> handed;  // entry -> the widest handout from it
  for (const HandoffLedger::Entry& e : ledger.entries()) {
    if (e.uid == pod.meta.uid && !e.entry.empty() && !e.gpus.empty()) {
      const HandoffLedger::Entry*& slot = handed[e.entry];
      if (slot == nullptr || e.gpus.size() > slot->gpus.size()) {
        slot = &e;
      }
    }
  }
  for (const auto& [name, e] : handed) {
    replace(name, e->gpus, true);
  }
  if (self != nullptr) {
    replace(self->entry, self->gpus, false);
  }

  auto holds = [&](const std::string& entry) {
    const std::string_view name =
        std::string_view(entry).starts_with("init:") ? std::string_view(entry).substr(5) : std::string_view(entry);
    for (const HandoffLedger::Entry& e : ledger.entries()) {
      if (e.uid == pod.meta.uid && (e.container == name || e.entry == entry)) {
        return true;
      }
    }
    if (listed == nullptr) {
      return false;
    }
    const auto view = std::find_if(pod.containers.begin(), pod.containers.end(),
                                   [&](const ContainerView& c) { return c.name == name; });
    for (const KubeletContainer& kc : listed->containers) {
      if (kc.name != name || view == pod.containers.end()) {
        continue;
      }
      for (const auto& [resource, ids] : kc.devices) {
        if (!ids.empty() && view->devices.contains(resource)) {
          return true;
        }
      }
    }
    return false;
  };
  for (const Entry& e : entries) {
    const bool held = holds(e.name);
    for (const core::GpuShare& share : e.gpus) {
      const ports::GpuSample* gpu = FindGpu(share, gpus);
      if (gpu == nullptr) {
        continue;  // not this node's GPU: it claims nothing here
      }
      Claim& c = out.gpus[gpu->index];
      c.milli += share.milli.value();
      c.mib += share.memory.value();
      c.shares += 1;
      c.exclusive = c.exclusive || share.exclusive;
      c.holds = c.holds || held;
      c.checked = c.checked || e.checked;
    }
  }
  return out;
}

std::string Amount(const Claim& c) {
  return std::to_string(c.milli) + " milli-GPU, " + std::to_string(c.mib) + " MiB" + (c.exclusive ? ", exclusive" : "");
}

std::string Describe(std::span<const Rival> rivals) {
  std::string out;
  for (size_t i = 0; i < rivals.size(); ++i) {
    const Rival& r = rivals[i];
    out += std::string(i > 0 ? ", " : "") + "pod " + r.pod->pod->meta.Key() + " (" + Amount(r.claim) +
           (r.claim.holds ? "; holds its devices)" : "; bound, holds no devices yet)");
  }
  return out;
}

// A rival with the same (non-zero) allocation id: the annotation was probably copied from it.
std::string CopiedNote(const PodClaims& mine, std::span<const Rival> rivals) {
  if (mine.allocation_id == 0) {
    return "";
  }
  for (const Rival& r : rivals) {
    if (r.pod->allocation_id == mine.allocation_id) {
      return " (allocation id " + std::to_string(mine.allocation_id) + " is pod " + r.pod->pod->meta.Key() +
             "'s too: a copied annotation?)";
    }
  }
  return "";
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

common::Result<ContainerShares> SharesFor(const HandoffRequest& request, const PodView& pod,
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
  std::set<std::string_view> names;
  for (const auto& c : allocation->containers) {
    if (!names.insert(c.container).second) {
      // Which of the two would it be? Neither: the annotation is not one gpusched writes.
      return common::FailedPrecondition("pod " + pod.meta.Key() + ": its allocation names container entry \"" +
                                        c.container + "\" twice");
    }
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
  return ContainerShares{
      .entry = entry->container,
      .gpus = std::vector<core::GpuShare>(entry->gpus.begin(), entry->gpus.begin() + static_cast<std::ptrdiff_t>(n))};
}

common::Result<ContainerShares> ResolveShares(std::string_view node, const PodView& pod, const ContainerView& container,
                                              ContainerShares shares, std::span<const ports::GpuSample> gpus) {
  const std::string who = "pod " + pod.meta.Key() + " container " + container.name;
  std::set<int32_t> seen;
  for (auto& share : shares.gpus) {
    const ports::GpuSample* gpu = FindGpu(share, gpus);
    if (gpu == nullptr) {
      return common::FailedPrecondition(who + ": the allocation names GPU " +
                                        (share.uuid.empty() ? std::to_string(share.index) : share.uuid.str()) +
                                        ", which node " + std::string(node) + " does not have");
    }
    share.uuid = gpu->uuid;
    share.index = gpu->index;
    share.numa_node = gpu->numa_node;  // where the GPU is, as this node sees it, whatever the allocation recorded
    if (!seen.insert(share.index).second) {
      return common::FailedPrecondition(who + ": its allocation entry \"" + shares.entry + "\" names " + GpuName(*gpu) +
                                        " twice (a container gets distinct GPUs)");
    }
    if (!share.exclusive && share.milli.value() <= 0 && share.memory.value() <= 0) {
      return common::FailedPrecondition(who + ": its allocation gives it nothing of " + GpuName(*gpu) +
                                        " (0 milli-GPU, 0 MiB, not exclusive)");
    }
  }
  return shares;
}

common::Status CheckGpuConflicts(const ConflictCheck& check, std::span<const PodView> pods,
                                 std::span<const KubeletPod> kubelet, const HandoffLedger& ledger,
                                 std::span<const ports::GpuSample> gpus) {
  const PodView& pod = *check.pod;
  const std::string who = "pod " + pod.meta.Key() + " container " + check.container->name;
  std::map<std::string, const KubeletPod*, std::less<>> listed;
  for (const KubeletPod& kp : kubelet) {
    listed[kp.Key()] = &kp;
  }
  auto listed_pod = [&](const PodView& p) -> const KubeletPod* {
    auto it = listed.find(p.meta.Key());
    return it == listed.end() ? nullptr : it->second;
  };
  const PodClaims mine = ClaimsOf(pod, check.node, listed_pod(pod), ledger, gpus, check.shares);
  // At PreStartContainer a container this plugin handed its GPUs was checked at Allocate; only holders that were
  // checked as well can overrule it (header).
  const bool self_checked =
      check.stage == ConflictStage::kPreStart &&
      std::any_of(ledger.entries().begin(), ledger.entries().end(), [&](const HandoffLedger::Entry& e) {
        return e.uid == pod.meta.uid && e.container == check.container->name && !e.gpus.empty();
      });
  std::vector<PodClaims> others;
  for (const PodView& p : pods) {
    if (p.meta.uid == pod.meta.uid || p.meta.Terminal() ||
        (!p.meta.node_name.empty() && p.meta.node_name != check.node)) {
      continue;
    }
    PodClaims c = ClaimsOf(p, check.node, listed_pod(p), ledger, gpus, nullptr);
    if (!c.gpus.empty()) {
      others.push_back(std::move(c));
    }
  }
  const std::string tail = "; refused (docs/device-plugin.md, \"Forged allocations\")";
  std::set<int32_t> done;
  for (const core::GpuShare& share : check.shares->gpus) {
    if (!done.insert(share.index).second) {
      continue;
    }
    const ports::GpuSample* gpu = FindGpu(share, gpus);
    auto own = mine.gpus.find(share.index);
    if (gpu == nullptr || own == mine.gpus.end()) {
      continue;  // ResolveShares refuses these
    }
    const Claim& m = own->second;
    const std::string gname = GpuName(*gpu);
    if (m.exclusive && m.shares > 1) {
      return common::FailedPrecondition(who + ": its pod's allocation names " + gname + " " + std::to_string(m.shares) +
                                        " times with an exclusive share" + tail);
    }
    std::vector<Rival> rivals;
    for (const PodClaims& o : others) {
      auto it = o.gpus.find(share.index);
      if (it == o.gpus.end()) {
        continue;
      }
      const Claim& c = it->second;
      if (check.stage == ConflictStage::kPreStart && (!c.holds || (self_checked && !c.checked))) {
        continue;
      }
      rivals.push_back(Rival{.pod = &o, .claim = c});
    }
    if (rivals.empty()) {
      continue;
    }
    const std::string copied = CopiedNote(mine, rivals);
    if (m.exclusive) {
      return common::FailedPrecondition(who + ": its allocation asks for " + gname +
                                        " exclusively, but it is allocated to " + Describe(rivals) + copied + tail);
    }
    for (const Rival& r : rivals) {
      if (r.claim.exclusive) {
        return common::FailedPrecondition(who + ": " + gname + " is " + (r.claim.holds ? "held" : "claimed") +
                                          " exclusively by " + Describe(std::span<const Rival>(&r, 1)) + copied + tail);
      }
    }
    int64_t milli = m.milli;
    int64_t mib = m.mib;
    for (const Rival& r : rivals) {
      milli += r.claim.milli;
      mib += r.claim.mib;
    }
    const std::string asks = who + ": " + gname + " would be overcommitted: pod " + pod.meta.Key() + " asks " +
                             Amount(m) + " of it, and it is allocated to " + Describe(rivals) + "; together ";
    if (milli > common::kGpuMilli.value()) {
      return common::FailedPrecondition(asks + std::to_string(milli) + " milli-GPU > " +
                                        std::to_string(common::kGpuMilli.value()) + copied + tail);
    }
    if (gpu->memory_total.value() > 0 && mib > gpu->memory_total.value()) {
      return common::FailedPrecondition(asks + std::to_string(mib) + " MiB > " +
                                        std::to_string(gpu->memory_total.value()) + " MiB (the GPU's memory)" + copied +
                                        tail);
    }
  }
  return common::Status::Ok();
}

}  // namespace gpusched::adapters::deviceplugin
