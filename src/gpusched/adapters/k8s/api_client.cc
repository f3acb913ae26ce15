#include "gpusched/adapters/k8s/api_client.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "gpusched/adapters/k8s/api_errors.h"
#include "gpusched/adapters/k8s/exec_credential.h"
#include "gpusched/adapters/k8s/json_prune.h"
#include "gpusched/common/log.h"
#include "gpusched/net/http_client.h"

namespace gpusched::adapters::k8s {
namespace {

using common::Result;
using common::Status;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 64 * 1024;
constexpr auto kTokenRefresh = std::chrono::minutes(1);
// Exec plugins: run again this long before the token expires; not more often than kExecRetry after a failure; and
// each run may take kExecTimeout (cloud CLIs can be slow to start).
constexpr auto kExecEarly = std::chrono::seconds(60);
constexpr auto kExecRetry = std::chrono::seconds(5);
constexpr auto kExecTimeout = std::chrono::milliseconds(30000);
constexpr auto kWatchPoll = std::chrono::milliseconds(100);

using HttpResponse = net::ClientResponse;

void AddParam(std::string& target, const std::string& name, const std::string& value) {
  target += target.find('?') == std::string::npos ? '?' : '&';
  target += name;
  target += '=';
  target += UrlEncode(value);
}

std::string PathOnly(const std::string& target) { return target.substr(0, target.find('?')); }

std::string Rfc3339(std::chrono::system_clock::time_point at) {
  const std::time_t now = std::chrono::system_clock::to_time_t(at);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Rfc3339Now() { return Rfc3339(std::chrono::system_clock::now()); }

std::string TrimToken(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) {
    s.pop_back();
  }
  return s;
}

bool Is2xx(long code) { return code >= 200 && code <= 299; }

// Parses a successful body; an empty body is null.
// Parser callbacks that drop metadata.managedFields while parsing (the field owners of server-side apply, about a
// third of a pod's JSON; nothing in gpusched reads it): not building it costs less than building and erasing it (a
// 500-pod list page parses about 12 % faster). Only at the depth of an object's metadata (the callback's depth of a
// member is the number of enclosing objects and arrays), so that a label or annotation of that name is kept:
// 2 in a response that is one object, 4 in a list (root, items, item, metadata).
bool IsManagedFields(int depth, json::parse_event_t event, const json& parsed, int metadata_depth) {
  return event == json::parse_event_t::key && depth == metadata_depth && parsed.is_string() &&
         parsed.get_ref<const std::string&>() == "managedFields";
}
bool SkipManagedFieldsOfResponse(int depth, json::parse_event_t event, json& parsed) {
  return !IsManagedFields(depth, event, parsed, 2) && !IsManagedFields(depth, event, parsed, 4);
}

Result<json> ParseBody(const std::string& method, const std::string& path, const HttpResponse& response) {
  if (!Is2xx(response.status)) {
    return StatusFromHttp(method, path, response.status, response.body);
  }
  if (response.body.empty()) {
    return json();
  }
  json parsed = json::parse(response.body, SkipManagedFieldsOfResponse, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return common::Internal(method + " " + path + ": HTTP " + std::to_string(response.status) +
                            ": the response is not JSON");
  }
  return parsed;
}

json AnnotationPatch(const std::map<std::string, std::optional<std::string>>& annotations,
                     const std::string& resource_version) {
  json values = json::object();
  for (const auto& [key, value] : annotations) {
    values[key] = value.has_value() ? json(*value) : json(nullptr);
  }
  json patch = {{"metadata", {{"annotations", values}}}};
  if (!resource_version.empty()) {
    patch["metadata"]["resourceVersion"] = resource_version;
  }
  return patch;
}

// State of one watch, fed by the stream's data callback (on the calling thread).
struct WatchStream {
  std::string path;
  const std::function<void(json&)>* on_event = nullptr;
  const JsonPrune* prune = nullptr;  // of the whole event: "object" pruned by the caller's rule, managedFields
  PrunedReader* reader = nullptr;
  long http_code = 0;
  std::string pending;     // bytes after the last newline
  std::string error_body;  // body of a non-200 answer
  bool gone = false;
  Status error;

