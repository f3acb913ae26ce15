#include "gpusched/testing/fake_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <utility>

namespace gpusched::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr auto kWatchPoll = std::chrono::milliseconds(50);

const char* ReasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 405:
      return "MethodNotAllowed";
    case 409:
      return "Conflict";
    case 410:
      return "Expired";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    case 504:
      return "Timeout";
    default:
      return code >= 500 ? "InternalError" : "";
  }
}

json StatusJson(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void WriteStatus(httplib::Response& res, int code, const std::string& message, const std::string& reason = "") {
  res.status = code;
  res.set_content(StatusJson(code, reason.empty() ? ReasonFor(code) : reason, message).dump(), "application/json");
}

void WriteJson(httplib::Response& res, int code, const json& body) {
  res.status = code;
  res.set_content(body.dump(), "application/json");
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) {
      return out;
    }
    start = pos + 1;
  }
}

// The string value at a dotted path ("spec.nodeName"); "" when absent.
std::string FieldValue(const json& object, const std::string& dotted) {
  const json* cur = &object;
  for (const std::string& part : Split(dotted, '.')) {
    if (!cur->is_object() || !cur->contains(part)) {
      return "";
    }
    cur = &(*cur)[part];
  }
  if (cur->is_string()) {
    return cur->get<std::string>();
  }
  return cur->is_null() ? "" : cur->dump();
}

// fieldSelector: comma-separated key=value, key==value, key!=value.
bool MatchesFields(const json& object, const std::string& selector) {
  if (selector.empty()) {
    return true;
  }
  for (const std::string& term : Split(selector, ',')) {
    if (term.empty()) {
      continue;
    }
    const size_t ne = term.find("!=");
    if (ne != std::string::npos) {
      if (FieldValue(object, term.substr(0, ne)) == term.substr(ne + 2)) {
        return false;
      }
      continue;
    }
    const size_t eq = term.find('=');
    if (eq == std::string::npos) {
      return false;
    }
    const size_t value_at = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
    if (FieldValue(object, term.substr(0, eq)) != term.substr(value_at)) {
      return false;
    }
  }
  return true;
}

// labelSelector: comma-separated k=v, k==v, k!=v, k (exists), !k (absent).
bool MatchesLabels(const json& object, const std::string& selector) {
  if (selector.empty()) {
    return true;
  }
  const json labels =
      object.contains("metadata") && object["metadata"].contains("labels") && object["metadata"]["labels"].is_object()
          ? object["metadata"]["labels"]
          : json::object();
  auto label = [&labels](const std::string& k) -> std::optional<std::string> {
    if (!labels.contains(k) || !labels[k].is_string()) {
      return std::nullopt;
    }
    return labels[k].get<std::string>();
  };
  for (const std::string& term : Split(selector, ',')) {
    if (term.empty()) {
      continue;
    }
    const size_t ne = term.find("!=");
    const size_t eq = term.find('=');
    if (ne != std::string::npos) {
      if (label(term.substr(0, ne)) == term.substr(ne + 2)) {
        return false;
      }
    } else if (eq != std::string::npos) {
      const size_t value_at = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      if (label(term.substr(0, eq)) != term.substr(value_at)) {
        return false;
      }
    } else if (term.front() == '!') {
      if (label(term.substr(1)).has_value()) {
        return false;
      }
    } else if (!label(term).has_value()) {
      return false;
    }
  }
  return true;
}

std::string Now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// kube-apiserver's Priority admission plugin on a pod create: spec.priority from the named PriorityClass (the two
// built-in system classes; no others exist here, and no global default), 0 when none is named; a spec.priority that
// differs from that value is forbidden. Returns the error message, or "" when admitted (priority set).
std::string AdmitPriority(json& pod) {
  if (!pod.contains("spec") || !pod["spec"].is_object()) {
    return "";
  }
  json& spec = pod["spec"];
  const std::string name = spec.contains("priorityClassName") && spec["priorityClassName"].is_string()
                               ? spec["priorityClassName"].get<std::string>()
                               : std::string();
  int64_t value = 0;
  if (name == "system-node-critical") {
    value = 2000001000;
  } else if (name == "system-cluster-critical") {
    value = 2000000000;
  } else if (!name.empty()) {
    return "no PriorityClass with name " + name + " was found";
  }
  if (spec.contains("priority") && spec["priority"].is_number_integer() && spec["priority"].get<int64_t>() != value) {
    return "the integer value of priority (" + std::to_string(spec["priority"].get<int64_t>()) +
           ") must not be provided in pod spec; priority admission controller computed " + std::to_string(value) +
           " from the given PriorityClass name";
  }
  spec["priority"] = value;
  return "";
}

std::string Meta(const json& object, const char* key) {
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object()) {
    return object["metadata"].value(key, "");
  }
  return "";
}

std::string Kind(const std::string& resource) {
  return resource == "nodes" ? "Node" : resource == "pods" ? "Pod" : resource == "events" ? "Event" : "Lease";
}

