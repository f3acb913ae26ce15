#pragma once

// DraPlugin: the agent's DRA kubelet plugin (Dynamic Resource Allocation, resource.k8s.io/v1) for driver
// gpu.gpusched.io on one node. docs/dra.md, "The kubelet plugin", is the user's view; this is the contract.
//
// Sockets (both 0600, our directory 0700; the kubelet runs as root):
//   <plugins_registry_dir>/<driver>-reg.sock  pluginregistration.Registration: GetInfo answers
//       {type "DRAPlugin", name <driver>, endpoint <kubelet_plugins_dir>/<driver>/dra.sock,
//        supported_versions ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"]}.
//       Kubelets 1.34+ take the first entry they know (v1 before v1beta1, in our order); 1.32 and 1.33 look for
//       "v1beta1.DRAPlugin". NotifyRegistrationStatus is logged; a refusal is kept in last_error().
//   <plugins_dir>/<driver>/dra.sock  k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin and ...dra.v1beta1.DRAPlugin (one
//       implementation), and v1alpha1.DRAResourceHealth.
//
// NodePrepareResources, per claim of the request (one call at a time: prepare and unprepare are serialised):
//   1. the claim's uid, namespace and name are checked (a uid is a file name here: letters, digits, '-', '_');
//   2. a claim this plugin prepared already (the checkpoint has its uid) gets the same devices again, and its CDI
//      spec is rewritten if it went missing (the kubelet calls again after its own restarts);
//   3. otherwise the claim is read through ports::ResourceClaimReader and prepared only when its UID is the one asked
//      for, it is allocated, not being deallocated, allocated to this node, and has results of this driver, all in
//      this node's pool and each naming a GPU of this node ("gpu-<index>", the slice publisher's names, mapped to the
//      GPU of that index in the DeviceInventory): PrepareClaim below; any other claim gets a per-claim error that
//      says why and nothing is written;
//   4. the claim's CDI spec is written (<cdi.spec_dir>/<driver>-claim_<uid>.json, kind <cdi_kind>, devices
//      "<uid>-<device>"), then the checkpoint; the answer names each device with its fully qualified CDI name.
// NodeUnprepareResources removes the spec and the checkpoint entry; a claim it does not know is already unprepared.
//
// The CDI spec of a claim: per device its /dev/nvidia<minor> (cdi_spec.h's GpuDeviceNode); for the whole claim the
// control nodes and driver files (CommonContainerEdits) and the environment and mounts of container_env.h's
// BuildContainerEnv for the claim's GPUs: NVIDIA_VISIBLE_DEVICES with their UUIDs, and for a device taken with
// consumed capacity (shared) the MPS limits: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from the compute capacity (percent of
// the GPU, DraPluginOptions::compute_capacity), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT from the memory capacity (bytes,
// rounded down to MiB), CUDA_MPS_PIPE_DIRECTORY and the pipe directory's read-only mount. A device taken whole gets
// no MPS limits. Several results on one device (two requests sharing it) add up.
//
// The checkpoint (<plugins_dir>/<driver>/checkpoint.json, 0600, written atomically: temporary file, fsync, rename)
// holds every prepared claim with its devices and its CDI spec. Start() reads it, so Unprepare works after an agent
// restart, and rewrites every spec it lists (CDI specs live on tmpfs, gone after a reboot; the kubelet's directory is
// on disk). Spec files of this driver that the checkpoint does not list (left by a crash between the two writes) are
// removed. A checkpoint that cannot be parsed fails Start() naming the file: forgetting what was handed out would
// let Unprepare leave specs behind and hide prepared claims.
//
// Health (NodeWatchResources): the full list of this node's devices, HEALTHY or UNHEALTHY from the inventory sample
// (UNKNOWN for all while sampling fails), sent at once, on every change, and at least every health_resend. At most
// max_health_streams streams at a time; more are refused with RESOURCE_EXHAUSTED.
//
// gRPC limits on both servers: max_message_bytes per received message, max_concurrent_streams per connection, a
// thread cap; a Prepare/Unprepare call with more than max_claims_per_call claims is refused as a whole.
//
// Life cycle: Start() validates the options, takes a first inventory sample, loads the checkpoint, restores the
// specs, serves both sockets and starts a supervisor thread that samples the inventory every sample_interval and,
// every poll_interval, serves the sockets again if one of them was deleted. Stop() ends the streams, stops both
// servers, removes both sockets, keeps the checkpoint and the specs (running containers still use them).
//
// Threading: all public methods are thread-safe.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/deviceplugin/cdi_spec.h"
#include "gpusched/adapters/deviceplugin/container_env.h"
#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"
#include "gpusched/ports/device_inventory.h"
#include "gpusched/ports/resource_claims.h"

