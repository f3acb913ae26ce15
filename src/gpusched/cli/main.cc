// gpusched: the daemons (scheduler, extender, agent, webhook) and the cluster commands (status, top, why). Wiring
// only. The lab tools (simulate, interference, monitor) are gpusched-lab (lab_main.cc), so this binary, the one the
// image ships, links no plotting or ML library.

#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>

#include "gpusched/cli/agent_command.h"
#include "gpusched/cli/app_main.h"
#include "gpusched/cli/doctor_command.h"
#include "gpusched/cli/extender_command.h"
#include "gpusched/cli/live_inputs.h"
#include "gpusched/cli/scheduler_command.h"
#include "gpusched/cli/status_command.h"
#include "gpusched/cli/top_command.h"
#include "gpusched/cli/webhook_command.h"
#include "gpusched/cli/why_command.h"
#include "gpusched/policy/registry.h"

int main(int argc, char** argv) {
  CLI::App app{
      "gpusched: a Kubernetes GPU scheduler (scheduler, extender, agent, webhook; status, top, why). The lab tools "
      "(simulate, interference, monitor) are gpusched-lab"};
  // Installed as kubectl-gpusched (a link to this binary), it answers `kubectl gpusched ...` as a kubectl plugin.
  const std::string self = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "";
  if (self == "kubectl-gpusched") {
    app.name("kubectl gpusched");
    app.description(
        "gpusched as a kubectl plugin: status of the cluster's GPUs (status, top, why), and every other gpusched "
        "subcommand; what-if placement is `gpusched-lab simulate --from-cluster`");
  }
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpusched ") + GPUSCHED_VERSION);
  int exit_code = 0;
  gpusched::cli::ExtenderFlags extender;
  std::string policies;
  for (const auto& n : gpusched::policy::PolicyNames()) {
    policies += (policies.empty() ? "" : ", ") + n;
  }
  CLI::App* ext = app.add_subcommand(
      "extender", "Serve kube-scheduler's extender verbs (filter, prioritize, bind, preempt) with GPU sharing");
  ext->add_option("--config", extender.config, "YAML config (listen, pathPrefix, tls, policy, resourceNames, ...)")
      ->check(CLI::ExistingFile);
  ext->add_option("--kubeconfig", extender.kubeconfig,
                  "kubeconfig (default: the config's, then $KUBECONFIG, in-cluster, ~/.kube/config)");
  ext->add_option("--listen", extender.listen, "host:port, overrides the config");
  ext->add_option("--policy", extender.policy, "Placement policy, overrides the config. Known: " + policies);
  ext->add_flag("-v,--verbose", extender.verbose, "Debug logging (--v=4)");
  ext->add_option("--context", extender.context, "kubeconfig context to use (default: its current-context)");
  gpusched::cli::AddLogFlags(*ext, extender.log);
  ext->add_option("--interference-model", extender.interference_model,
                  "Slowdown model file from `gpusched-lab interference train` (for the interference-aware policy)");
  ext->callback([&extender, &exit_code] {
    exit_code = gpusched::cli::RunExtender(extender, gpusched::cli::TrainedModelLoader());
  });

  gpusched::cli::AgentFlags agent;
  CLI::App* ag = app.add_subcommand(
      "agent", "Node agent: GPU metrics (DCGM names) on /metrics, the node's GPU inventory, the kubelet device plugin");
  ag->add_option("--fake-gpus", agent.fake_gpus,
                 "Fake GPUs instead of NVML: 4xA100-80GB, 2xH100-80GB,1xT4, or a YAML file");
  ag->add_option("--nvml-library", agent.nvml_library, "NVML library to dlopen")->capture_default_str();
  ag->add_option("--listen", agent.listen, "host:port for /metrics, /healthz and /readyz")->capture_default_str();
  ag->add_flag("--standalone", agent.standalone, "No kubelet and no API server: serve /metrics and /healthz only");
  ag->add_option("--node-name", agent.node_name, "This node's name (default $NODE_NAME, else the host name)");
  ag->add_option("--kubeconfig", agent.kubeconfig, "kubeconfig (default $KUBECONFIG, in-cluster, ~/.kube/config)");
  ag->add_option("--interval", agent.interval_s, "Sampling interval in seconds")->capture_default_str();
  ag->add_option("--influxdb-url", agent.influxdb_url, "Push samples to this InfluxDB 1.x (e.g. http://influx:8086)");
  ag->add_option("--influxdb-db", agent.influxdb_db, "InfluxDB database")->capture_default_str();
  ag->add_option("--device-plugin-dir", agent.device_plugin_dir, "kubelet device-plugin directory")
      ->capture_default_str();
  ag->add_option("--pod-resources-socket", agent.pod_resources_socket, "kubelet PodResources socket")
      ->capture_default_str();
  ag->add_option("--replicas", agent.replicas,
                 "Devices per GPU for gpusched.io/gpu and keti.com/mpsgpu (and nvidia.com/gpu in hami mode): how many "
                 "pods may share one GPU; published in the node's inventory")
      ->capture_default_str();
  ag->add_option("--device-plugin-mode", agent.device_plugin_mode,
                 "Resources the device plugin serves: gpusched (gpusched.io/gpu, keti.com/mpsgpu; beside the NVIDIA "
                 "device plugin), nvidia (also nvidia.com/gpu, one device per GPU: replaces the NVIDIA device plugin), "
                 "hami (also nvidia.com/gpu split into --replicas devices per GPU: replaces HAMi's)")
      ->check(CLI::IsMember({"gpusched", "nvidia", "hami"}))
      ->capture_default_str();
  ag->add_option("--device-list-strategy", agent.device_list_strategy,
                 "How the device plugin hands a container its GPUs (docs/device-plugin.md): volume-mounts (needs "
                 "accept-nvidia-visible-devices-as-volume-mounts=true in nvidia-container-runtime's config.toml), "
                 "envvar (NVIDIA_VISIBLE_DEVICES: an image's own value reaches GPUs too), cdi-annotations or cdi-cri "
                 "(CDI devices from the spec the agent writes in --cdi-spec-dir)")
      ->check(CLI::IsMember({"volume-mounts", "envvar", "cdi-annotations", "cdi-cri"}))
      ->capture_default_str();
  ag->add_option("--cdi-spec-dir", agent.cdi_spec_dir, "Where the agent writes its CDI spec (the CDI strategies)")
      ->capture_default_str();
  ag->add_option("--mps", agent.mps,
                 "MPS control daemon: run (start nvidia-cuda-mps-control and restart it when it dies), external "
                 "(someone else runs it; only check it), off (no MPS: shared GPUs get no compute or memory caps). "
                 "With run or external, a container with MPS limits is refused while the daemon does not answer. "
                 "Default: run with NVML, off with --fake-gpus")
      ->check(CLI::IsMember({"run", "external", "off"}));
  ag->add_option("--mps-control", agent.mps_control, "The MPS control binary (a path, or a name on PATH)")
      ->capture_default_str();
  ag->add_option("--mps-pipe-dir", agent.mps_pipe_dir, "MPS pipe directory mounted into containers")
      ->capture_default_str();
  ag->add_option("--mps-log-dir", agent.mps_log_dir, "MPS log directory (--mps run)")->capture_default_str();
  ag->add_option("--mps-shm-dir", agent.mps_shm_dir,
                 "The MPS control daemon's /dev/shm on the host, mounted at /dev/shm into MPS clients (default: "
                 "none; clients then need the daemon's IPC namespace)");
  ag->add_option("--mps-proc-dir", agent.mps_proc_dir,
                 "Where the MPS servers' pids are looked up for their uid (the host's /proc when the daemon runs "
                 "with hostPID)")
      ->capture_default_str();
  ag->add_option("--mps-fallback-pinned-mib", agent.mps_fallback_pinned_mib,
                 "MPS default pinned memory limit (MiB) on GPUs no MPS client has memory on; 0: none")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  ag->add_option("--share-within", agent.share_within,
                 "Which pods may share one GPU: any, namespace (one namespace per GPU), queue (one gpusched.io/queue "
                 "per GPU); checked at Allocate")
      ->check(CLI::IsMember({"any", "namespace", "queue"}))
      ->capture_default_str();
  ag->add_flag("--dra", agent.dra,
               "Publish the GPUs as DRA ResourceSlices (resource.k8s.io/v1) of driver gpu.gpusched.io (docs/dra.md)");
  ag->add_flag("--dra-whole-gpus", agent.dra_whole_gpus,
               "With --dra: whole GPUs only (no allowMultipleAllocations, no capacity request policies)");
  ag->add_flag("-v,--verbose", agent.verbose, "Debug logging (--v=4)");
  ag->add_option("--context", agent.context, "kubeconfig context to use (default: its current-context)");
  gpusched::cli::AddLogFlags(*ag, agent.log);
  ag->callback([&agent, &exit_code] { exit_code = gpusched::cli::RunAgent(agent); });

  gpusched::cli::SchedulerFlags scheduler;
  gpusched::cli::AddSchedulerCommand(app, scheduler, exit_code);

  gpusched::cli::WebhookFlags webhook;
  gpusched::cli::AddWebhookCommand(app, webhook, exit_code);

  gpusched::cli::StatusFlags status;
  gpusched::cli::AddStatusCommand(app, status, exit_code);

  gpusched::cli::TopFlags top;
  gpusched::cli::AddTopCommand(app, top, exit_code);

  gpusched::cli::WhyFlags why;
  gpusched::cli::AddWhyCommand(app, why, exit_code);

  gpusched::cli::DoctorFlags doctor;
  gpusched::cli::AddDoctorCommand(app, doctor, exit_code);

  return gpusched::cli::ParseAndRun(
      app, argc, argv, self == "kubectl-gpusched" ? "kubectl gpusched" : "gpusched",
      {{"simulate", "gpusched-lab"}, {"interference", "gpusched-lab"}, {"monitor", "gpusched-lab"}}, exit_code);
}