// The request kind used by counters and FailNext, from the method and path.
std::string Classify(const httplib::Request& req) {
  const std::vector<std::string> seg = Split(req.path, '/');  // "", "api", "v1", ...
  const bool watch = req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true";
  const std::string& m = req.method;
  auto list_or_watch = [&](const std::string& what) { return (watch ? "watch-" : "list-") + what; };
  if (seg.size() >= 4 && seg[1] == "api" && seg[2] == "v1") {
    if (seg[3] == "nodes") {
      if (seg.size() == 4) {
        return list_or_watch("nodes");
      }
      return m == "GET" ? "get-node" : m == "PATCH" ? "patch-node" : m == "DELETE" ? "delete-node" : "unknown";
    }
    if (seg[3] == "pods" && seg.size() == 4) {
      return list_or_watch("pods");
    }
    if (seg[3] == "namespaces" && seg.size() >= 6) {
      if (seg[5] == "pods") {
        if (seg.size() == 6) {
          return m == "POST" ? "create-pod" : list_or_watch("pods");
        }
        if (seg.size() == 8 && seg[7] == "binding") {
          return "binding";
        }
        return m == "GET" ? "get-pod" : m == "PATCH" ? "patch-pod" : m == "DELETE" ? "delete-pod" : "unknown";
      }
      if (seg[5] == "events") {
        return m == "POST" ? "create-event" : "list-events";
      }
      if (seg[5] == "secrets") {
        return seg.size() == 6 ? (m == "POST" ? "create-secret" : "list-secrets")
                               : (m == "PUT"   ? "update-secret"
                                  : m == "GET" ? "get-secret"
                                               : "unknown");
      }
    }
  }
  if (seg.size() == 6 && seg[1] == "apis" && seg[2] == "admissionregistration.k8s.io" &&
      (seg[4] == "mutatingwebhookconfigurations" || seg[4] == "validatingwebhookconfigurations")) {
    return m == "GET" ? "get-webhookconfiguration" : m == "PATCH" ? "patch-webhookconfiguration" : "unknown";
  }
  if (seg.size() >= 5 && seg[1] == "apis" && seg[2] == "resource.k8s.io" && seg[3] == "v1") {
    const bool one = seg.size() == 6;
    if (seg[4] == "resourceslices") {
      return one ? (m == "GET"      ? "get-resourceslice"
                    : m == "PUT"    ? "update-resourceslice"
                    : m == "DELETE" ? "delete-resourceslice"
                                    : "unknown")
                 : (m == "POST" ? "create-resourceslice" : list_or_watch("resourceslices"));
    }
    if (seg[4] == "deviceclasses") {
      return one ? "get-deviceclass" : list_or_watch("deviceclasses");
    }
  }
  if (seg.size() >= 7 && seg[1] == "apis" && seg[2] == "coordination.k8s.io" && seg[6] == "leases") {
    if (seg.size() == 7) {
      return m == "POST" ? "create-lease" : "list-leases";
    }
    return m == "PUT" ? "update-lease" : "get-lease";
  }
  return "unknown";
}

}  // namespace

// The position of one open watch stream.
struct FakeApiServer::WatchCursor {
  std::string resource, ns, field_selector, label_selector;
  uint64_t rv = 0;
  uint64_t generation = 0;
  bool bookmarks = false;
  std::optional<Clock::time_point> deadline;
  Clock::time_point next_bookmark;
  std::string initial;  // lines to send first
  bool end_after_initial = false;
};

// Route handlers; a nested class so they see the private state.
class FakeApiServer::Handlers {
 public:
  explicit Handlers(FakeApiServer& s) : s_(s) {}