  // False to abort the transfer (410, error event, malformed line).
  bool ProcessLine(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      return true;
    }
    Result<json> parsed = reader->Parse(line, *prune, "GET " + path + ": watch event");
    json event = parsed.ok() ? std::move(parsed).value() : json();
    if (!event.is_object() || !event.contains("type")) {
      error = common::Internal("GET " + path + ": malformed watch event: " + std::string(line.substr(0, 200)));
      return false;
    }
    if (event["type"] == "ERROR") {
      const json& object = event.contains("object") ? event["object"] : json();
      const long code = object.is_object() && object.contains("code") && object["code"].is_number_integer()
                            ? object["code"].get<long>()
                            : 500;
      if (code == 410) {
        gone = true;
      } else {
        error = StatusFromHttp("GET", path + " (watch ERROR event)", code, object.dump());
      }
      return false;
    }
    (*on_event)(event);
    return true;
  }

  // False to end the stream.
  bool Write(long status, std::string_view data) {
    http_code = status;
    if (http_code != 200) {
      if (error_body.size() < kMaxErrorBody) {
        error_body.append(data);
      }
      return true;
    }
    pending.append(data);
    size_t start = 0;
    for (;;) {
      const size_t nl = pending.find('\n', start);
      if (nl == std::string::npos) {
        break;
      }
      if (!ProcessLine(std::string_view(pending).substr(start, nl - start))) {
        return false;
      }
      start = nl + 1;
    }
    pending.erase(0, start);
    return true;
  }
};

}  // namespace

std::string UrlEncode(const std::string& value) { return net::UrlEncode(value); }

struct ApiClient::Impl {
  Impl(ClientConfig c, std::unique_ptr<net::HttpClient> h) : config(std::move(c)), http(std::move(h)) {}

  ClientConfig config;
  std::unique_ptr<net::HttpClient> http;  // URL, TLS and the connection pool

  std::mutex fence_mu;
  std::function<int64_t()> write_fence;  // GUARDED_BY(fence_mu); null = none

  // The write fence's verdict for one request: nullopt = send with the usual timeout; else the timeout to send it
  // with, or an error when there is no budget left. Reads and lease calls are never fenced (a leader renews
  // through the same client).
  std::optional<Result<std::chrono::milliseconds>> Fence(const std::string& method, const std::string& target) {
    if (method == "GET" || method == "HEAD" || target.starts_with("/apis/coordination.k8s.io/")) {
      return std::nullopt;
    }
    std::function<int64_t()> fence;
    {
      std::lock_guard<std::mutex> lock(fence_mu);
      fence = write_fence;
    }
    if (!fence) {
      return std::nullopt;
    }
    const int64_t budget = fence();
    if (budget <= 0) {
      return Result<std::chrono::milliseconds>(common::FailedPrecondition(
          method + " " + PathOnly(target) +
          " not sent: this replica's leadership lapsed (no lease renewal within the renew deadline)"));
    }
    return Result<std::chrono::milliseconds>(std::min(config.request_timeout, std::chrono::milliseconds(budget)));
  }

  std::mutex token_mu;
  std::string token;             // GUARDED_BY(token_mu)
  Clock::time_point token_read;  // GUARDED_BY(token_mu)

  // Exec plugin state, GUARDED_BY(token_mu).
  std::optional<std::chrono::system_clock::time_point> exec_expires;
  bool exec_stale = false;
  std::optional<Clock::time_point> exec_failed_at;
  std::string exec_error;

  // After a 401: the plugin's token may have been revoked before its expiry; run it again at the next request.
  void OnUnauthorized() {
    if (!config.exec.command.empty()) {
      std::lock_guard<std::mutex> lock(token_mu);
      exec_stale = true;
    }
  }

