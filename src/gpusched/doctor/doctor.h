#pragma once

// RunDoctor: fetches what the checks of checks.h need through the API client and returns their findings, in this
// order: api-server (when it fails, nothing else is tried), crd, webhook-config and webhook-ca, webhook-dry-run,
// node-inventory and device-plugin, agent-readiness, leader-lease, rbac. Each check runs only where the mode
// installs what it checks (ExpectedSetup: no webhook in mode agent, a leader Lease in mode scheduler only).
//
// Read-only: GETs, SubjectAccessReviews and SelfSubjectAccessReviews (creating a review stores nothing), one
// server-side dry-run create of a pod (?dryRun=All: admission runs, nothing is stored), and GETs of the agents'
// readiness endpoint through the API server's pod proxy (only when a SelfSubjectAccessReview says the caller may).
// Every request is bounded by the client's request_timeout (ClientConfig).

#include <string>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/doctor/expected_setup.h"
#include "gpusched/doctor/report.h"

namespace gpusched::doctor {

struct DoctorOptions {
  std::string namespace_ = "default";  // where the dry-run GPU pod is created
};

[[nodiscard]] Report RunDoctor(adapters::k8s::ApiClient& client, const ExpectedSetup& setup,
                               const DoctorOptions& options);

}  // namespace gpusched::doctor
