#pragma once

// DevicePlugin: gpusched's kubelet device plugin (API v1beta1, k8s-gpu-protocols.md §3) for one node. One gRPC
// server per resource, each on its own unix socket in the device-plugin directory, registered with the kubelet:
//
//   gpusched.io/gpu   each GPU advertised as `replicas` devices "<uuid>::<k>" (device_ids.h)
//   nvidia.com/gpu    one device per GPU, "<uuid>" (or nvidia_gpu_replicas devices "<uuid>::<k>": HAMi's split)
//   keti.com/mpsgpu   like gpusched.io/gpu (compatibility with KETI's MPS scheduler)
//
// ListAndWatch streams the device list and sends it again whenever it changes: health from the DeviceInventory
// samples (an unhealthy GPU makes all its devices Unhealthy; a failed sample makes every device Unhealthy), NUMA
// topology from GpuSample::numa_node. Allocate hands each container the GPUs its pod's gpusched.io/allocation
// names (handoff.h, docs/device-plugin.md) with the environment of container_env.h, unless they conflict with
// another pod's allocation on the node (a forged annotation; handoff.h, "Forged allocations"). GetPreferredAllocation
// steers the kubelet to device ids of those same GPUs. PreStartContainer re-checks the handoff against the kubelet's
// own record (PodResources) and the GPUs against the pods holding them before the container starts, and refuses it
// on any mismatch or conflict.
//
// Life cycle. Start() checks the options and takes a first inventory sample, then a supervisor thread:
//   every poll_interval: samples the inventory (every sample_interval), and looks at kubelet.sock. When it exists
//   and its identity (inode, ctime) differs from the one we registered with, or one of our sockets is gone (the
//   kubelet deletes the directory's sockets when it restarts), it restarts our gRPC servers on fresh sockets and
//   registers every resource again. While kubelet.sock is missing or a registration fails, last_error() says why
//   and registration is retried with exponential backoff (initial_backoff doubling to max_backoff). Whether that
//   is fatal is the caller's decision (registered() / last_error()).
// Stop() ends the streams, stops the servers, removes our sockets and joins the thread.
//
// Threading: all public methods are thread-safe. Allocate-side calls (Allocate, GetPreferredAllocation,
// PreStartContainer) are serialised by one lock: the kubelet makes them one at a time anyway.

#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/adapters/deviceplugin/cdi_spec.h"
#include "gpusched/adapters/deviceplugin/container_env.h"
#include "gpusched/adapters/deviceplugin/pod_resources.h"
#include "gpusched/adapters/deviceplugin/pod_source.h"
#include "gpusched/adapters/deviceplugin/share_within.h"
#include "gpusched/common/status.h"
#include "gpusched/kube/resources.h"
#include "gpusched/ports/device_inventory.h"
#include "gpusched/ports/event_recorder.h"

namespace gpusched::adapters::deviceplugin {

inline constexpr std::string_view kDevicePluginVersion = "v1beta1";
inline constexpr std::string_view kDefaultPluginDir = "/var/lib/kubelet/device-plugins";
inline constexpr std::string_view kDefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
inline constexpr std::string_view kHealthy = "Healthy";
inline constexpr std::string_view kUnhealthy = "Unhealthy";

struct DevicePluginOptions {
  std::string node_name;  // required: Allocate only honours allocations for this node
  std::string plugin_dir = std::string(kDefaultPluginDir);
  std::string kubelet_socket = "kubelet.sock";  // name inside plugin_dir
  // Our sockets: "<socket_prefix>-<resource with '/' and '.' as '-'>.sock" in plugin_dir.
  std::string socket_prefix = "gpusched";
  std::vector<std::string> resources = {std::begin(kube::kCountableGpuResources),
                                        std::end(kube::kCountableGpuResources)};
  int replicas = 10;  // devices per GPU for gpusched.io/gpu and keti.com/mpsgpu (1..1000)
  // Devices per GPU for nvidia.com/gpu: 1 replaces the NVIDIA device plugin (whole GPUs); `replicas` is HAMi's split
  // count (`gpusched agent --device-plugin-mode hami`).
  int nvidia_gpu_replicas = 1;
  MpsOptions mps;
  // How Allocate hands the GPUs over (container_env.h). The CDI strategies need the spec the plugin writes (cdi,
  // cdi_spec.h): it is rewritten whenever the GPUs change, and removed at Start under the other strategies.
  DeviceListStrategy device_list_strategy = DeviceListStrategy::kVolumeMounts;
  CdiSpecOptions cdi;
  // Whether the node's MPS control daemon answers (MpsDaemon::Status). When set and a container's GPUs come with MPS
  // limits, Allocate refuses the container while it returns an error: without the daemon the limits are not
  // enforced. Null: not checked (mps.enabled = false hands out no limits at all).
  std::function<common::Status()> mps_daemon;
  // --- MPS enforcement and shareWithin (mps_enforcer.h, share_within.h) ---
  // Which pods may share a GPU; checked at Allocate against the node's pods (CheckShareWithin).
  ShareWithin share_within = ShareWithin::kAny;
  // Sets the container's limits in the MPS control daemon before Allocate answers (MpsEnforcer::Admit), for a
  // container with MPS limits; an error refuses it. Null: not set (the daemon keeps what it has).
  std::function<common::Status(const kube::PodMeta& pod, const std::string& entry,
                               std::span<const core::GpuShare> shares)>
      mps_admit;
  // --- end MPS ---
  bool verify_pre_start = true;  // register with pre_start_required and check the handoff in PreStartContainer
  std::chrono::milliseconds poll_interval{1000};    // kubelet.sock check
  std::chrono::milliseconds sample_interval{1000};  // inventory sampling; 0 = only what OnSamples() pushes
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::milliseconds rpc_timeout{10000};  // Register, and the reads an Allocate makes
  // A refused handoff (Allocate or PreStartContainer) for a pod it could identify is told to that pod as a Warning
  // Event, reason GPUHandoffRefused, with the reason the kubelet gets. Null = none.
  ports::EventRecorder* events = nullptr;
};

[[nodiscard]] common::Status ValidateOptions(const DevicePluginOptions& options);

// The socket name of one resource ("gpusched-gpusched-io-gpu.sock").
[[nodiscard]] std::string SocketName(std::string_view prefix, std::string_view resource);

// Devices per GPU that `resource` is advertised with.
[[nodiscard]] int ReplicasFor(const DevicePluginOptions& options, std::string_view resource);

class DevicePlugin {
 public:
  // The references must outlive the plugin.
  DevicePlugin(DevicePluginOptions options, ports::DeviceInventory& inventory, PodSource& pods,
               PodResourcesSource& pod_resources);
  ~DevicePlugin();  // Stop()
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Invalid options or a first inventory sample that fails are errors; a missing kubelet is not (see above).
  [[nodiscard]] common::Status Start();
  void Stop();

  // New samples from the caller's own sampling loop (use with sample_interval = 0 to sample only once).
  void OnSamples(std::vector<ports::GpuSample> samples);

  // Every resource is registered with the current kubelet.
  [[nodiscard]] bool registered() const;
  [[nodiscard]] bool WaitRegistered(std::chrono::milliseconds timeout) const;
  [[nodiscard]] uint64_t registrations() const;  // successful rounds of registration (1 + kubelet restarts seen)
  [[nodiscard]] std::string last_error() const;  // "" when the last attempt succeeded
  [[nodiscard]] uint64_t allocations() const;    // containers handed GPUs
  [[nodiscard]] uint64_t refusals() const;       // Allocate/PreStartContainer calls refused

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::adapters::deviceplugin
