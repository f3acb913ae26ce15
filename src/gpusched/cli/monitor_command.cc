#include "gpusched/cli/monitor_command.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/common/log.h"
#include "gpusched/monitor/manifest.h"
#include "gpusched/monitor/runner.h"
#include "gpusched/monitor/source.h"

namespace gpusched::cli {
namespace {

namespace k8s = adapters::k8s;

int SetupError(const std::string& message) {
  std::fprintf(stderr, "gpusched-lab monitor: %s\n", message.c_str());
  return 2;
}

}  // namespace

void AddMonitorCommand(CLI::App& app, MonitorFlags& flags, int& exit_code) {
  CLI::App* mon = app.add_subcommand(
      "monitor",
      "Run GPU workloads (YAML) on the cluster, record their GPU metrics from Prometheus or InfluxDB, write CSV, "
      "charts and an HTML page, and delete what was created (docs/monitor.md)");
  mon->add_option("-f,--filename", flags.files, "A YAML file or a directory of them; repeatable. One workload a file")
      ->required();
  mon->add_option("--kubeconfig", flags.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  mon->add_option("--context", flags.context, "kubeconfig context to use (default: its current-context)");
  mon->add_option("-n,--namespace", flags.ns, "Namespace for objects that name none (default: the kubeconfig's)");
  mon->add_option("--prometheus", flags.prometheus, "Prometheus URL (scraping the gpusched agent or dcgm-exporter)");
  mon->add_option("--influxdb", flags.influxdb, "InfluxDB 1.x URL (the gpusched agent's --influxdb-url)");
  mon->add_option("--influxdb-db", flags.influxdb_db, "InfluxDB database")->capture_default_str();
  mon->add_option("--interval", flags.interval, "Sampling interval (and the range query's step)")
      ->capture_default_str();
  mon->add_option("--timeout", flags.timeout, "A run that takes longer fails and is cleaned up")->capture_default_str();
  mon->add_option("--duration", flags.duration,
                  "End a run this long after it started, as a success (required for Deployments)");
  mon->add_option("--metrics", flags.metrics,
                  "Comma-separated: util, temp, memcopy, power, fb_used, fb_free, sm_clock, mem_clock, or DCGM_* "
                  "names (default " +
                      monitor::DefaultMetricList() + ")");
  mon->add_option("-o,--out", flags.out, "Output directory")->capture_default_str();
  mon->add_flag("--keep", flags.keep, "Leave the objects on the cluster");
  mon->add_option("--parallel", flags.parallel, "Workloads run at once")->capture_default_str();
  mon->add_flag("-v,--verbose", flags.verbose, "Debug logging");
  AddLogFlags(*mon, flags.log);
  mon->callback([&flags, &exit_code] { exit_code = RunMonitor(flags); });
}

int RunMonitor(const MonitorFlags& flags) {
  SetUpLogging(flags.log, flags.verbose, "monitor");
  // Usage.
  monitor::RunOptions options;
  auto interval = monitor::ParseDuration(flags.interval);
  if (!interval.ok() || interval->count() < 100) {
    return SetupError("--interval: " + (interval.ok() ? "at least 100ms" : interval.status().message()));
  }
  options.interval = *interval;
  auto timeout = monitor::ParseDuration(flags.timeout);
  if (!timeout.ok() || timeout->count() <= 0) {
    return SetupError("--timeout: " + (timeout.ok() ? "must be positive" : timeout.status().message()));
  }
  options.timeout = *timeout;
  if (!flags.duration.empty()) {
    auto d = monitor::ParseDuration(flags.duration);
    if (!d.ok() || d->count() <= 0) {
      return SetupError("--duration: " + (d.ok() ? "must be positive" : d.status().message()));
    }
    options.duration = *d;
  }
  auto metrics = monitor::ParseMetricList(flags.metrics.empty() ? monitor::DefaultMetricList() : flags.metrics);
  if (!metrics.ok()) {
    return SetupError(metrics.status().message());
  }
  options.metrics = std::move(metrics).value();
  if (flags.parallel < 1) {
    return SetupError("--parallel must be at least 1");
  }
  if (!flags.influxdb.empty()) {
    for (const monitor::MetricInfo& m : options.metrics) {
      if (m.influx.empty()) {
        return SetupError("--metrics: " + m.name + " is not in the agent's InfluxDB schema");
      }
    }
  }
  options.keep = flags.keep;
  options.out_dir = flags.out;
  options.tty = isatty(fileno(stderr)) != 0;
  // Files.
  auto workloads = monitor::LoadWorkloads(flags.files);
  if (!workloads.ok()) {
    return SetupError(workloads.status().message());
  }
  // The metrics source, before anything is created.
  auto source_options = monitor::SourceOptions{
      .prometheus_url = flags.prometheus, .influxdb_url = flags.influxdb, .influxdb_db = flags.influxdb_db};
  auto probe = monitor::MakeSource(source_options);
  if (!probe.ok()) {
    return SetupError(probe.status().message());
  }
  if (auto s = (*probe)->Check(); !s.ok()) {
    return SetupError("the metrics source does not answer: " + s.message());
  }
  // The API server, and every kind.
  auto config = k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
  if (!config.ok()) {
    return SetupError(config.status().message());
  }
  options.ns = flags.ns.empty() ? (config->namespace_.empty() ? "default" : config->namespace_) : flags.ns;
  auto make_api = [&]() { return k8s::ApiClient::Create(*config); };
  auto api = make_api();
  if (!api.ok()) {
    return SetupError(api.status().message());
  }
  if (auto v = (*api)->Get("/version"); !v.ok()) {
    return SetupError("the API server does not answer: " + v.status().message());
  }
  monitor::ResourceResolver resolver(**api);
  for (const monitor::Workload& w : *workloads) {
    if (auto s = monitor::CheckWorkload(w, resolver, options); !s.ok()) {
      return SetupError(s.message());
    }
  }

  // Signals: SIGINT and SIGTERM end the runs (each cleans up); blocked before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> interrupted{false};
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    const timespec wait{.tv_sec = 0, .tv_nsec = 200'000'000};
    while (!done.load()) {
      const int sig = sigtimedwait(&signals, nullptr, &wait);
      if (sig > 0) {
        if (!interrupted.exchange(true)) {
          std::fprintf(stderr, "\ngpusched-lab monitor: %s: ending the run(s) and cleaning up\n", strsignal(sig));
        }
      }
    }
  });
  options.interrupted = &interrupted;

