#pragma once

// What a mode of deploy/ installs, as `gpusched doctor` checks it: read from the manifests compiled into the binary
// (deploy_files.h), never from a second list that could drift from them.
//
// A mode is an overlay: deploy/scheduler, deploy/extender or deploy/agent. Its kustomization.yaml's `resources`
// are followed (a directory with a kustomization.yaml is entered, a file is read), and of the documents found:
//   CustomResourceDefinition                       -> crds (by metadata.name)
//   Mutating/ValidatingWebhookConfiguration        -> webhook_configurations
//   ServiceAccount + (Cluster)RoleBinding + rules  -> service_accounts, each with one Grant per verb x resource x
//                                                     resourceName of every rule bound to it (a RoleBinding's
//                                                     grants hold in its namespace; a ClusterRoleBinding's
//                                                     cluster-wide). A role that is not in the files (a
//                                                     bootstrap role such as system:kube-scheduler) is skipped.
//   ConfigMap gpusched-scheduler, key scheduler.yaml, leaderElection (enabled) -> lease
//   DaemonSet gpusched-agent                       -> agent: namespace, pod selector, readiness probe path and port
// Errors (a resource missing from the embedded files, malformed YAML) name the file; they mean the binary was
// built from a broken tree, and the tests catch them.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/doctor/deploy_files.h"

namespace gpusched::doctor {

struct Grant {
  std::string verb, group, resource, subresource;
  std::string name;        // one of the rule's resourceNames; "" = any object
  std::string namespace_;  // where it holds; "" = every namespace and cluster-scoped objects
  std::string role;        // "ClusterRole gpusched-scheduler", for messages

  // "create pods/eviction", "get leases.coordination.k8s.io gpusched-scheduler in kube-system"
  [[nodiscard]] std::string Describe() const;
  auto operator<=>(const Grant&) const = default;
};

struct ServiceAccountGrants {
  std::string namespace_, name;
  std::string file;  // the manifest that defines it
  std::vector<Grant> grants;

  // system:serviceaccount:<namespace>:<name>
  [[nodiscard]] std::string Username() const;
};

struct ObjectRef {
  std::string kind, namespace_, name;
  std::string file;
};

struct LeaseRef {
  std::string namespace_, name;
  int64_t duration_seconds = 15;
  std::string file;
};

struct AgentRef {
  std::string namespace_;
  std::string label_selector;  // "app.kubernetes.io/name=gpusched-agent"
  std::string readiness_path = "/readyz";
  int port = 0;
  std::string file;
};

struct ExpectedSetup {
  std::string mode;
  std::vector<ObjectRef> crds;
  std::vector<ObjectRef> webhook_configurations;
  std::vector<ServiceAccountGrants> service_accounts;
  std::optional<LeaseRef> lease;
  std::optional<AgentRef> agent;
};

// scheduler, extender, agent.
[[nodiscard]] std::vector<std::string> Modes();

[[nodiscard]] common::Result<ExpectedSetup> ExpectedSetupOf(std::string_view mode,
                                                            std::span<const DeployFile> files = DeployFiles());

}  // namespace gpusched::doctor
