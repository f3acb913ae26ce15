#include "gpusched/adapters/k8s/pod_binder.h"

#include <map>
#include <optional>
#include <string>

#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"

namespace gpusched::adapters::k8s {

common::Status PodBinder::Bind(const core::PodRequest& pod, const core::Allocation& allocation) {
  const size_t slash = pod.name.find('/');
  if (slash == std::string::npos) {
    return common::InvalidArgument("bind: pod name \"" + pod.name + "\" is not namespace/name");
  }
  const std::string ns = pod.name.substr(0, slash);
  const std::string name = pod.name.substr(slash + 1);
  const std::string key(kube::kAnnotationAllocation);
  const bool annotate = !allocation.containers.empty();
  if (annotate) {
    GPUSCHED_RETURN_IF_ERROR(client_.PatchPodAnnotations(ns, name, {{key, kube::EncodeAllocation(allocation)}}));
  }
  common::Status bound = client_.BindPod(ns, name, pod.uid.str(), allocation.node.str());
  if (!bound.ok() && annotate) {
    (void)client_.PatchPodAnnotations(ns, name, {{key, std::nullopt}});
  }
  return bound;
}

}  // namespace gpusched::adapters::k8s
