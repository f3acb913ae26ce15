#pragma once

// ApiClient: a thin, thread-safe client of the Kubernetes REST API over net::HttpClient (libcurl): list
// with pagination, watch streams, binding, merge-patching annotations, core/v1 Events and coordination.k8s.io
// Leases, plus a generic Request for everything else.
//
// Threading: any number of threads may call any method at once. Each call borrows a connection from the client's
// small pool (TLS connections stay alive between calls) and returns it afterwards; a Watch uses its own connection
// for the life of the stream. Nothing is held locked across network I/O.
//
// TLS: the server certificate is verified against ClientConfig::ca_pem (or the system store when empty) unless
// insecure_skip_verify; client certificate and key are passed as PEM blobs, never written to disk. A bearer token
// is sent when set; with token_file the file is re-read at most once a minute (projected tokens rotate).
//
// Errors: see api_errors.h. Every call is bounded by ClientConfig::request_timeout except Watch, whose connection
// phase is bounded by it and whose stream lasts until timeout_seconds (+30 s of grace), the stop flag or the server.

#include <nlohmann/json_fwd.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/common/status.h"

namespace gpusched::adapters::k8s {

class JsonPrune;

struct ListResult {
  std::vector<nlohmann::json> items;
  std::string resource_version;  // of the list: watch from here
};

enum class WatchEnd {
  kClosed,   // the server ended the stream (timeoutSeconds, restart): reconnect from the last rv
  kGone,     // 410, as an HTTP status or as an ERROR event with code 410: relist
  kStopped,  // the caller's stop flag became true
  kStalled,  // the server neither sent nor ended the stream until grace_seconds past its timeout: cut off
};

// An answer as the server sent it: any HTTP code, the body unparsed (GetRaw).
struct RawResponse {
  long status = 0;
  std::string body;
};

struct EventSpec {
  std::string namespace_, pod_name, pod_uid, reason, message, type /*Normal|Warning*/, component;
};

class ApiClient {
 public:
  static common::Result<std::unique_ptr<ApiClient>> Create(ClientConfig config);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  [[nodiscard]] const ClientConfig& config() const;

  // Fences every write (any method but GET, except coordination.k8s.io Lease calls) by leadership: `budget_ms`
  // says how long this replica may still write (sched::LeaderElector::ActBudgetMs). With no budget left the
  // request is not sent (FailedPrecondition, naming the request); else its timeout is at most the budget, so a
  // deposed leader's Binding, eviction or status write cannot complete after its renew deadline from this side.
  // Null (the default) fences nothing. Any thread; takes effect for requests that start afterwards.
  void SetWriteFence(std::function<int64_t()> budget_ms);

  // GET; the parsed body.
  common::Result<nlohmann::json> Get(const std::string& path);

  // GET with limit=config().list_page_size and continue tokens; selectors optional ("" = none). A 410 on a continue
  // token (the token expired between pages) restarts the list from the first page once.
  common::Result<ListResult> List(const std::string& path, const std::string& field_selector = "",
                                  const std::string& label_selector = "", const JsonPrune* item_prune = nullptr);
  // The same list, handed over a page at a time (at most list_page_size objects), so that a large list never has to be
  // held whole; returns the list's resourceVersion. `restarted` is true for the first page of a list that started over
  // (the continue token expired): what the earlier pages said may be out of date.
  using PageHandler = std::function<void(std::vector<nlohmann::json>& items, bool restarted)>;
  // Each item is read without metadata.managedFields and what `item_prune` drops.
  common::Result<std::string> ListPages(const std::string& path, const std::string& field_selector,
                                        const std::string& label_selector, const PageHandler& on_page,
                                        const JsonPrune* item_prune = nullptr);

  // GET path?watch=1&resourceVersion=rv&allowWatchBookmarks=true&timeoutSeconds=N (N <= 0: no timeoutSeconds).
  // Calls on_event({"type","object"}) for each line, BOOKMARK included, on the calling thread; the handler may move
  // from the event. Returns when the stream ends (kClosed), `stop` becomes true (checked at least every 100 ms:
  // kStopped) or a 410 arrives (kGone). An ERROR event with another code, a non-200 answer or a malformed line is an
  // error Status. A stream the server has not ended grace_seconds after its timeoutSeconds is stalled: it is cut off
  // (kStalled). Each object is read without metadata.managedFields and what `object_prune` drops (never built).
  common::Result<WatchEnd> Watch(const std::string& path, const std::string& resource_version, int timeout_seconds,
                                 const std::string& field_selector,
                                 const std::function<void(nlohmann::json&)>& on_event, const std::atomic<bool>& stop,
                                 int grace_seconds = 30, const JsonPrune* object_prune = nullptr);

  // POST /api/v1/namespaces/{ns}/pods/{name}/binding with the pod uid as precondition (when non-empty); 201
  // expected. Already bound (409) is Aborted with the server's message. `annotations` ride in the Binding's
  // metadata: the API server copies them onto the pod in the same write as spec.nodeName, so both land or neither.
  common::Status BindPod(const std::string& ns, const std::string& name, const std::string& uid,
                         const std::string& node, const std::map<std::string, std::string>& annotations = {});

  // merge-patch {"metadata":{"annotations":{k: v or null}}}; a non-empty resource_version is put in metadata as a
  // precondition (stale: 409 -> Aborted). nullopt deletes the key.
  common::Status PatchPodAnnotations(const std::string& ns, const std::string& name,
                                     const std::map<std::string, std::optional<std::string>>& annotations,
                                     const std::string& resource_version = "");
  common::Status PatchNodeAnnotations(const std::string& name,
                                      const std::map<std::string, std::optional<std::string>>& annotations,
                                      const std::string& resource_version = "");

  // core/v1 Event about a pod: generateName "<pod>.", first/lastTimestamp now (RFC 3339), count 1. An empty
  // namespace_ means the config's namespace. Returns the Event's name.
  common::Result<std::string> CreateEvent(const EventSpec& event);
  // Aggregation of an Event that happened again: a merge patch of its count and lastTimestamp, the time it last
  // happened (`last`; a count written late must not date an old reason after a newer Event).
  common::Status PatchEventCount(const std::string& ns, const std::string& name, int64_t count,
                                 std::chrono::system_clock::time_point last);

  // coordination.k8s.io/v1 Lease: get (NotFound when absent), create (AlreadyExists when present), update with its
  // metadata.resourceVersion (stale: Aborted). Each returns the server's object.
  common::Result<nlohmann::json> GetLease(const std::string& ns, const std::string& name);
  common::Result<nlohmann::json> CreateLease(const std::string& ns, const nlohmann::json& lease);
  common::Result<nlohmann::json> UpdateLease(const std::string& ns, const nlohmann::json& lease);

  // GET whose answer is returned as it came, whatever its code and content (a proxied /readyz answers text);
  // only transport failures are errors.
  common::Result<RawResponse> GetRaw(const std::string& path);

  // Generic: method GET/POST/PUT/PATCH/DELETE; `content_type` applies when there is a body. A 2xx body that is not
  // JSON is Internal; an empty 2xx body is a null json.
  common::Result<nlohmann::json> Request(const std::string& method, const std::string& path,
                                         const std::string& body = "",
                                         const std::string& content_type = "application/json");

 private:
  struct Impl;
  explicit ApiClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes a query parameter value (RFC 3986 unreserved characters stay). Exposed for tests.
[[nodiscard]] std::string UrlEncode(const std::string& value);

}  // namespace gpusched::adapters::k8s
