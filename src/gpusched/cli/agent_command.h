#pragma once

// `gpusched agent`: the node agent (GPU collector, /metrics, inventory annotation, device plugin, InfluxDB push).
// Wiring only.

#include <string>

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
  std::string mps_pipe_dir = "/tmp/nvidia-mps";
  bool verbose = false;
};

// Runs until SIGINT or SIGTERM; returns the process exit code.
int RunAgent(const AgentFlags& flags);

}  // namespace gpusched::cli
