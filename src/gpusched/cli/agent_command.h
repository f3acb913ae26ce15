#pragma once

// `gpusched agent`: the node agent (GPU collector, /metrics, inventory annotation, device plugin, InfluxDB push).
// Wiring only.

#include <string>

#include "gpusched/cli/logging.h"

namespace gpusched::cli {

struct AgentFlags {
  std::string fake_gpus;  // "4xA100-80GB" or a YAML file; empty: NVML
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string listen = "0.0.0.0:9400";
  bool standalone = false;  // no kubelet, no API server: only /metrics and /healthz
  std::string node_name;    // default $NODE_NAME, else the host name
  std::string kubeconfig;
  double interval_s = 1.0;
  std::string influxdb_url;  // push samples when set
  std::string influxdb_db = "gpusched";
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  int replicas = 10;
  // Which resources the device plugin serves: "gpusched" (gpusched.io/gpu, keti.com/mpsgpu), "nvidia" (also
  // nvidia.com/gpu, one device per GPU: replaces the NVIDIA device plugin), "hami" (also nvidia.com/gpu with
  // `replicas` devices per GPU: replaces HAMi's device plugin).
  std::string device_plugin_mode = "gpusched";
  // How Allocate hands the GPUs over: "volume-mounts", "envvar", "cdi-annotations", "cdi-cri" (container_env.h).
  std::string device_list_strategy = "volume-mounts";
  std::string cdi_spec_dir = "/var/run/cdi";
  // "run": start and supervise nvidia-cuda-mps-control; "external": only check it; "off": no MPS limits at all.
  // Empty: "run" with NVML, "off" with --fake-gpus.
  std::string mps;
  std::string mps_control = "nvidia-cuda-mps-control";
  std::string mps_pipe_dir = "/tmp/nvidia-mps";
  std::string mps_log_dir = "/var/log/nvidia-mps";
  // MPS enforcement (docs/device-plugin.md, "MPS"): the control daemon's /dev/shm mounted into clients ("" = none),
  // where the servers' pids are looked up, the default memory limit on GPUs no client has memory on (0 = none),
  // which pods may share a GPU (any, namespace, queue).
  std::string mps_shm_dir;
  std::string mps_proc_dir = "/proc";
  int64_t mps_fallback_pinned_mib = 0;
  std::string share_within = "any";
  // DRA (docs/dra.md): publish the GPUs as ResourceSlices of driver gpu.gpusched.io; whole GPUs only (no sharing).
  bool dra = false;
  bool dra_whole_gpus = false;
  bool verbose = false;
  LogFlags log;
  std::string context;  // kubeconfig context (--context); empty: current-context
};

// Runs until SIGINT or SIGTERM; returns the process exit code.
int RunAgent(const AgentFlags& flags);

}  // namespace gpusched::cli
