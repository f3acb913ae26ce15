#include "gpusched/agent/node_pods.h"

#include <set>
#include <utility>

#include "gpusched/adapters/k8s/json_prune.h"
#include "gpusched/common/log.h"

namespace gpusched::agent {
namespace {

namespace k8s = adapters::k8s;
using nlohmann::json;

k8s::InformerOptions InformerOptionsFor(const NodePodsOptions& options) {
  k8s::InformerOptions out = options.informer;
  out.path = "/api/v1/pods";
  out.field_selector = "spec.nodeName=" + options.node;
  if (out.prune == nullptr) {
    out.prune = &k8s::SchedulingPrune();
  }
  out.cache_identity_only = false;  // the handoff reads whole pods from the cache
  return out;
}

std::string NodeNameOf(const json& pod) {
  if (!pod.is_object()) {
    return "";
  }
  auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->is_object()) {
    return "";
  }
  auto node = spec->find("nodeName");
  return node != spec->end() && node->is_string() ? node->get<std::string>() : "";
}

// Drops the oldest keys of `order` from `map` until it holds at most `max` (keys erased meanwhile are skipped).
template <typename Map>
void Bound(Map& map, std::deque<std::string>& order, size_t max) {
  while (map.size() > max && !order.empty()) {
    map.erase(order.front());
    order.pop_front();
  }
  if (order.size() > 2 * max + 16) {  // keys erased by events: compact
    std::deque<std::string> kept;
    std::set<std::string> seen;
    for (auto& key : order) {
      if (map.contains(key) && seen.insert(key).second) {
        kept.push_back(std::move(key));
      }
    }
    order = std::move(kept);
  }
}

}  // namespace

NodePods::NodePods(k8s::ApiClient& client, NodePodsOptions options, k8s::Informer::Handler on_event)
    : client_(client),
      options_(std::move(options)),
      on_event_(std::move(on_event)),
      informer_(client, InformerOptionsFor(options_), [this](const k8s::WatchEvent& e) { OnEvent(e); }) {}

NodePods::~NodePods() { Stop(); }

void NodePods::Start() { informer_.Start(); }
void NodePods::Stop() { informer_.Stop(); }
bool NodePods::HasSynced() const { return informer_.HasSynced(); }
bool NodePods::WaitForSync(std::chrono::milliseconds timeout) const { return informer_.WaitForSync(timeout); }
std::vector<json> NodePods::List() const { return informer_.List(); }

void NodePods::OnEvent(const k8s::WatchEvent& event) {
  const std::string key = k8s::ObjectKey(event.object);
  {
    std::lock_guard lock(mu_);
    ++sequence_;
    // The watch has this pod now, as new as the read alone or newer.
    fetched_.erase(key);
    if (event.type == k8s::WatchEvent::Type::kDeleted) {
      deleted_[key] = sequence_;
      deleted_order_.push_back(key);
      Bound(deleted_, deleted_order_, options_.max_deleted);
    } else {
      deleted_.erase(key);  // created again under its name
    }
  }
  if (on_event_) {
    on_event_(event);
  }
}

common::Result<std::vector<json>> NodePods::FreshPodsOnNode() {
  {
    std::lock_guard lock(mu_);
    ++lists_;
  }
  const k8s::JsonPrune* prune = options_.informer.prune != nullptr ? options_.informer.prune : &k8s::SchedulingPrune();
  auto list = client_.List("/api/v1/pods", "spec.nodeName=" + options_.node, "", prune);
  if (!list.ok()) {
    const std::string why = informer_.last_error();
    return common::Status(list.status().code(),
                          list.status().message() + (why.empty() ? "" : " (the pod informer: " + why + ")"));
  }
  return std::move(list->items);
}

common::Result<std::vector<json>> NodePods::PodsOnNode() {
  if (!informer_.HasSynced()) {
    common::Log(common::LogLevel::kInfo, "gpusched agent: the pod informer of node " + options_.node +
                                             " has not synced yet; listing the node's pods");
    return FreshPodsOnNode();
  }
  // Under mu_: an event whose cache update this List misses has not erased its pod from fetched_ yet (its handler
  // waits for mu_), so the pod is in one of the two.
  std::lock_guard lock(mu_);
  std::vector<json> out = informer_.List();
  std::set<std::string> keys;
  for (const json& pod : out) {
    keys.insert(k8s::ObjectKey(pod));
  }
  for (auto it = fetched_.begin(); it != fetched_.end();) {
    if (keys.contains(it->first)) {
      it = fetched_.erase(it);  // delivered by the watch (its handler has yet to run)
      continue;
    }
    out.push_back(it->second);
    ++it;
  }
  return out;
}

common::Result<json> NodePods::GetPod(const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  uint64_t started = 0;
  {
    std::lock_guard lock(mu_);
    started = sequence_;
    ++gets_;
  }
  auto pod = client_.Get("/api/v1/namespaces/" + ns + "/pods/" + name);
  std::lock_guard lock(mu_);
  if (pod.ok()) {
    auto gone = deleted_.find(key);
    const bool deleted_since = gone != deleted_.end() && gone->second > started;
    if (!deleted_since && !informer_.Get(key).has_value() && NodeNameOf(*pod) == options_.node) {
      fetched_[key] = *pod;
      fetched_order_.push_back(key);
      Bound(fetched_, fetched_order_, options_.max_fetched);
    }
    return pod;
  }
  fetched_.erase(key);
  if (pod.status().code() == common::StatusCode::kNotFound) {
    return pod.status();
  }
  if (deleted_.contains(key) && !informer_.Get(key).has_value()) {
    return common::NotFound(
        "pod " + key + " was deleted (seen by the watch); the API server did not answer: " + pod.status().message());
  }
  return pod.status();
}

uint64_t NodePods::lists() const {
  std::lock_guard lock(mu_);
  return lists_;
}

uint64_t NodePods::gets() const {
  std::lock_guard lock(mu_);
  return gets_;
}

}  // namespace gpusched::agent
