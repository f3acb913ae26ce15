#pragma once

// Readers of the Alibaba openb trace (cluster-trace-gpu-v2023), fgd-benchmark.md §2.
//   node list: sn,cpu_milli,memory_mib,gpu,model
//   pod list:  name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,qos,pod_phase,creation_time,deletion_time,
//              scheduled_time]   (11 columns; the multigpuXX files have only the first 5)
// Columns are found by the header, so column order does not matter and unknown extra columns are ignored. A
// malformed row is an InvalidArgument "file:line:column: what", and nothing is returned.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/core/node.h"

namespace gpusched::sim {

struct TraceNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t gpus = 0;
  std::string model;
};

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int32_t num_gpu = 0;
  int64_t gpu_milli = 0;
  std::vector<std::string> gpu_spec;  // allowed models
  // creation_time and deletion_time (seconds) where the list has them; -1 otherwise.
  int64_t creation_s = -1;
  int64_t deletion_s = -1;
  std::string qos;  // LS, BE, Burstable, Guaranteed where the list has it; empty otherwise
};

// Parse from text; `source` names the input in errors.
[[nodiscard]] common::Result<std::vector<TraceNode>> ParseNodeList(std::string_view text, std::string_view source);
[[nodiscard]] common::Result<std::vector<TracePod>> ParsePodList(std::string_view text, std::string_view source);
[[nodiscard]] common::Result<std::vector<TraceNode>> ReadNodeList(const std::string& path);
[[nodiscard]] common::Result<std::vector<TracePod>> ReadPodList(const std::string& path);

// GPU memory by openb model (MiB); 0 for the undisclosed G2/G3 and unknown models.
[[nodiscard]] int64_t ModelMemoryMib(std::string_view model);

[[nodiscard]] core::Node ToNode(const TraceNode& n);
// gpu_milli is clamped to 0..1000 as KSS does; num_gpu >= 2 or gpu_milli == 1000 means whole, exclusive GPUs;
// gpu_spec becomes the allowed models.
[[nodiscard]] core::PodRequest ToPodRequest(const TracePod& p);

}  // namespace gpusched::sim
