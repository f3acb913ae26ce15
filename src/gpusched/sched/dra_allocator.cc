#include "gpusched/sched/dra_allocator.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace gpusched::sched {
namespace {

using core::dra::AllocationMode;
using core::dra::AttributeValue;
using core::dra::Device;
using core::dra::DeviceCapacity;
using core::dra::DeviceConstraint;
using core::dra::DeviceRequest;
using core::dra::DeviceResult;
using core::dra::DeviceSubRequest;
using core::dra::Quantity;
using core::dra::ResourceClaim;

std::string ClaimName(const ResourceClaim& c) { return c.namespace_ + "/" + c.name; }

// Whether the tolerations tolerate every taint of the device that has an effect on allocation.
bool Tolerates(const Device& device, std::span<const core::dra::DeviceToleration> tolerations) {
  for (const auto& taint : device.taints) {
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") {
      continue;  // None and effects this version does not know: informational
    }
    bool tolerated = std::any_of(tolerations.begin(), tolerations.end(), [&](const auto& t) {
      if (!t.effect.empty() && t.effect != taint.effect) {
        return false;
      }
      if (t.op == "Exists") {
        return t.key.empty() || t.key == taint.key;
      }
      return t.key == taint.key && t.value == taint.value;
    });
    if (!tolerated) {
      return false;
    }
  }
  return true;
}

// The fully qualified name a requested capacity key means on a device of `driver`.
std::string Qualified(const std::string& key, std::string_view driver) {
  return key.find('/') == std::string::npos ? std::string(driver) + "/" + key : key;
}

// What an alternative needs of one candidate, fixed for the whole search (only what is free changes).
struct Serve {
  bool possible = false;  // selectors true, taints tolerated, the capacity asked present, the policy can serve it
  std::vector<std::pair<uint32_t, Quantity>> consume;  // shareable, not admin: (capacity index, amount)
};

struct Alternative {
  const DeviceSubRequest* sub = nullptr;
  std::string result_name;  // "req" or "req/sub"
  std::vector<std::string_view> selectors;
  bool admin_access = false;
  std::vector<char> matches;  // per candidate: selectors true and taints tolerated
  std::vector<Serve> serve;   // per candidate
  // The capacity asked, with names qualified for devices of `resolved_for` (the driver of the last candidate).
  std::string resolved_for;
  std::vector<std::pair<std::string, Quantity>> asked;
  bool resolved = false;
};

struct Slot {
  size_t claim = 0;
  const DeviceRequest* request = nullptr;
  std::vector<Alternative> alternatives;
};

struct Pick {
  size_t candidate = 0;
  bool shareable = false;
  bool admin = false;
};

// The running state of one constraint.
struct ConstraintState {
  const DeviceConstraint* constraint = nullptr;
  size_t claim = 0;
  std::optional<AttributeValue> value;  // match_attribute: the value chosen so far
  int32_t holders = 0;                  // match_attribute: picks that set or share `value`
  std::vector<AttributeValue> seen;     // distinct_attribute: values taken so far
};

class Search {
 public:
  Search(std::span<const ResourceClaim* const> claims, std::span<const DraCandidate> candidates,
         const DraAllocatorOptions& options)
      : claims_(claims), candidates_(candidates), options_(options) {
    taken_.resize(candidates.size());
    available_.resize(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      const DraCandidate& cand = candidates[i];
      taken_[i] = cand.taken ? 1 : 0;
      if (!cand.device->allow_multiple_allocations) {
        continue;
      }
      available_[i].reserve(cand.device->capacity.size());
      for (const auto& [name, capacity] : cand.device->capacity) {
        auto free = cand.available.find(name);
        available_[i].push_back(free == cand.available.end() ? capacity.value : free->second);
      }
    }
  }

  common::Status Prepare(const std::map<std::string, core::dra::DeviceClass>& classes, const DraSelectorMatch& match);
  common::Result<bool> Run() { return Place(0); }
  [[nodiscard]] bool exhausted() const { return steps_ > options_.max_steps; }
  [[nodiscard]] std::string WhyNot() const;
  [[nodiscard]] std::vector<core::dra::ClaimAllocation> Results(const common::NodeName& node) const;

