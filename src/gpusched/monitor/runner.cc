#include "gpusched/monitor/runner.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>
#include <set>
#include <thread>

#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/monitor/outcome.h"
#include "gpusched/plot/csv_writer.h"

namespace gpusched::monitor {
namespace {

using nlohmann::json;
using SysClock = std::chrono::system_clock;

std::string Utc(SysClock::time_point t, const char* format = "%Y-%m-%dT%H:%M:%SZ") {
  const std::time_t tt = SysClock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

double Seconds(SysClock::duration d) { return std::chrono::duration<double>(d).count(); }

int64_t UnixMs(SysClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

struct Created {
  std::string kind;
  std::string ns;  // empty for cluster-scoped
  std::string name;
  std::string path;  // the object's own path
  WaitKind wait = WaitKind::kNone;
  [[nodiscard]] std::string Text() const { return kind + " " + (ns.empty() ? "" : ns + "/") + name; }
};

bool Transient(const common::Status& s) {
  return s.code() == common::StatusCode::kUnavailable || s.code() == common::StatusCode::kDeadlineExceeded ||
         s.code() == common::StatusCode::kInternal;
}

// Sleeps `d` in steps, returning early (false) when interrupted.
bool SleepUnlessInterrupted(std::chrono::milliseconds d, const std::atomic<bool>* interrupted) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
    if (interrupted != nullptr && interrupted->load()) {
      return false;
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
  return true;
}

common::Status DeleteWithRetry(adapters::k8s::ApiClient& api, const std::string& path) {
  common::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto r = api.Request("DELETE", path + "?propagationPolicy=Background");
    if (r.ok() || r.status().code() == common::StatusCode::kNotFound) {
      return common::Status::Ok();
    }
    last = r.status();
    if (!Transient(last)) {
      return last;
    }
    std::this_thread::sleep_for(std::chrono::seconds(1 << attempt));
  }
  return last;
}

std::vector<GpuRef> GpusFromAllocation(const json& pod) {
  std::vector<GpuRef> out;
  const json meta = pod.value("metadata", json::object());
  const json annotations = meta.value("annotations", json::object());
  const std::string key(kube::kAnnotationAllocation);
  if (!annotations.is_object() || !annotations.contains(key) || !annotations[key].is_string()) {
    return out;
  }
  auto a = kube::DecodeAllocation(annotations[key].get<std::string>(), common::PodUid(meta.value("uid", "")));
  if (!a.ok()) {
    common::Log(common::LogLevel::kWarn, "pod " + meta.value("name", "") + ": " + a.status().message());
    return out;
  }
  const std::string node = pod.value("spec", json::object()).value("nodeName", "");
  for (const core::ContainerAllocation& c : a->containers) {
    for (const core::GpuShare& g : c.gpus) {
      out.push_back(GpuRef{.ns = meta.value("namespace", ""),
                           .pod = meta.value("name", ""),
                           .container = c.container,
                           .node = a->node.str().empty() ? node : a->node.str(),
                           .uuid = g.uuid.str(),
                           .index = g.index});
    }
  }
  return out;
}

// The UUIDs of the GPUs, each once (a GPU two containers share is listed for both), in report order.
std::vector<std::string> DistinctUuids(const std::vector<GpuRef>& gpus) {
  std::vector<std::string> uuids;
  for (const GpuRef& g : gpus) {
    if (std::find(uuids.begin(), uuids.end(), g.uuid) == uuids.end()) {
      uuids.push_back(g.uuid);
    }
  }
  return uuids;
}

std::string LiveValues(const std::map<std::string, std::map<std::string, double>>& latest,
                       const std::vector<MetricInfo>& metrics) {
  std::string out;
  for (const MetricInfo& m : metrics) {
    auto it = latest.find(m.name);
    if (it == latest.end() || it->second.empty()) {
      continue;
    }
    double sum = 0;
    for (const auto& [uuid, v] : it->second) {
      sum += v;
    }
    const double mean = sum / static_cast<double>(it->second.size());
    char buf[64];
    std::snprintf(buf, sizeof buf, " %s %.0f%s", m.name.c_str(), mean, m.unit == "%" ? "%" : (" " + m.unit).c_str());
    out += buf;
  }
  return out;
}

}  // namespace

common::Result<ResourceResolver::Resource> ResourceResolver::Resolve(const std::string& api_version,
                                                                     const std::string& kind) {
  auto it = by_version_.find(api_version);
  if (it == by_version_.end()) {
    const std::string path = api_version == "v1" ? "/api/v1" : "/apis/" + api_version;
    auto r = api_.Get(path);
    if (!r.ok()) {
      if (r.status().code() == common::StatusCode::kNotFound) {
        return common::NotFound("the API server does not serve apiVersion " + api_version);
      }
      return common::Status(r.status().code(), "discovery of " + api_version + ": " + r.status().message());
    }
    std::map<std::string, Resource> kinds;
    for (const json& res : r->value("resources", json::array())) {
      const std::string name = res.value("name", "");
      if (name.empty() || name.find('/') != std::string::npos) {
        continue;  // subresources
      }
      kinds[res.value("kind", "")] = Resource{.plural = name, .namespaced = res.value("namespaced", true)};
    }
    it = by_version_.emplace(api_version, std::move(kinds)).first;
  }
  auto k = it->second.find(kind);
  if (k == it->second.end()) {
    return common::NotFound("the API server serves no kind " + kind + " in " + api_version);
  }
  return k->second;
}

common::Result<std::string> ResourceResolver::CollectionPath(const std::string& api_version, const std::string& kind,
                                                             const std::string& ns) {
  GPUSCHED_ASSIGN_OR_RETURN(res, Resolve(api_version, kind));
  const std::string base = api_version == "v1" ? "/api/v1" : "/apis/" + api_version;
  if (res.namespaced) {
    return base + "/namespaces/" + ns + "/" + res.plural;
  }
  return base + "/" + res.plural;
}

common::Result<std::chrono::milliseconds> ParseDuration(std::string_view text) {
  const std::string what = "duration \"" + std::string(text) + "\"";
  if (text.empty()) {
    return common::InvalidArgument("empty duration");
  }
  double total_ms = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && ((text[j] >= '0' && text[j] <= '9') || text[j] == '.')) {
      ++j;
    }
    if (j == i) {
      return common::InvalidArgument(what + ": want a number and a unit (ms, s, m, h), e.g. 30s or 1h30m");
    }
    double v = 0;
    try {
      v = std::stod(std::string(text.substr(i, j - i)));
    } catch (const std::exception&) {
      return common::InvalidArgument(what + ": not a number");
    }
    size_t k = j;
    while (k < text.size() && text[k] >= 'a' && text[k] <= 'z') {
      ++k;
    }
    const std::string_view unit = text.substr(j, k - j);
    double scale = 0;
    if (unit.empty()) {
      if (i != 0 || k != text.size()) {
        return common::InvalidArgument(what + ": a number without a unit inside a duration");
      }
      scale = 1000;
    } else {
      if (unit == "ms") {
        scale = 1;
      } else if (unit == "s") {
        scale = 1000;
      } else if (unit == "m") {
        scale = 60e3;
      } else if (unit == "h") {
        scale = 3600e3;
      } else {
        return common::InvalidArgument(what + ": unknown unit \"" + std::string(unit) + "\" (ms, s, m, h)");
      }
    }
    total_ms += v * scale;
    i = k;
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

std::string NewRunId() {
  std::random_device rd;
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", rd() & 0xffffU);
  return "gm-" + Utc(SysClock::now(), "%Y%m%d-%H%M%S") + "-" + buf;
}

common::Status CheckWorkload(const Workload& w, ResourceResolver& resolver, const RunOptions& options) {
  for (const ManifestObject& o : w.objects) {
    auto r = resolver.Resolve(o.ApiVersion(), o.Kind());
    if (!r.ok()) {
      return common::Status(r.status().code(), o.Where() + ": " + r.status().message());
    }
  }
  if (w.HasDeployment() && options.duration.count() == 0) {
    return common::InvalidArgument(w.file + ": a Deployment never ends by itself: give --duration");
  }
  if (!w.WaitsOnSomething() && options.duration.count() == 0) {
    return common::InvalidArgument(w.file + ": no Pod, Job or Deployment to wait on: give --duration");
  }
  return common::Status::Ok();
}

RunResult RunWorkload(const Workload& workload, adapters::k8s::ApiClient& api, GpuMetricSource& source,
                      const RunOptions& options) {
  RunResult result;
  RunReport& report = result.report;
  RunFacts& facts = report.facts;
  report.metrics = options.metrics;
  facts.workload = workload.name;
  facts.file = workload.file;
  facts.run_id = NewRunId();
  facts.ns = options.ns;
  facts.source = source.Describe();
  facts.step_s = std::chrono::duration<double>(options.interval).count();
  const auto created_at = SysClock::now();
  facts.created_utc = Utc(created_at);
  result.dir = options.out_dir + "/" + workload.name + "-" + Utc(created_at, "%Y%m%d-%H%M%S");

  auto say = [&](const std::string& line, bool final_line) {
    if (options.status == nullptr) {
      return;
    }
    if (options.tty) {
      std::fprintf(options.status, "\r\033[K%s%s", line.c_str(), final_line ? "\n" : "");
    } else {
      std::fprintf(options.status, "%s\n", line.c_str());
    }
    std::fflush(options.status);
  };
  const std::string tag = "[" + workload.name + "] ";

  // Create.
  ResourceResolver resolver(api);
  std::vector<Created> created;
  std::set<std::string> namespaces;
  std::string outcome;
  bool failed = false;
  for (const ManifestObject& o : workload.objects) {
    json obj = o.object;
    LabelForRun(obj, facts.run_id);
    auto res = resolver.Resolve(o.ApiVersion(), o.Kind());
    if (!res.ok()) {
      outcome = "failed: " + o.Where() + ": " + res.status().message();
      failed = true;
      break;
    }
    std::string ns;
    if (res->namespaced) {
      json& meta = obj["metadata"];
      ns = meta.contains("namespace") && meta["namespace"].is_string() ? meta["namespace"].get<std::string>()
                                                                       : options.ns;
      meta["namespace"] = ns;
    }
    auto path = resolver.CollectionPath(o.ApiVersion(), o.Kind(), ns);
    auto made = path.ok() ? api.Request("POST", *path, obj.dump()) : common::Result<json>(path.status());
    if (!made.ok()) {
      outcome = "failed: " + o.Where() + ": the API server refused the " + o.Kind() + " " + o.Name() + ": " +
                made.status().message();
      failed = true;
      break;
    }
    Created c{.kind = o.Kind(), .ns = ns, .name = made->value("metadata", json::object()).value("name", o.Name())};
    c.path = *path + "/" + c.name;
    c.wait = o.Wait();
    created.push_back(c);
    result.created.push_back(c.Text());
    facts.objects.push_back(c.Text());
    if (!ns.empty()) {
      namespaces.insert(ns);
    }
    say(tag + "created " + c.Text() + " (run " + facts.run_id + ")", true);
  }

  // Wait, sample.
  std::optional<SysClock::time_point> scheduled_at;
  std::optional<SysClock::time_point> started_at;
  std::map<std::string, std::vector<GpuRef>> gpus_by_pod;  // "ns/pod"
  SampleSet live;
  std::string last_line;
  std::string last_key;
  auto last_print = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::vector<ObjectState> states(created.size());
  std::string last_reason = "not yet seen by the API server";
  bool interrupted = false;
  while (!failed) {
    const auto now = SysClock::now();
    if (options.interrupted != nullptr && options.interrupted->load()) {
      interrupted = true;
      outcome = "interrupted";
      break;
    }
    if (now - created_at > options.timeout) {
      outcome =
          "timed out after " + plot::FormatNumber(Seconds(options.timeout), 1) + " s" +
          (started_at ? ""
                      : " (" + std::string(scheduled_at ? "not started" : "not scheduled") + ": " + last_reason + ")");
      failed = true;
      break;
    }
    std::string api_error;
    std::vector<ObjectState> waited;
    for (size_t i = 0; i < created.size(); ++i) {
      if (created[i].wait == WaitKind::kNone) {
        continue;
      }
      auto got = api.Get(created[i].path);
      if (got.ok()) {
        states[i] = StateOf(created[i].wait, *got);
      } else if (got.status().code() == common::StatusCode::kNotFound) {
        states[i] = StateOf(created[i].wait, std::nullopt);
      } else {
        api_error = got.status().message();
      }
      waited.push_back(states[i]);
    }
    std::vector<json> pods;
    for (const std::string& ns : namespaces) {
      auto list = api.List("/api/v1/namespaces/" + ns + "/pods", "", std::string(kRunLabel) + "=" + facts.run_id);
      if (list.ok()) {
        pods.insert(pods.end(), list->items.begin(), list->items.end());
      } else {
        api_error = list.status().message();
      }
    }
    ObjectState all = Combine(waited);
    const bool pods_scheduled =
        !pods.empty() && std::all_of(pods.begin(), pods.end(), [](const json& p) { return PodState(p).scheduled; });
    if (!scheduled_at && (pods_scheduled || (waited.empty() && api_error.empty()))) {
      scheduled_at = now;
      facts.wait_s = Seconds(now - created_at);
    }
    if (!started_at && api_error.empty() && (all.phase == Phase::kRunning || all.phase == Phase::kSucceeded)) {
      started_at = now;
      facts.started_utc = Utc(now);
      if (!scheduled_at) {
        scheduled_at = now;
        facts.wait_s = Seconds(now - created_at);
      }
    }
    if (all.phase == Phase::kPending && !all.reason.empty()) {
      last_reason = all.reason;
    }
    for (const json& p : pods) {
      if (!PodState(p).scheduled) {
        // A pod of a Job or Deployment that waits: its reason is the one worth showing.
        if (all.phase != Phase::kFailed) {
          last_reason = PodState(p).reason;
        }
        continue;
      }
      const json meta = p.value("metadata", json::object());
      const std::string key = meta.value("namespace", "") + "/" + meta.value("name", "");
      if (gpus_by_pod.contains(key)) {
        continue;
      }
      std::vector<GpuRef> g = GpusFromAllocation(p);
      if (g.empty() && PodState(p).phase == Phase::kRunning) {
        auto found = source.GpusOfPod(meta.value("namespace", ""), meta.value("name", ""));
        if (found.ok()) {
          g = std::move(found).value();
        }
      }
      if (!g.empty()) {
        gpus_by_pod[key] = std::move(g);
      }
    }
    report.gpus.clear();
    for (const auto& [key, g] : gpus_by_pod) {
      report.gpus.insert(report.gpus.end(), g.begin(), g.end());
    }
    const std::vector<std::string> uuids = DistinctUuids(report.gpus);
    std::map<std::string, std::map<std::string, double>> latest;
    if (started_at && !uuids.empty()) {
      for (const MetricInfo& m : options.metrics) {
        auto values = source.Latest(m, uuids);
        if (!values.ok()) {
          continue;
        }
        for (const auto& [uuid, v] : *values) {
          live[m.name][uuid].push_back(Sample{.t = Seconds(now - *started_at), .value = v});
        }
        latest[m.name] = std::move(values).value();
      }
    }
    // Status.
    const double elapsed = Seconds(now - (started_at ? *started_at : created_at));
    std::string line = tag + PhaseName(all.phase) + " " + plot::FormatNumber(std::floor(elapsed), 0) + " s";
    if (!api_error.empty()) {
      line += " (API server: " + api_error + "; retrying)";
    } else if (all.phase == Phase::kPending) {
      line += ": " + last_reason;
    } else if (!uuids.empty()) {
      line += ", " + std::to_string(uuids.size()) + " GPU(s):" + LiveValues(latest, options.metrics);
    }
    // On a terminal the line is redrawn every interval; elsewhere a line is printed when the phase, the reason
    // or the API server's state changes, and every 10 s.
    const auto steady_now = std::chrono::steady_clock::now();
    const std::string key =
        std::string(PhaseName(all.phase)) + "|" + api_error + "|" + (all.phase == Phase::kPending ? last_reason : "");
    if (options.tty || key != last_key || steady_now - last_print > std::chrono::seconds(10)) {
      say(line, false);
      last_print = steady_now;
      last_key = key;
    }
    last_line = line;
    // End?
    if (api_error.empty() && Ended(all.phase)) {
      outcome = all.phase == Phase::kSucceeded ? "succeeded" : "failed: " + all.reason;
      failed = all.phase == Phase::kFailed;
      break;
    }
    if (started_at && options.duration.count() > 0 && now - *started_at >= options.duration) {
      outcome = "succeeded (ran for --duration " + plot::FormatNumber(Seconds(options.duration), 1) + " s)";
      break;
    }
    if (!SleepUnlessInterrupted(options.interval, options.interrupted)) {
      continue;  // the loop's head records the interrupt
    }
  }
  if (options.tty) {
    say(last_line, true);
  }
  const auto ended_at = SysClock::now();
  facts.ended_utc = Utc(ended_at);
  if (started_at) {
    facts.duration_s = Seconds(ended_at - *started_at);
  }
  facts.succeeded = !failed && !interrupted;
  facts.outcome = outcome;

  // The whole window at once.
  if (started_at && !report.gpus.empty()) {
    const std::vector<std::string> uuids = DistinctUuids(report.gpus);
    const int64_t start_ms = UnixMs(*started_at);
    for (const MetricInfo& m : options.metrics) {
      auto range = source.Range(m, uuids, start_ms, UnixMs(ended_at), options.interval);
      if (!range.ok()) {
        facts.notes.push_back(m.name + ": the range query failed (" + range.status().message() +
                              "); the samples taken during the run are used");
        report.samples[m.name] = live[m.name];
        continue;
      }
      auto& into = report.samples[m.name];
      for (const auto& [uuid, points] : *range) {
        for (const auto& [ms, v] : points) {
          into[uuid].push_back(Sample{.t = static_cast<double>(ms - start_ms) / 1000.0, .value = v});
        }
      }
      for (const auto& [uuid, samples] : live[m.name]) {
        if (!into.contains(uuid) && !samples.empty()) {
          into[uuid] = samples;
          facts.notes.push_back(m.name + ": no range data for " + uuid + "; the samples taken during the run are used");
        }
      }
    }
  } else if (report.gpus.empty()) {
    facts.notes.push_back(started_at ? "no GPU of the workload's pods was found (no allocation annotation, and no "
                                       "series labelled with the pods)"
                                     : "the workload never started: no metrics");
  }
  result.write_status = WriteRun(report, result.dir);

  // Clean up.
  if (options.keep) {
    say(tag + "kept (--keep): " + std::to_string(created.size()) + " object(s) labelled " + std::string(kRunLabel) +
            "=" + facts.run_id,
        true);
    return result;
  }
  std::set<std::string> undeleted;  // paths already reported
  for (auto it = created.rbegin(); it != created.rend(); ++it) {
    const common::Status s = DeleteWithRetry(api, it->path);
    if (!s.ok()) {
      result.remaining.push_back(it->Text() + " (" + s.message() + ")");
      undeleted.insert(it->path);
    }
  }
  for (const std::string& ns : namespaces) {
    auto list = api.List("/api/v1/namespaces/" + ns + "/pods", "", std::string(kRunLabel) + "=" + facts.run_id);
    if (!list.ok()) {
      result.remaining.push_back("pods labelled " + std::string(kRunLabel) + "=" + facts.run_id + " in " + ns +
                                 " (could not list them: " + list.status().message() + ")");
      continue;
    }
    for (const json& p : list->items) {
      const json meta = p.value("metadata", json::object());
      if (meta.contains("deletionTimestamp")) {
        continue;  // already going
      }
      const std::string name = meta.value("name", "");
      const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
      if (undeleted.contains(path)) {
        continue;
      }
      const common::Status s = DeleteWithRetry(api, path);
      if (!s.ok()) {
        result.remaining.push_back("Pod " + ns + "/" + name + " (" + s.message() + ")");
      }
    }
  }
  if (result.remaining.empty()) {
    say(tag + "deleted " + std::to_string(created.size()) + " object(s)", true);
  }
  return result;
}

}  // namespace gpusched::monitor
