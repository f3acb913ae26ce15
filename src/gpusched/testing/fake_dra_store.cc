#include "gpusched/testing/fake_dra_store.h"

#include <chrono>
#include <ctime>
#include <tuple>

#include "gpusched/kube/dra_slices.h"

namespace gpusched::testing {
namespace {

using nlohmann::json;

constexpr const char* kGroupVersion = "resource.k8s.io/v1";

std::string NowRfc3339() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Meta(const json& object, const char* key) {
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    const json& v = object["metadata"].value(key, json());
    return v.is_string() ? v.get<std::string>() : std::string();
  }
  return "";
}

// The value at a dotted path as a string ("" when absent).
std::string FieldValue(const json& object, const std::string& dotted) {
  const json* cur = &object;
  size_t start = 0;
  for (;;) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!cur->is_object() || !cur->contains(part)) {
      return "";
    }
    cur = &(*cur)[part];
    if (dot == std::string::npos) {
      break;
    }
    start = dot + 1;
  }
  return cur->is_string() ? cur->get<std::string>() : std::string();
}

FakeReply Error(int code, std::string reason, std::string message) {
  return FakeReply{.code = code, .object = nullptr, .reason = std::move(reason), .message = std::move(message)};
}

std::string NotFound(const std::string& resource, const std::string& name) {
  return resource + ".resource.k8s.io \"" + name + "\" not found";
}

FakeReply Conflict(const std::string& name) {
  return Error(409, "Conflict",
               "Operation cannot be fulfilled on resourceslices.resource.k8s.io \"" + name +
                   "\": the object has been modified; please apply your changes to the latest version and try again");
}

// Taints the driver left without timeAdded get the current time, as the API server's strategy does.
void StampTaints(json& slice) {
  if (!slice.contains("spec") || !slice["spec"].is_object() || !slice["spec"].contains("devices") ||
      !slice["spec"]["devices"].is_array()) {
    return;
  }
  const std::string now = NowRfc3339();
  for (json& device : slice["spec"]["devices"]) {
    if (!device.is_object() || !device.contains("taints") || !device["taints"].is_array()) {
      continue;
    }
    for (json& taint : device["taints"]) {
      if (taint.is_object() && (!taint.contains("timeAdded") || taint["timeAdded"].is_null())) {
        taint["timeAdded"] = now;
      }
    }
  }
}

// Parses a fieldSelector into (field, op, value) terms; an unsupported field is an error message.
std::string ParseFieldSelector(const std::string& selector,
                               std::vector<std::tuple<std::string, bool, std::string>>& out) {
  size_t start = 0;
  while (start <= selector.size() && !selector.empty()) {
    const size_t comma = selector.find(',', start);
    const std::string term = selector.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? selector.size() + 1 : comma + 1;
    if (term.empty()) {
      continue;
    }
    const size_t ne = term.find("!=");
    const size_t eq = term.find('=');
    if (eq == std::string::npos) {
      return "invalid selector: '" + selector + "'; can't understand '" + term + "'";
    }
    const bool negate = ne != std::string::npos && ne < eq;
    const std::string field = term.substr(0, negate ? ne : eq);
    size_t value_at = negate ? ne + 2 : eq + 1;
    if (!negate && term.compare(eq, 2, "==") == 0) {
      value_at = eq + 2;
    }
    if (field != "metadata.name" && field != "spec.nodeName" && field != "spec.driver" && field != "spec.pool.name") {
      return "field label not supported: " + field;
    }
    out.emplace_back(field, negate, term.substr(value_at));
  }
  return "";
}

}  // namespace

json FakeDraStore::StampLocked(json object, const json* old, const char* kind) {
  json& meta = object["metadata"];
  if (old != nullptr) {
    meta["uid"] = Meta(*old, "uid");
    meta["creationTimestamp"] = Meta(*old, "creationTimestamp");
  } else {
    meta["uid"] = std::string(kind) + "-uid-" + std::to_string(++uids_);
    meta["creationTimestamp"] = NowRfc3339();
  }
  meta["resourceVersion"] = std::to_string(next_rv_());
  object["apiVersion"] = kGroupVersion;
  object["kind"] = kind;
  return object;
}

FakeReply FakeDraStore::CreateSlice(json slice) {
  if (!slice.is_object()) {
    return Error(400, "BadRequest", "the request body is not a JSON object");
  }
  std::lock_guard lock(mu_);
  if (Meta(slice, "name").empty() && !Meta(slice, "generateName").empty()) {
    // The real server appends 5 random characters of [bcdfghjklmnpqrstvwxz2456789]; a counter is enough here.
    static constexpr char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    uint64_t n = ++generated_;
    std::string suffix;
    for (int i = 0; i < 5; ++i) {
      suffix += kAlphabet[n % (sizeof(kAlphabet) - 1)];
      n /= sizeof(kAlphabet) - 1;
    }
    slice["metadata"]["name"] = Meta(slice, "generateName") + suffix;
  }
  if (auto s = kube::ValidateResourceSlice(slice); !s.ok()) {
    return Error(422, "Invalid", s.message());
  }
  const std::string name = Meta(slice, "name");
  if (slices_.contains(name)) {
    return Error(409, "AlreadyExists", "resourceslices.resource.k8s.io \"" + name + "\" already exists");
  }
  StampTaints(slice);
  slice["metadata"]["generation"] = 1;
  slice["metadata"].erase("deletionTimestamp");
  slices_[name] = StampLocked(std::move(slice), nullptr, "ResourceSlice");
  return FakeReply{.code = 201, .object = slices_[name]};
}

