#pragma once

// The agent's /metrics page: GPU samples as Prometheus text exposition 0.0.4 with dcgm-exporter's metric names,
// HELP texts, units and labels (k8s-gpu-protocols.md section 5.1), so dashboards and queries written for
// dcgm-exporter work unchanged, plus gpusched's own per-GPU gauges.
//
// Families, in this order, each with HELP and TYPE (all gauges, as in dcgm-exporter's default-counters.csv):
//   DCGM_FI_DEV_SM_CLOCK (MHz), DCGM_FI_DEV_MEM_CLOCK (MHz), DCGM_FI_DEV_GPU_TEMP (C), DCGM_FI_DEV_POWER_USAGE (W),
//   DCGM_FI_DEV_GPU_UTIL (%), DCGM_FI_DEV_MEM_COPY_UTIL (%), DCGM_FI_DEV_FB_FREE (MiB), DCGM_FI_DEV_FB_USED (MiB),
//   DCGM_FI_DEV_XID_ERRORS (the last XID, 0 = none),
//   gpusched_gpu_healthy (1/0), gpusched_gpu_allocated_milli (1000 = one GPU),
//   gpusched_gpu_allocated_memory_mib, and per container holding a share (for allocation by namespace and pod):
//   gpusched_pod_gpu_allocated_milli, gpusched_pod_gpu_allocated_memory_mib.
// A value the backend could not read (-1) leaves that GPU's line out of that family; a family with no line at all
// is left out with its HELP and TYPE.
//
// Labels, in dcgm-exporter's order: gpu="<index>", UUID, pci_bus_id (when known), device="nvidia<index>",
// modelName (NVML's product name, spaces kept, as dcgm-exporter does by default), then the host labels, then
// pod/namespace/container.
//   Host: dcgm-exporter called it `Hostname` until its May 2026 release and `hostname` since (protocols section 8
//   item 7). By default both are written with the same value, so queries and dashboards written for either
//   release select our series; a label pair costs a few bytes per line. HostnameLabels picks one, or none.
//   Pods (dcgm-exporter's --kubernetes mode): a GPU that the attribution gives pods gets pod, namespace and
//   container labels; a GPU without pods gets none (PromQL reads a missing label as "", so {pod=""} still selects
//   it, as with dcgm-exporter's empty values). A GPU shared by several pods (gpusched's fractional sharing) gets
//   one series per pod, each carrying the GPU's full values, which is what dcgm-exporter does for
//   time-sliced GPUs: `DCGM_FI_DEV_GPU_UTIL{pod="x"}` then answers "how busy is the GPU my pod is on" for every
//   pod, but `sum by (pod)` over a shared GPU counts the GPU once per pod; use `max by (UUID)` for device totals.
//   gpusched_gpu_* are per GPU, never per pod, so they never double-count; gpusched_pod_gpu_* carry each
//   container's own share, so `sum by (namespace)` is what a namespace holds.
//   gpusched's own series use Prometheus's snake_case label names: gpu, uuid, pci_bus_id, device, model_name,
//   hostname (and namespace, pod, container); only the DCGM_* series keep dcgm-exporter's UUID, modelName and
//   Hostname, for the dashboards written for it.
//
// Label values are escaped per the format (\ -> \\, " -> \", newline -> \n). Values print as the shortest
// decimal that reads back exactly; whole numbers print as integers ("1700000000", not "1.7e+09").

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/ids.h"
#include "gpusched/common/units.h"
#include "gpusched/ports/device_inventory.h"

namespace gpusched::agent {

// A container that holds (part of) a GPU.
struct PodRef {
  std::string namespace_name;
  std::string pod;
  std::string container;

  auto operator<=>(const PodRef&) const = default;
};

// Which pods hold each GPU (from the kubelet PodResources API or the pods' allocation annotations).
using PodAttribution = std::map<common::GpuUuid, std::vector<PodRef>>;

// One container's share of a GPU, from its pod's allocation annotation.
struct PodShare {
  PodRef ref;
  common::MilliGpu milli{0};
  common::MiB memory{0};
};

// What gpusched has allocated on one GPU, summed over its pods, and each container's share.
struct GpuAllocated {
  common::MilliGpu milli{0};
  common::MiB memory{0};
  std::vector<PodShare> pods;
};
using AllocationMap = std::map<common::GpuUuid, GpuAllocated>;

enum class HostnameLabels {
  kBoth,       // Hostname="h",hostname="h" (the default)
  kLegacy,     // Hostname only (dcgm-exporter before May 2026)
  kLowercase,  // hostname only (dcgm-exporter since May 2026)
  kNone,       // no host label (dcgm-exporter --no-hostname)
};

struct DcgmRenderOptions {
  std::string hostname;  // empty: no host label
  HostnameLabels hostname_labels = HostnameLabels::kBoth;
};

// Renders every family for `samples`. GPUs missing from `allocations` have 0 allocated.
[[nodiscard]] std::string RenderDcgmMetrics(std::span<const ports::GpuSample> samples,
                                            const PodAttribution& attribution, const AllocationMap& allocations,
                                            const DcgmRenderOptions& options);

// Appends `s` to `out` escaped for a label value.
void AppendEscapedLabelValue(std::string& out, std::string_view s);
// Appends the shortest exact decimal of `v` ("87", "312.25", "NaN", "+Inf").
void AppendMetricValue(std::string& out, double v);

}  // namespace gpusched::agent
