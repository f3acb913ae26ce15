#pragma once

// GPU queues, the domain part: the amounts a queue accounts (GpuAmount: whole GPUs, GPU compute, GPU memory), what
// a pod asks of its queue (DemandOf), a queue's declaration (QueueSpec, from the GpuQueue object) and the rules a
// set of declarations must follow (ValidateQueues). The accounting over time is sched/gpu_queues.h; decoding the
// GpuQueue object is kube/gpu_queue.h.
//
// Three dimensions, each accounted on its own:
//   gpus     whole GPUs: Σ count of the containers that take whole GPUs (exclusive, or compute 1000 per GPU)
//   milli    GPU compute: Σ count × compute per GPU, a whole GPU as 1000
//   memory   GPU memory in MiB of shared GPUs: Σ count × memory per GPU of the containers that share (0 when they
//            name none); a whole GPU counts in gpus and milli only. A placed pod counts what its allocation holds
//            (the same, except that a share of memory asked in percent counts the MiB it came to).

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/core/allocation.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::core {

// The label on a pod that names its GPU queue, and the queue a pod's labels name (empty when none).
inline constexpr const char* kQueueLabel = "gpusched.io/queue";
inline std::string QueueLabel(const std::map<std::string, std::string>& labels) {
  auto it = labels.find(kQueueLabel);
  return it != labels.end() ? it->second : std::string();
}

struct GpuAmount {
  static constexpr int64_t kUnlimited = std::numeric_limits<int64_t>::max();
  int64_t gpus = 0;
  int64_t milli = 0;
  int64_t memory_mib = 0;

  static GpuAmount Unlimited() { return {kUnlimited, kUnlimited, kUnlimited}; }
  [[nodiscard]] bool IsZero() const { return gpus == 0 && milli == 0 && memory_mib == 0; }
  // Every dimension of *this is at most that of `other`.
  [[nodiscard]] bool FitsIn(const GpuAmount& other) const {
    return gpus <= other.gpus && milli <= other.milli && memory_mib <= other.memory_mib;
  }
  GpuAmount& operator+=(const GpuAmount& o);  // saturating at kUnlimited
  GpuAmount& operator-=(const GpuAmount& o);  // kUnlimited stays kUnlimited
  friend bool operator==(const GpuAmount&, const GpuAmount&) = default;
};
GpuAmount operator+(GpuAmount a, const GpuAmount& b);
GpuAmount operator-(GpuAmount a, const GpuAmount& b);
// "gpus=2 milli=2500 memory=8192Mi" (unlimited dimensions as "∞").
std::string ToString(const GpuAmount& a);

// What a pod asks of its queue (see the dimensions above), and what a placed pod holds.
GpuAmount DemandOf(const PodRequest& pod);
GpuAmount DemandOf(const Allocation& allocation);

inline constexpr const char* kDefaultQueue = "default";
inline constexpr int kMaxQueueDepth = 2;

struct QueueSpec {
  std::string name;
  std::string parent;                   // empty: a top-level queue
  std::vector<std::string> namespaces;  // the namespaces whose pods it takes, the only ones its label admits
  GpuAmount guaranteed;
  GpuAmount limit = GpuAmount::Unlimited();
  double weight = 1;  // share of what is beyond guarantees, > 0
};

// A queue as its accounting stands (sched::GpuQueues::Status): what the GpuQueue's status and the queue metrics
// report.
struct QueueStatus {
  std::string name, parent;
  GpuAmount guaranteed, limit, allocated, pending, fair_share;
  double weight = 1;
  double rank = 0;  // allocated / fair share, the dominant dimension
  size_t running_pods = 0, pending_pods = 0;
  uint64_t reclaimed_pods = 0;  // its pods evicted to give a guarantee back
  bool declared = false;        // from a spec (the implicit default queue is not)
};

// Why each rejected queue was rejected; the others are valid together. Rules: a name; weight > 0; no negative
// amount; guaranteed within limit in every dimension; the parent exists, is top level, and its guarantee covers the
// sum of its children's; a namespace served by one queue only (the first by name keeps it). A parent may list
// namespaces: its pods must then name one of its children by label (the parent takes no pods itself), and every
// child admits them (sched::GpuQueues::JoinRefusal).
std::map<std::string, std::string> ValidateQueues(const std::vector<QueueSpec>& specs);

// Why a pod of `namespace_` may not join the queue named `queue` by its label gpusched.io/queue; empty when it may.
// `spec` is that queue's declaration (null: nobody declared it), `parent` its parent's (null: none), `serving` the
// queue that serves the namespace ("" when none). The rule, one for the scheduler and the admission webhook:
//   * a declared queue admits the namespaces its spec.namespaces or its parent's list;
//   * the default queue admits the namespaces no declared queue serves (declared, also those it lists);
//   * a queue nobody declared (other than default) is not judged here: the scheduler keeps such a pod waiting
//     ("queue x does not exist") and judges it once the queue exists.
// So a label moves a pod among the queues its namespace was given, never into another team's queue nor out of its
// own queue's limit into the default queue.
std::string QueueJoinRefusal(std::string_view queue, const QueueSpec* spec, const QueueSpec* parent,
                             std::string_view serving, std::string_view namespace_);

}  // namespace gpusched::core