  std::string ExecToken() {  // token_mu held
    const auto now = std::chrono::system_clock::now();
    const bool due = token.empty() || exec_stale || (exec_expires && now + kExecEarly >= *exec_expires);
    if (!due || (exec_failed_at && Clock::now() - *exec_failed_at < kExecRetry)) {
      return token;
    }
    auto cred = RunExecPlugin(config, kExecTimeout);
    if (!cred.ok()) {
      exec_failed_at = Clock::now();
      if (cred.status().message() != exec_error) {
        exec_error = cred.status().message();
        common::Log(common::LogLevel::kError, "kubeconfig exec plugin: " + exec_error);
      }
      return token;  // the old one, if any: the server decides
    }
    token = std::move(cred->token);
    exec_expires = cred->expires;
    exec_stale = false;
    exec_failed_at.reset();
    exec_error.clear();
    return token;
  }

  std::string Token() {
    std::lock_guard<std::mutex> lock(token_mu);
    if (!config.exec.command.empty()) {
      return ExecToken();
    }
    if (!config.token_file.empty() && (token.empty() || Clock::now() - token_read >= kTokenRefresh)) {
      std::ifstream in(config.token_file);
      if (in) {
        std::ostringstream ss;
        ss << in.rdbuf();
        std::string fresh = TrimToken(ss.str());
        if (!fresh.empty()) {
          token = std::move(fresh);
        }
      }
      token_read = Clock::now();  // on a failed read keep the old token and try again in a minute
    }
    return token;
  }

  net::ClientRequest Request(const std::string& method, std::string target, const std::string& body,
                             const std::string& content_type) {
    net::ClientRequest request{.method = method, .target = std::move(target), .body = body};
    request.headers.emplace_back("Accept: application/json");
    if (!body.empty()) {
      request.headers.push_back("Content-Type: " + content_type);
    }
    const std::string bearer = Token();
    if (!bearer.empty()) {
      request.headers.push_back("Authorization: Bearer " + bearer);
    }
    return request;
  }

  // One request; any HTTP code is a response, only transport failures are errors.
  // `reserve`: the expected size of the response body (a list page), allocated at once rather than grown.
  Result<HttpResponse> Perform(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& content_type, size_t reserve = 0) {
    net::ClientRequest request = Request(method, target, body, content_type);
    request.reserve = reserve;
    if (auto fenced = Fence(method, target); fenced.has_value()) {
      if (!fenced->ok()) {
        return fenced->status();
      }
      request.timeout = **fenced;
    }
    Result<HttpResponse> response = http->Send(request);
    if (!response.ok()) {
      return StatusFromTransport(method, PathOnly(target),
                                 response.status().code() == common::StatusCode::kDeadlineExceeded,
                                 response.status().message());
    }
    if (response->status == 401) {
      OnUnauthorized();
    }
    return response;
  }

  Result<json> Call(const std::string& method, const std::string& target, const std::string& body = "",
                    const std::string& content_type = "application/json") {
    GPUSCHED_ASSIGN_OR_RETURN(response, Perform(method, target, body, content_type));
    return ParseBody(method, PathOnly(target), response);
  }
};

ApiClient::ApiClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ApiClient::~ApiClient() = default;

Result<std::unique_ptr<ApiClient>> ApiClient::Create(ClientConfig config) {
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return common::InvalidArgument("API server URL must start with https:// (or http://), got '" + config.server + "'");
  }
  while (config.server.back() == '/') {
    config.server.pop_back();
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return common::InvalidArgument("a client certificate needs both the certificate and the key");
  }
  if (config.request_timeout.count() <= 0) {
    return common::InvalidArgument("request_timeout must be positive");
  }
  if (config.list_page_size <= 0) {
    return common::InvalidArgument("list_page_size must be positive");
  }
  GPUSCHED_ASSIGN_OR_RETURN(http, net::HttpClient::Create(net::HttpClientOptions{
                                      .base_url = config.server,
                                      .timeout = config.request_timeout,
                                      .connect_timeout = config.request_timeout,
                                      .tls = net::ClientTls{.insecure_skip_verify = config.insecure_skip_verify,
                                                            .ca_pem = config.ca_pem,
                                                            .client_cert_pem = config.client_cert_pem,
                                                            .client_key_pem = config.client_key_pem},
                                      .tcp_keepalive = true}));
  auto impl = std::make_unique<Impl>(std::move(config), std::move(http));
  impl->token = impl->config.token;
  impl->token_read = Clock::now();
  return std::unique_ptr<ApiClient>(new ApiClient(std::move(impl)));
}

