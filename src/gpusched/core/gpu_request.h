#pragma once

// What a pod asks for. A GpuRequest is one container's GPU demand; a PodRequest is the pod's node resources plus
// the GpuRequests of its containers that want GPUs (containers without GPUs are folded into cpu/memory).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu.h"
#include "gpusched/core/share_within.h"

namespace gpusched::core {

struct GpuRequest {
  std::string container;
  int32_t count = 0;                  // number of GPUs
  common::MilliGpu milli_per_gpu{0};  // compute per GPU, 1..1000
  common::MiB memory_per_gpu{0};      // memory per GPU; 0 = no memory demand
  bool exclusive = false;             // whole GPUs that nobody else may share
  std::vector<std::string> models;    // allowed GPU models; empty = any
  // A share of each GPU's own memory in percent (HAMi's nvidia.com/gpumem-percentage), 1..100; 0 = none, and
  // memory_per_gpu applies. Resolved per GPU by MemoryOn.
  int32_t memory_percent = 0;
  // Who this container may share a GPU with (share_within.h: 0 = anyone); the same for every container of a pod.
  ShareGroup share_group = 0;

  // A fraction of one GPU that others may share (the FGD paper's "GPU-sharing pod").
  [[nodiscard]] bool IsSharing() const { return count == 1 && !exclusive && milli_per_gpu < common::kGpuMilli; }
  [[nodiscard]] bool AllowsModel(std::string_view model) const;
  // The memory this request takes on `gpu`: memory_percent of its memory (rounded up) when set, else
  // memory_per_gpu.
  [[nodiscard]] common::MiB MemoryOn(const Gpu& gpu) const;
  bool operator==(const GpuRequest&) const = default;
};

// What the pod asks of the links between its GPUs (annotation gpusched.io/topology; docs/topology.md).
enum class TopologyNeed : int8_t {
  kPreferred = 0,  // the best-connected GPUs the node has (the default)
  kRequired,       // every multi-GPU container on GPUs all NVLink-joined, or not on this node
  kNone,           // the lowest-numbered free GPUs, links ignored
};

struct PodRequest {
  common::PodUid uid;
  std::string name;  // namespace/name, for messages
  common::MilliCpu cpu{0};
  common::MiB memory{0};
  std::vector<GpuRequest> containers;  // only the containers that request GPUs
  int32_t priority = 0;
  bool preempt_never = false;  // spec.preemptionPolicy: Never (it waits for room, never evicts others)
  // The application class (annotation gpusched.io/app or a configured label): what the interference model knows
  // the workload as. Empty = unknown.
  std::string app;
  // Placement constraints (sched/node_predicates.h). node_name: spec.nodeName of a pod that names its node.
  std::string node_name;
  std::map<std::string, std::string> node_selector;
  std::vector<NodeSelectorTerm> required_node_affinity;  // ORed; empty = no requirement
  std::vector<Toleration> tolerations;
  // Requests of other resources (ephemeral-storage, hugepages-*, extended resources; effective pod-level amounts in
  // base units) and host ports (sched::FitNodeResources checks both).
  std::map<std::string, int64_t> scalars;
  std::vector<HostPort> host_ports;
  // What inter-pod constraints read (sched/inter_pod.h): the pod's namespace and labels, its required pod affinity
  // and anti-affinity terms, and its DoNotSchedule topology spread constraints.
  std::string namespace_;
  std::map<std::string, std::string> labels;
  std::vector<PodAffinityTerm> pod_affinity, pod_anti_affinity;
  std::vector<TopologySpreadConstraint> spread;
  // The gang the pod belongs to (a name within its namespace; empty = none) and how many of the group's members
  // are placed together or not at all (1 = no gang rule).
  std::string pod_group;
  int32_t min_available = 0;
  TopologyNeed topology = TopologyNeed::kPreferred;

  [[nodiscard]] bool RequestsGpu() const { return !containers.empty(); }
  [[nodiscard]] bool HasInterPodConstraints() const {
    return !pod_affinity.empty() || !pod_anti_affinity.empty() || !spread.empty();
  }
  // Σ count over containers.
  [[nodiscard]] int32_t GpuCount() const;
  // The pod's share group (its containers all carry the same one; 0 without GPU containers).
  [[nodiscard]] ShareGroup GpuShareGroup() const { return containers.empty() ? 0 : containers.front().share_group; }
  // Σ count × milli over containers: the pod's total GPU compute.
  [[nodiscard]] common::MilliGpu TotalGpuMilli() const;
};

// The pod reduced to the FGD paper's shape {cpu, gpu_count, gpu_milli, models}: what the benchmark policies score
// on. For a pod with one GPU container this is exact; several GPU containers are summed (count) and take the
// largest per-GPU share.
struct PodShape {
  common::MilliCpu cpu{0};
  int32_t gpu_count = 0;
  common::MilliGpu gpu_milli{0};
  const std::vector<std::string>* models = nullptr;  // null or empty = any

  [[nodiscard]] bool IsSharing() const { return gpu_count == 1 && gpu_milli < common::kGpuMilli; }
  [[nodiscard]] bool AllowsModel(std::string_view model) const;
};

PodShape ShapeOf(const PodRequest& pod);

}  // namespace gpusched::core
