#pragma once

// FakeKubelet: the kubelet's side of the device plugin API (k8s-gpu-protocols.md §3) for integration tests, on
// unix sockets in a temporary directory:
//   * the Registration server on <dir>/kubelet.sock. On Register it dials the plugin's socket (<dir>/<endpoint>)
//     as a DevicePlugin client, calls GetDevicePluginOptions and consumes ListAndWatch on a thread of its own,
//     recording the latest device list per resource. A second Register for a resource replaces the first, as the
//     kubelet does.
//   * the raw RPCs the kubelet makes, one container per call: Allocate, GetPreferredAllocation, PreStartContainer.
//   * admission as the kubelet's device manager does it (AdmitPod): one pod at a time; the pod enters the pod
//     manager (and so the PodResources list) right before its containers are allocated, init containers first,
//     then app containers, each resource with its own Allocate call for device ids the kubelet picks from the
//     healthy, unallocated ones (asking GetPreferredAllocation first when the plugin offers it); the devices are
//     recorded for PodResources once Allocate succeeded; a failed Allocate rejects the pod (it leaves the list and
//     frees its devices). PreStartContainer is called afterwards for each allocated container when the plugin
//     asked for it. Options model other kubelets: one that lists the pod only after admission, and a broken one
//     that admits pods in parallel.
//   * the PodResources server (v1 List) on its own socket, listing the admitted (and admitting) pods with their app
//     containers and devices, one ContainerDevices entry per device id as kubelets since 1.21 send them.
//   * Restart(): what a kubelet restart does to the directory: every socket in it is deleted and kubelet.sock is
//     created anew; device lists and plugin connections are forgotten, pod devices are kept (the kubelet's
//     checkpoint).
// Init containers get devices of their own here (the real kubelet lets app containers reuse them); not modelled.
//
// FakeDraKubelet: the kubelet's side of DRA kubelet plugins (adapters/deviceplugin/dra_plugin.h):
//   * the plugin watcher: polls the plugins_registry directory for "*-reg.sock" sockets; for each new one (or one
//     created again: another inode or ctime) it dials it, calls GetInfo, checks it as kubelets 1.34+ do (type
//     "DRAPlugin", a name and endpoint, and the first of supported_versions that this kubelet serves,
//     FakeDraKubeletOptions:: services, newest first; none: refused) and answers with NotifyRegistrationStatus. A
//     socket that goes away deregisters the plugin.
//   * NodePrepareResources / NodeUnprepareResources on the registered endpoint, through the chosen service or a
//     given version (v1, v1beta1), with the answers per claim; the claims prepared and not unprepared are
//     remembered per driver (the kubelet's own checkpoint).
//   * NodeWatchResources when the plugin lists v1alpha1.DRAResourceHealth: the latest device list per driver.
//   * Restart(): registrations and streams are forgotten, the registry is scanned again, and every remembered claim
//     is prepared again (the kubelet does so for the pods it still runs).
//
// Threading: every public method is thread-safe. The header has no gRPC include.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::testing {

struct FakeKubeletOptions {
  std::string dir;                   // the device plugin directory; required, must exist
  std::string pod_resources_socket;  // default <dir>/pod-resources/kubelet.sock (the directory is created)
  bool list_admitting_pod = true;    // false: PodResources lists a pod only once it is admitted
  bool serial_admission = true;      // false: AdmitPod calls overlap (no real kubelet does this)
  bool use_preferred_allocation = true;
};

struct FakeDevice {
  std::string id;
  std::string health;
  std::vector<int64_t> numa_nodes;
};

struct FakeMount {
  std::string container_path, host_path;
  bool read_only = false;
};

struct FakeContainerResponse {
  std::map<std::string, std::string> envs;
  std::vector<FakeMount> mounts;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // CDIDevice names
};

struct FakePluginOptions {
  bool pre_start_required = false;
  bool get_preferred_allocation_available = false;
};

struct FakeContainerSpec {
  std::string name;
  std::map<std::string, int64_t> devices;  // device-plugin resource -> count
  bool init = false;
};

struct FakePodSpec {
  std::string namespace_ = "default";
  std::string name;
  std::vector<FakeContainerSpec> containers;
  [[nodiscard]] std::string Key() const { return namespace_ + "/" + name; }
};

struct FakeContainerAdmission {
  std::string container;
  std::string resource;
  std::vector<std::string> device_ids;
  FakeContainerResponse response;
  common::Status pre_start;  // PreStartContainer's answer (OK when not called)
};

class FakeKubelet {
 public:
  explicit FakeKubelet(FakeKubeletOptions options);
  ~FakeKubelet();  // Stop()
  FakeKubelet(const FakeKubelet&) = delete;
  FakeKubelet& operator=(const FakeKubelet&) = delete;

  [[nodiscard]] common::Status Start();
  void Stop();
  [[nodiscard]] common::Status Restart();

  [[nodiscard]] std::string kubelet_socket() const;
  [[nodiscard]] std::string pod_resources_socket() const;

