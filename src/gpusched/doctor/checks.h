#pragma once

// The checks of `gpusched doctor`, as pure functions of what was fetched from the API server: each takes the
// objects (or the error the fetch returned) and says what it found and what to fix. No I/O, no clock (`now` is
// passed in), so every finding is unit-tested without a cluster (checks_test.cc). doctor.h does the fetching.
//
// A fetch is a Result<json>: the object, or the Status of a failed request (NotFound, PermissionDenied, a
// transport error, ... : adapters/k8s/api_errors.h). A PermissionDenied fetch is a warning ("could not check"),
// never a failure: doctor may run with less than cluster-admin, and what it cannot read is not broken.

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/common/status.h"
#include "gpusched/doctor/expected_setup.h"
#include "gpusched/doctor/report.h"

namespace gpusched::doctor {

using Fetched = common::Result<nlohmann::json>;
using Clock = std::chrono::system_clock;

// Check names, as printed.
inline constexpr std::string_view kCheckApiServer = "api-server";
inline constexpr std::string_view kCheckCrd = "crd";
inline constexpr std::string_view kCheckWebhookConfig = "webhook-config";
inline constexpr std::string_view kCheckWebhookCa = "webhook-ca";
inline constexpr std::string_view kCheckWebhookDryRun = "webhook-dry-run";
inline constexpr std::string_view kCheckNodeInventory = "node-inventory";
inline constexpr std::string_view kCheckDevicePlugin = "device-plugin";
inline constexpr std::string_view kCheckAgentReadiness = "agent-readiness";
inline constexpr std::string_view kCheckLeaderLease = "leader-lease";
inline constexpr std::string_view kCheckRbac = "rbac";

// A caBundle certificate that expires within this long is a warning.
inline constexpr std::chrono::hours kCertificateWarnBefore{24 * 30};

// GET /version. Anything but a version is a FAIL and the run stops there: "cannot reach the API server at <url>:
// <cause>" for a transport failure, "the API server at <url> refused the credentials" for 401/403.
[[nodiscard]] Finding CheckApiServer(std::string_view url, const Fetched& version);

// GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/<name>: present, and condition Established True.
[[nodiscard]] Finding CheckCrd(const ObjectRef& crd, const Fetched& object, std::string_view mode);

// GET of a Mutating- or ValidatingWebhookConfiguration: one webhook-config line (present, its webhooks), then,
// when present, one webhook-ca line: every webhook has a caBundle, each holds PEM certificates, and every one of
// them is valid at `now` (expired, not yet valid: FAIL; expiring within kCertificateWarnBefore: warn).
[[nodiscard]] std::vector<Finding> CheckWebhookConfiguration(const ObjectRef& config, const Fetched& object,
                                                             Clock::time_point now, std::string_view mode);

// The probe pod that the dry run creates in `ns`: it asks for GPU memory alone, so that the mutating webhook, when
// it runs, adds gpusched.io/gpu to it (the pod comes back as it would have been stored).
[[nodiscard]] nlohmann::json DryRunPod(std::string_view ns);

// POST /api/v1/namespaces/<ns>/pods?dryRun=All of DryRunPod: the API server runs the admission webhooks and stores
// nothing. Its error is the finding ("failed calling webhook ...: x509 ...", "connection refused"); a pod that comes
// back without gpusched.io/gpu was admitted without the mutating webhook (failurePolicy Ignore hides its error).
[[nodiscard]] Finding CheckDryRun(std::string_view ns, const Fetched& created);

// GET /api/v1/nodes. node-inventory: every GPU node (one with the inventory annotation, allocatable
// nvidia.com/gpu, or a GPU node label the agent's DaemonSet selects) carries gpusched.io/gpus, and it decodes.
// device-plugin: every node with the inventory advertises the agent's device plugin resources (gpusched.io/gpu,
// keti.com/mpsgpu) in status.allocatable.
[[nodiscard]] std::vector<Finding> CheckNodes(const Fetched& nodes);

// The agent pods and their /readyz. `may_proxy`: the SelfSubjectAccessReview of get pods/proxy in the agent's
// namespace (its status.allowed); `pods`: the pod list there by the DaemonSet's selector; `readyz`: the answer of
// each running pod's /readyz through the API server's pod proxy, by pod name. /readyz says "ok", or 503 and what
// keeps the node from handing out GPUs (the MPS control daemon not answering, among others): that is the finding.
[[nodiscard]] Finding CheckAgentReadiness(
    const AgentRef& agent, const Fetched& may_proxy, const Fetched& pods,
    const std::map<std::string, common::Result<adapters::k8s::RawResponse>>& readyz);

// GET of the scheduler's Lease: held (holderIdentity set) and renewed within its leaseDurationSeconds of `now`.
[[nodiscard]] Finding CheckLease(const LeaseRef& lease, const Fetched& object, Clock::time_point now);

// The SubjectAccessReview that asks whether the ServiceAccount may do `grant`.
[[nodiscard]] nlohmann::json SubjectAccessReviewFor(const ServiceAccountGrants& sa, const Grant& grant);

// One line per ServiceAccount: the SubjectAccessReview answers, one per grant, in sa.grants' order. A refused grant
// is named; a review the API server would not create is a warning.
[[nodiscard]] Finding CheckRbac(const ServiceAccountGrants& sa, const std::vector<Fetched>& reviews,
                                std::string_view mode);

// "3s", "4m10s", "2h5m", "3d4h": how long ago, for messages.
[[nodiscard]] std::string FormatAge(Clock::duration d);

}  // namespace gpusched::doctor
