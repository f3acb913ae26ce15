#include "gpusched/cli/agent_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/deviceplugin/device_plugin.h"
#include "gpusched/adapters/deviceplugin/mps_daemon.h"
#include "gpusched/adapters/deviceplugin/mps_enforcer.h"
#include "gpusched/adapters/deviceplugin/pod_resources.h"
#include "gpusched/adapters/deviceplugin/pod_source.h"
#include "gpusched/adapters/influxdb/influx_writer.h"
#include "gpusched/adapters/influxdb/line_protocol.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/client_config.h"
#include "gpusched/adapters/k8s/event_writer.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/adapters/nvml/fake_inventory.h"
#include "gpusched/adapters/nvml/nvml_inventory.h"
#include "gpusched/agent/collector.h"
#include "gpusched/agent/dra_slices.h"
#include "gpusched/agent/inventory.h"
#include "gpusched/agent/node_pods.h"
#include "gpusched/common/log.h"
#include "gpusched/daemon/config.h"
#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"
#include "gpusched/net/http_server.h"

namespace gpusched::cli {
namespace {

namespace dp = adapters::deviceplugin;
namespace k8s = adapters::k8s;
using std::chrono::milliseconds;

void Info(const std::string& m) { common::Log(common::LogLevel::kInfo, "gpusched agent: " + m); }
void Warn(const std::string& m) { common::Log(common::LogLevel::kWarn, "gpusched agent: " + m); }

int Fail(const std::string& message) { return Fatal("gpusched agent", message); }

// A backend that has nothing: NVML could not be opened and no fake was asked for. Every sample fails with the
// reason, which /healthz and the error counter report; the agent keeps serving.
class UnavailableInventory : public ports::DeviceInventory {
 public:
  explicit UnavailableInventory(common::Status why) : why_(std::move(why)) {}
  common::Result<std::vector<ports::GpuSample>> Sample() override { return why_; }
  std::string Describe() const override { return "no GPU backend (" + why_.message() + ")"; }

 private:
  common::Status why_;
};

// The device plugin's and the MPS daemon's state on /metrics.
std::string DaemonMetrics(const dp::DevicePlugin* plugin, const agent::NodePods* pods, const dp::MpsDaemon* mps) {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(value) + "\n";
  };
  if (plugin != nullptr) {
    metric("gpusched_agent_device_plugin_registered", "gauge",
           "1 while every resource of the device plugin is registered with the kubelet.", plugin->registered() ? 1 : 0);
    metric("gpusched_agent_device_plugin_allocations_total", "counter", "Containers the device plugin handed GPUs.",
           plugin->allocations());
    metric("gpusched_agent_device_plugin_refusals_total", "counter",
           "Allocate and PreStartContainer calls the device plugin refused (forged or conflicting handoffs, no MPS "
           "daemon).",
           plugin->refusals());
  }
  if (plugin != nullptr && pods != nullptr) {
    out +=
        "# HELP gpusched_agent_device_plugin_pod_reads_total Requests to the API server the device plugin made to read "
        "pods: a GET of a pod the informer had not delivered yet, a quorum LIST of the node's pods before the "
        "informer synced or for an Allocate its cache did not decide.\n# TYPE "
        "gpusched_agent_device_plugin_pod_reads_total counter\n"
        "gpusched_agent_device_plugin_pod_reads_total{verb=\"get\"} " +
        std::to_string(pods->gets()) + "\ngpusched_agent_device_plugin_pod_reads_total{verb=\"list\"} " +
        std::to_string(pods->lists()) + "\n";
  }
  if (mps != nullptr) {
    metric("gpusched_agent_mps_daemon_up", "gauge", "1 while the node's MPS control daemon answers.",
           mps->up() ? 1 : 0);
    metric("gpusched_agent_mps_daemon_restarts_total", "counter",
           "Times the agent started the MPS control daemon again after it stopped answering.", mps->restarts());
  }
  return out;
}

std::string DefaultNodeName() {
  if (const char* env = std::getenv("NODE_NAME"); env != nullptr && *env != '\0') {
    return env;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) {
    return host;
  }
  return "localhost";
}

// Which pods hold which GPUs, from the pods' allocation annotations, plus the kubelet's PodResources for whole
// GPUs handed out by another device plugin (nvidia.com/gpu device ids are the GPUs' UUIDs).
class Attribution {
 public:
  void SetPods(const std::vector<nlohmann::json>& pods, const std::string& node) {
    agent::PodsOnNode s = agent::SummarisePods(pods, node);
    std::lock_guard lock(mu_);
    from_pods_ = std::move(s);
  }
  void SetKubelet(const std::vector<dp::KubeletPod>& pods) {
    agent::PodAttribution a;
    for (const auto& p : pods) {
      for (const auto& c : p.containers) {
        auto it = c.devices.find("nvidia.com/gpu");
        if (it == c.devices.end()) {
          continue;
        }
        for (const auto& id : it->second) {
          if (id.starts_with("GPU-") && id.find("::") == std::string::npos) {
            a[common::GpuUuid(id)].push_back(
                agent::PodRef{.namespace_name = p.namespace_, .pod = p.name, .container = c.name});
          }
        }
      }
    }
    std::lock_guard lock(mu_);
    from_kubelet_ = std::move(a);
  }
  std::pair<agent::PodAttribution, agent::AllocationMap> Get() const {
    std::lock_guard lock(mu_);
    agent::PodAttribution a = from_pods_.attribution;
    for (const auto& [uuid, refs] : from_kubelet_) {
      auto& mine = a[uuid];
      for (const auto& r : refs) {
        if (std::find(mine.begin(), mine.end(), r) == mine.end()) {
          mine.push_back(r);
        }
      }
    }
    return {std::move(a), from_pods_.allocations};
  }