  // Register calls accepted for `resource` since construction.
  [[nodiscard]] int registrations(const std::string& resource) const;
  // The plugin's answer to GetDevicePluginOptions at its last registration.
  [[nodiscard]] std::optional<FakePluginOptions> plugin_options(const std::string& resource) const;
  // The last device list ListAndWatch sent for `resource` since its last registration.
  [[nodiscard]] std::optional<std::vector<FakeDevice>> Devices(const std::string& resource) const;
  // Polls `pred` every 5 ms until it holds or `timeout` passes.
  static bool WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout);

  // Raw RPCs to the plugin registered for `resource`; gRPC errors come back as Status with the plugin's message.
  [[nodiscard]] common::Result<FakeContainerResponse> Allocate(const std::string& resource,
                                                               const std::vector<std::string>& device_ids);
  [[nodiscard]] common::Result<std::vector<std::string>> GetPreferredAllocation(
      const std::string& resource, const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size);
  [[nodiscard]] common::Status PreStartContainer(const std::string& resource,
                                                 const std::vector<std::string>& device_ids);

  // Admission as described above. An error is the pod's rejection (UnexpectedAdmissionError) with the reason.
  [[nodiscard]] common::Result<std::vector<FakeContainerAdmission>> AdmitPod(const FakePodSpec& pod);
  // The pod is gone: it leaves the PodResources list and its devices are free again.
  void RemovePod(const std::string& ns, const std::string& name);
  // Sets what PodResources reports for one container (for tests that script the kubelet's record).
  void RecordDevices(const std::string& ns, const std::string& name, const std::string& container,
                     const std::string& resource, const std::vector<std::string>& device_ids);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct FakeDraKubeletOptions {
  std::string registry_dir;  // the kubelet's plugins_registry directory; required, must exist
  // The DRAPlugin services this kubelet calls, newest first: {"v1.DRAPlugin", "v1beta1.DRAPlugin"} for 1.34+,
  // {"v1beta1.DRAPlugin"} for 1.32 and 1.33.
  std::vector<std::string> services = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
  bool watch_health = true;  // open NodeWatchResources when the plugin serves v1alpha1.DRAResourceHealth
  std::chrono::milliseconds poll{20};
};

struct FakeDraRegistration {
  std::string type;
  std::string name;
  std::string endpoint;
  std::vector<std::string> supported_versions;
  std::string chosen_service;  // "" when refused
  std::string error;           // why it was refused ("" when registered); sent in NotifyRegistrationStatus
};

struct FakeClaim {
  std::string namespace_ = "default";
  std::string uid;
  std::string name;
};

struct FakePreparedDevice {
  std::vector<std::string> requests;
  std::string pool;
  std::string device;
  std::vector<std::string> cdi_device_ids;
};

struct FakePrepareResult {
  std::vector<FakePreparedDevice> devices;
  std::string error;
};

struct FakeDeviceHealth {
  std::string pool;
  std::string device;
  std::string health;  // "UNKNOWN", "HEALTHY", "UNHEALTHY"
  int64_t last_updated = 0;
};

enum class FakeDraApi { kChosen, kV1, kV1beta1 };

class FakeDraKubelet {
 public:
  explicit FakeDraKubelet(FakeDraKubeletOptions options);
  ~FakeDraKubelet();  // Stop()
  FakeDraKubelet(const FakeDraKubelet&) = delete;
  FakeDraKubelet& operator=(const FakeDraKubelet&) = delete;

  [[nodiscard]] common::Status Start();
  void Stop();
  // Stop, Start, wait up to `timeout` for `driver` to register again, then prepare again what was prepared: the
  // answers of that call (an error when the driver did not come back).
  [[nodiscard]] common::Result<std::map<std::string, FakePrepareResult>> Restart(const std::string& driver,
                                                                                 std::chrono::milliseconds timeout);

  // The last registration attempt of `driver` (a refused one too).
  [[nodiscard]] std::optional<FakeDraRegistration> registration(const std::string& driver) const;
  [[nodiscard]] int registrations(const std::string& driver) const;  // accepted ones since construction

  // Claim uid -> answer. An RPC error (or no registered plugin) is the error.
  [[nodiscard]] common::Result<std::map<std::string, FakePrepareResult>> NodePrepareResources(
      const std::string& driver, const std::vector<FakeClaim>& claims, FakeDraApi api = FakeDraApi::kChosen);
  // Claim uid -> error ("" when unprepared).
  [[nodiscard]] common::Result<std::map<std::string, std::string>> NodeUnprepareResources(
      const std::string& driver, const std::vector<FakeClaim>& claims, FakeDraApi api = FakeDraApi::kChosen);
  [[nodiscard]] std::vector<FakeClaim> prepared_claims(const std::string& driver) const;

  // The last list NodeWatchResources sent for `driver`, and how many lists it sent since its registration.
  [[nodiscard]] std::optional<std::vector<FakeDeviceHealth>> Health(const std::string& driver) const;
  [[nodiscard]] int health_updates(const std::string& driver) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpusched::testing