 private:
  common::Result<bool> Place(size_t slot);
  common::Result<bool> Choose(size_t slot, const Alternative& alt, size_t from, int64_t remaining);
  // Whether candidate c can serve alt now; fills the pick.
  [[nodiscard]] bool CanServe(const Alternative& alt, size_t c) const;
  // Fills alt.serve (once per search).
  common::Status PrepareServe(Alternative& alt) const;
  bool ApplyConstraints(size_t slot, const Alternative& alt, size_t c);
  void UndoConstraints(size_t slot, const Alternative& alt, size_t c);
  [[nodiscard]] bool Applies(const ConstraintState& k, size_t slot, const Alternative& alt) const;
  void Take(size_t slot, const Alternative& alt, size_t c);
  void Untake(size_t slot);

  std::span<const ResourceClaim* const> claims_;
  std::span<const DraCandidate> candidates_;
  const DraAllocatorOptions& options_;
  std::vector<Slot> slots_;
  std::vector<ConstraintState> constraints_;
  std::vector<char> taken_;
  std::vector<std::vector<Quantity>> available_;  // per candidate, per capacity (the device's order)
  std::vector<std::vector<Pick>> picks_;          // per slot
  std::vector<const Alternative*> chosen_;        // per slot
  std::vector<std::vector<char>> used_;           // per slot: candidates picked by it (devices distinct per request)
  int64_t steps_ = 0;
  size_t deepest_ = 0;  // the furthest slot the search could not satisfy
};

common::Status Search::Prepare(const std::map<std::string, core::dra::DeviceClass>& classes,
                               const DraSelectorMatch& match) {
  for (size_t ci = 0; ci < claims_.size(); ++ci) {
    const ResourceClaim& claim = *claims_[ci];
    if (claim.allocation) {
      return common::InvalidArgument("claim " + ClaimName(claim) + " is allocated already");
    }
    for (const auto& request : claim.requests) {
      Slot slot{.claim = ci, .request = &request};
      std::vector<const DeviceSubRequest*> subs;
      if (request.exactly && !request.first_available.empty()) {
        return common::InvalidArgument("claim " + ClaimName(claim) + " request " + request.name +
                                       ": both exactly and firstAvailable are set");
      }
      if (request.exactly) {
        subs.push_back(&*request.exactly);
      }
      for (const auto& sub : request.first_available) {
        subs.push_back(&sub);
      }
      if (subs.empty()) {
        return common::InvalidArgument("claim " + ClaimName(claim) + " request " + request.name +
                                       ": neither exactly nor firstAvailable is set");
      }
      if (request.admin_access && !options_.admin_access_allowed) {
        return common::FailedPrecondition("claim " + ClaimName(claim) + " request " + request.name +
                                          " asks for admin access, which needs the namespace label "
                                          "resource.kubernetes.io/admin-access=true");
      }
      for (const DeviceSubRequest* sub : subs) {
        auto cls = classes.find(sub->device_class);
        if (cls == classes.end()) {
          return common::NotFound("claim " + ClaimName(claim) + " request " + sub->name + ": DeviceClass \"" +
                                  sub->device_class + "\" does not exist");
        }
        if (sub->mode == AllocationMode::kExactCount && sub->count < 1) {
          return common::InvalidArgument("claim " + ClaimName(claim) + " request " + sub->name + ": count " +
                                         std::to_string(sub->count) + " must be at least 1");
        }
        Alternative alt{.sub = sub, .result_name = sub->name, .admin_access = request.admin_access};
        for (const auto& s : cls->second.selectors) {
          alt.selectors.emplace_back(s);
        }
        for (const auto& s : sub->selectors) {
          alt.selectors.emplace_back(s);
        }
        alt.matches.assign(candidates_.size(), 0);
        for (size_t c = 0; c < candidates_.size(); ++c) {
          const DraCandidate& cand = candidates_[c];
          if (!Tolerates(*cand.device, sub->tolerations)) {
            continue;
          }
          bool all = true;
          for (std::string_view expr : alt.selectors) {
            auto ok = match(expr, *cand.pool, *cand.device);
            if (!ok.ok()) {
              return common::InvalidArgument("claim " + ClaimName(claim) + " request " + sub->name +
                                             ": selector on device " + cand.pool->driver + "/" + cand.pool->pool + "/" +
                                             cand.device->name + ": " + ok.status().message());
            }
            if (!*ok) {
              all = false;
              break;
            }
          }
          alt.matches[c] = all ? 1 : 0;
        }
        if (common::Status st = PrepareServe(alt); !st.ok()) {
          return common::InvalidArgument("claim " + ClaimName(claim) + ": " + st.message());
        }
        slot.alternatives.push_back(std::move(alt));
      }
      slots_.push_back(std::move(slot));
    }
    for (const auto& k : claim.constraints) {
      if (k.match_attribute.empty() == k.distinct_attribute.empty()) {
        return common::InvalidArgument("claim " + ClaimName(claim) +
                                       ": a constraint needs exactly one of matchAttribute and distinctAttribute");
      }
      constraints_.push_back({.constraint = &k, .claim = ci});
    }
  }
  picks_.resize(slots_.size());
  chosen_.resize(slots_.size());
  used_.assign(slots_.size(), std::vector<char>(candidates_.size(), 0));
  return common::Status::Ok();
}