 private:
  mutable std::mutex mu_;
  agent::PodsOnNode from_pods_;
  agent::PodAttribution from_kubelet_;
};

}  // namespace

int RunAgent(const AgentFlags& flags) {
  SetUpLogging(flags.log, flags.verbose, "agent");
  const std::string node = flags.node_name.empty() ? DefaultNodeName() : flags.node_name;
  std::string host;
  int port = 0;
  if (auto s = daemon::ParseListen(flags.listen, host, port); !s.ok()) {
    return Fail("--listen: " + s.message());
  }
  if (!(flags.interval_s >= 0.05 && flags.interval_s <= 3600)) {
    return Fail("--interval must be between 0.05 and 3600 seconds");
  }
  const milliseconds interval(static_cast<int64_t>(flags.interval_s * 1000));
  if (flags.dra_whole_gpus && !flags.dra) {
    return Fail("--dra-whole-gpus needs --dra");
  }
  if (flags.dra && flags.standalone) {
    return Fail("--dra publishes ResourceSlices through the API server: not with --standalone");
  }

  // The GPUs.
  std::unique_ptr<ports::DeviceInventory> inventory;
  std::string driver_version;  // NVML's, for the DRA devices
  if (!flags.fake_gpus.empty()) {
    auto fake =
        adapters::nvml::FakeInventory::Create(flags.fake_gpus, adapters::nvml::FakeInventoryOptions{.node_name = node});
    if (!fake.ok()) {
      return Fail("--fake-gpus: " + fake.status().message());
    }
    inventory = std::move(fake).value();
  } else {
    auto nvml = adapters::nvml::NvmlInventory::Open(flags.nvml_library);
    if (nvml.ok()) {
      driver_version = (*nvml)->driver_version();
      inventory = std::move(nvml).value();
    } else {
      Warn("no GPUs: " + nvml.status().message() + "; serving the agent's own metrics only");
      inventory = std::make_unique<UnavailableInventory>(nvml.status());
    }
  }
  ports::DeviceInventory& devices = *inventory;
  Info("GPUs: " + devices.Describe() + "; node " + node);

  // MPS: the daemon that enforces the limits the device plugin hands out (none without the device plugin).
  const std::string mps_mode = !flags.mps.empty() ? flags.mps : (flags.fake_gpus.empty() ? "run" : "off");
  std::unique_ptr<dp::MpsDaemon> mps;
  if (!flags.standalone && mps_mode != "off") {
    mps = std::make_unique<dp::MpsDaemon>(dp::MpsDaemonOptions{.control = flags.mps_control,
                                                               .pipe_dir = flags.mps_pipe_dir,
                                                               .log_dir = flags.mps_log_dir,
                                                               .manage = mps_mode == "run"});
    if (auto s = mps->Start(); !s.ok()) {
      return Fail("--mps " + mps_mode + ": " + s.message());
    }
  } else if (!flags.standalone) {
    Info("MPS off: containers on shared GPUs get no compute or memory caps (time slicing)");
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Attribution attribution;
  std::unique_ptr<k8s::ApiClient> client;
  std::unique_ptr<agent::NodePods> pods;
  std::unique_ptr<agent::InventoryPublisher> publisher;
  std::unique_ptr<dp::PodResourcesSource> pod_resources;
  std::unique_ptr<k8s::EventWriter> events;
  std::unique_ptr<dp::DevicePlugin> plugin;
  std::unique_ptr<dp::MpsControlRunner> mps_runner;  // MPS limits in the control daemon (mps_enforcer.h)
  std::unique_ptr<dp::MpsEnforcer> mps_limits;
  std::unique_ptr<agent::DraSlices> dra;  // --dra: the GPUs as ResourceSlices
  if (!flags.standalone) {
    auto config = k8s::ResolveClientConfig(flags.kubeconfig, flags.context);
    if (!config.ok()) {
      return Fail(config.status().message() + " (or run with --standalone)");
    }
    auto c = k8s::ApiClient::Create(std::move(config).value());
    if (!c.ok()) {
      return Fail(c.status().message());
    }
    client = std::move(c).value();
    events = std::make_unique<k8s::EventWriter>(*client, "gpusched-agent");
    // The node's inventory annotation as it is now: a restart with the same GPUs patches nothing.
    publisher = std::make_unique<agent::InventoryPublisher>(
        node,
        [&client](const std::string& n, const std::string& value) {
          return client->PatchNodeAnnotations(n, {{std::string(kube::kAnnotationGpus), value}});
        },
        flags.replicas);
    if (auto current = client->Get("/api/v1/nodes/" + node); current.ok()) {
      const auto& md = (*current)["metadata"];
      if (md.contains("annotations") && md["annotations"].contains(std::string(kube::kAnnotationGpus))) {
        publisher->SetCurrent(md["annotations"][std::string(kube::kAnnotationGpus)].get<std::string>());
      }
    } else {
      Warn("cannot read node " + node + " yet (" + current.status().message() + "); retrying at every sample");
    }
    if (flags.dra) {
      dra = std::make_unique<agent::DraSlices>(
          *client,
          agent::DraSlicesOptions{.node = node,
                                  .pool = {.whole_gpus_only = flags.dra_whole_gpus, .driver_version = driver_version}});
      dra->Start();
      Info(std::string("DRA: publishing ResourceSlices of driver gpu.gpusched.io") +
           (flags.dra_whole_gpus ? " (whole GPUs only)" : " (shareable GPUs)"));
    }
    // The pods bound to this node (one list, then a watch): /metrics attribution, and the device plugin's reads,
    // so that no container start lists the node's pods (NodePods).
    pods = std::make_unique<agent::NodePods>(
        *client, agent::NodePodsOptions{.node = node},
        [&attribution, &pods, &node](const k8s::WatchEvent&) { attribution.SetPods(pods->List(), node); });
    pods->Start();
    pod_resources = dp::NewKubeletPodResources(flags.pod_resources_socket, milliseconds(5000));
    dp::DevicePluginOptions options{.node_name = node, .plugin_dir = flags.device_plugin_dir};
    options.replicas = flags.replicas;
    options.events = events.get();
    options.resources.clear();
    for (std::string_view resource : kube::kCountableGpuResources) {
      // nvidia.com/gpu only where the agent replaces the NVIDIA device plugin (or HAMi's).
      if (resource != kube::kResNvidiaGpu || flags.device_plugin_mode == "nvidia" ||
          flags.device_plugin_mode == "hami") {
        options.resources.emplace_back(resource);
      }
    }
    options.nvidia_gpu_replicas = flags.device_plugin_mode == "hami" ? flags.replicas : 1;
    auto strategy = dp::ParseDeviceListStrategy(flags.device_list_strategy);
    if (!strategy.ok()) {
      return Fail("--device-list-strategy: " + strategy.status().message());
    }
    options.device_list_strategy = *strategy;
    options.cdi.spec_dir = flags.cdi_spec_dir;
    if (dp::UsesCdi(*strategy)) {
      // The driver's libraries as the agent sees them: NVIDIA's runtime mounts the host's files into the agent at
      // their host paths, so these paths are the host's too.
      const std::vector<std::string> lib_dirs = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
                                                 "/usr/lib64", "/usr/lib"};
      const std::vector<std::string> sonames = {"libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
                                                "libnvidia-nvvm.so.4", "libcudadebugger.so.1"};
      options.cdi.driver_files = dp::FindDriverFiles(lib_dirs, sonames);
      if (options.cdi.driver_files.empty()) {
        Warn("--device-list-strategy " + flags.device_list_strategy +
             ": no driver library found (libcuda.so.1 in /usr/lib/...); the CDI devices carry device nodes only");
      }
    }
    options.mps.enabled = mps != nullptr;
    options.mps.pipe_host_dir = flags.mps_pipe_dir;
    options.mps.pipe_container_dir = flags.mps_pipe_dir;
    if (mps != nullptr) {
      options.mps_daemon = [&mps] { return mps->Status(); };
    }
    // --- MPS enforcement and shareWithin ---
    options.mps.shm_host_dir = flags.mps_shm_dir;
    if (auto within = dp::ParseShareWithin(flags.share_within); within.ok()) {
      options.share_within = *within;
    } else {
      return Fail("--share-within: " + within.status().message());
    }
    if (mps != nullptr) {
      mps_runner = dp::NewProcessMpsRunner(dp::ProcessMpsRunnerOptions{.control = flags.mps_control,
                                                                       .pipe_dir = flags.mps_pipe_dir,
                                                                       .log_dir = flags.mps_log_dir,
                                                                       .proc_dir = flags.mps_proc_dir});
      mps_limits = std::make_unique<dp::MpsEnforcer>(
          *mps_runner,
          dp::MpsEnforcerOptions{
              .node = node,
              .plan = {.fallback_pinned_mib = flags.mps_fallback_pinned_mib},
              .pods = [&pods] { return pods->List(); },
              // The pod's uid settings from the watch's cache (it keeps the
              // security contexts); one remembered GET only for a pod the watch
              // has not delivered yet, as for the handoff itself.
              .get_pod = [&pods](const std::string& ns, const std::string& name) -> common::Result<nlohmann::json> {
                if (auto cached = pods->informer().Get(ns + "/" + name)) {
                  return std::move(*cached);
                }
                return pods->GetPod(ns, name);
              }});
      if (auto s = mps_limits->Start(); !s.ok()) {
        return Fail("MPS limits: " + s.message());
      }
      options.mps_admit = [&mps_limits](const kube::PodMeta& pod, const std::string& entry,
                                        std::span<const core::GpuShare> shares) {
        return mps_limits->Admit(pod, entry, shares);
      };
    }
    // --- end MPS ---
    Info("device plugin (" + flags.device_plugin_mode + " mode): " +
         [&] {
           std::string names;
           for (const auto& r : options.resources) {
             names += (names.empty() ? "" : ", ") + r + " x" + std::to_string(dp::ReplicasFor(options, r));
           }
           return names;
         }() +
         " per GPU; MPS " + mps_mode + "; devices by " + flags.device_list_strategy);
    options.sample_interval = milliseconds(0);  // the collector pushes its samples (OnSamples)
    plugin = std::make_unique<dp::DevicePlugin>(options, devices, *pods, *pod_resources);
    if (auto s = plugin->Start(); !s.ok()) {
      Warn("device plugin: " + s.message() + "; retrying with backoff");
    }
  }

  // Sampling; each snapshot goes to the device plugin's health and the inventory annotation.
  agent::Collector collector(
      std::move(inventory),
      agent::CollectorOptions{.interval = interval, .on_sample = [&](const agent::GpuSnapshot& s) {
                                if (plugin) {
                                  plugin->OnSamples(s.samples);
                                }
                                if (mps_limits) {
                                  mps_limits->OnSamples(s.samples);
                                }
                                if (dra) {
                                  dra->OnSamples(s.samples);
                                }
                                if (publisher) {
                                  if (auto st = publisher->Publish(s.samples); !st.ok()) {
                                    Warn("inventory annotation: " + st.message());
                                  }
                                }
                              }});
  if (auto s = collector.Start(); !s.ok()) {
    return Fail(s.message());
  }

  // /metrics and /healthz: read-only, GET only, through the hardened server layer (small bodies, short timeouts).
  // The kubelet's probes and Prometheus need a connection or two each: 16 per address, and idle ones give way at
  // the cap, so no pod on the node can lock the probes out.
  auto made = net::HttpServer::Create(net::HttpServerOptions{.host = host,
                                                             .port = port,
                                                             .threads = 2,
                                                             .limits = net::HttpLimits{.max_header_bytes = 8 * 1024,
                                                                                       .max_header_fields = 32,
                                                                                       .max_body_bytes = 4 * 1024,
                                                                                       .max_connections = 64,
                                                                                       .max_connections_per_peer = 16},
                                                             .name = "agent"});
  if (!made.ok()) {
    return Fail(made.status().message());
  }
  std::unique_ptr<net::HttpServer> server = std::move(made).value();
  server->Handle("GET", "/metrics", [&](net::HttpRequest&) {
    auto [pod_refs, allocations] = attribution.Get();
    std::string body = collector.RenderMetrics(pod_refs, allocations, node);
    body += net::RenderStats(server->stats(), "gpusched_agent");
    body += DaemonMetrics(plugin.get(), pods.get(), mps.get());
    if (mps_limits) {
      body += mps_limits->RenderMetrics();
    }
    if (events) {
      body += events->RenderMetrics("gpusched_agent_events_total");
    }
    return net::HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = std::move(body)};
  });
  // What keeps the node from handing out GPUs: a failed GPU sample, a device plugin the kubelet has not registered,
  // an MPS daemon that does not answer (each when used); "" when nothing does.
  auto problems = [&]() {
    std::string why;
    if (const common::Status s = collector.last_error(); !s.ok()) {
      why += "; last GPU sample failed: " + s.message();
    }
    if (plugin && !plugin->registered()) {
      why += "; device plugin not registered with the kubelet: " + plugin->last_error();
    }
    if (mps) {
      if (const common::Status s = mps->Status(); !s.ok()) {
        why += "; MPS control daemon not answering: " + s.message();
      }
    }
    if (mps_limits) {
      if (const common::Status s = mps_limits->status(); !s.ok()) {
        why += "; MPS limits not set: " + s.message();
      }
    }
    if (dra) {
      if (const std::string p = dra->Problem(); !p.empty()) {
        why += "; " + p;
      }
    }
    return why.empty() ? why : why.substr(2);
  };
  // Ready: none of those.
  server->Handle("GET", "/readyz", [&](net::HttpRequest&) {
    const std::string why = problems();
    return why.empty() ? net::HttpResponse{.body = "ok\n"} : net::HttpResponse{.status = 503, .body = why + "\n"};
  });
  // Alive: the server answers (200 whatever the GPUs do: a restart fixes neither a failed sample nor a missing
  // kubelet); the body says what is degraded. /readyz is the one that fails.
  server->Handle("GET", "/healthz", [&](net::HttpRequest&) {
    const std::string why = problems();
    return net::HttpResponse{.body = (why.empty() ? "ok: " : "degraded: ") + collector.Describe() +
                                     (why.empty() ? "" : "; " + why) + "\n"};
  });
  if (auto s = server->Start(); !s.ok()) {
    return Fail("cannot listen on " + flags.listen + ": " + s.message());
  }

  // PodResources attribution and the InfluxDB push, every interval.
  std::unique_ptr<adapters::influxdb::InfluxWriter> influx;
  if (!flags.influxdb_url.empty()) {
    auto w = adapters::influxdb::InfluxWriter::Create(
        adapters::influxdb::InfluxWriterOptions{.url = flags.influxdb_url, .database = flags.influxdb_db});
    if (!w.ok()) {
      return Fail("--influxdb-url: " + w.status().message());
    }
    influx = std::move(w).value();
  }
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread periodic([&] {
    bool database = false;
    bool influx_failing = false;
    std::unique_lock lock(stop_mu);
    while (!stop_cv.wait_for(lock, interval, [&] { return stopping; })) {
      lock.unlock();
      if (pod_resources && access(flags.pod_resources_socket.c_str(), F_OK) == 0) {
        if (auto list = pod_resources->List(); list.ok()) {
          attribution.SetKubelet(*list);
        }
      }
      if (influx) {
        auto snap = collector.Latest();
        common::Status s = common::Status::Ok();
        if (!database) {
          s = influx->CreateDatabase();
          database = s.ok();
        }
        if (s.ok() && snap != nullptr) {
          const auto ms = std::chrono::duration_cast<milliseconds>(snap->time.time_since_epoch()).count();
          s = influx->Write(adapters::influxdb::GpuSampleLines(snap->samples, {.hostname = node}, ms));
        }
        if (!s.ok() && !influx_failing) {
          Warn("InfluxDB: " + s.message() + " (retrying every interval)");
        } else if (s.ok() && influx_failing) {
          Info("InfluxDB: writing again");
        }
        influx_failing = !s.ok();
      }
      lock.lock();
    }
  });

  Info(std::string("serving /metrics and /healthz on ") + flags.listen + (flags.standalone ? " (standalone)" : ""));
  int sig = 0;
  sigwait(&signals, &sig);
  Info(std::string("stopping on ") + strsignal(sig));
  {
    std::lock_guard lock(stop_mu);
    stopping = true;
  }
  stop_cv.notify_all();
  periodic.join();
  server->Stop();
  collector.Stop();
  if (plugin) {
    plugin->Stop();
  }
  if (mps_limits) {
    mps_limits->Stop();
  }
  if (dra) {
    dra->Stop();
  }
  if (events) {
    events->Stop();  // what the last refusals told is written
  }
  if (pods) {
    pods->Stop();
  }
  return 0;
}

}  // namespace gpusched::cli
