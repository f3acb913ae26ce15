#include "gpusched/core/cluster_state.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

namespace gpusched::core {

using common::Status;

namespace {

std::string Fmt(int64_t v) { return std::to_string(v); }

bool HasPreferNoSchedule(const Node& node) {
  return std::any_of(node.taints.begin(), node.taints.end(),
                     [](const Taint& t) { return t.effect == TaintEffect::kPreferNoSchedule; });
}

void AddShape(std::vector<std::pair<int32_t, int32_t>>& counts, int32_t tag, int32_t delta) {
  if (tag < 0) {
    return;
  }
  auto it = std::lower_bound(counts.begin(), counts.end(), std::pair<int32_t, int32_t>{tag, INT32_MIN});
  if (it != counts.end() && it->first == tag) {
    it->second += delta;
    if (it->second == 0) {
      counts.erase(it);
    }
  } else {
    counts.insert(it, {tag, delta});
  }
}

}  // namespace

Status ClusterState::AddNode(Node node) {
  if (node.name.empty()) {
    return common::InvalidArgument("node has no name");
  }
  if (index_.Find(node.name.str()).has_value()) {
    return common::AlreadyExists("node " + node.name.str() + " already exists");
  }
  if (node.cpu.value() < 0 || node.memory.value() < 0) {
    return common::InvalidArgument("node " + node.name.str() + " has negative capacity");
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i].index != static_cast<int32_t>(i)) {
      return common::InvalidArgument("node " + node.name.str() + ": GPU at position " + Fmt(static_cast<int64_t>(i)) +
                                     " has index " + Fmt(node.gpus[i].index));
    }
    if (node.gpus[i].memory.value() < 0) {
      return common::InvalidArgument("node " + node.name.str() + ": GPU " + Fmt(static_cast<int64_t>(i)) +
                                     " has negative memory");
    }
  }
  size_t slot_index = 0;
  if (!free_slots_.empty()) {
    slot_index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot_index = slots_.size();
    slots_.emplace_back();
  }
  Slot& slot = slots_[slot_index];
  const auto name = node.name;
  capacity_milli_ += common::kGpuMilli * static_cast<int64_t>(node.gpus.size());
  prefer_no_schedule_nodes_ += HasPreferNoSchedule(node) ? 1U : 0U;
  slot.view = NodeView::Empty(std::make_shared<const Node>(std::move(node)));
  slot.pods.clear();
  slot.live = true;
  Touch(slot);
  ++freed_generation_;
  index_.Insert(name.str(), slot_index);
  return Status::Ok();
}

void ClusterState::CountPreferNoSchedule(const Node& before, const Node& after) {
  prefer_no_schedule_nodes_ -= HasPreferNoSchedule(before) ? 1U : 0U;
  prefer_no_schedule_nodes_ += HasPreferNoSchedule(after) ? 1U : 0U;
}

common::Result<std::vector<Allocation>> ClusterState::UpdateNode(Node node) {
  const std::optional<size_t> slot_of = index_.Find(node.name.str());
  if (!slot_of.has_value()) {
    GPUSCHED_RETURN_IF_ERROR(AddNode(std::move(node)));
    return std::vector<Allocation>{};
  }
  Slot& slot = slots_[*slot_of];
  const Node& old = *slot.view.node;
  if (old.SameCapacity(node)) {
    // Labels, taints or cordon changed (or nothing): the new description, the same charges.
    if (old.labels != node.labels || old.taints != node.taints || old.unschedulable != node.unschedulable) {
      CountPreferNoSchedule(old, node);
      slot.view.node = std::make_shared<const Node>(std::move(node));
      Touch(slot);
      ++freed_generation_;
    }
    return std::vector<Allocation>{};
  }
  if (node.cpu.value() < 0 || node.memory.value() < 0) {
    return common::InvalidArgument("node " + node.name.str() + " has negative capacity");
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i].index != static_cast<int32_t>(i) || node.gpus[i].memory.value() < 0) {
      return common::InvalidArgument("node " + node.name.str() + ": GPU at position " + Fmt(static_cast<int64_t>(i)) +
                                     " has index " + Fmt(node.gpus[i].index) + " or negative memory");
    }
  }
  // Re-charge every allocation to the new description: where it no longer fits it is charged anyway (forced);
  // where the GPU it names is gone it cannot be, and goes back to the caller.
  Slot fresh;
  CountPreferNoSchedule(old, node);
  fresh.view = NodeView::Empty(std::make_shared<const Node>(std::move(node)));
  fresh.live = true;
  const auto allocated = allocated_milli_;
  common::MilliGpu orphaned_milli{0};
  std::vector<Allocation> orphaned;
  for (const auto& pod : slot.pods) {
    auto entry = allocations_.find(pod);
    Entry& e = entry->second;
    if (!ValidateShape(e.allocation, fresh).ok()) {
      orphaned_milli += e.allocation.TotalMilli();
      orphaned.push_back(std::move(e.allocation));
      allocations_.erase(entry);
      continue;
    }
    e.forced = !Validate(e.allocation, fresh).ok();
    Apply(e.allocation, fresh, +1);
    fresh.pods.push_back(pod);
    fresh.forced += e.forced ? 1 : 0;
  }
  allocated_milli_ = allocated - orphaned_milli;
  capacity_milli_ +=
      common::kGpuMilli * (static_cast<int64_t>(fresh.view.gpus.size()) - static_cast<int64_t>(slot.view.gpus.size()));
  slot.view = std::move(fresh.view);
  slot.pods = std::move(fresh.pods);
  slot.forced = fresh.forced;
  Touch(slot);
  ++freed_generation_;
  return orphaned;
}

