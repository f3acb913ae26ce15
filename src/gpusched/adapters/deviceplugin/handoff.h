#pragma once

// The handoff: which pod and container an Allocate(resource, device ids) is for, and which GPUs that container
// gets. The kubelet does not say (k8s-gpu-protocols.md §2.4); docs/device-plugin.md explains the design and why
// it never hands a container another pod's GPUs. In short, for one call:
//
//   1. Read, fresh: the pods bound to this node (PodSource, a quorum read) and what the kubelet has recorded
//      (PodResources: per pod and container, the device ids it holds). Pods the kubelet lists but the pod read
//      missed are fetched one by one, so the pod under admission is never missing.
//   2. A pod *waits* for `resource` when one of its containers requests it and holds no devices of it yet, after
//      the last container that holds some (the kubelet allocates init containers, then app containers, in spec
//      order). "Holds" = the kubelet lists devices of `resource` for it, or this plugin answered an Allocate for it
//      (the ledger: init containers are never listed, and the kubelet records a container only after Allocate
//      returns). Terminal pods (Succeeded, Failed) never wait. The pod's next waiting container is the one the
//      kubelet is allocating if the pod is the one being admitted.
//   3. Decide (FindTarget), each row sound on its own:
//        no pod waits                                  -> NotFound, naming the ids
//        exactly one pod waits                         -> that pod            (rule kOnlyWaitingPod)
//        several: keep those whose next container requests exactly as many devices as the kubelet passed (the
//                 kubelet passes the container's whole request); exactly one -> that pod (kOnlyCountMatch)
//        several still: keep those the kubelet lists (the kubelet adds a pod to its pod manager right before
//                 admitting it and admits one pod at a time, so a listed pod that still waits is the one under
//                 admission); exactly one -> that pod                   (kKubeletAdmitting)
//        otherwise                                     -> Aborted: ambiguous, naming the pods; never a guess
//   4. The chosen container's request must equal the number of ids, and its pod's gpusched.io/allocation must be
//      for this node and name exactly that many GPUs for the container (SharesFor); otherwise FailedPrecondition
//      naming the pod, the container and the ids.
//
// Everything here is pure: no I/O, no clock; DevicePlugin does the reads and holds the lock that serialises calls.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "gpusched/adapters/deviceplugin/pod_resources.h"
#include "gpusched/common/ids.h"
#include "gpusched/common/status.h"
#include "gpusched/core/allocation.h"
#include "gpusched/kube/objects.h"

namespace gpusched::adapters::deviceplugin {

struct ContainerView {
  std::string name;
  bool init = false;
  // Device-plugin resources the container asks for (limits, else requests), for the resources asked about.
  std::map<std::string, int64_t, std::less<>> devices;
};

struct PodView {
  kube::PodMeta meta;
  std::vector<ContainerView> containers;  // init containers first, then app containers, each in spec order
};

// Reads the pod's identity and, per container, the counts of `resources`. Malformed quantities are errors naming
// the pod and container.
[[nodiscard]] common::Result<PodView> DecodePodView(const nlohmann::json& pod,
                                                    const std::set<std::string, std::less<>>& resources);

// The Allocate calls this plugin has answered: (pod uid, container, resource) -> device ids. Not thread-safe (the
// caller's lock guards it).
class HandoffLedger {
 public:
  struct Entry {
    common::PodUid uid;
    std::string pod_key;  // namespace/name
    std::string container;
    std::string resource;
    std::vector<std::string> device_ids;  // sorted
  };

  void Record(Entry entry);
  [[nodiscard]] bool Holds(const common::PodUid& uid, std::string_view container, std::string_view resource) const;
  // The entry whose device ids are exactly `ids` (any order).
  [[nodiscard]] std::optional<Entry> FindByDevices(std::string_view resource, std::span<const std::string> ids) const;
  // Forgets the entries of pods not in `live` (gone from the node).
  void Retain(const std::set<common::PodUid>& live);
  [[nodiscard]] size_t size() const { return entries_.size(); }

 private:
  std::vector<Entry> entries_;
};

enum class HandoffRule { kOnlyWaitingPod, kOnlyCountMatch, kKubeletAdmitting };
[[nodiscard]] const char* HandoffRuleName(HandoffRule rule);

struct HandoffRequest {
  std::string_view node;
  std::string_view resource;
  std::span<const std::string> device_ids;  // the kubelet's choice; only the count matters for the decision
};

struct HandoffTarget {
  const PodView* pod = nullptr;  // points into the `pods` span passed to FindTarget
  size_t container = 0;          // index into pod->containers
  HandoffRule rule = HandoffRule::kOnlyWaitingPod;
};

// Steps 2 and 3 above; checks the container's request against the number of ids.
[[nodiscard]] common::Result<HandoffTarget> FindTarget(const HandoffRequest& request, std::span<const PodView> pods,
                                                       std::span<const KubeletPod> kubelet,
                                                       const HandoffLedger& ledger);

// Step 4: the GPUs the container gets, from its pod's gpusched.io/allocation. An app container uses its own entry;
// an init container its "init:<name>" entry when there is one, else the first app container entry with enough
// GPUs (gpusched gives init containers that an app container covers no entry of their own; the kubelet, too,
// hands an init container's devices on to the app containers).
[[nodiscard]] common::Result<std::vector<core::GpuShare>> SharesFor(const HandoffRequest& request, const PodView& pod,
                                                                    const ContainerView& container);

}  // namespace gpusched::adapters::deviceplugin
