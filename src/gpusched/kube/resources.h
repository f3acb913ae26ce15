#pragma once

// From a Kubernetes Pod to the core's PodRequest: every GPU resource name of ARCHITECTURE.md section 3, the
// compatibility names of gpushare, elastic-gpu, HAMi and KETI included.
//
// Per container (requests, falling back to limits, as Kubernetes copies extended-resource limits to requests):
//   gpusched.io/gpu N, gpusched.io/gpu-memory MiB, gpusched.io/gpu-core %
//       N GPUs (1 when only memory or core is given), each with core% of compute (1..100) and MiB of memory.
//       Neither memory nor core: N whole exclusive GPUs. core 100 without memory: exclusive. Memory without core:
//       a memory share with no compute reservation (as gpushare does).
//   nvidia.com/gpu N                      N whole exclusive GPUs (NVIDIA device plugin)
//   nvidia.com/gpu N + nvidia.com/gpumem MiB | nvidia.com/gpumem-percentage % | nvidia.com/gpucores %
//       HAMi: N GPUs with that memory (or share of each GPU's memory) and compute; no cores and no memory (or
//       100 %) means exclusive, as HAMi's webhook defaults gpucores to 100.
//   aliyun.com/gpu-mem G                  one shared GPU with G GiB of memory (gpushare)
//   elasticgpu.io/gpu-core C, elasticgpu.io/gpu-memory MiB (also the elasticgpu.com/ spelling)
//       C >= 100: C/100 whole exclusive GPUs (C must be a multiple of 100; memory ignored), else one GPU with C%.
//   keti.com/mpsgpu N                     N GPUs shared through MPS, never exclusive, each with the gpusched.io
//                                         core and memory when given (a missing one: none of it), else an equal
//                                         share: ResourceConfig::keti_share_percent of its compute and memory.
// Exclusive (whole GPUs nobody shares): nvidia.com/gpu alone; gpusched.io/gpu alone or with core 100 and no memory;
// HAMi without cores and memory (or at 100 % of both); elastic-gpu core >= 100; Genius without memory labels. A share
// of 100 % compute with a memory amount (gpusched.io core 100 + memory, HAMi gpucores 100 + gpumem) is a share.
//   labels genius/gpu-number, genius/gpu-memory-each | genius/gpu-memory-total, genius/gpu-model (Genius), on a pod
//                                         that asks for no GPU resource (ResourceConfig::genius_labels)
// aliyun.com/gpu-mem counts GiB unless ResourceConfig::gpushare_memory_unit_mib says MiB.
// Mixing families in one container (say nvidia.com/gpu with gpusched.io/gpu-core) is rejected, naming the
// container and both resources; so are core above 100, zero or negative amounts, and a fractional GPU count.
// One exception: gpusched.io/gpu alone next to gpushare, elastic-gpu or HAMi names without nvidia.com/gpu is the
// request's device count (what gpusched's webhook adds so that the kubelet calls the device plugin); it must equal
// the GPUs that family asks for, and the request is decoded as that family.
//
// Pod-level: CPU and memory are Kubernetes' effective requests, max(sum over containers, largest init
// container). Init containers that ask for GPUs reuse the GPUs of an app container that covers them (the kubelet's
// device manager does the same); one that no app container covers gets its own entry, conservatively. Models
// come from the annotation gpusched.io/gpu-model ("A100-SXM4-80GB|H100"); priority from spec.priority, else the
// label gpusched.io/priority. The application class (PodRequest::app, what the interference model knows the workload
// as) comes from the annotation gpusched.io/app, else from the label ResourceConfig::app_label names.

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::kube {

inline constexpr std::string_view kResGpu = "gpusched.io/gpu";
inline constexpr std::string_view kResGpuMemory = "gpusched.io/gpu-memory";
inline constexpr std::string_view kResGpuCore = "gpusched.io/gpu-core";
inline constexpr std::string_view kResNvidiaGpu = "nvidia.com/gpu";
inline constexpr std::string_view kResHamiMem = "nvidia.com/gpumem";
inline constexpr std::string_view kResHamiMemPercent = "nvidia.com/gpumem-percentage";
inline constexpr std::string_view kResHamiCores = "nvidia.com/gpucores";
inline constexpr std::string_view kResAliyunMem = "aliyun.com/gpu-mem";
inline constexpr std::string_view kResElasticCore = "elasticgpu.io/gpu-core";
inline constexpr std::string_view kResElasticMemory = "elasticgpu.io/gpu-memory";
inline constexpr std::string_view kResElasticCoreCom = "elasticgpu.com/gpu-core";
inline constexpr std::string_view kResElasticMemoryCom = "elasticgpu.com/gpu-memory";
inline constexpr std::string_view kResKetiMps = "keti.com/mpsgpu";
// The countable GPU resources, whose devices the agent's device plugin advertises and hands out.
inline constexpr std::string_view kCountableGpuResources[] = {kResGpu, kResNvidiaGpu, kResKetiMps};

inline constexpr std::string_view kAnnotationGpuModel = "gpusched.io/gpu-model";
inline constexpr std::string_view kAnnotationPolicy = "gpusched.io/policy";
inline constexpr std::string_view kLabelPriority = "gpusched.io/priority";
inline constexpr std::string_view kAnnotationApp = "gpusched.io/app";
// "required", "preferred" (the default) or "none": what the pod asks of the links between its GPUs.
inline constexpr std::string_view kAnnotationTopology = "gpusched.io/topology";
// Gangs: the group's name (in the pod's namespace) and how many members must be placed together.
inline constexpr std::string_view kAnnotationPodGroup = "gpusched.io/pod-group";
inline constexpr std::string_view kAnnotationMinAvailable = "gpusched.io/min-available";
// The coscheduling plugin's label naming a pod's PodGroup (scheduler-plugins); its name is read as the group's.
inline constexpr std::string_view kLabelCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group";
inline constexpr int32_t kMaxMinAvailable = 10000;
// Genius's pod labels (ResourceConfig::genius_labels).
inline constexpr std::string_view kLabelGeniusGpuNumber = "genius/gpu-number";
inline constexpr std::string_view kLabelGeniusMemoryEach = "genius/gpu-memory-each";
inline constexpr std::string_view kLabelGeniusMemoryTotal = "genius/gpu-memory-total";
inline constexpr std::string_view kLabelGeniusModel = "genius/gpu-model";
inline constexpr std::string_view kLabelGeniusPriority = "genius/priority";

// Every GPU resource name gpusched understands.
const std::set<std::string, std::less<>>& AllGpuResourceNames();

struct ResourceConfig {
  // Names that are honoured; a request for another name is ignored as if absent. Default: all.
  std::set<std::string, std::less<>> enabled = AllGpuResourceNames();
  [[nodiscard]] bool Enabled(std::string_view name) const { return enabled.contains(name); }
  // A label that names the pod's application class when the annotation gpusched.io/app is absent (clusters that
  // already label workloads, e.g. "app.kubernetes.io/name"); empty = the annotation only.
  std::string app_label;
  // aliyun.com/gpu-mem's unit in MiB: 1024 (GiB, as gpushare's device plugin counts by default) or 1 (MiB, as
  // gpushare runs with --memory-unit=MiB, e.g. in Co-scheML's deployment).
  int64_t gpushare_memory_unit_mib = 1024;
  // Read Genius's labels on pods that ask for no GPU resource: genius/gpu-number (GPUs, default 1),
  // genius/gpu-memory-each or genius/gpu-memory-total (MiB; none: whole exclusive GPUs), genius/gpu-model (one
  // model); genius/priority when the pod has no spec.priority and no gpusched.io/priority label.
  bool genius_labels = true;
  // Who may share a GPU with whom (core/share_within.h): sets every GPU request's share group.
  core::ShareWithin share_within = core::ShareWithin::kAny;
  // The share of each GPU, in percent of its compute and of its memory, that keti.com/mpsgpu asks for without
  // gpusched.io/gpu-core or -memory (1..100): 10 is the share of one of the agent's default 10 devices per GPU.
  int32_t keti_share_percent = 10;
};

// Decodes the pod's request (uid, "namespace/name", CPU, memory, GPU containers, priority, models). Errors are
// InvalidArgument and name the container and resource.
common::Result<core::PodRequest> DecodePodRequest(const nlohmann::json& pod, const ResourceConfig& config);

// What a bound pod holds of its node besides GPUs, with DecodePodRequest's rules (containers summed, init
// containers' maximum): CPU, memory, other resources and host ports. Reads only spec.containers and
// spec.initContainers, so a pod whose other fields do not decode is still charged. Errors name the container.
struct PodResources {
  common::MilliCpu cpu{0};
  common::MiB memory{0};
  std::map<std::string, int64_t> scalars;
  std::vector<core::HostPort> host_ports;
};
[[nodiscard]] common::Result<PodResources> DecodePodResources(const nlohmann::json& pod);

// The pod's application class: the annotation gpusched.io/app, else the label `app_label` names (when not
// empty), else "" (unknown: the interference model's prior). An empty or non-string value counts as absent.
// The pod's priority: spec.priority, else the label gpusched.io/priority, else genius/priority (with
// genius_labels); 0 when none is given. A label that is not an integer is InvalidArgument naming it.
[[nodiscard]] common::Result<int32_t> DecodePodPriority(const nlohmann::json& pod, bool genius_labels);

[[nodiscard]] std::string DecodePodApp(const nlohmann::json& pod, std::string_view app_label);

// The gang a pod belongs to: the annotation gpusched.io/pod-group (else the label scheduling.x-k8s.io/pod-group)
// names the group within the pod's namespace; the annotation gpusched.io/min-available (1..10000, default 1) is
// how many of its members are placed together or not at all. No group: {"", 0}. Errors (InvalidArgument, naming
// the annotation): min-available that is not an integer in range, or given without a group.
struct PodGroupRef {
  std::string name;
  int32_t min_available = 0;
  // Named by the coscheduling label, without min-available: the minMember of its PodGroup object applies, where
  // that API is served (min_available is then the default 1 until it is known).
  bool coscheduling = false;
};
[[nodiscard]] common::Result<PodGroupRef> DecodePodGroup(const nlohmann::json& pod);

// The coscheduling plugin's PodGroup (scheduling.x-k8s.io/v1alpha1, scheduler-plugins), as far as gpusched reads
// it: its namespace, name and spec.minMember (absent or 0: 1, no gang). Read only; gpusched never requires it.
inline constexpr const char* kCoschedulingApi = "/apis/scheduling.x-k8s.io/v1alpha1";
inline constexpr const char* kPodGroupsPath = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups";
struct CoschedulingPodGroup {
  std::string namespace_, name;
  int32_t min_member = 1;
};
// Errors (InvalidArgument, naming the field): no metadata.name or namespace, a minMember that is not an integer
// from 0 to 10000.
[[nodiscard]] common::Result<CoschedulingPodGroup> DecodeCoschedulingPodGroup(const nlohmann::json& object);

// One container's GPU request (`container` is an element of spec.containers or spec.initContainers), by the rules
// above; nullopt when it asks for no enabled GPU resource. The pod-level parts (models, init-container covering)
// are DecodePodRequest's. Errors are InvalidArgument and name the container and resource.
common::Result<std::optional<core::GpuRequest>> DecodeContainerGpuRequest(const nlohmann::json& container,
                                                                          const ResourceConfig& config);

// Whether the pod asks for any enabled GPU resource (managedResources' IsInterested, for requests or limits).
bool RequestsGpuResource(const nlohmann::json& pod, const ResourceConfig& config);

}  // namespace gpusched::kube
