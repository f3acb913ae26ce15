#pragma once

// Kubernetes Pod and Node objects as the scheduler needs them: the pod's identity and life-cycle fields, and the
// node's capacity and GPUs.
//
// A node's GPUs come from the annotation gpusched.io/gpus (the agent's inventory, see annotations.h); without
// it, from the nvidia.com/gpu capacity and GPU feature discovery's labels nvidia.com/gpu.product and
// nvidia.com/gpu.memory (MiB). Those GPUs have no UUID; the product loses its "NVIDIA-" prefix so that
// "NVIDIA-A100-SXM4-80GB" and an inventory's "A100-SXM4-80GB" are the same model.

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/node.h"

namespace gpusched::kube {

inline constexpr std::string_view kAnnotationGpus = "gpusched.io/gpus";
inline constexpr std::string_view kAnnotationAllocation = "gpusched.io/allocation";
inline constexpr std::string_view kLabelGpuProduct = "nvidia.com/gpu.product";
inline constexpr std::string_view kLabelGpuMemory = "nvidia.com/gpu.memory";

struct PodMeta {
  std::string namespace_;
  std::string name;
  common::PodUid uid;
  std::string resource_version;
  std::string creation_timestamp;  // metadata.creationTimestamp, RFC 3339 as the API server wrote it
  std::string node_name;           // spec.nodeName; empty while unscheduled
  std::string scheduler_name;      // spec.schedulerName
  std::string phase;               // status.phase
  bool deleting = false;           // metadata.deletionTimestamp is set
  std::map<std::string, std::string> annotations;
  std::map<std::string, std::string> labels;

  [[nodiscard]] std::string Key() const { return namespace_ + "/" + name; }
  // Succeeded or Failed: its resources are free again.
  [[nodiscard]] bool Terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  [[nodiscard]] const std::string* Annotation(std::string_view key) const;
};

common::Result<PodMeta> DecodePodMeta(const nlohmann::json& pod);

// The node's name, allocatable CPU, memory and pods, and GPUs (see above). A malformed gpusched.io/gpus annotation is
// an error naming the node.
common::Result<core::Node> DecodeNode(const nlohmann::json& node);

// MicroTime as the API writes it ("2026-11-25T15:04:05.123456Z"), and back (also without the fraction; an offset
// other than Z is accepted). Milliseconds since the epoch.
[[nodiscard]] std::string FormatMicroTime(int64_t wall_ms);
[[nodiscard]] common::Result<int64_t> ParseMicroTime(const std::string& text);

}  // namespace gpusched::kube
