#pragma once

// SchedulingQueue: the pending pods of a scheduler and the order it tries them in, with kube-scheduler's three
// sets and rules, on an injected Clock (tests and the simulator move time by hand):
//
//   active         ready to be tried; Pop() returns the highest priority first, then the earliest created, then
//                  by key (namespace/name), so the order is total and stable. With GPU queues (SetQueueChooser), that
//                  order holds within each queue, and Pop takes from the queue of the lowest rank (the one
//                  furthest below its fair share; ties by name).
//   backoff        failed with an error (a bind that did not land, an API error): waits 1 s doubling per attempt
//                  up to 10 s, then goes back to active by itself (Pop and NextWakeMs see to it).
//   unschedulable  tried and found no place: waits for a cluster event that can make it fit, never for a timer.
//                  Each such pod records what blocked it (Blockers: GPU capacity, CPU/memory/pods, node
//                  constraints, quota); an event names what it may have freed, and only the pods blocked by that
//                  move, straight to active (a pod blocked only by GPU capacity is tried again in the same
//                  cycle that released the capacity). A pod that sat there `flush_after_ms` (5 min) goes back
//                  anyway: a safety net against an event the scheduler missed, as kube-scheduler has.
//
// An event that arrives while a pod is being tried (popped, not yet requeued) is remembered: if it could have
// unblocked the pod, Requeue(kUnschedulable) sends the pod to active instead of parking it (kube-scheduler's
// "moveRequestCycle"), so a release racing with a failed attempt is never lost.
//
// Thread-safety: all methods may be called from any thread (one mutex).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <memory>

#include "gpusched/common/clock.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/core/gpu_request.h"

namespace gpusched::sched {

// What kept a pod from fitting, and what an event may have freed: bits, so one event can name several.
enum Blocker : uint32_t {
  kBlockedByGpu = 1U << 0,        // GPU compute or memory, or whole GPUs
  kBlockedByResources = 1U << 1,  // CPU, memory, pods count, other resources of the node
  kBlockedByNodeSpec = 1U << 2,   // labels, taints, unschedulable, affinity (a node changed or was added)
  kBlockedByQuota = 1U << 3,      // a queue's quota
  kBlockedByPods = 1U << 4,       // inter-pod (anti-)affinity, spread constraints, host ports (a pod left)
  kBlockedByPodAdded = 1U << 5,   // pod affinity, spread constraints (a pod was placed)
  kBlockedByGang = 1U << 6,       // a pod group with fewer pending members than it needs (a member arrived)
  kBlockedByGuarantee = 1U << 7,  // beyond its GPU queue's guarantee, so it may not reclaim (its queue shrank)
  kBlockedByAnything = 0xffffffffU,
};

struct QueuedPod {
  std::string uid;
  std::string key;  // namespace/name
  int32_t priority = 0;
  int64_t created_ms = 0;  // creation time (any epoch; only the order matters)
  std::string queue;       // its GPU queue; one unnamed queue when queues are not used
  // What it asks (read by the hints of OnClusterEvent); null when its request cannot be read.
  std::shared_ptr<const core::PodRequest> request;
  // Set by the queue: the node whose freed room woke it (WakeInOrder with a ticket), as Pop returns it; empty when
  // something else made it active. The entry forgets it once popped.
  std::string woken_for;
  // Set by Decline: the node, and that node's generation, where the pod was woken for room and still found none
  // (a room wake of that node at that generation passes it by).
  std::string declined_node;
  uint64_t declined_generation = 0;
};

struct QueueOptions {
  int64_t initial_backoff_ms = 1000;
  int64_t max_backoff_ms = 10000;
  int64_t flush_after_ms = 5 * 60 * 1000;  // 0 or less: never (the simulator, where every event is known)
};

class SchedulingQueue {
 public:
  enum class Outcome {
    kUnschedulable,  // no node fits: wait for an event naming one of `blockers`
    kError,          // something failed that may work later: backoff
  };

  explicit SchedulingQueue(const common::Clock& clock, QueueOptions options = {});

  // A new pending pod, or a pending pod whose spec changed (priority, requests): it goes to active (a changed pod
  // may fit now), keeping its attempt count. A pod being tried is updated in place and stays with its cycle.
  void AddOrUpdate(const QueuedPod& pod);
  // The pod is gone (deleted, or bound by someone else). False when it was not queued.
  bool Delete(const std::string& uid);

  // The next pod to try, moving due backoff and overdue unschedulable pods to active first; nullopt when none is
  // ready. The pod is "in flight" until Requeue or Done.
  std::optional<QueuedPod> Pop();
  // The in-flight pod found no place (kUnschedulable, blocked by `blockers`) or failed (kError).
  void Requeue(const std::string& uid, Outcome outcome, uint32_t blockers = kBlockedByAnything);
  // The in-flight pod was placed (or dropped): forget it.
  void Done(const std::string& uid);
  // Takes a queued pod that is not in flight into flight, as Pop does, out of turn: the other members of a gang
  // tried together with the popped one. False when it is not queued or already in flight.
  bool Claim(const std::string& uid);

  // How Pop orders queues: given the names of the queues that have pods ready (by name), the index of the one to
  // take from (the lowest rank). Called under the queue's lock, so it must not call back into this queue. Unset:
  // queues by name.
  using QueueChooser = std::function<size_t(std::span<const std::string* const> queues)>;
  void SetQueueChooser(QueueChooser choose);