FakeReply FakeDraStore::UpdateSlice(const std::string& name, json slice) {
  if (!slice.is_object()) {
    return Error(400, "BadRequest", "the request body is not a JSON object");
  }
  if (Meta(slice, "name") != name) {
    return Error(
        400, "BadRequest",
        "the name of the object (" + Meta(slice, "name") + ") does not match the name on the URL (" + name + ")");
  }
  std::lock_guard lock(mu_);
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return Error(404, "NotFound", NotFound("resourceslices", name));
  }
  const std::string want_rv = Meta(slice, "resourceVersion");
  if (!want_rv.empty() && want_rv != Meta(it->second, "resourceVersion")) {
    return Conflict(name);
  }
  if (auto s = kube::ValidateResourceSlice(slice); !s.ok()) {
    return Error(422, "Invalid", s.message());
  }
  for (const char* field : {"spec.driver", "spec.pool.name", "spec.nodeName"}) {
    if (FieldValue(slice, field) != FieldValue(it->second, field)) {
      return Error(422, "Invalid",
                   "ResourceSlice.resource.k8s.io \"" + name + "\" is invalid: " + field +
                       ": Invalid value: field is immutable");
    }
  }
  StampTaints(slice);
  const json& old_spec = it->second["spec"];
  int64_t generation = it->second["metadata"].value("generation", int64_t{1});
  if (slice["spec"] != old_spec) {
    ++generation;
  }
  slice["metadata"]["generation"] = generation;
  it->second = StampLocked(std::move(slice), &it->second, "ResourceSlice");
  return FakeReply{.code = 200, .object = it->second};
}

FakeReply FakeDraStore::DeleteSlice(const std::string& name, const json& options) {
  std::lock_guard lock(mu_);
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return Error(404, "NotFound", NotFound("resourceslices", name));
  }
  if (options.is_object() && options.contains("preconditions") && options["preconditions"].is_object()) {
    const json& pre = options["preconditions"];
    const std::string rv = pre.value("resourceVersion", "");
    const std::string uid = pre.value("uid", "");
    if ((!rv.empty() && rv != Meta(it->second, "resourceVersion")) ||
        (!uid.empty() && uid != Meta(it->second, "uid"))) {
      return Error(409, "Conflict",
                   "Precondition failed: resourceslices.resource.k8s.io \"" + name + "\" has another " +
                       (!uid.empty() && uid != Meta(it->second, "uid") ? "uid" : "resourceVersion"));
    }
  }
  json object = std::move(it->second);
  slices_.erase(it);
  next_rv_();
  return FakeReply{.code = 200, .object = std::move(object)};
}

FakeReply FakeDraStore::GetSlice(const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return Error(404, "NotFound", NotFound("resourceslices", name));
  }
  return FakeReply{.code = 200, .object = it->second};
}

FakeReply FakeDraStore::ListSlices(const std::string& field_selector, const std::string& label_selector,
                                   std::vector<std::pair<std::string, json>>& items) const {
  if (!label_selector.empty()) {
    return Error(400, "BadRequest", "labelSelector is not supported by this fake for resourceslices");
  }
  std::vector<std::tuple<std::string, bool, std::string>> terms;
  if (const std::string why = ParseFieldSelector(field_selector, terms); !why.empty()) {
    return Error(400, "BadRequest", why);
  }
  std::lock_guard lock(mu_);
  for (const auto& [name, slice] : slices_) {
    bool match = true;
    for (const auto& [field, negate, value] : terms) {
      match = match && ((FieldValue(slice, field) == value) != negate);
    }
    if (match) {
      items.emplace_back(name, slice);
    }
  }
  return FakeReply{.code = 200};
}

std::vector<json> FakeDraStore::Slices() const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  for (const auto& [name, slice] : slices_) {
    out.push_back(slice);
  }
  return out;
}

int FakeDraStore::CollectOwnedBy(const std::string& uid) {
  std::lock_guard lock(mu_);
  int removed = 0;
  for (auto it = slices_.begin(); it != slices_.end();) {
    bool owned = false;
    const json& refs = it->second["metadata"].value("ownerReferences", json::array());
    for (const json& ref : refs) {
      owned = owned || (ref.is_object() && ref.value("uid", "") == uid);
    }
    if (owned) {
      it = slices_.erase(it);
      next_rv_();
      ++removed;
    } else {
      ++it;
    }
  }
  return removed;
}

json FakeDraStore::UpsertDeviceClass(json device_class) {
  std::lock_guard lock(mu_);
  const std::string name = Meta(device_class, "name");
  const auto it = classes_.find(name);
  const json* old = it == classes_.end() ? nullptr : &it->second;
  json stored = StampLocked(std::move(device_class), old, "DeviceClass");
  classes_[name] = stored;
  return stored;
}

FakeReply FakeDraStore::GetDeviceClass(const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = classes_.find(name);
  if (it == classes_.end()) {
    return Error(404, "NotFound", NotFound("deviceclasses", name));
  }
  return FakeReply{.code = 200, .object = it->second};
}

void FakeDraStore::ListDeviceClasses(std::vector<std::pair<std::string, json>>& items) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, c] : classes_) {
    items.emplace_back(name, c);
  }
}

}  // namespace gpusched::testing