bool Search::Applies(const ConstraintState& k, size_t slot, const Alternative& alt) const {
  if (k.claim != slots_[slot].claim) {
    return false;
  }
  if (k.constraint->requests.empty()) {
    return true;
  }
  const std::string& request = slots_[slot].request->name;
  return std::any_of(k.constraint->requests.begin(), k.constraint->requests.end(),
                     [&](const std::string& r) { return r == request || r == alt.result_name; });
}

bool Search::ApplyConstraints(size_t slot, const Alternative& alt, size_t c) {
  const Device& device = *candidates_[c].device;
  size_t applied = 0;
  bool ok = true;
  for (; applied < constraints_.size(); ++applied) {
    ConstraintState& k = constraints_[applied];
    if (!Applies(k, slot, alt)) {
      continue;
    }
    const std::string& attr =
        k.constraint->match_attribute.empty() ? k.constraint->distinct_attribute : k.constraint->match_attribute;
    auto it = device.attributes.find(attr);
    if (it == device.attributes.end()) {
      ok = false;
      break;
    }
    if (!k.constraint->match_attribute.empty()) {
      if (k.value && !(*k.value == it->second)) {
        ok = false;
        break;
      }
      if (!k.value) {
        k.value = it->second;
      }
      ++k.holders;
    } else {
      if (std::find(k.seen.begin(), k.seen.end(), it->second) != k.seen.end()) {
        ok = false;
        break;
      }
      k.seen.push_back(it->second);
    }
  }
  if (!ok) {
    // Roll back the constraints applied before the one that failed.
    for (size_t i = 0; i < applied; ++i) {
      ConstraintState& k = constraints_[i];
      if (!Applies(k, slot, alt)) {
        continue;
      }
      if (!k.constraint->match_attribute.empty()) {
        if (--k.holders == 0) {
          k.value.reset();
        }
      } else {
        k.seen.pop_back();
      }
    }
  }
  return ok;
}

void Search::UndoConstraints(size_t slot, const Alternative& alt, size_t /*c*/) {
  for (ConstraintState& k : constraints_) {
    if (!Applies(k, slot, alt)) {
      continue;
    }
    if (!k.constraint->match_attribute.empty()) {
      if (--k.holders == 0) {
        k.value.reset();
      }
    } else {
      k.seen.pop_back();
    }
  }
}

