#pragma once

// Preemptor: what a scheduler does to the cluster when it preempts. In production (adapters/k8s/PodPreemptor) the
// Eviction API, which honours PodDisruptionBudgets, and a patch of the preemptor's status.nominatedNodeName; in
// tests a fake that records the calls.

#include <string>

#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"

namespace gpusched::ports {

class Preemptor {
 public:
  virtual ~Preemptor() = default;
  // Evicts the pod (with its uid as precondition). A pod already gone is OK. A budget that does not allow the
  // disruption is an error whose message says so (the API server's 429).
  [[nodiscard]] virtual common::Status Evict(const std::string& ns, const std::string& name,
                                             const common::PodUid& uid) = 0;
  // Records on the pending pod the node it was nominated to (status.nominatedNodeName; "" clears it).
  [[nodiscard]] virtual common::Status Nominate(const std::string& ns, const std::string& name,
                                                const std::string& node) = 0;
};

}  // namespace gpusched::ports