  // Counting, delay, auth and failure injection. False when the response is already written.
  bool Preamble(const httplib::Request& req, httplib::Response& res) {
    const std::string kind = Classify(req);
    std::optional<Failure> failure;
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      ++s_.counts_[{req.method, kind}];
      for (auto it = s_.failures_.begin(); it != s_.failures_.end(); ++it) {
        if (it->method == req.method &&
            (it->path_substring == kind || req.target.find(it->path_substring) != std::string::npos)) {
          failure = *it;
          if (it->remaining > 0 && --it->remaining == 0) {
            s_.failures_.erase(it);
          }
          break;
        }
      }
      if (kind.rfind("watch-", 0) != 0) {
        delay = s_.delay_;
      }
    }
    if (delay.count() > 0) {
      std::unique_lock<std::mutex> lock(s_.mu_);
      s_.changed_.wait_for(lock, delay, [this] { return s_.stopping_; });
    }
    if (!s_.options_.token.empty() && req.get_header_value("Authorization") != "Bearer " + s_.options_.token) {
      WriteStatus(res, 401, "Unauthorized");
      return false;
    }
    if (failure.has_value()) {
      WriteStatus(res, failure->http_code, failure->message);
      return false;
    }
    return true;
  }

  template <typename Fn>
  httplib::Server::Handler Wrap(Fn fn) {
    return [this, fn](const httplib::Request& req, httplib::Response& res) {
      if (Preamble(req, res)) {
        fn(req, res);
      }
    };
  }

  void Register(httplib::Server& svr) {
    // Discovery of the core group, as far as this server serves it.
    svr.Get("/api/v1", Wrap([](const auto&, auto& res) {
              const json list = {{"kind", "APIResourceList"},
                                 {"groupVersion", "v1"},
                                 {"resources",
                                  {{{"name", "pods"}, {"namespaced", true}, {"kind", "Pod"}},
                                   {{"name", "pods/status"}, {"namespaced", true}, {"kind", "Pod"}},
                                   {{"name", "pods/binding"}, {"namespaced", true}, {"kind", "Binding"}},
                                   {{"name", "nodes"}, {"namespaced", false}, {"kind", "Node"}},
                                   {{"name", "events"}, {"namespaced", true}, {"kind", "Event"}}}}};
              res.set_content(list.dump(), "application/json");
            }));
    svr.Get("/api/v1/nodes", Wrap([this](const auto& req, auto& res) { ListOrWatch(req, res, "nodes", ""); }));
    svr.Get("/api/v1/pods", Wrap([this](const auto& req, auto& res) { ListOrWatch(req, res, "pods", ""); }));
    svr.Get(R"(/api/v1/namespaces/([^/]+)/pods)",
            Wrap([this](const auto& req, auto& res) { ListOrWatch(req, res, "pods", req.matches[1]); }));
    svr.Get(R"(/api/v1/nodes/([^/]+))",
            Wrap([this](const auto& req, auto& res) { GetOne(res, "nodes", req.matches[1]); }));
    svr.Get(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))", Wrap([this](const auto& req, auto& res) {
              GetOne(res, "pods", std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
            }));
    svr.Post(R"(/api/v1/namespaces/([^/]+)/pods)",
             Wrap([this](const auto& req, auto& res) { CreatePod(req, res, req.matches[1]); }));
    svr.Post(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding)",
             Wrap([this](const auto& req, auto& res) { Bind(req, res, req.matches[1], req.matches[2]); }));
    svr.Patch(R"(/api/v1/nodes/([^/]+)(/status)?)",
              Wrap([this](const auto& req, auto& res) { Patch(req, res, "nodes", req.matches[1]); }));
    svr.Patch(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+)(/status)?)", Wrap([this](const auto& req, auto& res) {
                Patch(req, res, "pods", std::string(req.matches[1]) + "/" + std::string(req.matches[2]));
              }));
    svr.Delete(R"(/api/v1/namespaces/([^/]+)/pods/([^/]+))",
               Wrap([this](const auto& req, auto& res) { DeletePod(res, req.matches[1], req.matches[2]); }));
    svr.Get(R"(/api/v1/namespaces/([^/]+)/events)",
            Wrap([this](const auto& req, auto& res) { ListEvents(req, res, req.matches[1]); }));
    svr.Post(R"(/api/v1/namespaces/([^/]+)/events)",
             Wrap([this](const auto& req, auto& res) { CreateEvent(req, res, req.matches[1]); }));
    svr.Patch(R"(/api/v1/namespaces/([^/]+)/events/([^/]+))",
              Wrap([this](const auto& req, auto& res) { PatchEvent(req, res, req.matches[1], req.matches[2]); }));
    const std::string leases = R"(/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases)";
    svr.Get(leases, Wrap([this](const auto& req, auto& res) { ListLeases(req, res, req.matches[1]); }));
    svr.Post(leases, Wrap([this](const auto& req, auto& res) { PutLease(req, res, req.matches[1], "", true); }));
    svr.Get(leases + "/([^/]+)",
            Wrap([this](const auto& req, auto& res) { GetLease(res, req.matches[1], req.matches[2]); }));
    svr.Put(leases + "/([^/]+)",
            Wrap([this](const auto& req, auto& res) { PutLease(req, res, req.matches[1], req.matches[2], false); }));
    const std::string secrets = R"(/api/v1/namespaces/([^/]+)/secrets)";
    svr.Post(secrets, Wrap([this](const auto& req, auto& res) { PutSecret(req, res, req.matches[1], "", true); }));
    svr.Get(secrets + "/([^/]+)", Wrap([this](const auto& req, auto& res) {
              GetStored(res, s_.secrets_, std::string(req.matches[1]) + "/" + std::string(req.matches[2]), "secrets");
            }));
    svr.Put(secrets + "/([^/]+)",
            Wrap([this](const auto& req, auto& res) { PutSecret(req, res, req.matches[1], req.matches[2], false); }));
    const std::string configs =
        R"(/apis/admissionregistration.k8s.io/v1/((?:mutating|validating)webhookconfigurations)/([^/]+))";
    svr.Get(configs, Wrap([this](const auto& req, auto& res) {
              const std::string resource = req.matches[1];
              GetStored(res, s_.webhook_configs_, resource + "/" + std::string(req.matches[2]),
                        resource + ".admissionregistration.k8s.io");
            }));
    svr.Patch(configs,
              Wrap([this](const auto& req, auto& res) { PatchConfig(req, res, req.matches[1], req.matches[2]); }));
    RegisterDra(svr);
  }

 private:
  std::map<std::string, json>& Objects(const std::string& resource) {
    return resource == "nodes" ? s_.nodes_ : s_.pods_;
  }

  static bool InNamespace(const json& object, const std::string& ns) {
    return ns.empty() || Meta(object, "namespace") == ns;
  }

  static bool Matches(const WatchCursor& c, const json& object) {
    return InNamespace(object, c.ns) && MatchesFields(object, c.field_selector) &&
           MatchesLabels(object, c.label_selector);
  }

  static std::optional<json> Parse(const httplib::Request& req, httplib::Response& res) {
    json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      WriteStatus(res, 400, "the request body is not a JSON object");
      return std::nullopt;
    }
    return body;
  }

  // Pages over `objects` (sorted by key) with limit and continue "<rv>:<last key>".
  void WriteList(const httplib::Request& req, httplib::Response& res, const std::string& kind,
                 const std::vector<std::pair<std::string, json>>& objects, uint64_t current_rv, uint64_t compacted_rv) {
    const std::string token = req.get_param_value("continue");
    uint64_t list_rv = current_rv;
    std::string after;
    if (!token.empty()) {
      const size_t colon = token.find(':');
      if (colon == std::string::npos) {
        WriteStatus(res, 400, "invalid continue token");
        return;
      }
      list_rv = std::stoull(token.substr(0, colon));
      after = token.substr(colon + 1);
      if (list_rv < compacted_rv) {
        WriteStatus(res, 410,
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter.",
                    "Expired");
        return;
      }
    }
    size_t limit = 0;
    if (req.has_param("limit")) {
      limit = static_cast<size_t>(std::stoul(req.get_param_value("limit")));
    }
    json items = json::array();
    std::string last_key;
    bool more = false;
    for (const auto& [key, object] : objects) {
      if (!after.empty() && key <= after) {
        continue;
      }
      if (limit > 0 && items.size() == limit) {
        more = true;
        break;
      }
      items.push_back(object);
      last_key = key;
    }
    json meta = {{"resourceVersion", std::to_string(list_rv)}};
    if (more) {
      meta["continue"] = std::to_string(list_rv) + ":" + last_key;
    }
    WriteJson(res, 200, {{"kind", kind + "List"}, {"apiVersion", "v1"}, {"metadata", meta}, {"items", items}});
  }

  void ListOrWatch(const httplib::Request& req, httplib::Response& res, const std::string& resource,
                   const std::string& ns) {
    const std::string field_selector = req.get_param_value("fieldSelector");
    const std::string label_selector = req.get_param_value("labelSelector");
    const std::string watch = req.get_param_value("watch");
    if (watch == "1" || watch == "true") {
      Watch(req, res, resource, ns);
      return;
    }
    std::vector<std::pair<std::string, json>> objects;
    uint64_t rv = 0;
    uint64_t compacted = 0;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      for (const auto& [key, object] : Objects(resource)) {
        if (InNamespace(object, ns) && MatchesFields(object, field_selector) && MatchesLabels(object, label_selector)) {
          objects.emplace_back(key, object);
        }
      }
      rv = s_.rv_;
      compacted = s_.compacted_rv_;
    }
    WriteList(req, res, Kind(resource), objects, rv, compacted);
  }

  static std::string Line(const std::string& type, const json& object) {
    return json{{"type", type}, {"object", object}}.dump() + "\n";
  }

  static std::string GoneLine(uint64_t rv, uint64_t compacted) {
    return Line("ERROR",
                StatusJson(410, "Expired",
                           "too old resource version: " + std::to_string(rv) + " (" + std::to_string(compacted) + ")"));
  }

  void Watch(const httplib::Request& req, httplib::Response& res, const std::string& resource, const std::string& ns) {
    auto cursor = std::make_shared<WatchCursor>();
    cursor->resource = resource;
    cursor->ns = ns;
    cursor->field_selector = req.get_param_value("fieldSelector");
    cursor->label_selector = req.get_param_value("labelSelector");
    cursor->bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
    const std::string rv_param = req.get_param_value("resourceVersion");
    const std::string timeout = req.get_param_value("timeoutSeconds");
    const auto now = Clock::now();
    if (!timeout.empty() && std::stol(timeout) > 0) {
      cursor->deadline = now + std::chrono::seconds(std::stol(timeout));
    }
    cursor->next_bookmark = now + s_.options_.bookmark_interval;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      cursor->generation = s_.watch_generation_;
      if (rv_param.empty() || rv_param == "0") {
        for (const auto& [key, object] : Objects(resource)) {
          if (Matches(*cursor, object)) {
            cursor->initial += Line("ADDED", object);
          }
        }
        cursor->rv = s_.rv_;
      } else {
        cursor->rv = std::stoull(rv_param);
        if (cursor->rv < s_.compacted_rv_) {
          cursor->initial = GoneLine(cursor->rv, s_.compacted_rv_);
          cursor->end_after_initial = true;
        }
      }
      ++s_.open_watches_;
      ++s_.watches_started_;
    }
    res.status = 200;
    res.set_chunked_content_provider(
        "application/json", [this, cursor](size_t /*offset*/, httplib::DataSink& sink) { return Pump(*cursor, sink); },
        [this, cursor](bool /*success*/) {
          std::lock_guard<std::mutex> lock(s_.mu_);
          --s_.open_watches_;
        });
  }

  // One step of a watch stream: send what is new, else wait up to kWatchPoll. httplib calls it again while the
  // stream is open.
  bool Pump(WatchCursor& c, httplib::DataSink& sink) {
    {
      std::unique_lock<std::mutex> lock(s_.mu_);
      if (s_.stalled_ && !s_.stopping_) {  // a black-holed stream: nothing arrives, nothing ends
        s_.changed_.wait_for(lock, kWatchPoll);
        return true;
      }
    }
    std::string out = std::move(c.initial);
    c.initial.clear();
    bool finish = c.end_after_initial;
    {
      std::unique_lock<std::mutex> lock(s_.mu_);
      if (!finish && (s_.stopping_ || s_.watch_generation_ != c.generation)) {
        finish = true;
      }
      if (!finish && c.rv < s_.compacted_rv_) {
        out += GoneLine(c.rv, s_.compacted_rv_);
        finish = true;
      }
      if (!finish) {
        const auto first = std::upper_bound(s_.history_.begin(), s_.history_.end(), c.rv,
                                            [](uint64_t rv, const Change& ch) { return rv < ch.rv; });
        for (auto it = first; it != s_.history_.end(); ++it) {
          if (it->resource != c.resource) {
            continue;
          }
          const bool now_matches = Matches(c, it->object);
          const bool was_matching = it->old_object.has_value() && Matches(c, *it->old_object);
          if (it->type == "MODIFIED") {
            if (now_matches) {
              out += Line(was_matching ? "MODIFIED" : "ADDED", it->object);
            } else if (was_matching) {
              out += Line("DELETED", it->object);
            }
          } else if (now_matches) {
            out += Line(it->type, it->object);
          }
        }
        c.rv = s_.rv_;
        const auto now = Clock::now();
        if (c.bookmarks && now >= c.next_bookmark) {
          out += Line("BOOKMARK", {{"kind", Kind(c.resource)},
                                   {"apiVersion", "v1"},
                                   {"metadata", {{"resourceVersion", std::to_string(c.rv)}}}});
          c.next_bookmark = now + s_.options_.bookmark_interval;
        }
        if (c.deadline.has_value() && now >= *c.deadline) {
          finish = true;
        }
        if (out.empty() && !finish) {
          auto wake = now + kWatchPoll;
          if (c.bookmarks) {
            wake = std::min(wake, c.next_bookmark);
          }
          if (c.deadline.has_value()) {
            wake = std::min(wake, *c.deadline);
          }
          s_.changed_.wait_until(lock, wake);
        }
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      return false;
    }
    if (finish) {
      sink.done();
    }
    return true;
  }

  void GetOne(httplib::Response& res, const std::string& resource, const std::string& key) {
    std::lock_guard<std::mutex> lock(s_.mu_);
    const auto& objects = Objects(resource);
    const auto it = objects.find(key);
    if (it == objects.end()) {
      WriteStatus(res, 404, resource + " \"" + key.substr(key.find('/') + 1) + "\" not found");
      return;
    }
    WriteJson(res, 200, it->second);
  }

  void CreatePod(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    auto body = Parse(req, res);
    if (!body.has_value()) {
      return;
    }
    (*body)["metadata"]["namespace"] = ns;
    const std::string name = Meta(*body, "name");
    if (name.empty()) {
      WriteStatus(res, 422, "Pod \"\" is invalid: metadata.name: Required value");
      return;
    }
    if (const std::string refused = AdmitPriority(*body); !refused.empty()) {
      WriteStatus(res, 403, "pods \"" + name + "\" is forbidden: " + refused, "Forbidden");
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    if (s_.pods_.count(ns + "/" + name) != 0) {
      WriteStatus(res, 409, "pods \"" + name + "\" already exists", "AlreadyExists");
      return;
    }
    WriteJson(res, 201, s_.StoreLocked("pods", ns + "/" + name, std::move(*body)));
  }

  void Bind(const httplib::Request& req, httplib::Response& res, const std::string& ns, const std::string& name) {
    auto body = Parse(req, res);
    if (!body.has_value()) {
      return;
    }
    const std::string node = (*body).contains("target") ? (*body)["target"].value("name", "") : "";
    if (node.empty()) {
      WriteStatus(res, 400, "Binding.target.name is required");
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    const auto it = s_.pods_.find(ns + "/" + name);
    if (it == s_.pods_.end()) {
      WriteStatus(res, 404, "pods \"" + name + "\" not found");
      return;
    }
    const std::string want_uid = Meta(*body, "uid");
    const std::string uid = Meta(it->second, "uid");
    if (!want_uid.empty() && want_uid != uid) {
      WriteStatus(res, 409,
                  "Operation cannot be fulfilled on pods/binding \"" + name +
                      "\": Precondition failed: UID in precondition: " + want_uid + ", UID in object meta: " + uid);
      return;
    }
    const std::string current = FieldValue(it->second, "spec.nodeName");
    if (!current.empty()) {
      WriteStatus(res, 409,
                  "Operation cannot be fulfilled on pods/binding \"" + name + "\": pod " + name +
                      " is already assigned to node \"" + current + "\"");
      return;
    }
    json pod = it->second;
    pod["spec"]["nodeName"] = node;
    // As the real API server does: the Binding's annotations are copied onto the pod in the same write.
    if (body->contains("metadata") && (*body)["metadata"].is_object() && (*body)["metadata"].contains("annotations") &&
        (*body)["metadata"]["annotations"].is_object()) {
      for (const auto& [k, v] : (*body)["metadata"]["annotations"].items()) {
        pod["metadata"]["annotations"][k] = v;
      }
    }
    s_.StoreLocked("pods", ns + "/" + name, std::move(pod));
    WriteJson(
        res, 201,
        {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"status", "Success"}, {"code", 201}});
  }

  void Patch(const httplib::Request& req, httplib::Response& res, const std::string& resource, const std::string& key) {
    const std::string type = req.get_header_value("Content-Type");
    if (type.rfind("application/merge-patch+json", 0) != 0 &&
        type.rfind("application/strategic-merge-patch+json", 0) != 0) {
      WriteStatus(res, 415,
                  "the body of the request was in an unknown format - accepted media types include: "
                  "application/merge-patch+json, application/strategic-merge-patch+json");
      return;
    }
    auto patch = Parse(req, res);
    if (!patch.has_value()) {
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    auto& objects = Objects(resource);
    const auto it = objects.find(key);
    const std::string name = key.substr(key.find('/') + 1);
    if (it == objects.end()) {
      WriteStatus(res, 404, resource + " \"" + name + "\" not found");
      return;
    }
    const std::string want_rv = Meta(*patch, "resourceVersion");
    if (!want_rv.empty() && want_rv != Meta(it->second, "resourceVersion")) {
      WriteStatus(res, 409,
                  "Operation cannot be fulfilled on " + resource + " \"" + name +
                      "\": the object has been modified; please apply your changes to the latest version and try "
                      "again");
      return;
    }
    json merged = it->second;
    const json identity = merged["metadata"];
    merged.merge_patch(*patch);
    for (const char* k : {"name", "namespace", "uid", "creationTimestamp"}) {
      if (identity.contains(k)) {
        merged["metadata"][k] = identity[k];
      }
    }
    WriteJson(res, 200, s_.StoreLocked(resource, key, std::move(merged)));
  }

  void DeletePod(httplib::Response& res, const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(s_.mu_);
    const auto it = s_.pods_.find(ns + "/" + name);
    if (it == s_.pods_.end()) {
      WriteStatus(res, 404, "pods \"" + name + "\" not found");
      return;
    }
    const json pod = it->second;
    s_.RemoveLocked("pods", ns + "/" + name);
    WriteJson(res, 200, pod);
  }

  void ListEvents(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    std::vector<std::pair<std::string, json>> objects;
    uint64_t rv = 0;
    uint64_t compacted = 0;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      for (const json& e : s_.events_) {
        if (InNamespace(e, ns) && MatchesFields(e, req.get_param_value("fieldSelector"))) {
          objects.emplace_back(Meta(e, "namespace") + "/" + Meta(e, "name"), e);
        }
      }
      rv = s_.rv_;
      compacted = s_.compacted_rv_;
    }
    std::sort(objects.begin(), objects.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    WriteList(req, res, "Event", objects, rv, compacted);
  }

  void CreateEvent(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    auto body = Parse(req, res);
    if (!body.has_value()) {
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    json& meta = (*body)["metadata"];
    if (Meta(*body, "name").empty()) {
      const std::string prefix = meta.value("generateName", "");
      if (prefix.empty()) {
        WriteStatus(res, 422, "Event is invalid: metadata.name or metadata.generateName is required");
        return;
      }
      meta["name"] = prefix + "e" + std::to_string(++s_.uid_counter_);
    }
    meta["namespace"] = ns;
    meta["uid"] = "event-uid-" + std::to_string(++s_.uid_counter_);
    meta["resourceVersion"] = std::to_string(s_.NextRvLocked());
    meta["creationTimestamp"] = Now();
    s_.events_.push_back(*body);
    WriteJson(res, 201, *body);
  }

  void PatchEvent(const httplib::Request& req, httplib::Response& res, const std::string& ns, const std::string& name) {
    if (req.get_header_value("Content-Type").rfind("application/merge-patch+json", 0) != 0) {
      WriteStatus(res, 415, "the fake takes merge patches of events only");
      return;
    }
    auto patch = Parse(req, res);
    if (!patch.has_value()) {
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    for (json& e : s_.events_) {
      if (Meta(e, "namespace") == ns && Meta(e, "name") == name) {
        const json identity = e["metadata"];
        e.merge_patch(*patch);
        e["metadata"] = identity;
        e["metadata"]["resourceVersion"] = std::to_string(s_.NextRvLocked());
        WriteJson(res, 200, e);
        return;
      }
    }
    WriteStatus(res, 404, "events \"" + name + "\" not found");
  }

  void ListLeases(const httplib::Request& req, httplib::Response& res, const std::string& ns) {
    std::vector<std::pair<std::string, json>> objects;
    uint64_t rv = 0;
    uint64_t compacted = 0;
    {
      std::lock_guard<std::mutex> lock(s_.mu_);
      for (const auto& [key, lease] : s_.leases_) {
        if (InNamespace(lease, ns)) {
          objects.emplace_back(key, lease);
        }
      }
      rv = s_.rv_;
      compacted = s_.compacted_rv_;
    }
    WriteList(req, res, "Lease", objects, rv, compacted);
  }

  void GetLease(httplib::Response& res, const std::string& ns, const std::string& name) {
    std::lock_guard<std::mutex> lock(s_.mu_);
    const auto it = s_.leases_.find(ns + "/" + name);
    if (it == s_.leases_.end()) {
      WriteStatus(res, 404, "leases.coordination.k8s.io \"" + name + "\" not found");
      return;
    }
    WriteJson(res, 200, it->second);
  }

  // POST (create) or PUT (update) of a Lease.
  void PutLease(const httplib::Request& req, httplib::Response& res, const std::string& ns,
                const std::string& path_name, bool create) {
    auto body = Parse(req, res);
    if (!body.has_value()) {
      return;
    }
    const std::string name = Meta(*body, "name");
    if (name.empty() || (!create && name != path_name)) {
      WriteStatus(res, 400, "Lease metadata.name is missing or does not match the path");
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    const std::string key = ns + "/" + name;
    const auto it = s_.leases_.find(key);
    json& meta = (*body)["metadata"];
    if (create) {
      if (it != s_.leases_.end()) {
        WriteStatus(res, 409, "leases.coordination.k8s.io \"" + name + "\" already exists", "AlreadyExists");
        return;
      }
      meta["uid"] = "lease-uid-" + std::to_string(++s_.uid_counter_);
      meta["creationTimestamp"] = Now();
    } else {
      if (it == s_.leases_.end()) {
        WriteStatus(res, 404, "leases.coordination.k8s.io \"" + name + "\" not found");
        return;
      }
      const std::string want_rv = meta.value("resourceVersion", "");
      if (!want_rv.empty() && want_rv != Meta(it->second, "resourceVersion")) {
        WriteStatus(res, 409,
                    "Operation cannot be fulfilled on leases.coordination.k8s.io \"" + name +
                        "\": the object has been modified; please apply your changes to the latest version and try "
                        "again");
        return;
      }
      meta["uid"] = it->second["metadata"]["uid"];
      meta["creationTimestamp"] = it->second["metadata"]["creationTimestamp"];
    }
    meta["namespace"] = ns;
    meta["resourceVersion"] = std::to_string(s_.NextRvLocked());
    (*body)["apiVersion"] = "coordination.k8s.io/v1";
    (*body)["kind"] = "Lease";
    s_.leases_[key] = *body;
    WriteJson(res, create ? 201 : 200, *body);
  }

  void GetStored(httplib::Response& res, const std::map<std::string, json>& objects, const std::string& key,
                 const std::string& resource) {
    std::lock_guard<std::mutex> lock(s_.mu_);
    const auto it = objects.find(key);
    if (it == objects.end()) {
      WriteStatus(res, 404, resource + " \"" + key.substr(key.rfind('/') + 1) + "\" not found");
      return;
    }
    WriteJson(res, 200, it->second);
  }

  // POST (create) or PUT (update) of a Secret.
  void PutSecret(const httplib::Request& req, httplib::Response& res, const std::string& ns,
                 const std::string& path_name, bool create) {
    auto body = Parse(req, res);
    if (!body.has_value()) {
      return;
    }
    const std::string name = Meta(*body, "name");
    if (name.empty()) {
      WriteStatus(res, 422, "Secret \"\" is invalid: metadata.name: Required value");
      return;
    }
    if ((!create && name != path_name) || (!Meta(*body, "namespace").empty() && Meta(*body, "namespace") != ns)) {
      WriteStatus(res, 400, "the name or namespace of the object does not match the request");
      return;
    }
    if (body->contains("data") &&
        (!(*body)["data"].is_object() ||
         std::any_of((*body)["data"].begin(), (*body)["data"].end(), [](const json& v) { return !v.is_string(); }))) {
      WriteStatus(res, 400, "Secret data must map keys to base64 strings");
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    const std::string key = ns + "/" + name;
    const auto it = s_.secrets_.find(key);
    if (create && it != s_.secrets_.end()) {
      WriteStatus(res, 409, "secrets \"" + name + "\" already exists", "AlreadyExists");
      return;
    }
    if (!create) {
      if (it == s_.secrets_.end()) {
        WriteStatus(res, 404, "secrets \"" + name + "\" not found");
        return;
      }
      const std::string want_rv = Meta(*body, "resourceVersion");
      if (!want_rv.empty() && want_rv != Meta(it->second, "resourceVersion")) {
        WriteStatus(res, 409,
                    "Operation cannot be fulfilled on secrets \"" + name +
                        "\": the object has been modified; please apply your changes to the latest version and try "
                        "again");
        return;
      }
    }
    (*body)["metadata"]["namespace"] = ns;
    std::optional<json> old;
    if (it != s_.secrets_.end()) {
      old = it->second;
    }
    s_.secrets_[key] = s_.StampLocked(std::move(*body), old, "v1", "Secret");
    WriteJson(res, create ? 201 : 200, s_.secrets_[key]);
  }

  // resource.k8s.io/v1: ResourceSlices and DeviceClasses (fake_dra_store.h holds the rules).
  void RegisterDra(httplib::Server& svr) {
    const std::string slices = "/apis/resource.k8s.io/v1/resourceslices";
    const std::string classes = "/apis/resource.k8s.io/v1/deviceclasses";
    auto reply = [](httplib::Response& res, const FakeReply& r) {
      if (r.code >= 300) {
        WriteStatus(res, r.code, r.message, r.reason);
      } else {
        WriteJson(res, r.code, r.object);
      }
    };
    auto list = [this](const httplib::Request& req, httplib::Response& res, const char* kind,
                       const std::vector<std::pair<std::string, json>>& items) {
      uint64_t rv = 0;
      uint64_t compacted = 0;
      {
        std::lock_guard<std::mutex> lock(s_.mu_);
        rv = s_.rv_;
        compacted = s_.compacted_rv_;
      }
      WriteList(req, res, kind, items, rv, compacted);
    };
    svr.Get(slices, Wrap([this, reply, list](const auto& req, auto& res) {
              if (req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true") {
                WriteStatus(res, 405, "this fake does not watch resourceslices");
                return;
              }
              std::vector<std::pair<std::string, json>> items;
              const FakeReply r = s_.dra_->ListSlices(req.get_param_value("fieldSelector"),
                                                      req.get_param_value("labelSelector"), items);
              if (r.code >= 300) {
                reply(res, r);
                return;
              }
              list(req, res, "ResourceSlice", items);
            }));
    svr.Post(slices, Wrap([this, reply](const auto& req, auto& res) {
               if (auto body = Parse(req, res)) {
                 reply(res, s_.dra_->CreateSlice(std::move(*body)));
               }
             }));
    svr.Get(slices + "/([^/]+)",
            Wrap([this, reply](const auto& req, auto& res) { reply(res, s_.dra_->GetSlice(req.matches[1])); }));
    svr.Put(slices + "/([^/]+)", Wrap([this, reply](const auto& req, auto& res) {
              if (auto body = Parse(req, res)) {
                reply(res, s_.dra_->UpdateSlice(req.matches[1], std::move(*body)));
              }
            }));
    svr.Delete(slices + "/([^/]+)", Wrap([this, reply](const auto& req, auto& res) {
                 const json options =
                     req.body.empty() ? json::object() : json::parse(req.body, nullptr, /*allow_exceptions=*/false);
                 reply(res, s_.dra_->DeleteSlice(req.matches[1], options));
               }));
    svr.Get(classes, Wrap([this, list](const auto& req, auto& res) {
              std::vector<std::pair<std::string, json>> items;
              s_.dra_->ListDeviceClasses(items);
              list(req, res, "DeviceClass", items);
            }));
    svr.Get(classes + "/([^/]+)",
            Wrap([this, reply](const auto& req, auto& res) { reply(res, s_.dra_->GetDeviceClass(req.matches[1])); }));
  }

  void PatchConfig(const httplib::Request& req, httplib::Response& res, const std::string& resource,
                   const std::string& name) {
    const std::string type = req.get_header_value("Content-Type");
    const bool json_patch = type.rfind("application/json-patch+json", 0) == 0;
    if (!json_patch && type.rfind("application/merge-patch+json", 0) != 0 &&
        type.rfind("application/strategic-merge-patch+json", 0) != 0) {
      WriteStatus(res, 415,
                  "the body of the request was in an unknown format - accepted media types include: "
                  "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json");
      return;
    }
    json patch = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (patch.is_discarded() || (json_patch ? !patch.is_array() : !patch.is_object())) {
      WriteStatus(res, 400,
                  json_patch ? "a JSON patch is a list of operations" : "the request body is not a JSON object");
      return;
    }
    std::lock_guard<std::mutex> lock(s_.mu_);
    const std::string key = resource + "/" + name;
    const auto it = s_.webhook_configs_.find(key);
    if (it == s_.webhook_configs_.end()) {
      WriteStatus(res, 404, resource + ".admissionregistration.k8s.io \"" + name + "\" not found");
      return;
    }
    json patched;
    if (json_patch) {
      try {
        patched = it->second.patch(patch);
      } catch (const json::exception& e) {
        WriteStatus(res, 422,
                    std::string("the server rejected our request due to an error in our request: ") + e.what());
        return;
      }
    } else {
      const std::string want_rv = Meta(patch, "resourceVersion");
      if (!want_rv.empty() && want_rv != Meta(it->second, "resourceVersion")) {
        WriteStatus(res, 409,
                    "Operation cannot be fulfilled on " + resource + ".admissionregistration.k8s.io \"" + name +
                        "\": the object has been modified; please apply your changes to the latest version and try "
                        "again");
        return;
      }
      patched = it->second;
      patched.merge_patch(patch);
    }
    if (Meta(patched, "name") != name) {
      WriteStatus(res, 422, "metadata.name may not change");
      return;
    }
    it->second = s_.StampLocked(std::move(patched), it->second, "admissionregistration.k8s.io/v1",
                                resource == "mutatingwebhookconfigurations" ? "MutatingWebhookConfiguration"
                                                                            : "ValidatingWebhookConfiguration");
    WriteJson(res, 200, it->second);
  }

  FakeApiServer& s_;
};

FakeApiServer::FakeApiServer(FakeApiServerOptions options)
    : options_(std::move(options)), dra_(std::make_unique<FakeDraStore>([this] {
        std::lock_guard<std::mutex> lock(mu_);
        return NextRvLocked();
      })) {}

FakeApiServer::~FakeApiServer() { Stop(); }

common::Status FakeApiServer::Start() {
  if (server_ != nullptr) {
    return common::FailedPrecondition("FakeApiServer already started");
  }
  std::unique_ptr<httplib::SSLServer> svr;
  if (options_.client_ca_file.empty()) {
    svr = std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(), options_.key_file.c_str());
  } else {
    svr = std::make_unique<httplib::SSLServer>(options_.cert_file.c_str(), options_.key_file.c_str(),
                                               options_.client_ca_file.c_str());
  }
  if (!svr->is_valid()) {
    return common::InvalidArgument("FakeApiServer: cannot load " + options_.cert_file + " / " + options_.key_file +
                                   " / " + options_.client_ca_file);
  }
  // With client-certificate verification OpenSSL refuses to resume a TLS session (curl tries on every new
  // connection) unless a session id context is set: "tlsv1 alert internal error".
  static constexpr unsigned char kSessionContext[] = "gpusched-fake-apiserver";
  SSL_CTX_set_session_id_context(svr->ssl_context(), kSessionContext, sizeof(kSessionContext) - 1);
  const auto threads = static_cast<size_t>(std::max(options_.threads, 4));
  svr->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  svr->set_keep_alive_timeout(1);  // Stop() waits for idle keep-alive connections this long at most
  handlers_ = std::make_unique<Handlers>(*this);
  handlers_->Register(*svr);
  port_ = svr->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) {
    return common::Unavailable("FakeApiServer: cannot bind 127.0.0.1");
  }
  server_ = std::move(svr);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!server_->is_running()) {
    if (Clock::now() > deadline) {
      return common::Unavailable("FakeApiServer: did not start listening within 10 s");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return common::Status::Ok();
}

void FakeApiServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (server_ != nullptr) {
    server_->stop();
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

int FakeApiServer::port() const { return port_; }

std::string FakeApiServer::url() const { return "https://127.0.0.1:" + std::to_string(port_); }

uint64_t FakeApiServer::NextRvLocked() { return ++rv_; }

json FakeApiServer::StoreLocked(const std::string& resource, const std::string& key, json object) {
  auto& objects = resource == "nodes" ? nodes_ : pods_;
  const auto it = objects.find(key);
  std::optional<json> old;
  if (it != objects.end()) {
    old = it->second;
  }
  json& meta = object["metadata"];
  if (!meta.contains("uid") || meta["uid"].get<std::string>().empty()) {
    meta["uid"] = old.has_value() ? Meta(*old, "uid") : Kind(resource) + "-uid-" + std::to_string(++uid_counter_);
  }
  if (!meta.contains("creationTimestamp")) {
    meta["creationTimestamp"] = old.has_value() ? Meta(*old, "creationTimestamp") : Now();
  }
  const uint64_t rv = NextRvLocked();
  meta["resourceVersion"] = std::to_string(rv);
  objects[key] = object;
  history_.push_back(Change{.rv = rv,
                            .resource = resource,
                            .type = old.has_value() ? "MODIFIED" : "ADDED",
                            .object = object,
                            .old_object = std::move(old)});
  changed_.notify_all();
  return object;
}

bool FakeApiServer::RemoveLocked(const std::string& resource, const std::string& key) {
  auto& objects = resource == "nodes" ? nodes_ : pods_;
  const auto it = objects.find(key);
  if (it == objects.end()) {
    return false;
  }
  json object = std::move(it->second);
  objects.erase(it);
  const uint64_t rv = NextRvLocked();
  object["metadata"]["resourceVersion"] = std::to_string(rv);
  history_.push_back(Change{.rv = rv, .resource = resource, .type = "DELETED", .object = std::move(object)});
  changed_.notify_all();
  return true;
}

json FakeApiServer::UpsertNode(json node) {
  std::lock_guard<std::mutex> lock(mu_);
  node["apiVersion"] = "v1";
  node["kind"] = "Node";
  if (node.contains("metadata") && node["metadata"].contains("namespace")) {
    node["metadata"].erase("namespace");
  }
  const std::string name = Meta(node, "name");
  return StoreLocked("nodes", name, std::move(node));
}

json FakeApiServer::UpsertPod(json pod) {
  std::lock_guard<std::mutex> lock(mu_);
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  if (Meta(pod, "namespace").empty()) {
    pod["metadata"]["namespace"] = "default";
  }
  const std::string key = Meta(pod, "namespace") + "/" + Meta(pod, "name");
  return StoreLocked("pods", key, std::move(pod));
}

bool FakeApiServer::DeleteNode(const std::string& name) {
  std::string uid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      return false;
    }
    uid = Meta(it->second, "uid");
    RemoveLocked("nodes", name);
  }
  dra_->CollectOwnedBy(uid);  // the garbage collector: slices owned by the Node go with it
  return true;
}

bool FakeApiServer::DeletePod(const std::string& ns, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return RemoveLocked("pods", ns + "/" + name);
}

std::optional<json> FakeApiServer::GetNode(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = nodes_.find(name);
  return it == nodes_.end() ? std::nullopt : std::optional<json>(it->second);
}

std::optional<json> FakeApiServer::GetPod(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = pods_.find(ns + "/" + name);
  return it == pods_.end() ? std::nullopt : std::optional<json>(it->second);
}

std::vector<json> FakeApiServer::Pods() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<json> out;
  for (const auto& [key, pod] : pods_) {
    out.push_back(pod);
  }
  return out;
}

std::vector<json> FakeApiServer::Events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::optional<json> FakeApiServer::GetLease(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = leases_.find(ns + "/" + name);
  return it == leases_.end() ? std::nullopt : std::optional<json>(it->second);
}

uint64_t FakeApiServer::resource_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

void FakeApiServer::Compact() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    compacted_rv_ = rv_;
    ++rv_;  // continue tokens issued from now on are newer than the compaction point
    history_.clear();
  }
  changed_.notify_all();
}

void FakeApiServer::StallWatches(bool stalled) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stalled_ = stalled;
  }
  changed_.notify_all();
}