// The capacity `alt` asks for, qualified with `driver`: an unqualified name means the device's own driver's, and
// naming one capacity both ways is ambiguous (an error).
common::Status Resolve(Alternative& alt, const std::string& driver) {
  if (alt.resolved && alt.resolved_for == driver) {
    return common::Status::Ok();
  }
  alt.asked.clear();
  for (const auto& [key, amount] : alt.sub->capacity) {
    std::string name = Qualified(key, driver);
    for (const auto& [other, unused] : alt.asked) {
      if (other == name) {
        return common::InvalidArgument("request " + alt.sub->name + " asks for capacity " + name +
                                       " twice, with and without its domain (ambiguous)");
      }
    }
    alt.asked.emplace_back(std::move(name), amount);
  }
  alt.resolved_for = driver;
  alt.resolved = true;
  return common::Status::Ok();
}

common::Status Search::PrepareServe(Alternative& alt) const {
  alt.serve.assign(candidates_.size(), Serve{});
  for (size_t c = 0; c < candidates_.size(); ++c) {
    if (alt.matches[c] == 0) {
      continue;
    }
    const DraCandidate& cand = candidates_[c];
    const Device& device = *cand.device;
    if (common::Status st = Resolve(alt, cand.pool->driver); !st.ok()) {
      return st;
    }
    Serve& serve = alt.serve[c];
    // Every capacity the request names must exist on the device with at least the amount asked.
    bool possible = true;
    for (const auto& [name, amount] : alt.asked) {
      auto cap = device.capacity.find(name);
      if (cap == device.capacity.end() || cap->second.value < amount) {
        possible = false;
        break;
      }
    }
    if (possible && device.allow_multiple_allocations && !alt.admin_access) {
      uint32_t i = 0;
      for (const auto& [name, capacity] : device.capacity) {
        std::optional<Quantity> asked;
        for (const auto& [n, amount] : alt.asked) {
          if (n == name) {
            asked = amount;
          }
        }
        std::optional<Quantity> amount = ConsumedAmount(capacity, asked);
        if (!amount || *amount > capacity.value) {
          possible = false;
          break;
        }
        serve.consume.emplace_back(i++, *amount);
      }
    }
    serve.possible = possible;
  }
  return common::Status::Ok();
}

bool Search::CanServe(const Alternative& alt, size_t c) const {
  const Serve& serve = alt.serve[c];
  if (!serve.possible) {
    return false;
  }
  if (alt.admin_access) {
    return true;  // ignores other allocations, consumes nothing
  }
  if (taken_[c] != 0) {
    return false;
  }
  const std::vector<Quantity>& free = available_[c];
  for (const auto& [i, amount] : serve.consume) {
    if (amount > free[i]) {
      return false;
    }
  }
  return true;
}

void Search::Take(size_t slot, const Alternative& alt, size_t c) {
  const bool shareable = candidates_[c].device->allow_multiple_allocations;
  used_[slot][c] = 1;
  if (!alt.admin_access) {
    if (!shareable) {
      taken_[c] = 1;
    } else {
      for (const auto& [i, amount] : alt.serve[c].consume) {
        available_[c][i].milli -= amount.milli;
      }
    }
  }
  picks_[slot].push_back(Pick{.candidate = c, .shareable = shareable, .admin = alt.admin_access});
}

void Search::Untake(size_t slot) {
  const Pick pick = picks_[slot].back();
  picks_[slot].pop_back();
  const size_t c = pick.candidate;
  used_[slot][c] = 0;
  if (pick.admin) {
    return;
  }
  if (!pick.shareable) {
    taken_[c] = 0;
    return;
  }
  for (const auto& [i, amount] : chosen_[slot]->serve[c].consume) {
    available_[c][i].milli += amount.milli;
  }
}

