#pragma once

// One workload's run: create its objects (labelled with a run id), wait for them to be scheduled, to start and to
// end, sample the GPUs they hold, fetch the whole window at the end, write the run's files, and clean up.
//
// Ends: every waited object ended (Succeeded, Failed), or --duration after the start (success), or --timeout after
// creation (failure, with the last scheduling reason), or an interrupt (failure: "interrupted"). Objects that are
// not waited on (ConfigMaps, Services, ...) are only created and deleted.
//
// GPUs: the pods' gpusched.io/allocation annotations; for a pod without one, the GPUs whose series carry the pod's
// labels (GpuMetricSource::GpusOfPod), retried every interval while the pod runs.
//
// Cleanup (unless keep): every created object is deleted with propagationPolicy=Background, then the pods that
// carry the run's label (a cluster without a garbage collector leaves them); each delete is retried while the API
// server is unreachable (5 tries over about 15 s). What could not be deleted is listed in RunResult::remaining.
//
// API server errors while waiting are retried every interval until the timeout; the status line says so.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/common/status.h"
#include "gpusched/monitor/manifest.h"
#include "gpusched/monitor/report.h"
#include "gpusched/monitor/source.h"

namespace gpusched::monitor {

// Kind -> REST path through the API server's discovery (/api/v1, /apis/<group>/<version>), cached.
class ResourceResolver {
 public:
  explicit ResourceResolver(adapters::k8s::ApiClient& api) : api_(api) {}
  struct Resource {
    std::string plural;  // "pods"
    bool namespaced = true;
  };
  // NotFound naming the kind and apiVersion when the server does not serve it.
  [[nodiscard]] common::Result<Resource> Resolve(const std::string& api_version, const std::string& kind);
  // The collection path of the kind in `ns` (ignored for cluster-scoped kinds).
  [[nodiscard]] common::Result<std::string> CollectionPath(const std::string& api_version, const std::string& kind,
                                                           const std::string& ns);

 private:
  adapters::k8s::ApiClient& api_;
  std::map<std::string, std::map<std::string, Resource>> by_version_;  // apiVersion -> kind -> resource
};

struct RunOptions {
  std::string ns = "default";
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{30 * 60 * 1000};
  std::chrono::milliseconds duration{0};  // 0: none
  bool keep = false;
  std::vector<MetricInfo> metrics;
  std::string out_dir;  // the run writes into out_dir/<workload>-<start time>/
  std::FILE* status = stderr;
  bool tty = false;  // a live status line (\r) rather than plain lines
  const std::atomic<bool>* interrupted = nullptr;
};

struct RunResult {
  RunReport report;
  std::string dir;                     // where the files went
  std::vector<std::string> created;    // "Pod default/train"
  std::vector<std::string> remaining;  // objects cleanup could not delete, with why
  common::Status write_status;         // writing the files
};

// Everything before a run creates anything: every object's kind resolves and Deployments come with a duration.
[[nodiscard]] common::Status CheckWorkload(const Workload& w, ResourceResolver& resolver, const RunOptions& options);

[[nodiscard]] RunResult RunWorkload(const Workload& workload, adapters::k8s::ApiClient& api, GpuMetricSource& source,
                                    const RunOptions& options);

// "1s", "500ms", "30m", "2h", "1h30m", or plain seconds ("2.5"). InvalidArgument naming the text otherwise, and for
// a negative duration.
[[nodiscard]] common::Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

// "gm-20261127-114500-3fa2": unique enough for one cluster (time and 16 random bits).
[[nodiscard]] std::string NewRunId();

}  // namespace gpusched::monitor