const ClientConfig& ApiClient::config() const { return impl_->config; }

void ApiClient::SetWriteFence(std::function<int64_t()> budget_ms) {
  std::lock_guard<std::mutex> lock(impl_->fence_mu);
  impl_->write_fence = std::move(budget_ms);
}

Result<json> ApiClient::Get(const std::string& path) { return impl_->Call("GET", path); }

Result<ListResult> ApiClient::List(const std::string& path, const std::string& field_selector,
                                   const std::string& label_selector, const JsonPrune* item_prune) {
  ListResult out;
  GPUSCHED_ASSIGN_OR_RETURN(rv, ListPages(
                                    path, field_selector, label_selector,
                                    [&out](std::vector<json>& items, bool restarted) {
                                      if (restarted) {
                                        out.items.clear();
                                      }
                                      for (json& item : items) {
                                        out.items.push_back(std::move(item));
                                      }
                                    },
                                    item_prune));
  out.resource_version = std::move(rv);
  return out;
}

Result<std::string> ApiClient::ListPages(const std::string& path, const std::string& field_selector,
                                         const std::string& label_selector, const PageHandler& on_page,
                                         const JsonPrune* item_prune) {
  JsonPrune page_prune;
  JsonPrune& items_prune = page_prune.Under("items");
  if (item_prune != nullptr) {
    items_prune = *item_prune;
  }
  items_prune.Under("metadata").Drop("managedFields");  // whatever the rule, as Get and Watch do
  // Pages are fetched one after the other (the next starts once this one is parsed), so one reader serves all.
  PrunedReader reader;
  // A page: the parsed body, or nullopt for a 410 on a continue token (the token expired: start over).
  std::atomic<size_t> last_size{0};
  auto fetch = [this, &path, &field_selector, &label_selector, &last_size, &page_prune, &reader](
                   std::string token, bool may_restart) -> Result<std::optional<json>> {
    std::string target = path;
    AddParam(target, "limit", std::to_string(impl_->config.list_page_size));
    const bool continued = !token.empty();
    if (continued) {
      AddParam(target, "continue", token);
    }
    if (!field_selector.empty()) {
      AddParam(target, "fieldSelector", field_selector);
    }
    if (!label_selector.empty()) {
      AddParam(target, "labelSelector", label_selector);
    }
    // A page of 2000 pods runs to about 7 MB; the size of the last one is a good guess for the next.
    GPUSCHED_ASSIGN_OR_RETURN(response, impl_->Perform("GET", target, "", "", last_size.load()));
    last_size.store(response.body.size() + response.body.size() / 8);
    if (response.status == 410 && continued && may_restart) {
      return std::optional<json>();
    }
    if (!Is2xx(response.status)) {
      return StatusFromHttp("GET", path, response.status, response.body);
    }
    GPUSCHED_ASSIGN_OR_RETURN(
        page, reader.Parse(response.body, page_prune, "GET " + path + ": HTTP " + std::to_string(response.status)));
    if (!page.is_object()) {
      return common::Internal("GET " + path + ": list response is not an object");
    }
    return std::optional<json>(std::move(page));
  };
  // The next page is fetched (and parsed) while the handler works on this one.
  std::future<Result<std::optional<json>>> next = std::async(std::launch::async, fetch, std::string(), true);
  bool restarted = false;
  bool announce_restart = false;
  std::vector<json> items;
  for (;;) {
    Result<std::optional<json>> fetched = next.get();
    if (!fetched.ok()) {
      return fetched.status();
    }
    if (!fetched->has_value()) {
      restarted = true;  // the continue token expired between pages: start over once
      announce_restart = true;
      next = std::async(std::launch::async, fetch, std::string(), false);
      continue;
    }
    json& page = **fetched;
    items.clear();
    if (page.contains("items") && page["items"].is_array()) {
      items.reserve(page["items"].size());
      for (json& item : page["items"]) {
        items.push_back(std::move(item));
      }
    }
    const json& meta = page.contains("metadata") ? page["metadata"] : json::object();
    std::string resource_version = meta.value("resourceVersion", "");
    const std::string continue_token = meta.value("continue", "");
    page = json();
    if (!continue_token.empty()) {
      next = std::async(std::launch::async, fetch, continue_token, !restarted);
    }
    on_page(items, announce_restart);
    announce_restart = false;
    if (continue_token.empty()) {
      return resource_version;
    }
  }
}

