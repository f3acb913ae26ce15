#pragma once

// NodePods: the pods bound to this node, kept by one informer (list once, then watch; fieldSelector
// spec.nodeName=<node>), for the agent's /metrics attribution and as the device plugin's PodSource. The device
// plugin's Allocate-side calls (GetPreferredAllocation, Allocate, PreStartContainer) read this cache: no request to
// the API server per container, and a pod the watch has delivered is handed its GPUs while the API server is slow
// or down.
//
//   PodsOnNode(): the informer's cache, plus the pods read alone (GetPod) that the watch has not delivered yet. Before
//     the first list has synced (start-up, or an API server that was down since), one LIST of the node's pods
//     (quorum read) instead: there is no cache to read yet.
//   FreshPodsOnNode(): one quorum LIST of the node's pods, for the rare Allocate the cached view does not decide as
//     a current one would (pod_source.h).
//   GetPod(ns, name): one GET of that pod. The device plugin calls it for a pod the kubelet's PodResources lists
//     that PodsOnNode lacks: a pod bound a moment ago whose watch event has not arrived. The kubelet names the pod
//     (namespace/name), so no list is needed to find it. The pod read is remembered and returned by PodsOnNode until
//     the watch delivers an event for it (or max_fetched newer reads push it out), so the three calls of one
//     container start make one GET between them. When the GET fails for a reason other than NotFound (the API
//     server is unreachable) and the watch saw that pod deleted, it is NotFound: what the API server would say.
//
// Why a cache is safe here (docs/device-plugin.md, "Reads"): every version of a pod with spec.nodeName set carries
// its gpusched.io/allocation (the Binding writes both at once), the pod the kubelet admits is always one the
// kubelet lists (fetched when the cache lacks it), and the pods holding GPUs are in the plugin's ledger or the
// kubelet's list, so they are never missing either. A pod the cache lacks that the kubelet does not list is neither
// admitted nor holding devices: leaving it out cannot make the handoff choose another pod, only decide who is the
// newcomer when two claims conflict.
//
// Memory: the informer's cache (pruned objects of the node's pods), at most max_fetched pods read alone and
// max_deleted names of deleted pods. Threading: every method is thread-safe; the handler runs on the informer's
// thread after NodePods has applied the event, in event order, and must not call Stop().

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/deviceplugin/pod_source.h"
#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/adapters/k8s/informer.h"
#include "gpusched/common/status.h"

namespace gpusched::agent {

struct NodePodsOptions {
  std::string node;  // required
  // The informer's settings; NodePods sets path (/api/v1/pods) and field_selector (spec.nodeName=<node>), and prune
  // when it is null (k8s::SchedulingPrune: keeps what the handoff reads).
  adapters::k8s::InformerOptions informer;
  size_t max_fetched = 256;   // pods read alone, kept until the watch delivers them
  size_t max_deleted = 4096;  // names of pods the watch saw deleted
};

class NodePods final : public adapters::deviceplugin::PodSource {
 public:
  NodePods(adapters::k8s::ApiClient& client, NodePodsOptions options,
           adapters::k8s::Informer::Handler on_event = nullptr);
  ~NodePods() override;  // Stop()
  NodePods(const NodePods&) = delete;
  NodePods& operator=(const NodePods&) = delete;

  void Start();
  void Stop();
  [[nodiscard]] bool HasSynced() const;
  [[nodiscard]] bool WaitForSync(std::chrono::milliseconds timeout) const;
  // The informer's cache (the pods the watch delivered), in key order.
  [[nodiscard]] std::vector<nlohmann::json> List() const;
  [[nodiscard]] const adapters::k8s::Informer& informer() const { return informer_; }

  [[nodiscard]] common::Result<std::vector<nlohmann::json>> PodsOnNode() override;
  [[nodiscard]] common::Result<std::vector<nlohmann::json>> FreshPodsOnNode() override;
  [[nodiscard]] common::Result<nlohmann::json> GetPod(const std::string& ns, const std::string& name) override;

  // Requests the device plugin's reads made: quorum LISTs (FreshPodsOnNode, and PodsOnNode before the informer
  // synced), and GETs of single pods.
  [[nodiscard]] uint64_t lists() const;
  [[nodiscard]] uint64_t gets() const;

 private:
  void OnEvent(const adapters::k8s::WatchEvent& event);

  adapters::k8s::ApiClient& client_;
  const NodePodsOptions options_;
  const adapters::k8s::Informer::Handler on_event_;

  mutable std::mutex mu_;  // taken before the informer's own mutex (List, Get), never the other way round
  std::map<std::string, nlohmann::json> fetched_;  // GUARDED_BY(mu_) ns/name -> the pod read alone
  std::deque<std::string> fetched_order_;          // GUARDED_BY(mu_) oldest first (may name erased keys)
  std::map<std::string, uint64_t> deleted_;        // GUARDED_BY(mu_) ns/name -> the event sequence number
  std::deque<std::string> deleted_order_;          // GUARDED_BY(mu_) oldest first (may name erased keys)
  uint64_t sequence_ = 0;                          // GUARDED_BY(mu_) events applied
  uint64_t lists_ = 0, gets_ = 0;                  // GUARDED_BY(mu_)

  adapters::k8s::Informer informer_;  // last: its thread calls OnEvent, so it stops before the state above goes
};

}  // namespace gpusched::agent
