#pragma once

// What the interference-aware policy reads from the Snapshot: for the pod being placed, the predicted slowdowns on
// every GPU that already holds pods. The front end fills it before the cycle (sched/interference_forecast.h) from
// a ports::SlowdownModel and the application classes of the pods on each GPU, so the policy stays a pure function
// of (request, node view, snapshot).

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpusched/common/ids.h"

namespace gpusched::policy {

struct GpuInterference {
  int32_t residents = 0;         // pods already sharing this GPU (0 = empty: no interference)
  bool feasible = true;          // false: predicted not to fit in memory next to a resident
  double incoming = 1.0;         // predicted slowdown of the pod being placed on this GPU
  double residents_added = 0.0;  // Σ over residents of the slowdown the pod would add to each
  // The predicted sum of slowdowns the placement adds: the incoming pod's own plus what it adds to the residents.
  [[nodiscard]] double Cost() const { return incoming + residents_added; }
};

struct InterferenceForecast {
  std::string app;  // the incoming pod's application class; empty = unknown (the model's prior applies)
  // Per node, per GPU index. A node or GPU index not present holds no pods: an empty GPU.
  std::unordered_map<common::NodeName, std::vector<GpuInterference>> nodes;
  [[nodiscard]] const GpuInterference* Find(const common::NodeName& node, size_t gpu) const {
    auto it = nodes.find(node);
    if (it == nodes.end() || gpu >= it->second.size()) return nullptr;
    return &it->second[gpu];
  }
};

}  // namespace gpusched::policy
