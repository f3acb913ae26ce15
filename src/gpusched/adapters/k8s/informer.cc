#include "gpusched/adapters/k8s/informer.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/common/log.h"

namespace gpusched::adapters::k8s {
namespace {

using nlohmann::json;

std::string MetaField(const json& object, const char* field) {
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    const json& meta = object["metadata"];
    if (auto it = meta.find(field); it != meta.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return "";
}

std::string ResourceVersionOf(const json& object) { return MetaField(object, "resourceVersion"); }

// Same key, another object: the one cached was deleted and a new one created under its name while this informer
// was not looking (a relist after 410, or a missed DELETED). Objects without a uid are never told apart.
// What the cache keeps of `object` under cache_identity_only.
json Identity(const json& object) {
  json meta = json::object();
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    for (const char* k : {"name", "namespace", "uid", "resourceVersion"}) {
      if (auto it = object["metadata"].find(k); it != object["metadata"].end()) {
        meta[k] = *it;
      }
    }
  }
  return json{{"metadata", std::move(meta)}};
}

bool Replaced(const json& cached, const json& fresh) {
  const std::string old_uid = MetaField(cached, "uid");
  const std::string new_uid = MetaField(fresh, "uid");
  return !old_uid.empty() && !new_uid.empty() && old_uid != new_uid;
}

}  // namespace

std::string ObjectKey(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return "";
  }
  const json& meta = object["metadata"];
  const std::string name = meta.value("name", "");
  const std::string ns = meta.value("namespace", "");
  return ns.empty() ? name : ns + "/" + name;
}

Informer::Informer(ApiClient& client, InformerOptions options, Handler handler)
    : client_(client),
      options_(std::move(options)),
      handler_(std::move(handler)),
      backoff_(options_.initial_backoff, options_.max_backoff),
      rng_(options_.seed != 0 ? options_.seed : std::random_device{}()) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  std::lock_guard<std::mutex> lock(start_mu_);
  if (thread_.joinable() || stop_.load()) {
    return;
  }
  thread_ = std::thread([this] { Run(); });
}

void Informer::Stop() {
  std::lock_guard<std::mutex> lock(start_mu_);
  {
    std::lock_guard<std::mutex> state_lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

bool Informer::HasSynced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return synced_; });
}

std::vector<json> Informer::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  out.reserve(cache_.size());
  for (const auto& [key, object] : cache_) {
    out.push_back(object);
  }
  return out;
}

std::optional<json> Informer::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) {
    return std::nullopt;
  }
  return it->second;
}

uint64_t Informer::relists() const {
  std::lock_guard<std::mutex> lock(mu_);
  return relists_;
}

uint64_t Informer::reconnects() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reconnects_;
}

std::string Informer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resource_version_;
}

std::string Informer::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

uint64_t Informer::handler_failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handler_failures_;
}

uint64_t Informer::stalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stalls_;
}

void Informer::Contact() {
  std::lock_guard<std::mutex> lock(mu_);
  last_contact_ = std::chrono::steady_clock::now();
}

std::string Informer::Staleness() const {
  const auto bound =
      options_.stale_after.count() > 0
          ? options_.stale_after
          : std::chrono::milliseconds(1000L * (options_.watch_timeout_seconds + 2L * options_.watch_grace_seconds));
  std::lock_guard<std::mutex> lock(mu_);
  const auto silent = std::chrono::steady_clock::now() - last_contact_;
  if (silent <= bound) {
    return "";
  }
  return "watch of " + options_.path + " silent for " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(silent).count()) + " s (" +
         std::to_string(stalls_) + " stalled watches cut off" +
         (last_error_.empty() ? "" : "; last error: " + last_error_) + ")";
}

void Informer::Deliver(const WatchEvent& event) {
  if (!handler_) {
    return;
  }
  try {
    handler_(event);
  } catch (...) {
    // The handler did not take the event: make the cache say so, so that the relist Run starts after this
    // delivers it again (an addition or change as kAdded, a deletion as kDeleted) instead of finding nothing new.
    const std::string key = ObjectKey(event.object);
    if (!key.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (event.type == WatchEvent::Type::kDeleted) {
        cache_.insert_or_assign(key, options_.cache_identity_only ? Identity(event.object) : event.object);
      } else {
        cache_.erase(key);
      }
    }
    throw;
  }
}

