#pragma once

// FakeDraStore: the resource.k8s.io/v1 objects of FakeApiServer (ResourceSlices, DeviceClasses), kept apart from
// the HTTP routes so that the rules read in one place. What kube-apiserver does that matters to a driver:
//   create: metadata.name, or generateName + 5 characters; the slice validated as the API server does
//     (kube::ValidateResourceSlice: required fields, name rules, the limits) else 422 Invalid naming the fields; an
//     existing name is 409 AlreadyExists; uid, creationTimestamp, resourceVersion and metadata.generation (1) are
//     set, and a device taint without timeAdded gets the current time;
//   update (PUT): the name in the body must be the one of the path (400); unknown name 404; a metadata
//     .resourceVersion that is not the stored one is 409 Conflict (an empty one updates unconditionally); spec.driver,
//     spec.pool.name and spec.nodeName are immutable (422); metadata.generation goes up when the spec changes;
//   delete: unknown name 404; DeleteOptions preconditions.resourceVersion / preconditions.uid checked (409);
//   list: fieldSelector on the fields the API server indexes for resourceslices (metadata.name, spec.nodeName,
//     spec.driver, spec.pool.name; '=', '==', '!=', comma = and); any other field is 400 "field label not
//     supported"; labelSelector is not supported here (400).
//   garbage collection: CollectOwnedBy(uid) deletes the slices with an ownerReference to that uid, as the garbage
//     collector does once the owner (the Node) is gone.
// DeviceClasses: get and list; tests add them with UpsertDeviceClass.
// No watch. Every write takes the next value of the server's resourceVersion counter (`next_rv`).
//
// Threading: every method is thread-safe; `next_rv` is called with the store's mutex held (it must not call back).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpusched::testing {

// An answer: 2xx with the object (or list items), else the code, the Status reason and message.
struct FakeReply {
  int code = 200;
  nlohmann::json object;
  std::string reason, message;
};

class FakeDraStore {
 public:
  explicit FakeDraStore(std::function<uint64_t()> next_rv) : next_rv_(std::move(next_rv)) {}

  FakeReply CreateSlice(nlohmann::json slice);
  FakeReply UpdateSlice(const std::string& name, nlohmann::json slice);
  FakeReply DeleteSlice(const std::string& name, const nlohmann::json& options);
  FakeReply GetSlice(const std::string& name) const;
  // 200 with the matching slices by name in `items`, or the 400 for an unsupported selector.
  FakeReply ListSlices(const std::string& field_selector, const std::string& label_selector,
                       std::vector<std::pair<std::string, nlohmann::json>>& items) const;
  [[nodiscard]] std::vector<nlohmann::json> Slices() const;
  // Deletes the slices owned by the object with this uid; returns how many.
  int CollectOwnedBy(const std::string& uid);

  nlohmann::json UpsertDeviceClass(nlohmann::json device_class);
  FakeReply GetDeviceClass(const std::string& name) const;
  void ListDeviceClasses(std::vector<std::pair<std::string, nlohmann::json>>& items) const;

 private:
  nlohmann::json StampLocked(nlohmann::json object, const nlohmann::json* old, const char* kind);

  const std::function<uint64_t()> next_rv_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> slices_;   // GUARDED_BY(mu_) by name
  std::map<std::string, nlohmann::json> classes_;  // GUARDED_BY(mu_) by name
  uint64_t uids_ = 0;                              // GUARDED_BY(mu_)
  uint64_t generated_ = 0;                         // GUARDED_BY(mu_) generateName suffixes
};

}  // namespace gpusched::testing