void FakeApiServer::CloseWatches() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++watch_generation_;
  }
  changed_.notify_all();
}

int FakeApiServer::watches_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watches_started_;
}

int FakeApiServer::open_watches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_watches_;
}

void FakeApiServer::FailNext(const std::string& method, const std::string& path_substring, int http_code,
                             const std::string& message, int count) {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back(Failure{.method = method,
                              .path_substring = path_substring,
                              .message = message,
                              .http_code = http_code,
                              .remaining = count});
}

void FakeApiServer::ClearFailures() {
  std::lock_guard<std::mutex> lock(mu_);
  failures_.clear();
}

void FakeApiServer::SetDelay(std::chrono::milliseconds delay) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_ = delay;
}

int FakeApiServer::RequestCount(const std::string& method, const std::string& kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = counts_.find({method, kind});
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::pair<std::string, std::string>, int> FakeApiServer::RequestCounts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

json FakeApiServer::StampLocked(json object, const std::optional<json>& old, const char* api_version,
                                const char* kind) {
  json& meta = object["metadata"];
  if (old.has_value()) {
    meta["uid"] = (*old)["metadata"].value("uid", "");
    meta["creationTimestamp"] = (*old)["metadata"].value("creationTimestamp", "");
  } else {
    meta["uid"] = std::string(kind) + "-uid-" + std::to_string(++uid_counter_);
    meta["creationTimestamp"] = Now();
  }
  meta["resourceVersion"] = std::to_string(NextRvLocked());
  object["apiVersion"] = api_version;
  object["kind"] = kind;
  return object;
}

json FakeApiServer::UpsertSecret(json secret) {
  if (Meta(secret, "namespace").empty()) {
    secret["metadata"]["namespace"] = "default";
  }
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = Meta(secret, "namespace") + "/" + Meta(secret, "name");
  std::optional<json> old;
  if (const auto it = secrets_.find(key); it != secrets_.end()) {
    old = it->second;
  }
  return secrets_[key] = StampLocked(std::move(secret), old, "v1", "Secret");
}

std::optional<json> FakeApiServer::GetSecret(const std::string& ns, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = secrets_.find(ns + "/" + name);
  return it == secrets_.end() ? std::nullopt : std::optional<json>(it->second);
}

json FakeApiServer::UpsertWebhookConfiguration(const std::string& resource, json configuration) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = resource + "/" + Meta(configuration, "name");
  std::optional<json> old;
  if (const auto it = webhook_configs_.find(key); it != webhook_configs_.end()) {
    old = it->second;
  }
  return webhook_configs_[key] =
             StampLocked(std::move(configuration), old, "admissionregistration.k8s.io/v1",
                         resource == "mutatingwebhookconfigurations" ? "MutatingWebhookConfiguration"
                                                                     : "ValidatingWebhookConfiguration");
}

std::optional<json> FakeApiServer::GetWebhookConfiguration(const std::string& resource, const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = webhook_configs_.find(resource + "/" + name);
  return it == webhook_configs_.end() ? std::nullopt : std::optional<json>(it->second);
}

}  // namespace gpusched::testing
