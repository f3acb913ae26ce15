#pragma once

// FakeApiServer: a stateful stand-in for kube-apiserver in integration tests (kube-apiserver is not packaged for
// Debian; dependencies.md §4). HTTPS on 127.0.0.1, port 0, with httplib::SSLServer; by default a client certificate
// signed by the test CA is required, and a bearer token can be required too.
//
// What it serves (k8s-gpu-protocols.md §7), enough for adapters/k8s:
//   GET    /api/v1 (discovery: pods, nodes, events)
//   GET    /api/v1/nodes[/{name}], /api/v1/pods, /api/v1/namespaces/{ns}/pods[/{name}]
//          lists take limit/continue, fieldSelector (spec.nodeName=X, spec.schedulerName=X, status.phase=X and
//          !=X, metadata.name=X, metadata.namespace=X; comma = and) and labelSelector (k=v, k!=v, k; comma = and).
//          watch=1 streams one JSON event per line from resourceVersion (empty or "0": synthetic ADDED for the current
//          state first); an rv older than the compaction point gets an ERROR event with code 410; BOOKMARKs every
//          bookmark_interval when allowWatchBookmarks=true; timeoutSeconds is honoured. An object that stops (starts)
//          matching the field selector is sent as DELETED (ADDED), like the real watch cache.
//   POST   /api/v1/namespaces/{ns}/pods (create, with the Priority admission plugin's defaults: spec.priority from
//          the named class, 0 without one; a spec.priority that disagrees is 403 Forbidden), .../pods/{name}/binding
//          (409 when already bound or on a uid mismatch, 404 for an unknown pod; sets spec.nodeName, emits MODIFIED)
//   PATCH  /api/v1/nodes/{name}[/status], /api/v1/namespaces/{ns}/pods/{name}[/status]: merge-patch (RFC 7386) on
//          the whole object; strategic-merge-patch is treated as merge patch; metadata.resourceVersion in the patch
//          is a precondition (stale: 409)
//   DELETE /api/v1/namespaces/{ns}/pods/{name} (emits DELETED)
//   GET/POST /api/v1/namespaces/{ns}/events; GET/POST /apis/coordination.k8s.io/v1/namespaces/{ns}/leases,
//          GET/PUT .../leases/{name} (PUT with a stale metadata.resourceVersion: 409)
//   GET/POST /api/v1/namespaces/{ns}/secrets, GET/PUT .../secrets/{name} (POST of an existing name: 409
//          AlreadyExists; PUT with a stale metadata.resourceVersion: 409 Conflict; unknown name: 404)
//   GET/PATCH /apis/admissionregistration.k8s.io/v1/{mutating,validating}webhookconfigurations/{name}: JSON patch
//          (RFC 6902; a failed "test" or a bad path is 422) or merge patch (strategic-merge-patch treated as one,
//          so a patch of `webhooks` replaces the list); metadata.resourceVersion in a merge patch is a precondition
//   GET/POST /apis/resource.k8s.io/v1/resourceslices (list with fieldSelector on metadata.name, spec.nodeName,
//          spec.driver, spec.pool.name), GET/PUT/DELETE .../resourceslices/{name}, GET .../deviceclasses[/{name}]:
//          validated, versioned and garbage-collected as fake_dra_store.h says (no watch); DeleteNode removes the
//          slices the Node owns
// Errors are metav1.Status JSON. Every object change takes the next value of one global resourceVersion counter.
//
// Threading: every public method is thread-safe. Stop() ends open watch streams within about 50 ms.

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/testing/fake_dra_store.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace gpusched::testing {

struct FakeApiServerOptions {
  std::string cert_file, key_file;  // server certificate (TestPki::server_cert_file / server_key_file)
  std::string client_ca_file;       // when set, clients must present a certificate signed by this CA
  std::string token;                // when set, every request needs "Authorization: Bearer <token>" (else 401)
  std::chrono::milliseconds bookmark_interval{100};
  int threads = 32;  // httplib worker threads; each open watch holds one
};

class FakeApiServer {
 public:
  explicit FakeApiServer(FakeApiServerOptions options);
  ~FakeApiServer();  // stops
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  // Binds 127.0.0.1:0 and serves on a background thread; returns once it accepts connections.
  [[nodiscard]] common::Status Start();
  void Stop();
  [[nodiscard]] int port() const;
  [[nodiscard]] std::string url() const;  // https://127.0.0.1:<port>

  // State. Upserts assign uid (when missing), creationTimestamp and a new resourceVersion and emit ADDED or
  // MODIFIED; they return the stored object.
  nlohmann::json UpsertNode(nlohmann::json node);
  nlohmann::json UpsertPod(nlohmann::json pod);  // metadata.namespace defaults to "default"
  bool DeleteNode(const std::string& name);
  bool DeletePod(const std::string& ns, const std::string& name);
  [[nodiscard]] std::optional<nlohmann::json> GetNode(const std::string& name) const;
  [[nodiscard]] std::optional<nlohmann::json> GetPod(const std::string& ns, const std::string& name) const;
  [[nodiscard]] std::vector<nlohmann::json> Pods() const;
  [[nodiscard]] std::vector<nlohmann::json> Events() const;
  [[nodiscard]] std::optional<nlohmann::json> GetLease(const std::string& ns, const std::string& name) const;
  // Secrets, and webhook configurations (`resource` "mutatingwebhookconfigurations" or
  // "validatingwebhookconfigurations"), as stored; the upserts take a new resourceVersion (no watch events).
  nlohmann::json UpsertSecret(nlohmann::json secret);  // metadata.namespace defaults to "default"
  [[nodiscard]] std::optional<nlohmann::json> GetSecret(const std::string& ns, const std::string& name) const;
  nlohmann::json UpsertWebhookConfiguration(const std::string& resource, nlohmann::json configuration);
  [[nodiscard]] std::optional<nlohmann::json> GetWebhookConfiguration(const std::string& resource,
                                                                      const std::string& name) const;
  [[nodiscard]] uint64_t resource_version() const;
  // resource.k8s.io/v1 objects: inspect the slices, add DeviceClasses.
  FakeDraStore& dra() { return *dra_; }

  // Drops the watch history: a watch from an older resourceVersion (including open ones that are behind, and
  // continue tokens issued before) gets 410.
  void Compact();
  // Ends every open watch stream, as an apiserver restart would.
  void CloseWatches();
  // While stalled, every watch stream (open or new) sends nothing and never ends, as behind a dead load balancer
  // or a hung apiserver: no events, no bookmarks, no timeout. Lists and writes still work.
  void StallWatches(bool stalled);
  [[nodiscard]] int open_watches() const;
  // Watch streams that have started (registered with the generation CloseWatches ends), ever. Unlike the request
  // count, a stream counted here is certain to be ended by the next CloseWatches.
  [[nodiscard]] int watches_started() const;

  // The next `count` requests with this method whose path contains `path_substring`, or whose kind (below) equals
  // it, fail with `http_code` and a Status carrying `message`. count < 0: until ClearFailures().
  void FailNext(const std::string& method, const std::string& path_substring, int http_code, const std::string& message,
                int count = 1);
  void ClearFailures();
  // Every request (watches excepted) waits this long before being handled; 0 turns it off.
  void SetDelay(std::chrono::milliseconds delay);

  // Requests seen per (method, kind); kinds: list-nodes, watch-nodes, get-node, patch-node, list-pods,
  // watch-pods, get-pod, create-pod, patch-pod, delete-pod, binding, list-events, create-event, get-lease,
  // list-leases, create-lease, update-lease, get-secret, create-secret, update-secret, get-webhookconfiguration,
  // patch-webhookconfiguration, list-resourceslices, create-resourceslice, get-resourceslice, update-resourceslice,
  // delete-resourceslice, list-deviceclasses, get-deviceclass, unknown. Counted before failure injection and auth.
  [[nodiscard]] int RequestCount(const std::string& method, const std::string& kind) const;
  [[nodiscard]] std::map<std::pair<std::string, std::string>, int> RequestCounts() const;

 private:
  struct Change {
    uint64_t rv;
    std::string resource;  // "nodes" or "pods"
    std::string type;      // ADDED, MODIFIED, DELETED
    nlohmann::json object;
    std::optional<nlohmann::json> old_object;  // MODIFIED only
  };
  struct Failure {
    std::string method, path_substring, message;
    int http_code;
    int remaining;
  };
  struct WatchCursor;
  class Handlers;
  friend class Handlers;

  // All below with mu_ held.
  nlohmann::json StoreLocked(const std::string& resource, const std::string& key, nlohmann::json object);
  bool RemoveLocked(const std::string& resource, const std::string& key);
  uint64_t NextRvLocked();
  nlohmann::json StampLocked(nlohmann::json object, const std::optional<nlohmann::json>& old, const char* api_version,
                             const char* kind);

  const FakeApiServerOptions options_;
  const std::unique_ptr<FakeDraStore> dra_;  // its own mutex; takes mu_ for the resourceVersion
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;
  std::condition_variable changed_;                            // history grew, watches closed, stopping
  std::map<std::string, nlohmann::json> nodes_;                // GUARDED_BY(mu_) by name
  std::map<std::string, nlohmann::json> pods_;                 // GUARDED_BY(mu_) by ns/name
  std::map<std::string, nlohmann::json> leases_;               // GUARDED_BY(mu_) by ns/name
  std::map<std::string, nlohmann::json> secrets_;              // GUARDED_BY(mu_) by ns/name
  std::map<std::string, nlohmann::json> webhook_configs_;      // GUARDED_BY(mu_) by resource/name
  std::vector<nlohmann::json> events_;                         // GUARDED_BY(mu_)
  std::deque<Change> history_;                                 // GUARDED_BY(mu_) changes with rv > compacted_rv_
  uint64_t rv_ = 1;                                            // GUARDED_BY(mu_)
  uint64_t compacted_rv_ = 0;                                  // GUARDED_BY(mu_)
  uint64_t watch_generation_ = 0;                              // GUARDED_BY(mu_) bumped by CloseWatches
  uint64_t uid_counter_ = 0;                                   // GUARDED_BY(mu_)
  int open_watches_ = 0;                                       // GUARDED_BY(mu_)
  int watches_started_ = 0;                                    // GUARDED_BY(mu_)
  bool stopping_ = false;                                      // GUARDED_BY(mu_)
  bool stalled_ = false;                                       // GUARDED_BY(mu_)
  std::vector<Failure> failures_;                              // GUARDED_BY(mu_)
  std::chrono::milliseconds delay_{0};                         // GUARDED_BY(mu_)
  std::map<std::pair<std::string, std::string>, int> counts_;  // GUARDED_BY(mu_)
};

}  // namespace gpusched::testing
