#pragma once

// What `gpusched webhook` admits and changes: who may write gpusched.io/allocation, which GPU resource names count,
// and which namespaces' GPU pods get a schedulerName. Parsed from YAML; every key is optional and unknown keys are
// errors (a typo must not silently fall back to a default):
//
//   allowedUsers:                  users that may set, change or remove gpusched.io/allocation (on pods and in
//   - system:serviceaccount:kube-system:gpusched-extender      Bindings). Replaces the default, which is the two
//   - system:serviceaccount:kube-system:gpusched-scheduler     ServiceAccounts of deploy/ (listed here).
//   allowedGroups: []              ... or users in one of these groups (default none)
//   schedulerName: gpusched        GPU pods of `namespaces` that leave spec.schedulerName empty or
//   namespaces: [ml, research]     default-scheduler get this one (both keys or neither)
//   schedulerNames:                the same per namespace; a namespace may not be in both forms
//     vision: gpusched-vision
//   resourceNames: [...]           GPU resource names to honour (as the extender's resourceNames); default: all

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"
#include "gpusched/kube/resources.h"
#include "gpusched/webhook/admission_review.h"

namespace gpusched::webhook {

// deploy/base/extender/rbac.yaml's extender ServiceAccount, and the standalone scheduler's (deploy/ names it the same
// way).
inline constexpr std::string_view kExtenderUser = "system:serviceaccount:kube-system:gpusched-extender";
inline constexpr std::string_view kSchedulerUser = "system:serviceaccount:kube-system:gpusched-scheduler";

struct WebhookConfig {
  std::vector<std::string> allowed_users = {std::string(kExtenderUser), std::string(kSchedulerUser)};
  std::vector<std::string> allowed_groups;
  std::map<std::string, std::string, std::less<>> scheduler_names;  // namespace -> schedulerName
  kube::ResourceConfig resources;

  // Whether `user` may write gpusched.io/allocation.
  [[nodiscard]] bool MayWriteAllocation(const UserInfo& user) const;
  // Whether the pod carries Genius's GPU request labels (genius/gpu-number, -memory-each, -memory-total) and they
  // are read (resources.genius_labels): both webhooks treat it as a GPU pod.
  [[nodiscard]] bool HasGeniusGpuLabels(const nlohmann::json& pod) const;
};

// Parses YAML text; `source` names the file in errors.
common::Result<WebhookConfig> ParseWebhookConfig(const std::string& yaml, const std::string& source);

}  // namespace gpusched::webhook