Status ClusterState::RemoveNode(const common::NodeName& name) {
  const std::optional<size_t> slot_of = index_.Find(name.str());
  if (!slot_of.has_value()) {
    return common::NotFound("node " + name.str() + " not found");
  }
  Slot& slot = slots_[*slot_of];
  for (const auto& pod : slot.pods) {
    auto a = allocations_.find(pod);
    allocated_milli_ -= a->second.allocation.TotalMilli();
    allocations_.erase(a);
  }
  capacity_milli_ -= common::kGpuMilli * static_cast<int64_t>(slot.view.gpus.size());
  prefer_no_schedule_nodes_ -= HasPreferNoSchedule(*slot.view.node) ? 1U : 0U;
  slot.pods.clear();
  slot.forced = 0;
  slot.live = false;
  slot.view = NodeView{};
  Touch(slot);
  free_slots_.push_back(*slot_of);
  index_.Erase(name.str());
  return Status::Ok();
}

namespace {

// The allocation's shares summed per GPU (two containers may share one), after the checks that do not depend on
// what is free: index in range, the UUID of that GPU, a positive share, no exclusive share named twice.
common::Result<std::map<int32_t, GpuShare>> PerGpu(const Allocation& a, const NodeView& v, const std::string& where) {
  std::map<int32_t, GpuShare> per_gpu;
  for (const auto& c : a.containers) {
    for (const auto& s : c.gpus) {
      if (s.index < 0 || static_cast<size_t>(s.index) >= v.gpus.size()) {
        return common::InvalidArgument(where + "GPU index " + Fmt(s.index) + " out of range (node has " +
                                       Fmt(static_cast<int64_t>(v.gpus.size())) + ")");
      }
      const Gpu& gpu = v.node->gpus[static_cast<size_t>(s.index)];
      if (!s.uuid.empty() && s.uuid != gpu.uuid) {
        return common::InvalidArgument(where + "GPU " + Fmt(s.index) + " has UUID " + gpu.uuid.str() + ", not " +
                                       s.uuid.str());
      }
      if (s.milli.value() < 0 || s.memory.value() < 0 || (s.milli.value() == 0 && s.memory.value() == 0)) {
        return common::InvalidArgument(where + "GPU " + Fmt(s.index) + ": a share needs positive milli or memory");
      }
      auto [it, inserted] = per_gpu.try_emplace(s.index, s);
      if (!inserted) {
        if (s.exclusive || it->second.exclusive) {
          return common::InvalidArgument(where + "GPU " + Fmt(s.index) + " is named twice with an exclusive share");
        }
        it->second.milli += s.milli;
        it->second.memory += s.memory;
      }
    }
  }
  return per_gpu;
}

std::string Where(const Allocation& a) { return "pod " + a.pod.str() + " on node " + a.node.str() + ": "; }

}  // namespace

