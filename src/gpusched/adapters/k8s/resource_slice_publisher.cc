#include "gpusched/adapters/k8s/resource_slice_publisher.h"

#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/common/backoff.h"
#include "gpusched/common/log.h"
#include "gpusched/kube/dra_slices.h"

namespace gpusched::adapters::k8s {
namespace {

using nlohmann::json;

std::string MetaString(const json& object, const char* key) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return "";
  }
  const json& v = object["metadata"].value(key, json());
  return v.is_string() ? v.get<std::string>() : std::string();
}

// The uid of the Node that owns the slice ("" when it has no Node owner).
std::string OwnerNodeUid(const json& slice) {
  if (!slice.contains("metadata") || !slice["metadata"].contains("ownerReferences")) {
    return "";
  }
  for (const json& ref : slice["metadata"]["ownerReferences"]) {
    if (ref.is_object() && ref.value("kind", "") == "Node" && ref.value("apiVersion", "") == "v1") {
      return ref.value("uid", "");
    }
  }
  return "";
}

// Gives each wanted taint without timeAdded the time the server stamped on the same taint of the same device.
void CarryTaintTimes(std::vector<core::dra::Device>& wanted, const std::map<std::string, core::dra::Device>& listed) {
  for (auto& d : wanted) {
    const auto it = listed.find(d.name);
    if (it == listed.end()) {
      continue;
    }
    for (auto& t : d.taints) {
      if (!t.time_added.empty()) {
        continue;
      }
      for (const auto& old : it->second.taints) {
        if (old.key == t.key && old.value == t.value && old.effect == t.effect) {
          t.time_added = old.time_added;
          break;
        }
      }
    }
  }
}

}  // namespace

ResourceSlicePublisher::ResourceSlicePublisher(ApiClient& client, ResourceSlicePublisherOptions options)
    : client_(client), options_(std::move(options)) {}

ResourceSlicePublisher::~ResourceSlicePublisher() { Stop(); }

void ResourceSlicePublisher::Warn(const std::string& message) const {
  if (options_.log) {
    options_.log(message);
  } else {
    common::Log(common::LogLevel::kWarn, "resourceslices: " + message);
  }
}

common::Status ResourceSlicePublisher::Sync(const std::vector<core::dra::Device>& devices) {
  common::Status s = SyncOnce(devices);
  std::lock_guard lock(mu_);
  last_error_ = s;
  return s;
}

