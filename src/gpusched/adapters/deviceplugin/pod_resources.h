#pragma once

// PodResourcesSource: the kubelet's PodResources API v1 (PodResourcesLister.List on
// /var/lib/kubelet/pod-resources/kubelet.sock): which device ids each container of each pod on the node holds, as
// the kubelet's device manager records them once an Allocate has succeeded. The handoff (handoff.h) reads it to
// know which containers already hold their devices; PreStartContainer reads it to check the handoff.
//
// What the kubelet lists (docs/device-plugin.md): the pods in its pod manager (the active ones on kubelets with
// KubeletPodResourcesListUseActivePods) with their app containers (and restartable init containers), each with the
// devices recorded for it; a pod appears in the pod manager right before the kubelet admits it.

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::adapters::deviceplugin {

struct KubeletContainer {
  std::string name;
  // resource name -> device ids; a container that holds nothing has an empty map.
  std::map<std::string, std::vector<std::string>, std::less<>> devices;
};

struct KubeletPod {
  std::string namespace_;
  std::string name;
  std::vector<KubeletContainer> containers;
  [[nodiscard]] std::string Key() const { return namespace_ + "/" + name; }
};

class PodResourcesSource {
 public:
  virtual ~PodResourcesSource() = default;
  [[nodiscard]] virtual common::Result<std::vector<KubeletPod>> List() = 0;
};

// The gRPC client of the kubelet's socket (a path, e.g. /var/lib/kubelet/pod-resources/kubelet.sock). Each List is
// bounded by `timeout`; an absent socket or a failed call is Unavailable, naming the socket. Thread-safe.
[[nodiscard]] std::unique_ptr<PodResourcesSource> NewKubeletPodResources(std::string socket_path,
                                                                         std::chrono::milliseconds timeout);

}  // namespace gpusched::adapters::deviceplugin
