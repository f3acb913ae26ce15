#include "gpusched/adapters/k8s/pod_binder.h"

#include <map>
#include <string>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"

namespace gpusched::adapters::k8s {

common::Status PodBinder::Bind(const core::PodRequest& pod, const core::Allocation& allocation) {
  const size_t slash = pod.name.find('/');
  if (slash == std::string::npos) {
    return common::InvalidArgument("bind: pod name \"" + pod.name + "\" is not namespace/name");
  }
  std::map<std::string, std::string> annotations;
  if (!allocation.containers.empty()) {
    annotations.emplace(kube::kAnnotationAllocation, kube::EncodeAllocation(allocation));
  }
  return client_.BindPod(pod.name.substr(0, slash), pod.name.substr(slash + 1), pod.uid.str(), allocation.node.str(),
                         annotations);
}

}  // namespace gpusched::adapters::k8s