Result<WatchEnd> ApiClient::Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
                                  const std::string& field_selector, const std::function<void(json&)>& on_event,
                                  const std::atomic<bool>& stop, int grace_seconds, const JsonPrune* object_prune) {
  std::string target = path;
  AddParam(target, "watch", "1");
  if (!resource_version.empty()) {
    AddParam(target, "resourceVersion", resource_version);
  }
  AddParam(target, "allowWatchBookmarks", "true");
  if (timeout_seconds > 0) {
    AddParam(target, "timeoutSeconds", std::to_string(timeout_seconds));
  }
  if (!field_selector.empty()) {
    AddParam(target, "fieldSelector", field_selector);
  }
  net::ClientRequest request = impl_->Request("GET", target, "", "");
  // Bounded by the server's timeout plus the grace; without timeoutSeconds only the stop flag ends it.
  request.timeout =
      timeout_seconds > 0
          ? std::chrono::milliseconds((static_cast<int64_t>(timeout_seconds) + std::max(grace_seconds, 1)) * 1000)
          : std::chrono::milliseconds(0);
  // Each event is read without what the rule drops from its object (and without metadata.managedFields), rather
  // than parsed whole and pruned after.
  JsonPrune event_prune;
  JsonPrune& object_rule = event_prune.Under("object");
  if (object_prune != nullptr) {
    object_rule = *object_prune;
  }
  object_rule.Under("metadata").Drop("managedFields");
  PrunedReader reader;
  WatchStream stream{.path = path, .on_event = &on_event, .prune = &event_prune, .reader = &reader};
  Result<net::StreamEnd> ended = impl_->http->Stream(
      request, [&stream](long status, std::string_view data) { return stream.Write(status, data); }, stop, kWatchPoll);
  if (!ended.ok()) {
    return StatusFromTransport("GET", path + " (watch)", ended.status().code() == common::StatusCode::kDeadlineExceeded,
                               ended.status().message());
  }
  const net::StreamEnd& end = *ended;
  if (end.stopped) {
    return WatchEnd::kStopped;
  }
  if (stream.gone) {
    return WatchEnd::kGone;
  }
  if (!stream.error.ok()) {
    return stream.error;
  }
  stream.http_code = end.status;
  const bool stalled = end.timed_out && stream.http_code == 200;
  if (end.timed_out && !stalled) {
    return StatusFromTransport("GET", path + " (watch)", true, end.detail);
  }
  if (stream.http_code == 410) {
    return WatchEnd::kGone;
  }
  if (stream.http_code != 200) {
    if (stream.http_code == 401) {
      impl_->OnUnauthorized();
    }
    return StatusFromHttp("GET", path + " (watch)", stream.http_code, stream.error_body);
  }
  if (!stream.pending.empty() && !stream.ProcessLine(stream.pending)) {
    if (stream.gone) {
      return WatchEnd::kGone;
    }
    return stream.error;
  }
  return stalled ? WatchEnd::kStalled : WatchEnd::kClosed;
}