Status ClusterState::ValidateShape(const Allocation& a, const Slot& slot) const {
  if (a.cpu.value() < 0 || a.memory.value() < 0) {
    return common::InvalidArgument(Where(a) + "negative CPU or memory request");
  }
  for (const auto& [name, amount] : a.scalars) {
    if (amount < 0) {
      return common::InvalidArgument(Where(a) + "negative request of " + name);
    }
  }
  return PerGpu(a, slot.view, Where(a)).status();
}

Status ClusterState::Validate(const Allocation& a, const Slot& slot) const {
  const NodeView& v = slot.view;
  const std::string where = Where(a);
  GPUSCHED_RETURN_IF_ERROR(ValidateShape(a, slot));
  if (a.cpu > v.cpu_free) {
    return common::ResourceExhausted(where + "needs " + Fmt(a.cpu.value()) + " milli-CPU, " + Fmt(v.cpu_free.value()) +
                                     " free");
  }
  if (a.memory > v.memory_free) {
    return common::ResourceExhausted(where + "needs " + Fmt(a.memory.value()) + " MiB of memory, " +
                                     Fmt(v.memory_free.value()) + " free");
  }
  for (const auto& [name, amount] : a.scalars) {
    auto it = v.scalar_free.find(name);
    const int64_t free = it == v.scalar_free.end() ? 0 : it->second;
    if (amount > free) {
      return common::ResourceExhausted(where + "needs " + Fmt(amount) + " of " + name + ", " + Fmt(free) + " free");
    }
  }
  for (const HostPort& p : a.host_ports) {
    for (const HostPort& used : v.host_ports) {
      if (p.ConflictsWith(used)) {
        return common::ResourceExhausted(where + "host port " + p.protocol + "/" + Fmt(p.port) + " is in use");
      }
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(per_gpu, PerGpu(a, v, where));
  for (const auto& [index, s] : per_gpu) {
    const GpuState& g = v.gpus[static_cast<size_t>(index)];
    const Gpu& gpu = v.node->gpus[static_cast<size_t>(index)];
    const std::string gname = "GPU " + Fmt(index) + " (" + gpu.model + ")";
    if (g.exclusive) {
      return common::ResourceExhausted(where + gname + " is held exclusively");
    }
    if (s.exclusive && g.holders > 0) {
      return common::ResourceExhausted(where + gname + " is shared by " + Fmt(g.holders) +
                                       " pods, an exclusive share needs it idle");
    }
    if (!s.exclusive && !ShareGroupAdmits(g.share_group, g.holders, a.share_group)) {
      return common::ResourceExhausted(where + gname +
                                       " is shared by pods this pod may not share a GPU with (shareWithin: another "
                                       "namespace or queue)");
    }
    if (s.milli > g.free) {
      return common::ResourceExhausted(where + gname + " has " + Fmt(g.free.value()) + " milli free, needs " +
                                       Fmt(s.milli.value()));
    }
    if (s.memory > g.memory_free) {
      return common::ResourceExhausted(where + gname + " has " + Fmt(g.memory_free.value()) + " MiB free, needs " +
                                       Fmt(s.memory.value()) + " MiB");
    }
  }
  return Status::Ok();
}

ClusterState::Others ClusterState::OthersOn(const Slot& slot, int32_t gpu, const common::PodUid& except) const {
  Others others;
  int32_t holders = 0;
  for (const auto& pod : slot.pods) {
    if (pod == except) {
      continue;
    }
    auto it = allocations_.find(pod);
    if (it == allocations_.end()) {
      continue;
    }
    for (const auto& c : it->second.allocation.containers) {
      for (const auto& s : c.gpus) {
        if (s.index == gpu) {
          others.exclusive = others.exclusive || s.exclusive;
          others.group = JoinShareGroup(others.group, holders++, it->second.allocation.share_group);
        }
      }
    }
  }
  return others;
}

void ClusterState::Apply(const Allocation& a, Slot& slot, int sign) {
  NodeView& v = slot.view;
  v.cpu_free -= a.cpu * sign;
  v.memory_free -= a.memory * sign;
  for (const auto& c : a.containers) {
    for (const auto& s : c.gpus) {
      GpuState& g = v.gpus[static_cast<size_t>(s.index)];
      g.free -= s.milli * sign;
      g.memory_free -= s.memory * sign;
      if (sign > 0) {
        g.share_group = JoinShareGroup(g.share_group, g.holders, a.share_group);
      }
      g.holders += sign;
      if (sign > 0) {
        g.exclusive = g.exclusive || s.exclusive;
      } else if (g.holders == 0) {
        g.exclusive = false;
        g.share_group = 0;
      } else if (s.exclusive || g.share_group == kMixedShareGroup) {
        // Those who stay: only an overcommitted node (Charge) can have a second exclusive holder left when one
        // goes, and a GPU of mixed sharers may have become one group's again. (Otherwise the sharers who stay are
        // of the group the GPU has, and as exclusive as before.)
        const Others others = OthersOn(slot, s.index, a.pod);
        g.exclusive = others.exclusive;
        g.share_group = others.group;
      }
    }
  }
  v.pods += sign;
  ApplyScalarsAndPorts(v, a.scalars, a.host_ports, sign);
  AddShape(v.shape_counts, a.ShapeTag(), sign);
  allocated_milli_ += a.TotalMilli() * sign;
  Touch(slot);
  freed_generation_ += sign < 0 ? 1U : 0U;
}

Status ClusterState::Assume(Allocation allocation) { return Add(std::move(allocation), /*charge=*/false, nullptr); }

Status ClusterState::Charge(Allocation allocation, std::string* overcommit) {
  return Add(std::move(allocation), /*charge=*/true, overcommit);
}

Status ClusterState::Add(Allocation allocation, bool charge, std::string* overcommit) {
  if (allocation.pod.empty()) {
    return common::InvalidArgument("allocation has no pod");
  }
  if (allocations_.contains(allocation.pod)) {
    return common::AlreadyExists("pod " + allocation.pod.str() + " already holds an allocation");
  }
  const std::optional<size_t> slot_of = index_.Find(allocation.node.str());
  if (!slot_of.has_value()) {
    return common::NotFound("pod " + allocation.pod.str() + ": node " + allocation.node.str() + " not found");
  }
  Slot& slot = slots_[*slot_of];
  // A decision must fit; a charge (the pod is bound) only needs a shape the node can hold.
  const Status fit = Validate(allocation, slot);
  if (!fit.ok() && !charge) {
    return fit;
  }
  if (!fit.ok()) {
    GPUSCHED_RETURN_IF_ERROR(ValidateShape(allocation, slot));
    ++slot.forced;
    if (overcommit != nullptr) {
      *overcommit = fit.message();
    }
  }
  Apply(allocation, slot, +1);
  slot.pods.push_back(allocation.pod);
  const auto pod = allocation.pod;
  allocations_.emplace(
      pod, Entry{.allocation = std::move(allocation), .slot = *slot_of, .confirmed = charge, .forced = !fit.ok()});
  return Status::Ok();
}

Status ClusterState::Confirm(const common::PodUid& pod) {
  auto it = allocations_.find(pod);
  if (it == allocations_.end()) {
    return common::NotFound("pod " + pod.str() + " holds no allocation to confirm");
  }
  if (it->second.confirmed) {
    return common::FailedPrecondition("pod " + pod.str() + " is already confirmed");
  }
  it->second.confirmed = true;
  return Status::Ok();
}

Status ClusterState::Forget(const common::PodUid& pod) {
  auto it = allocations_.find(pod);
  if (it == allocations_.end()) {
    return common::NotFound("pod " + pod.str() + " holds no allocation to forget");
  }
  if (it->second.confirmed) {
    return common::FailedPrecondition("pod " + pod.str() + " is confirmed; release it instead of forgetting");
  }
  return Release(pod);
}

Status ClusterState::Release(const common::PodUid& pod) {
  auto it = allocations_.find(pod);
  if (it == allocations_.end()) {
    return common::NotFound("pod " + pod.str() + " holds no allocation to release");
  }
  Slot& slot = slots_[it->second.slot];
  Apply(it->second.allocation, slot, -1);
  if (it->second.forced) {
    --slot.forced;
  }
  auto p = std::find(slot.pods.begin(), slot.pods.end(), pod);
  GPUSCHED_CHECK(p != slot.pods.end(), "allocation missing from its node's pod list");
  *p = std::move(slot.pods.back());
  slot.pods.pop_back();
  allocations_.erase(it);
  return Status::Ok();
}

const NodeView* ClusterState::Find(const common::NodeName& name) const {
  const std::optional<size_t> slot_of = index_.Find(name.str());
  return !slot_of.has_value() ? nullptr : &slots_[*slot_of].view;
}

std::optional<size_t> ClusterState::SlotOf(std::string_view name) const { return index_.Find(name); }

const Allocation* ClusterState::FindAllocation(const common::PodUid& pod) const {
  auto it = allocations_.find(pod);
  return it == allocations_.end() ? nullptr : &it->second.allocation;
}

bool ClusterState::IsConfirmed(const common::PodUid& pod) const {
  auto it = allocations_.find(pod);
  return it != allocations_.end() && it->second.confirmed;
}

std::vector<common::PodUid> ClusterState::PodsOn(const common::NodeName& name) const {
  const std::optional<size_t> slot_of = index_.Find(name.str());
  if (!slot_of.has_value()) {
    return {};
  }
  return slots_[*slot_of].pods;
}

Status ClusterState::CheckSlot(const Slot& slot) const {
  const NodeView& v = slot.view;
  const Node& node = *v.node;
  NodeView want = NodeView::Empty(v.node);
  want.generation = v.generation;
  for (const auto& pod : slot.pods) {
    auto it = allocations_.find(pod);
    if (it == allocations_.end()) {
      return common::Internal("node " + node.name.str() + " lists pod " + pod.str() + " with no allocation");
    }
    const Allocation& a = it->second.allocation;
    want.cpu_free -= a.cpu;
    want.memory_free -= a.memory;
    for (const auto& c : a.containers) {
      for (const auto& s : c.gpus) {
        GpuState& g = want.gpus[static_cast<size_t>(s.index)];
        g.free -= s.milli;
        g.memory_free -= s.memory;
        g.share_group = JoinShareGroup(g.share_group, g.holders, a.share_group);
        g.holders += 1;
        if (s.exclusive) {
          if (g.exclusive && slot.forced == 0) {
            return common::Internal("node " + node.name.str() + " GPU " + Fmt(s.index) + " held exclusively twice");
          }
          g.exclusive = true;
        }
      }
    }
    want.pods += 1;
    ApplyScalarsAndPorts(want, a.scalars, a.host_ports, 1);
    AddShape(want.shape_counts, a.ShapeTag(), 1);
  }
  const std::string n = "node " + node.name.str() + ": ";
  // Capacity holds wherever nothing was charged past it (Charge, UpdateNode); consistency holds everywhere.
  const bool capped = slot.forced == 0;
  if (capped && (want.cpu_free.value() < 0 || want.memory_free.value() < 0)) {
    return common::Internal(n + "CPU or memory overcommitted");
  }
  if (want.cpu_free != v.cpu_free || want.memory_free != v.memory_free) {
    return common::Internal(n + "free CPU/memory disagree with allocations");
  }
  if (want.pods != v.pods || want.shape_counts != v.shape_counts) {
    return common::Internal(n + "pod count or shapes disagree with allocations");
  }
  auto sorted_ports = [](std::vector<HostPort> ports) {
    std::sort(ports.begin(), ports.end(), [](const HostPort& a, const HostPort& b) {
      return std::tie(a.protocol, a.ip, a.port) < std::tie(b.protocol, b.ip, b.port);
    });
    return ports;
  };
  auto nonzero = [](const std::map<std::string, int64_t>& m) {
    std::map<std::string, int64_t> out;
    for (const auto& [name, amount] : m) {
      if (amount != 0) {
        out.emplace(name, amount);
      }
    }
    return out;
  };
  if (nonzero(want.scalar_free) != nonzero(v.scalar_free) ||
      sorted_ports(want.host_ports) != sorted_ports(v.host_ports)) {
    return common::Internal(n + "other resources or host ports disagree with allocations");
  }
  if (capped) {
    for (const auto& [name, free] : want.scalar_free) {
      if (free < 0) {
        return common::Internal(n + name + " overcommitted");
      }
    }
  }
  for (size_t i = 0; i < want.gpus.size(); ++i) {
    const GpuState& w = want.gpus[i];
    const GpuState& g = v.gpus[i];
    const std::string gname = n + "GPU " + Fmt(static_cast<int64_t>(i)) + ": ";
    if (w.free > common::kGpuMilli || (capped && w.free.value() < 0)) {
      return common::Internal(gname + "more than 1000 milli allocated");
    }
    if (capped && w.memory_free.value() < 0) {
      return common::Internal(gname + "more than its memory allocated");
    }
    if (capped && w.exclusive && w.holders != 1) {
      return common::Internal(gname + "exclusive GPU is shared");
    }
    if (capped && w.share_group == kMixedShareGroup) {
      return common::Internal(gname + "shared by pods of several shareWithin groups");
    }
    if (w.free != g.free || w.memory_free != g.memory_free || w.holders != g.holders || w.exclusive != g.exclusive ||
        w.share_group != g.share_group) {
      return common::Internal(gname + "state disagrees with allocations");
    }
  }
  return Status::Ok();
}

std::string ClusterState::OverOf(const Slot& slot) const {
  const NodeView& v = slot.view;
  std::string over;
  auto add = [&over](const std::string& what) { over += (over.empty() ? "" : "; ") + what; };
  if (v.cpu_free.value() < 0) {
    add("CPU " + Fmt(-v.cpu_free.value()) + " milli over");
  }
  if (v.memory_free.value() < 0) {
    add("memory " + Fmt(-v.memory_free.value()) + " MiB over");
  }
  for (const auto& [name, free] : v.scalar_free) {
    if (free < 0) {
      add(name + " " + Fmt(-free) + " over");
    }
  }
  for (size_t i = 0; i < v.gpus.size(); ++i) {
    const GpuState& g = v.gpus[i];
    const std::string gname = "GPU " + Fmt(static_cast<int64_t>(i)) + " ";
    if (g.free.value() < 0) {
      add(gname + Fmt(-g.free.value()) + " milli over");
    }
    if (g.memory_free.value() < 0) {
      add(gname + Fmt(-g.memory_free.value()) + " MiB over");
    }
    if (g.exclusive && g.holders > 1) {
      add(gname + "exclusive but held by " + Fmt(g.holders) + " pods");
    }
    if (g.share_group == kMixedShareGroup) {
      add(gname + "shared by pods of several shareWithin groups");
    }
  }
  return over;
}

std::string ClusterState::OvercommitOf(const common::NodeName& name) const {
  const std::optional<size_t> slot_of = index_.Find(name.str());
  if (!slot_of.has_value() || slots_[*slot_of].forced == 0) {
    return "";
  }
  return OverOf(slots_[*slot_of]);
}

std::vector<std::pair<common::NodeName, std::string>> ClusterState::Overcommits() const {
  std::vector<std::pair<common::NodeName, std::string>> out;
  for (const auto& slot : slots_) {
    if (!slot.live || slot.forced == 0) {
      continue;
    }
    if (std::string over = OverOf(slot); !over.empty()) {
      out.emplace_back(slot.view.name(), std::move(over));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first.str() < b.first.str(); });
  return out;
}

Status ClusterState::CheckNodeInvariants(const common::NodeName& name) const {
  const std::optional<size_t> slot_of = index_.Find(name.str());
  if (!slot_of.has_value()) {
    return common::NotFound("node " + name.str() + " not found");
  }
  return CheckSlot(slots_[*slot_of]);
}

Status ClusterState::CheckInvariants() const {
  common::MilliGpu allocated{0};
  common::MilliGpu capacity{0};
  size_t prefer_no_schedule = 0;
  size_t pods = 0;
  for (const auto& slot : slots_) {
    if (!slot.live) {
      continue;
    }
    GPUSCHED_RETURN_IF_ERROR(CheckSlot(slot));
    pods += slot.pods.size();
    capacity += common::kGpuMilli * static_cast<int64_t>(slot.view.gpus.size());
    prefer_no_schedule += HasPreferNoSchedule(*slot.view.node) ? 1U : 0U;
    for (const auto& g : slot.view.gpus) {
      allocated += common::kGpuMilli - g.free;
    }
  }
  if (pods != allocations_.size()) {
    return common::Internal("allocations on nodes (" + Fmt(static_cast<int64_t>(pods)) + ") != allocations (" +
                            Fmt(static_cast<int64_t>(allocations_.size())) + ")");
  }
  if (prefer_no_schedule != prefer_no_schedule_nodes_) {
    return common::Internal("the count of nodes with PreferNoSchedule taints disagrees with the nodes");
  }
  if (allocated != allocated_milli_ || capacity != capacity_milli_) {
    return common::Internal("cluster totals disagree with nodes");
  }
  return Status::Ok();
}

}  // namespace gpusched::core