common::Result<bool> Search::Place(size_t slot) {
  if (slot == slots_.size()) {
    return true;
  }
  deepest_ = std::max(deepest_, slot);
  for (const Alternative& alt : slots_[slot].alternatives) {
    chosen_[slot] = &alt;
    if (alt.sub->mode == AllocationMode::kAll) {
      // Every matching device, each of which must be free.
      std::vector<size_t> all;
      for (size_t c = 0; c < candidates_.size(); ++c) {
        if (alt.matches[c] != 0) {
          all.push_back(c);
        }
      }
      bool ok = !all.empty();
      size_t done = 0;
      for (; ok && done < all.size(); ++done) {
        ++steps_;
        if (!CanServe(alt, all[done]) || !ApplyConstraints(slot, alt, all[done])) {
          ok = false;
          break;
        }
        Take(slot, alt, all[done]);
      }
      if (ok) {
        auto next = Place(slot + 1);
        if (!next.ok() || *next) {
          return next;
        }
      }
      while (!picks_[slot].empty()) {
        UndoConstraints(slot, alt, picks_[slot].back().candidate);
        Untake(slot);
      }
    } else {
      auto placed = Choose(slot, alt, 0, alt.sub->count);
      if (!placed.ok() || *placed) {
        return placed;
      }
    }
    if (exhausted()) {
      return false;
    }
  }
  return false;
}

common::Result<bool> Search::Choose(size_t slot, const Alternative& alt, size_t from, int64_t remaining) {
  if (remaining == 0) {
    return Place(slot + 1);
  }
  for (size_t c = from; c < candidates_.size(); ++c) {
    if (++steps_ > options_.max_steps) {
      return false;
    }
    if (used_[slot][c] != 0) {
      continue;
    }
    if (!CanServe(alt, c) || !ApplyConstraints(slot, alt, c)) {
      continue;
    }
    Take(slot, alt, c);
    auto next = Choose(slot, alt, c + 1, remaining - 1);
    if (!next.ok() || *next) {
      return next;
    }
    UndoConstraints(slot, alt, c);
    Untake(slot);
    if (exhausted()) {
      return false;
    }
  }
  return false;
}

std::string Search::WhyNot() const {
  if (slots_.empty()) {
    return "";
  }
  if (exhausted()) {
    return "the claims' device search gave up after " + std::to_string(options_.max_steps) + " trials on this node";
  }
  const Slot& slot = slots_[deepest_];
  const ResourceClaim& claim = *claims_[slot.claim];
  std::string why = "claim " + ClaimName(claim) + " request " + slot.request->name + ": ";
  bool first = true;
  for (const Alternative& alt : slot.alternatives) {
    int64_t matching = 0;
    int64_t free = 0;
    for (size_t c = 0; c < candidates_.size(); ++c) {
      if (alt.matches[c] == 0) {
        continue;
      }
      ++matching;
      if (alt.admin_access || candidates_[c].taken == false) {
        ++free;
      }
    }
    if (!first) {
      why += "; ";
    }
    first = false;
    const int64_t needed = alt.sub->mode == AllocationMode::kAll ? matching : alt.sub->count;
    why += std::to_string(matching) + " device(s) match class " + alt.sub->device_class +
           (alt.sub->selectors.empty() ? "" : " and the selectors") + ", " + std::to_string(free) + " not held whole";
    if (alt.sub->mode == AllocationMode::kAll) {
      why += ", all needed";
    } else {
      why += ", " + std::to_string(needed) + " needed";
    }
    if (!alt.sub->capacity.empty()) {
      why += " with capacity";
      for (const auto& [name, amount] : alt.sub->capacity) {
        why += " " + name + "=" + std::to_string(amount.milli / 1000);
      }
    }
    if (slot.alternatives.size() > 1) {
      why += " (" + alt.result_name + ")";
    }
  }
  bool constrained = std::any_of(constraints_.begin(), constraints_.end(),
                                 [&](const ConstraintState& k) { return k.claim == slot.claim; });
  if (constrained) {
    why += "; or no such set meets the claim's constraints";
  }
  return why;
}