Status ApiClient::BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                          const std::string& node, const std::map<std::string, std::string>& annotations) {
  json metadata = {{"name", name}, {"namespace", ns}};
  if (!uid.empty()) {
    metadata["uid"] = uid;
  }
  if (!annotations.empty()) {
    metadata["annotations"] = annotations;
  }
  const json binding = {{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", metadata},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}}}};
  return impl_->Call("POST", "/api/v1/namespaces/" + ns + "/pods/" + name + "/binding", binding.dump()).status();
}

Status ApiClient::PatchPodAnnotations(const std::string& ns, const std::string& name,
                                      const std::map<std::string, std::optional<std::string>>& annotations,
                                      const std::string& resource_version) {
  return impl_
      ->Call("PATCH", "/api/v1/namespaces/" + ns + "/pods/" + name,
             AnnotationPatch(annotations, resource_version).dump(), "application/merge-patch+json")
      .status();
}

Status ApiClient::PatchNodeAnnotations(const std::string& name,
                                       const std::map<std::string, std::optional<std::string>>& annotations,
                                       const std::string& resource_version) {
  return impl_
      ->Call("PATCH", "/api/v1/nodes/" + name, AnnotationPatch(annotations, resource_version).dump(),
             "application/merge-patch+json")
      .status();
}

Result<std::string> ApiClient::CreateEvent(const EventSpec& event) {
  const std::string ns = event.namespace_.empty() ? impl_->config.namespace_ : event.namespace_;
  const std::string now = Rfc3339Now();
  json involved = {{"kind", "Pod"}, {"apiVersion", "v1"}, {"namespace", ns}, {"name", event.pod_name}};
  if (!event.pod_uid.empty()) {
    involved["uid"] = event.pod_uid;
  }
  const json body = {{"apiVersion", "v1"},
                     {"kind", "Event"},
                     {"metadata", {{"generateName", event.pod_name + "."}, {"namespace", ns}}},
                     {"involvedObject", involved},
                     {"reason", event.reason},
                     {"message", event.message},
                     {"type", event.type.empty() ? "Normal" : event.type},
                     {"source", {{"component", event.component}}},
                     {"firstTimestamp", now},
                     {"lastTimestamp", now},
                     {"count", 1}};
  auto created = impl_->Call("POST", "/api/v1/namespaces/" + ns + "/events", body.dump());
  if (!created.ok()) {
    return created.status();
  }
  const json* name = nullptr;
  if (created->is_object() && created->contains("metadata") && (*created)["metadata"].is_object() &&
      (*created)["metadata"].contains("name") && (*created)["metadata"]["name"].is_string()) {
    name = &(*created)["metadata"]["name"];
  }
  if (name == nullptr) {
    return common::Internal("the API server's answer to an Event create has no metadata.name");
  }
  return name->get<std::string>();
}

Status ApiClient::PatchEventCount(const std::string& ns, const std::string& name, int64_t count,
                                  std::chrono::system_clock::time_point last) {
  const json patch = {{"count", count}, {"lastTimestamp", Rfc3339(last)}};
  return impl_
      ->Call("PATCH", "/api/v1/namespaces/" + ns + "/events/" + name, patch.dump(), "application/merge-patch+json")
      .status();
}

Result<json> ApiClient::GetLease(const std::string& ns, const std::string& name) {
  return impl_->Call("GET", "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name);
}

Result<json> ApiClient::CreateLease(const std::string& ns, const json& lease) {
  json body = lease;
  body["apiVersion"] = "coordination.k8s.io/v1";
  body["kind"] = "Lease";
  return impl_->Call("POST", "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases", body.dump());
}

Result<json> ApiClient::UpdateLease(const std::string& ns, const json& lease) {
  const json* name = nullptr;
  if (lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object() &&
      lease["metadata"].contains("name") && lease["metadata"]["name"].is_string()) {
    name = &lease["metadata"]["name"];
  }
  if (name == nullptr) {
    return common::InvalidArgument("UpdateLease: the lease has no metadata.name");
  }
  json body = lease;
  body["apiVersion"] = "coordination.k8s.io/v1";
  body["kind"] = "Lease";
  return impl_->Call("PUT", "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases/" + name->get<std::string>(),
                     body.dump());
}

Result<RawResponse> ApiClient::GetRaw(const std::string& path) {
  GPUSCHED_ASSIGN_OR_RETURN(response, impl_->Perform("GET", path, "", ""));
  return RawResponse{.status = response.status, .body = std::move(response.body)};
}

Result<json> ApiClient::Request(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& content_type) {
  return impl_->Call(method, path, body, content_type);
}

}  // namespace gpusched::adapters::k8s
