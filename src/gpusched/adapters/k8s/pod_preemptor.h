#pragma once

// PodPreemptor: ports::Preemptor over the API server.
//   Evict     POST /api/v1/namespaces/{ns}/pods/{name}/eviction with an Eviction (policy/v1 where the server has
//             it, policy/v1beta1 before 1.22) carrying the pod's uid as precondition and, when configured, a grace
//             period; the API server checks the pod's PodDisruptionBudgets and answers 429 when one does not allow
//             it. 404 (gone already) is OK.
//   Nominate  merge-patch of pods/{name}/status: {"status":{"nominatedNodeName": node}} (null clears it).
// PolicyApiVersion asks the server which policy group version it serves (PodDisruptionBudget and Eviction).

#include <optional>
#include <string>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/ports/preemptor.h"

namespace gpusched::adapters::k8s {

// "policy/v1" when GET /apis/policy/v1 answers, "policy/v1beta1" when the server does not know it (404); another
// failure is returned.
[[nodiscard]] common::Result<std::string> PolicyApiVersion(ApiClient& client);

class PodPreemptor : public ports::Preemptor {
 public:
  // grace_period_seconds: the victims' termination grace period; nullopt = each pod's own.
  PodPreemptor(ApiClient& client, std::string policy_api_version, std::optional<int64_t> grace_period_seconds)
      : client_(client), api_version_(std::move(policy_api_version)), grace_(grace_period_seconds) {}
  [[nodiscard]] common::Status Evict(const std::string& ns, const std::string& name,
                                     const common::PodUid& uid) override;
  [[nodiscard]] common::Status Nominate(const std::string& ns, const std::string& name,
                                        const std::string& node) override;

 private:
  ApiClient& client_;
  const std::string api_version_;
  const std::optional<int64_t> grace_;
};

}  // namespace gpusched::adapters::k8s