  // Runs.
  const size_t n = workloads->size();
  std::vector<monitor::RunResult> results(n);
  std::vector<common::Status> run_errors(n);
  std::atomic<size_t> next{0};
  std::mutex print_mu;
  auto worker = [&] {
    auto my_api = make_api();
    auto my_source = monitor::MakeSource(source_options);
    for (size_t i = next++; i < n; i = next++) {
      if (interrupted.load()) {
        run_errors[i] = common::Aborted("not started: interrupted");
        continue;
      }
      if (!my_api.ok() || !my_source.ok()) {
        run_errors[i] = !my_api.ok() ? my_api.status() : my_source.status();
        continue;
      }
      monitor::RunOptions o = options;
      o.tty = options.tty && flags.parallel == 1;
      results[i] = monitor::RunWorkload((*workloads)[i], **my_api, **my_source, o);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < std::min<int>(flags.parallel, static_cast<int>(n)); ++t) {
    workers.emplace_back(worker);
  }
  for (auto& w : workers) {
    w.join();
  }
  done = true;
  signal_thread.join();

  // Report.
  int exit_code = 0;
  std::vector<monitor::RunSummary> summaries;
  for (size_t i = 0; i < n; ++i) {
    const monitor::Workload& w = (*workloads)[i];
    if (!run_errors[i].ok()) {
      std::printf("%s: %s\n", w.name.c_str(), run_errors[i].message().c_str());
      exit_code = 1;
      continue;
    }
    const monitor::RunResult& r = results[i];
    const monitor::RunFacts& f = r.report.facts;
    std::printf("%s: %s", w.name.c_str(), f.outcome.c_str());
    if (f.duration_s) {
      std::printf(", ran %.1f s", *f.duration_s);
    }
    if (f.wait_s) {
      std::printf(", waited %.1f s to be scheduled", *f.wait_s);
    }
    std::printf("\n");
    if (r.write_status.ok()) {
      std::printf("  report: %s/index.html\n", r.dir.c_str());
    } else {
      std::printf("  the report could not be written: %s\n", r.write_status.message().c_str());
      exit_code = 1;
    }
    if (!r.remaining.empty()) {
      std::printf("  cleanup failed; these objects remain on the cluster:\n");
      for (const std::string& o : r.remaining) {
        std::printf("    %s\n", o.c_str());
      }
      exit_code = 1;
    } else if (flags.keep) {
      std::printf("  kept: run id %s\n", f.run_id.c_str());
    }
    if (!f.succeeded) {
      exit_code = 1;
    }
    std::string rel = r.dir;
    if (rel.rfind(flags.out + "/", 0) == 0) {
      rel = rel.substr(flags.out.size() + 1);
    }
    summaries.push_back(monitor::SummarizeRun(r.report, rel));
  }
  if (n > 1) {
    if (auto s = monitor::WriteSummary(summaries, flags.out); !s.ok()) {
      std::printf("the summary could not be written: %s\n", s.message().c_str());
      exit_code = 1;
    } else {
      std::printf("summary: %s/index.html and %s/summary.csv\n", flags.out.c_str(), flags.out.c_str());
    }
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace gpusched::cli