  // Something in the cluster changed that may make pods fit: every unschedulable pod blocked by any of `freed`
  // moves to active. Returns how many moved.
  size_t OnClusterEvent(uint32_t freed);
  // The same, with a hint: of the unschedulable pods blocked by any of `freed`, only those `may_help` accepts move
  // (kube-scheduler's queueing hints). Called under the queue's lock for each such pod, so it must not call back
  // into this queue. Pods in flight remember `freed` whatever the hint says.
  size_t OnClusterEvent(uint32_t freed, const std::function<bool(const QueuedPod&)>& may_help);

  // Room freed on one node: the unschedulable pods blocked by any of `freed` are offered to `choose` in the order
  // Pop would take them (queues by the chooser's rank, then priority, age and key), and move as it says. A pod moved
  // with kWakeForRoom carries `node` in QueuedPod::woken_for when popped: the front end that claimed room for it
  // offers the room again if the pod does not take it. kStop ends the offer. Called under the queue's lock, as the
  // hint of OnClusterEvent. Pods in flight remember `freed`. Returns how many moved.
  // `rank` (when given) is a queue's rank with `more` allocated to it: the offer goes to the queue of the lowest
  // rank counting what its pods woken for room and not yet popped ask (from earlier offers too), as Pop would choose
  // once they are placed (ties by name); without it, the queues go by name.
  // `only_queue` (when not empty): only that queue's pods are offered.
  enum class Offer { kPass, kWake, kWakeForRoom, kStop };
  using Rank = std::function<double(const std::string& queue, const core::GpuAmount& more)>;
  size_t WakeInOrder(uint32_t freed, const std::string& node, const std::function<Offer(const QueuedPod&)>& choose,
                     const Rank& rank = nullptr, const std::string& only_queue = {});
  // The pod (not in flight) was woken for `node`'s room at that node's `generation` and found none there.
  void Decline(const std::string& uid, const std::string& node, uint64_t generation);
  // How many pods woken for `node`'s room wait to be popped.
  [[nodiscard]] size_t TicketsFor(const std::string& node) const;
  // The nodes whose room a woken pod gave up without being popped (deleted, claimed into a gang, changed), each
  // once since the last call: the front end offers their room again.
  [[nodiscard]] std::vector<std::string> TakeOrphanedRooms();

  // When Pop may next have something new without an event: the earliest backoff or flush deadline; nullopt when
  // nothing waits on time.
  [[nodiscard]] std::optional<int64_t> NextWakeMs() const;

  struct Counts {
    size_t active = 0, backoff = 0, unschedulable = 0, in_flight = 0;
  };
  [[nodiscard]] Counts counts() const;
  // How many times the pod was tried (0 for a new one); -1 when not queued.
  [[nodiscard]] int attempts(const std::string& uid) const;

 private:
  enum class Where { kActive, kBackoff, kUnschedulable, kInFlight };
  struct Entry {
    QueuedPod pod;
    Where where = Where::kActive;
    int attempts = 0;
    int64_t since_ms = 0;  // when it entered its current set
    int64_t backoff_until_ms = 0;
    uint32_t blockers = 0;
    uint32_t freed_in_flight = 0;  // events seen while in flight
  };
  // Active order: higher priority, earlier creation, key.
  using ActiveKey = std::tuple<int32_t, int64_t, std::string, std::string>;  // (-priority, created, key, uid)
  static ActiveKey KeyOf(const Entry& e) { return {-e.pod.priority, e.pod.created_ms, e.pod.key, e.pod.uid}; }

  void Remove(Entry& e);  // from whichever ordered set holds it
  void ToActive(Entry& e, int64_t now);
  void Promote(int64_t now);  // due backoff and overdue unschedulable pods to active
  int64_t BackoffFor(int attempts) const;

  const common::Clock& clock_;
  const QueueOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> pods_;                  // by uid
  std::map<std::string, std::set<ActiveKey>> active_;  // by queue, each ordered; no empty set
  size_t active_count_ = 0;
  QueueChooser choose_;
  std::vector<const std::string*> ready_queues_;             // Pop's scratch
  std::set<std::pair<int64_t, std::string>> backoff_;        // (until, uid)
  std::set<std::pair<int64_t, std::string>> unschedulable_;  // (since, uid)
  // The unschedulable ones by queue, in Pop's order (entries of pods_, whose addresses are stable).
  std::map<std::string, std::map<ActiveKey, Entry*>> parked_;
  std::array<size_t, 32> blocked_by_{};  // unschedulable pods per Blocker bit
  void CountBlockers(uint32_t blockers, int sign);
  // Pods in flight remember `freed`; whether any unschedulable pod is blocked by one of its bits. mu_ held.
  bool NoteEvent(uint32_t freed);
  // The active pods woken for room: how many per node, and what they ask per queue.
  std::map<std::string, size_t> tickets_;
  std::map<std::string, core::GpuAmount> ticketed_demand_;
  std::set<std::string> orphaned_rooms_;
  void AddTicket(Entry& e, const std::string& node);
  void DropTicket(Entry& e, bool orphaned);
  std::set<std::string> in_flight_;  // popped, not yet requeued or done
};

}  // namespace gpusched::sched