common::Status ResourceSlicePublisher::SyncOnce(const std::vector<core::dra::Device>& devices) {
  const std::string& node = options_.node;
  const std::string& driver = options_.driver;
  auto node_object = client_.Get("/api/v1/nodes/" + node);
  if (!node_object.ok()) {
    return node_object.status();
  }
  const std::string node_uid = MetaString(*node_object, "uid");
  auto listed =
      client_.List(std::string(kube::kResourceSlicesPath), "spec.nodeName=" + node + ",spec.driver=" + driver);
  if (!listed.ok()) {
    return listed.status();
  }

  // What is there: this pool's slices by name (decoded), and everything by name.
  std::map<std::string, kube::ResourceSliceInfo> mine;
  std::map<std::string, json> all;
  std::map<std::string, core::dra::Device> listed_devices;
  int64_t generation = 0;
  for (json& item : listed->items) {
    const std::string name = MetaString(item, "name");
    auto info = kube::DecodeResourceSlice(item);
    if (info.ok() && info->pool.pool == node && info->pool.driver == driver) {
      generation = std::max(generation, info->pool.generation);
      for (const auto& d : info->pool.devices) {
        listed_devices.emplace(d.name, d);
      }
      mine.emplace(name, std::move(info).value());
    }
    all.emplace(name, std::move(item));
  }

  std::vector<core::dra::Device> wanted = devices;
  CarryTaintTimes(wanted, listed_devices);
  core::dra::DevicePool pool{
      .driver = driver, .pool = node, .node = common::NodeName(node), .generation = generation, .devices = wanted};
  auto specs = kube::EncodeResourceSliceSpecs(pool);
  if (!specs.ok()) {
    return specs.status();
  }

  // Up to date: exactly the wanted slices, one generation, owned by this Node.
  bool current = all.size() == specs->size() && mine.size() == specs->size();
  for (size_t i = 0; current && i < specs->size(); ++i) {
    const std::string name = kube::ResourceSliceName(node, driver, i);
    const auto it = mine.find(name);
    if (it == mine.end() || it->second.pool.generation != generation ||
        it->second.resource_slice_count != static_cast<int64_t>(specs->size()) || OwnerNodeUid(all[name]) != node_uid) {
      current = false;
      break;
    }
    auto wanted_slice = kube::DecodeResourceSlice(json{{"metadata", {{"name", name}}}, {"spec", (*specs)[i]}});
    current = wanted_slice.ok() && wanted_slice->pool.devices == it->second.pool.devices;
  }
  if (current && !mine.empty()) {
    std::lock_guard lock(mu_);
    generation_ = generation;
    return common::Status::Ok();
  }

  // Write the next generation.
  pool.generation = generation + 1;
  specs = kube::EncodeResourceSliceSpecs(pool);
  if (!specs.ok()) {
    return specs.status();
  }
  uint64_t writes = 0;
  auto count_writes = [this, &writes] {
    std::lock_guard lock(mu_);
    writes_ += writes;
  };
  auto remove = [this, &all, &writes](const std::string& name) -> common::Status {
    const json options = {{"kind", "DeleteOptions"},
                          {"apiVersion", "v1"},
                          {"preconditions", {{"resourceVersion", MetaString(all[name], "resourceVersion")}}}};
    ++writes;
    auto r = client_.Request("DELETE", std::string(kube::kResourceSlicesPath) + "/" + name, options.dump());
    if (!r.ok() && r.status().code() != common::StatusCode::kNotFound) {
      return r.status();
    }
    all.erase(name);
    return common::Status::Ok();
  };
  std::set<std::string> wanted_names;
  for (size_t i = 0; i < specs->size(); ++i) {
    const std::string name = kube::ResourceSliceName(node, driver, i);
    wanted_names.insert(name);
    json slice = {
        {"apiVersion", "resource.k8s.io/v1"},
        {"kind", "ResourceSlice"},
        {"metadata",
         {{"name", name},
          {"ownerReferences",
           {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", node_uid}, {"controller", true}}}}}},
        {"spec", (*specs)[i]}};
    const bool exists = all.contains(name);
    if (exists && !mine.contains(name)) {
      // A slice of this name that is not this pool's (another pool name is immutable): replace it.
      if (auto s = remove(name); !s.ok()) {
        count_writes();
        return s;
      }
    }
    ++writes;
    const bool update = all.contains(name);
    if (update) {
      slice["metadata"]["resourceVersion"] = MetaString(all[name], "resourceVersion");
    }
    auto r = update ? client_.Request("PUT", std::string(kube::kResourceSlicesPath) + "/" + name, slice.dump())
                    : client_.Request("POST", std::string(kube::kResourceSlicesPath), slice.dump());
    if (!r.ok()) {
      count_writes();
      return r.status();
    }
  }
  std::vector<std::string> extra;
  for (const auto& [name, object] : all) {
    if (!wanted_names.contains(name)) {
      extra.push_back(name);
    }
  }
  for (const auto& name : extra) {
    if (auto s = remove(name); !s.ok()) {
      count_writes();
      return s;
    }
  }
  count_writes();
  std::lock_guard lock(mu_);
  generation_ = pool.generation;
  return common::Status::Ok();
}

void ResourceSlicePublisher::Update(std::vector<core::dra::Device> devices) {
  {
    std::lock_guard lock(mu_);
    if (desired_.has_value() && *desired_ == devices) {
      return;
    }
    desired_ = std::move(devices);
    dirty_ = true;
    synced_ = false;
  }
  wake_.notify_all();
}

void ResourceSlicePublisher::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) {
    return;
  }
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
}

void ResourceSlicePublisher::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void ResourceSlicePublisher::Run() {
  common::ExponentialBackoff backoff(options_.initial_backoff, options_.max_backoff);
  bool failing = false;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (!desired_.has_value()) {
      wake_.wait(lock, [this] { return stopping_ || desired_.has_value(); });
      continue;
    }
    std::vector<core::dra::Device> devices = *desired_;
    dirty_ = false;
    lock.unlock();
    const common::Status s = Sync(devices);
    if (!s.ok() && !failing) {
      Warn("cannot publish the node's devices (retrying with backoff): " +
           DescribeApiFailure(s, client_.config().server));
    } else if (s.ok() && failing) {
      Warn("publishing again");
    }
    failing = !s.ok();
    lock.lock();
    last_error_ = s;
    if (s.ok()) {
      synced_ = !dirty_;
      backoff.Reset();
      wake_.wait_for(lock, options_.resync, [this] { return stopping_ || dirty_; });
    } else {
      ++failures_;
      // Not woken by Update: a failing server gets no more than one attempt per backoff step.
      wake_.wait_for(lock, backoff.Next(), [this] { return stopping_; });
    }
  }
}

int64_t ResourceSlicePublisher::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

uint64_t ResourceSlicePublisher::writes() const {
  std::lock_guard lock(mu_);
  return writes_;
}

uint64_t ResourceSlicePublisher::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

common::Status ResourceSlicePublisher::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

bool ResourceSlicePublisher::synced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

}  // namespace gpusched::adapters::k8s