void Informer::Apply(WatchEvent::Type type, json object) {
  const std::string key = ObjectKey(object);
  if (key.empty()) {
    return;
  }
  std::optional<json> replaced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = cache_.find(key);
    if (type == WatchEvent::Type::kDeleted) {
      if (it == cache_.end()) {
        return;
      }
      cache_.erase(it);
    } else {
      if (it != cache_.end() && Replaced(it->second, object)) {
        replaced = std::move(it->second);
        type = WatchEvent::Type::kAdded;
      } else if (type == WatchEvent::Type::kAdded && it != cache_.end()) {
        type = WatchEvent::Type::kModified;
      }
      cache_[key] = options_.cache_identity_only ? Identity(object) : object;
    }
  }
  if (replaced.has_value()) {
    Deliver(WatchEvent{.type = WatchEvent::Type::kDeleted, .object = std::move(*replaced)});
  }
  Deliver(WatchEvent{.type = type, .object = std::move(object)});
}

bool Informer::Backoff(const common::Status& why, bool is_error) {
  if (is_error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = why.ToString();
    }
    // The server first: an informer that cannot list or watch says which API server it cannot reach.
    common::Log(common::LogLevel::kWarn, "informer " + options_.path + ": " +
                                             DescribeApiFailure(why, client_.config().server) + " (" +
                                             std::string(common::StatusCodeName(why.code())) + ")");
  }
  std::uniform_real_distribution<double> jitter(0.75, 1.25);
  const auto wait =
      std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(backoff_.Next().count()) * jitter(rng_)));
  std::unique_lock<std::mutex> lock(mu_);
  return !cv_.wait_for(lock, wait, [this] { return stop_.load(); });
}

void Informer::ResetBackoff() { backoff_.Reset(); }

bool Informer::SyncPageByPage() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unordered_set<std::string> seen;
  size_t count = 0;
  auto listed = client_.ListPages(
      options_.path, options_.field_selector, options_.label_selector,
      [this, &seen, &count](std::vector<json>& items, bool restarted) {
        if (restarted) {
          seen.clear();
          count = 0;
        }
        for (json& item : items) {
          std::string key = ObjectKey(item);
          if (key.empty()) {
            continue;
          }
          ++count;
          seen.insert(key);
          {
            // Objects delivered by an earlier, failed or restarted attempt are compared
            // like a relist's.
            std::lock_guard<std::mutex> lock(mu_);
            const auto it = cache_.find(key);
            if (it != cache_.end() && !Replaced(it->second, item) &&
                ResourceVersionOf(it->second) == ResourceVersionOf(item)) {
              continue;
            }
          }
          Apply(WatchEvent::Type::kAdded, std::move(item));
        }
      },
      options_.prune);
  if (!listed.ok()) {
    Backoff(listed.status());
    return false;
  }
  // What an earlier attempt delivered and this list no longer has.
  std::vector<json> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      if (!seen.contains(it->first)) {
        gone.push_back(std::move(it->second));
        it = cache_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (json& object : gone) {
    Deliver(WatchEvent{.type = WatchEvent::Type::kDeleted, .object = std::move(object)});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = *listed;
    synced_ = true;
    last_contact_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
  common::Log(
      common::LogLevel::kInfo,
      "informer " + options_.path + ": listed and delivered " + std::to_string(count) + " objects in " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()) +
          " ms");
  return true;
}

bool Informer::ListAndDeliver(bool first) {
  if (first) {
    return SyncPageByPage();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto listed = client_.List(options_.path, options_.field_selector, options_.label_selector, options_.prune);
  if (!listed.ok()) {
    Backoff(listed.status());
    return false;
  }
  ListResult& list = *listed;
  const auto t1 = std::chrono::steady_clock::now();
  const size_t count = list.items.size();
  // The diff against the cache; on the first list the cache is empty and everything is kAdded.
  std::map<std::string, json> fresh;
  for (json& item : list.items) {
    std::string key = ObjectKey(item);
    if (!key.empty()) {
      fresh.emplace(std::move(key), std::move(item));
    }
  }
  std::vector<WatchEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cache_.begin(); it != cache_.end();) {
      const auto now_listed = fresh.find(it->first);
      if (now_listed == fresh.end() || Replaced(it->second, now_listed->second)) {
        events.push_back(WatchEvent{.type = WatchEvent::Type::kDeleted, .object = std::move(it->second)});
        it = cache_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Deliver deletions before additions (frees capacity first), each after its cache update.
  for (const WatchEvent& e : events) {
    Deliver(e);
  }
  for (auto& [key, object] : fresh) {
    WatchEvent::Type type = WatchEvent::Type::kAdded;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) {
        if (ResourceVersionOf(it->second) == ResourceVersionOf(object)) {
          continue;
        }
        type = WatchEvent::Type::kModified;
      }
      cache_[key] = options_.cache_identity_only ? Identity(object) : object;
    }
    Deliver(WatchEvent{.type = type, .object = std::move(object)});
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = list.resource_version;
    if (!first) {
      ++relists_;
    }
    synced_ = true;
    last_contact_ = std::chrono::steady_clock::now();
  }
  cv_.notify_all();
  auto ms = [](auto d) { return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); };
  common::Log(common::LogLevel::kInfo, "informer " + options_.path + ": relisted " + std::to_string(count) +
                                           " objects in " + ms(t1 - t0) + " ms, delivered in " +
                                           ms(std::chrono::steady_clock::now() - t1) + " ms");
  return true;
}