std::vector<core::dra::ClaimAllocation> Search::Results(const common::NodeName& node) const {
  std::vector<core::dra::ClaimAllocation> out(claims_.size());
  for (auto& a : out) {
    a.node = node;
  }
  std::vector<std::vector<std::string>> share_ids(candidates_.size());  // the sharers' IDs, then the new ones
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Alternative& alt = *chosen_[s];
    for (const Pick& pick : picks_[s]) {
      const DraCandidate& cand = candidates_[pick.candidate];
      DeviceResult r{.request = alt.result_name,
                     .driver = cand.pool->driver,
                     .pool = cand.pool->pool,
                     .device = cand.device->name,
                     .admin_access = pick.admin};
      if (pick.shareable && !pick.admin) {
        auto consume = alt.serve[pick.candidate].consume.begin();
        uint32_t i = 0;
        for (const auto& [name, capacity] : cand.device->capacity) {
          if (consume != alt.serve[pick.candidate].consume.end() && consume->first == i) {
            r.consumed_capacity.emplace(name, consume->second);
            ++consume;
          }
          ++i;
        }
        auto& ids = share_ids[pick.candidate];
        if (ids.empty()) {
          ids = cand.share_ids;
        }
        const ResourceClaim& claim = *claims_[slots_[s].claim];
        for (uint32_t attempt = 0;; ++attempt) {
          std::string id = DraShareId(claim.uid, alt.result_name, cand.device->name, attempt);
          if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
            r.share_id = id;
            ids.push_back(std::move(id));
            break;
          }
        }
      }
      out[slots_[s].claim].devices.push_back(std::move(r));
    }
  }
  return out;
}

uint64_t Fnv1a(uint64_t h, std::string_view s) {
  for (char ch : s) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  h ^= 0xff;  // field separator
  h *= 1099511628211ULL;
  return h;
}

}  // namespace

std::optional<Quantity> ConsumedAmount(const DeviceCapacity& capacity, std::optional<Quantity> asked) {
  const auto& policy = capacity.request_policy;
  if (!policy) {
    return asked.value_or(capacity.value);
  }
  Quantity want = asked ? *asked : policy->default_value.value_or(capacity.value);
  if (!policy->valid_values.empty()) {
    for (const Quantity& v : policy->valid_values) {
      if (v >= want) {
        return v;
      }
    }
    return std::nullopt;
  }
  const Quantity lo = policy->min.value_or(Quantity{0});
  if (want < lo) {
    want = lo;
  }
  if (policy->step && policy->step->milli > 0) {
    const int64_t over = want.milli - lo.milli;
    const int64_t steps = (over + policy->step->milli - 1) / policy->step->milli;
    want.milli = lo.milli + steps * policy->step->milli;
  }
  if (policy->max && want > *policy->max) {
    return std::nullopt;
  }
  return want;
}

std::string DraShareId(std::string_view claim_uid, std::string_view request, std::string_view device,
                       uint32_t attempt) {
  const std::string n = std::to_string(attempt);
  uint64_t a = 14695981039346656037ULL;
  uint64_t b = 0x84222325cbf29ce4ULL;
  for (std::string_view s : {claim_uid, request, device, std::string_view(n)}) {
    a = Fnv1a(a, s);
    b = Fnv1a(b, s);
  }
  b = (b & ~0xf000ULL) | 0x4000ULL;                         // version 4 (bits 12..15 of the third group)
  a = (a & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char out[37];
  std::snprintf(out, sizeof out, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(b >> 32),
                static_cast<unsigned>((b >> 16) & 0xffff), static_cast<unsigned>(b & 0xffff),
                static_cast<unsigned>(a >> 48), static_cast<unsigned long long>(a & 0xffffffffffffULL));
  return out;
}

common::Result<DraNodeResult> AllocateClaimsOnNode(std::span<const ResourceClaim* const> claims,
                                                   const common::NodeName& node,
                                                   std::span<const DraCandidate> candidates,
                                                   const std::map<std::string, core::dra::DeviceClass>& classes,
                                                   const DraSelectorMatch& match, const DraAllocatorOptions& options) {
  Search search(claims, candidates, options);
  if (common::Status s = search.Prepare(classes, match); !s.ok()) {
    return s;
  }
  auto found = search.Run();
  if (!found.ok()) {
    return found.status();
  }
  DraNodeResult result;
  result.fits = *found;
  if (result.fits && options.allocations) {
    result.allocations = search.Results(node);
  } else {
    result.reason = search.WhyNot();
  }
  return result;
}

}  // namespace gpusched::sched