namespace gpusched::adapters::deviceplugin {

inline constexpr std::string_view kDraDriverName = "gpu.gpusched.io";
inline constexpr std::string_view kDefaultPluginsRegistryDir = "/var/lib/kubelet/plugins_registry";
inline constexpr std::string_view kDefaultKubeletPluginsDir = "/var/lib/kubelet/plugins";
inline constexpr std::string_view kDraPluginType = "DRAPlugin";
// The supported_versions entries: "<last element of the proto package>.<service>", as the kubelet compares them.
inline constexpr std::string_view kDraV1Service = "v1.DRAPlugin";
inline constexpr std::string_view kDraV1beta1Service = "v1beta1.DRAPlugin";
inline constexpr std::string_view kDraHealthService = "v1alpha1.DRAResourceHealth";
inline constexpr std::string_view kDefaultClaimCdiKind = "gpu.gpusched.io/claim";

struct DraPluginOptions {
  std::string node_name;  // required: only claims allocated to this node are prepared
  std::string driver_name = std::string(kDraDriverName);
  std::string pool_name;  // the node's pool in the ResourceSlices; "" = node_name (one pool per node)
  std::string plugins_registry_dir = std::string(kDefaultPluginsRegistryDir);
  std::string plugins_dir = std::string(kDefaultKubeletPluginsDir);  // ours: <plugins_dir>/<driver>/
  // plugins_dir as the kubelet sees it (the endpoint GetInfo names); "" = plugins_dir (the usual same-path mount).
  std::string kubelet_plugins_dir;
  CdiSpecOptions cdi;  // spec_dir, dev_dir, proc_gpus_dir, control nodes, driver files (its `kind` is not used)
  std::string cdi_kind = std::string(kDefaultClaimCdiKind);
  MpsOptions mps;
  // Consumable capacities of a shared device: compute in percent of the GPU (100 = all of it), memory in bytes.
  std::string compute_capacity = "gpu.gpusched.io/compute";
  std::string memory_capacity = "gpu.gpusched.io/memory";
  // Whether the node's MPS control daemon answers (MpsDaemon::Status). Set: a claim with MPS limits is refused while
  // it returns an error (the limits would not be enforced). Null: not checked.
  std::function<common::Status()> mps_daemon;
  int max_claims_per_call = 256;
  int max_health_streams = 4;
  int max_message_bytes = 4 << 20;
  int max_concurrent_streams = 16;
  int max_threads = 32;
  std::chrono::milliseconds sample_interval{1000};  // 0 = only what OnSamples() pushes
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds health_resend{10000};
};

[[nodiscard]] common::Status ValidateOptions(const DraPluginOptions& options);

// "gpu-<index>" and back; ParseDraDeviceName refuses anything else ("gpu-01", "gpu--1", "gpu-x").
[[nodiscard]] std::string DraDeviceName(int32_t index);
[[nodiscard]] common::Result<int32_t> ParseDraDeviceName(std::string_view name);

// One device of a prepared claim, as NodePrepareResources answers it.
struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;  // fully qualified, "gpu.gpusched.io/claim=<uid>-gpu-0"
  bool operator==(const PreparedDevice&) const = default;
};

struct PreparedClaim {
  std::string uid;
  std::string namespace_;
  std::string name;
  std::vector<PreparedDevice> devices;
  nlohmann::json cdi_spec;  // the document written to CdiSpecPathFor(uid)
  bool operator==(const PreparedClaim&) const = default;
};

// The claim, as the kubelet named it.
struct ClaimRef {
  std::string namespace_;
  std::string uid;
  std::string name;
};

// Step 1: the kubelet's reference is usable (uid safe as a file name, namespace and name set).
[[nodiscard]] common::Status CheckClaimRef(const ClaimRef& ref);

// Step 3 without I/O except the GPUs' minor numbers (options.cdi.proc_gpus_dir): what preparing `claim` (read from
// the API for `ref`) on this node hands out, or FailedPrecondition/NotFound saying why it must not be prepared.
// `gpus` is the node's inventory in index order.
[[nodiscard]] common::Result<PreparedClaim> PrepareClaim(const DraPluginOptions& options, const ClaimRef& ref,
                                                         const core::dra::ResourceClaim& claim,
                                                         std::span<const ports::GpuSample> gpus);

// <cdi.spec_dir>/<driver>-claim_<uid>.json
[[nodiscard]] std::string ClaimCdiSpecPath(const DraPluginOptions& options, std::string_view uid);
// <plugins_dir>/<driver>/checkpoint.json
[[nodiscard]] std::string DraCheckpointPath(const DraPluginOptions& options);

// The checkpoint's document and back. Parse errors name what is wrong.
[[nodiscard]] nlohmann::json CheckpointJson(std::span<const PreparedClaim> claims);
[[nodiscard]] common::Result<std::vector<PreparedClaim>> ParseCheckpoint(const nlohmann::json& doc);

class DraPlugin {
 public:
  // The references must outlive the plugin.
  DraPlugin(DraPluginOptions options, ports::DeviceInventory& inventory, ports::ResourceClaimReader& claims);
  ~DraPlugin();  // Stop()
  DraPlugin(const DraPlugin&) = delete;
  DraPlugin& operator=(const DraPlugin&) = delete;

  [[nodiscard]] common::Status Start();
  void Stop();

  // New samples from the caller's own sampling loop (with sample_interval = 0).
  void OnSamples(std::vector<ports::GpuSample> samples);

  // The kubelet's last NotifyRegistrationStatus said registered.
  [[nodiscard]] bool registered() const;
  [[nodiscard]] bool WaitRegistered(std::chrono::milliseconds timeout) const;
  [[nodiscard]] uint64_t registrations() const;  // successful registrations the kubelet reported
  [[nodiscard]] std::string last_error() const;  // the kubelet's refusal, or a serving error; "" when none
  [[nodiscard]] std::vector<PreparedClaim> prepared() const;
  [[nodiscard]] std::string registration_socket() const;
  [[nodiscard]] std::string dra_socket() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::adapters::deviceplugin