void Informer::OnWatchEvent(json& event, bool& got_events) {
  const std::string type = event.value("type", "");
  if (!event.contains("object")) {
    return;
  }
  json& object = event["object"];
  const std::string rv = ResourceVersionOf(object);
  Contact();
  if (type == "BOOKMARK") {
    got_events = true;  // the server is alive and streaming
    if (!rv.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      resource_version_ = rv;
    }
    return;
  }
  WatchEvent::Type t;
  if (type == "ADDED") {
    t = WatchEvent::Type::kAdded;
  } else if (type == "MODIFIED") {
    t = WatchEvent::Type::kModified;
  } else if (type == "DELETED") {
    t = WatchEvent::Type::kDeleted;
  } else {
    return;
  }
  got_events = true;
  if (!rv.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    resource_version_ = rv;
  }
  Apply(t, std::move(object));  // read already pruned by the watch
}

void Informer::Run() {
  // A handler that throws (or anything under it: a JSON type error on an object no check foresaw) must not end the
  // process through std::terminate, nor leave the informer silent: it is logged, counted, and the informer lists
  // again after a backoff, since the event it was delivering may be half applied by the handler.
  while (!stop_.load()) {
    std::string what;
    try {
      RunLoop();
      return;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an exception that is not a std::exception";
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++handler_failures_;
    }
    common::Log(common::LogLevel::kError,
                "informer of " + options_.path + ": " + what + "; listing again and watching from there");
    Backoff(common::Internal("the informer's handler threw: " + what));
  }
}

void Informer::RunLoop() {
  // The watch call takes the field selector; the label selector rides in the path.
  std::string watch_path = options_.path;
  if (!options_.label_selector.empty()) {
    watch_path += (watch_path.find('?') == std::string::npos ? "?labelSelector=" : "&labelSelector=") +
                  UrlEncode(options_.label_selector);
  }
  bool need_list = true;
  bool first_list = !HasSynced();  // after a handler failure, a relist diffed against the cache
  bool first_watch = true;
  while (!stop_.load()) {
    if (need_list) {
      if (!ListAndDeliver(first_list)) {
        continue;
      }
      first_list = false;
      need_list = false;
      ResetBackoff();
    }
    const std::string rv = resource_version();
    if (!first_watch) {
      std::lock_guard<std::mutex> lock(mu_);
      ++reconnects_;
    }
    first_watch = false;
    bool got_events = false;
    auto ended = client_.Watch(
        watch_path, rv, options_.watch_timeout_seconds, options_.field_selector,
        [this, &got_events](json& event) { OnWatchEvent(event, got_events); }, stop_, options_.watch_grace_seconds,
        options_.prune);
    if (!ended.ok()) {
      if (got_events) {
        ResetBackoff();
      }
      Backoff(ended.status());
      continue;
    }
    switch (*ended) {
      case WatchEnd::kStopped:
        return;
      case WatchEnd::kGone:
        need_list = true;
        break;
      case WatchEnd::kStalled: {
        const std::string why = "the watch of " + options_.path + " stalled: the server neither sent nor ended it " +
                                std::to_string(options_.watch_grace_seconds) + " s past its timeout";
        {
          std::lock_guard<std::mutex> lock(mu_);
          ++stalls_;
        }
        Backoff(common::DeadlineExceeded(why));
        break;
      }
      case WatchEnd::kClosed:
        Contact();
        if (got_events) {
          ResetBackoff();
        } else {
          Backoff(common::Unavailable("watch closed before any event"),
                  /*is_error=*/false);  // no busy loop on a flapping server
        }
        break;
    }
  }
}

}  // namespace gpusched::adapters::k8s
