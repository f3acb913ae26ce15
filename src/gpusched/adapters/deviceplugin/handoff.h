#pragma once

// The handoff: which pod and container an Allocate(resource, device ids) is for, and which GPUs that container
// gets. The kubelet does not say (k8s-gpu-protocols.md §2.4); docs/device-plugin.md explains the design and why
// it never hands a container another pod's GPUs. In short, for one call:
//
//   1. Read: the pods bound to this node (PodSource: the agent's informer cache, which may lag) and what the
//      kubelet has recorded (PodResources, fresh: per pod and container, the device ids it holds). Pods the kubelet
//      lists but the pod read lacks are fetched one by one, so the pod under admission and the pods holding
//      devices are never missing; a pod neither read has seen is neither (docs/device-plugin.md, "Reads").
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
//      for this node and name exactly that many GPUs for the container (SharesFor), each a GPU of this node's
//      inventory named once, with something to give (ResolveShares); otherwise FailedPrecondition naming the pod,
//      the container and the ids.
//   5. The GPUs must not conflict with any other pod's allocation on the node (CheckGpuConflicts, "Forged
//      allocations" below); PreStartContainer runs the same check again before the container starts.
//
// Forged allocations. gpusched.io/allocation is an annotation, and any pod author can write one: a pod created with
// spec.nodeName set and an annotation copied from another pod would otherwise be handed that pod's GPUs. So the
// plugin never trusts one pod's annotation alone; it checks it against every allocation on the node
// (CheckGpuConflicts):
//   * A pod's *claim* on a GPU is the sum over its allocation entries (init entries included, as ClusterState
//     charges them) of milli-GPU and MiB on that GPU, exclusive if any entry is. For an entry this plugin has
//     handed out, the ledger's record of what it handed out replaces the annotation's (what runs is what was
//     handed out, whatever the annotation says since). GPUs are matched by UUID, else by index, against the
//     inventory; entries naming GPUs the node lacks claim nothing here.
//   * A claim *holds* the GPU when the container of an entry naming it holds devices (the kubelet lists devices of
//     a resource the container requests, or the ledger has the container). Device ids themselves are not used:
//     they carry no meaning for the handoff (device_ids.h).
//   * Live pods: bound to this node and not terminal (Succeeded, Failed). A pod being deleted still counts: it may
//     be running, and the schedulers charge it until it is gone.
//   * The container under check is refused when, on a GPU it is to get, its pod's claim and the claims of the other
//     pods that count would share an exclusive GPU (either side exclusive), or sum to more than 1000 milli-GPU or
//     more than the GPU's memory (inventory; not checked when unknown). Which other pods count:
//       at Allocate: every other live pod. The container holds nothing yet, so it is the newcomer: a pod holding
//         the GPU keeps it, and when neither holds devices yet the one being allocated now is refused (a GPU is
//         never handed out in conflict; the other pod is refused too when its turn comes, if its claim still
//         conflicts).
//       at PreStartContainer: only other pods holding the GPU (a pod bound later is the newcomer and is refused at
//         its own Allocate), and when this plugin handed the container its GPUs (ledger), only holders whose
//         handout is in the ledger too: those were checked at Allocate, an annotation alone was not.
//     The error (FailedPrecondition) names the refused pod and container, the GPU (index and UUID), the pods that
//     hold or claim it with their milli-GPU and MiB, and the sums.
//   * The container's own entry may name a GPU only once, and its pod may not name an exclusive GPU twice
//     (ClusterState's rules); an allocation id equal to another live pod's is pointed out in the error (a copied
//     annotation) but is no refusal on its own (a copy that fits takes nothing anyone holds).
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
#include "gpusched/ports/device_inventory.h"

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
    // What was handed out: the allocation entry ("main", "init:setup") and its GPUs, resolved against the
    // inventory (ResolveShares). Empty when unknown.
    std::string entry;
    std::vector<core::GpuShare> gpus;
  };

  void Record(Entry entry);
  [[nodiscard]] bool Holds(const common::PodUid& uid, std::string_view container, std::string_view resource) const;
  // The entry whose device ids are exactly `ids` (any order).
  [[nodiscard]] std::optional<Entry> FindByDevices(std::string_view resource, std::span<const std::string> ids) const;
  // Forgets the entries of pods not in `live` (gone from the node).
  void Retain(const std::set<common::PodUid>& live);
  [[nodiscard]] size_t size() const { return entries_.size(); }
  [[nodiscard]] const std::vector<Entry>& entries() const { return entries_; }

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

// The GPUs one container gets and the allocation entry they come from.
struct ContainerShares {
  std::string entry;  // "main", "init:setup"; for an init container covered by an app container, that one's name
  std::vector<core::GpuShare> gpus;
};

// Step 4: the GPUs the container gets, from its pod's gpusched.io/allocation. An app container uses its own entry;
// an init container its "init:<name>" entry when there is one, else the first app container entry with enough
// GPUs (gpusched gives init containers that an app container covers no entry of their own; the kubelet, too,
// hands an init container's devices on to the app containers).
[[nodiscard]] common::Result<ContainerShares> SharesFor(const HandoffRequest& request, const PodView& pod,
                                                        const ContainerView& container);

// Step 4, against the node: each share's GPU found in `gpus` (by UUID, else by index) and its UUID and index set
// from there. FailedPrecondition, naming the pod and container, when a GPU is not on the node, when the entry names
// one GPU twice (a container gets distinct GPUs; twice would double its share and its device count), or when a
// share is neither exclusive nor gives any milli-GPU or MiB.
[[nodiscard]] common::Result<ContainerShares> ResolveShares(std::string_view node, const PodView& pod,
                                                            const ContainerView& container, ContainerShares shares,
                                                            std::span<const ports::GpuSample> gpus);

enum class ConflictStage {
  kAllocate,  // the container is being handed its GPUs now
  kPreStart,  // the container holds its devices and is about to start
};

struct ConflictCheck {
  std::string_view node;
  ConflictStage stage = ConflictStage::kAllocate;
  const PodView* pod = nullptr;  // the container's pod (need not point into `pods`)
  const ContainerView* container = nullptr;
  const ContainerShares* shares = nullptr;  // what the container gets, resolved (ResolveShares)
};

// Step 5 ("Forged allocations" above). `pods` are the pods bound to this node (the checked pod among them or not),
// `kubelet` the kubelet's PodResources list, `gpus` the inventory. OK, or FailedPrecondition saying who holds the
// GPU and the numbers.
[[nodiscard]] common::Status CheckGpuConflicts(const ConflictCheck& check, std::span<const PodView> pods,
                                               std::span<const KubeletPod> kubelet, const HandoffLedger& ledger,
                                               std::span<const ports::GpuSample> gpus);

}  // namespace gpusched::adapters::deviceplugin
