#pragma once

// SchedulerCore: the scheduling loop of gpusched as a scheduler of its own, pure over ports (a Binder, a Preemptor,
// an event sink) and a Clock, for the pods whose spec.schedulerName is one of SchedulerCoreOptions::scheduler_names.
// `gpusched scheduler` (scheduler/scheduler.h) feeds it the watches' objects decoded once (kube::DecodeWatchedPod
// and the other kube decoders); the simulator feeds it trace pods through in-memory ports. Fed by the node and pod
// watches, it keeps
//   - the cluster: a sched::ClusterCache that charges every bound pod (CPU, memory, one pod slot, and the GPUs its
//     gpusched.io/allocation names), whoever bound it;
//   - the pending pods: decoded once per change of their spec, labels or annotations (a status update, such as the
//     PodScheduled condition this scheduler writes, does not requeue a pod), in a sched::SchedulingQueue.
//
// One attempt (ScheduleOne, on the scheduling thread):
//   pop the next pod (highest priority, then oldest) -> the request could not be decoded, or uses a constraint
//   this scheduler does not evaluate (kube::FindUnevaluatedFields' hard list): FailedScheduling naming it, parked
//   until the pod changes -> else the cycle over every node under the cache's write lock: node constraints
//   (nodeName, cordon, nodeSelector, required node affinity, taints), pods count, CPU and memory, inter-pod
//   affinity and anti-affinity and topology spread (sched/inter_pod.h, over every placed pod, those this scheduler
//   assumed included), then the placement policy's GPU filter and score; the best node's GPUs are assumed with a
//   fresh allocation id -> the bind is handed to a bind worker and the next attempt starts at once.
//   Nowhere to go: FailedScheduling with the grouped reasons (CycleResult::Summary) and PodScheduled=False; the pod
//   waits in the queue for an event that can make it fit (what blocked it: GPU capacity, CPU/memory/pods, node
//   constraints), never for a timer.
// A bind (worker): one POST of the Binding with the allocation in its annotations and the pod's uid as
// precondition (ports::Binder). Bound: the assumption is confirmed, event Scheduled. Definitely not bound: the
// assumption is forgotten (its capacity wakes the pods it blocked) and the pod backs off (1 s doubling to 10 s).
// Outcome unknown (timeout, 5xx, 409): the GPUs stay assumed for assumed_ttl_ms while the watch decides; the pod
// backs off and, if still pending and still assumed, its retry sends the same allocation to the same node.
// A pod whose watch shows it bound or gone leaves the queue; a bound pod that is deleted or finishes frees what it
// held and wakes the pods blocked by capacity that pass that node's filters now (a hint: the others could not use
// what it freed), the pods that hold a nomination, and every pod waiting for quota or for a pod to leave. A node added
// or changed wakes every waiting pod. Assumptions whose time ran out are forgotten once a second
// (ClusterCache::ExpireAssumed), waking pods too.
//
// Preemption (options.preemptor set; kube-scheduler's DefaultPreemption, sched/preemption.h): a pod that fits
// nowhere and may preempt (spec.preemptionPolicy is not Never) looks for the node where evicting the fewest, least
// important pods of lower priority makes it fit, their GPU shares, CPU, memory and pod slots counted, honouring
// the PodDisruptionBudgets the watch shows (OnDisruptionBudget). Then, in this order: the room it will take there
// is held for it (charged to the node under the name "nominated/<uid>", so no other pod can take it while the
// victims leave); its status.nominatedNodeName is set; the victims are evicted through the Eviction API, those a
// budget protects first (the API server refuses a disruption a budget does not allow: then nothing else is
// evicted, the room is given back and the pod backs off, 1 s doubling to 10 s); each victim gets a Preempted event. The
// pod waits, as any unschedulable pod, for the victims to leave; its next attempt gives the held room back first and
// schedules as usual. While the victims of its last preemption still exist, it does not preempt again. A nominee that
// is deleted, or bound by someone else, frees its room. Decisions: the room is held against every other pod, of any
// priority (kube-scheduler lets pods of higher priority ignore a nomination); victims that are already
// terminating are not chosen again.
// A gang that does not fit preempts for all the members it still needs at once (PlanGangPreemption): a room held
// for every member, the victims evicted once, and nothing bound until the whole group fits.
//
// GPU queues (sched/gpu_queues.h, fed by OnGpuQueue from the GpuQueue objects): every pod belongs to a queue (its
// label gpusched.io/queue, else its namespace's queue, else "default"). Pending pods are tried queue by queue, the
// queue furthest below its fair share first, by priority then age within it. A pod whose GPUs would take its queue
// (or the queue's parent) beyond its limit waits (FailedScheduling naming the queue and the dimension) until a pod
// of the queue leaves or the queues change. Preemption evicts pods of lower priority of the pod's own queue only;
// a pod within its queue's guarantee may also reclaim: evict pods of other queues that borrow beyond their
// guarantees (lowest priority first, then the queue furthest over its fair share), never from a queue within its
// guarantee. A queue object that cannot be read or breaks the rules (ValidateQueues) is left out, logged, and
// reported by QueueErrors; its pods go to the default queue.
//
// Only the leader schedules: with options.may_bind, nothing is popped while it answers false, and a bind worker
// asks again right before its POST (a leader that lost its lease in between forgets the assumption instead).
//
// Thread-safety: OnNode and OnPod from the informer threads, ScheduleOne from one scheduling thread (Start runs it),
// binds on the workers; Metrics and stats from anywhere.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "gpusched/common/clock.h"
#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"
#include "gpusched/common/rng.h"
#include "gpusched/common/status.h"
#include "gpusched/core/cluster_events.h"
#include "gpusched/core/constraints.h"
#include "gpusched/core/gpu_queue.h"
#include "gpusched/core/gpu_request.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"
#include "gpusched/ports/binder.h"
#include "gpusched/ports/event_recorder.h"
#include "gpusched/ports/preemptor.h"
#include "gpusched/sched/cluster_cache.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sched/gpu_queues.h"
#include "gpusched/sched/inter_pod.h"
#include "gpusched/sched/preemption.h"
#include "gpusched/sched/scheduling_queue.h"
#include "gpusched/sched/snapshot_builder.h"
#include "gpusched/sched/victims.h"

namespace gpusched::sched {

using core::EventType;

// What the scheduler tells about a pod: a core/v1 Event, and for FailedScheduling of a pod that fits nowhere also
// the pod's PodScheduled=False condition (reason Unschedulable) with the same message.
using ports::PodEvent;
using EventSink = std::function<void(PodEvent)>;

struct SchedulerCoreOptions {
  std::vector<std::string> scheduler_names = {"gpusched"};
  std::string policy = "binpack";
  // A weighted mix of policies' scores ((name, weight > 0)) that replaces the policy's own score; the policy still
  // filters and chooses the GPUs. Empty: the policy's score.
  std::vector<std::pair<std::string, double>> weights;
  sched::QueueOptions queue;
  size_t bind_workers = 16;
  int64_t bind_in_flight_ms = 300000;     // an assumption lives at most this long while its bind runs
  int64_t assumed_ttl_ms = 30000;         // and this long after a bind whose outcome is unknown
  uint64_t seed = 0;                      // random tie breaks; 0 = from the clock
  const common::Clock* clock = nullptr;   // steady time of the queue and the latency figures; null = system
  std::function<bool()> may_bind;         // null = always (no leader election)
  ports::Preemptor* preemptor = nullptr;  // null = no preemption
  // What snapshot-reading policies (load-aware, interference-aware) read: live GPU metrics from a metrics cache, an
  // interference forecast from a slowdown model (sched/snapshot_builder.h). A policy that reads what is not given
  // is refused at Create.
  sched::SnapshotSources snapshots;
  policy::LoadAwareOptions load_aware;
  policy::InterferenceAwareOptions interference_aware;
  // What fgd and fgd-scarcity read (policy::PolicyOptions): the target workload (null: the built-in default) and
  // the cluster's GPUs by model.
  std::shared_ptr<const policy::TargetWorkload> target_workload;
  std::map<std::string, int64_t> gpus_by_model;
  // Optional observers, in seconds: one attempt (pop to bind handed off or pod parked), and a bound pod's time from
  // first seen pending to its Binding written.
  std::function<void(double)> observe_attempt, observe_e2e;
  // A rank per node slot (in the order nodes were added) that breaks score ties, lowest first; empty: the node
  // name's hash (CycleOptions::stable_ties). The simulator's replays draw one per seed, as the FGD protocol does.
  std::vector<uint32_t> tie_rank;
  // The least important log lines written; the simulator writes errors only (a decision per pod is noise there).
  common::LogLevel min_log_level = common::LogLevel::kDebug;
  // Whether failed attempts carry the grouped reasons (CycleResult::Summary) in their FailedScheduling message and
  // log line; the simulator, which reads no events, turns this off.
  bool collect_reasons = true;
};

struct SchedulerStats {
  uint64_t scheduled = 0;      // attempts that chose a node
  uint64_t unschedulable = 0;  // attempts that found none (or met a constraint not evaluated, or a bad request)
  uint64_t errors = 0;         // attempts that failed for another reason
  uint64_t binds_ok = 0, binds_failed = 0, binds_unknown = 0;
  uint64_t expired_assumptions = 0;
  uint64_t preemptions = 0;          // preemptions carried out (every victim evicted)
  uint64_t preemption_failures = 0;  // an eviction was refused (a budget) or failed: the room was given back
  uint64_t victims = 0;              // pods evicted
  uint64_t gangs_placed = 0;         // pod groups whose min-available members were placed together
  uint64_t gangs_refused = 0;        // gang attempts that found no place for the minimum (placed none)
  uint64_t gangs_below_minimum = 0;  // placed groups that lost members below their minimum
};

class SchedulerCore {
 public:
  static common::Result<std::unique_ptr<SchedulerCore>> Create(ClusterCache& cache, ports::Binder& binder,
                                                               EventSink events, SchedulerCoreOptions options);
  ~SchedulerCore();  // Stop
  SchedulerCore(const SchedulerCore&) = delete;
  SchedulerCore& operator=(const SchedulerCore&) = delete;

  // The watches, decoded, in event order per resource. A node added or changed (`node`: as decoded; an error is
  // counted and logged by the cache), and a node deleted (its name, or why it cannot be read).
  void OnNode(common::Result<core::Node> node);
  void OnNodeDeleted(const common::Result<common::NodeName>& name);
  void OnPod(EventType type, const core::WatchedPod& pod);
  // PodDisruptionBudgets, which preemption honours. A budget that cannot be read is logged and keeps its last
  // readable version (none: it is not known; the Eviction API still enforces it).
  void OnDisruptionBudget(EventType type, const common::Result<core::DisruptionBudget>& budget);
  // Namespaces: their labels, which inter-pod terms with a namespaceSelector match. A change of labels wakes the
  // pods that inter-pod constraints keep waiting.
  void OnNamespace(EventType type, const std::string& name, std::map<std::string, std::string> labels);
  // A GpuQueue object: its name, its spec as text (a change of its status alone changes nothing) and its
  // declaration or why it cannot be read. Pods move to their new queues; pods waiting for quota are woken.
  void OnGpuQueue(EventType type, const std::string& name, const std::string& spec_text,
                  common::Result<core::QueueSpec> spec);
  // The coscheduling plugin's PodGroup (namespace, name, minMember): a pod that names its group by the label
  // scheduling.x-k8s.io/pod-group without gpusched.io/min-available takes the group's minMember (1 while no
  // PodGroup is known).
  void OnPodGroup(EventType type, const std::string& namespace_, const std::string& name, int32_t min_member);

  // One attempt on the calling thread; false when no pod is ready (or this replica may not schedule). Before
  // Start, the bind runs inline (tests); after, on a worker.
  bool ScheduleOne();
  // Forgets assumptions whose time ran out and wakes what they blocked; returns how many.
  size_t ExpireAssumed();

  // The scheduling thread (ScheduleOne whenever a pod is ready, ExpireAssumed every second) and the bind workers.
  void Start();
  // Stops scheduling; binds already handed to workers finish first. Idempotent.
  void Stop();
  // Tells the scheduling thread to look again (what may_bind answers changed).
  void Wake();

  // Whether pods naming this spec.schedulerName ("" reads as default-scheduler) are this scheduler's.
  [[nodiscard]] bool Serves(const std::string& scheduler_name) const;

  // Whether the pod (by uid) is still waiting: pending, and no placement of it assumed or bound here.
  [[nodiscard]] bool StillPending(const std::string& uid) const;

  [[nodiscard]] SchedulerStats stats() const;
  [[nodiscard]] sched::SchedulingQueue::Counts queue_counts() const { return queue_.counts(); }
  [[nodiscard]] const SchedulerCoreOptions& options() const { return options_; }
  // Every queue's accounting (the default queue included), by name; and the queues left out with why.
  [[nodiscard]] std::vector<sched::QueueStatus> QueueStatuses() const { return gpu_queues_.All(); }
  [[nodiscard]] std::map<std::string, std::string> QueueErrors() const;
  // The names of the GpuQueue objects seen, and one queue's accounting (nullopt when it is not accounted).
  [[nodiscard]] std::vector<std::string> QueueObjectNames() const;
  [[nodiscard]] std::optional<sched::QueueStatus> QueueStatusOf(const std::string& name) const {
    return gpu_queues_.Status(name);
  }
  // How long the pod waiting longest has waited (0 when none), and the disruption budgets known.
  [[nodiscard]] int64_t OldestPendingMs() const;
  [[nodiscard]] size_t DisruptionBudgets() const;
  [[nodiscard]] const ClusterCache& cache() const { return cache_; }
  [[nodiscard]] const sched::GpuQueues& gpu_queues() const { return gpu_queues_; }
  // When the next pod leaves its backoff (steady ms), if one waits for that.
  [[nodiscard]] std::optional<int64_t> NextWakeMs() const { return queue_.NextWakeMs(); }

 private:
  struct Pending {
    std::string namespace_, name;
    common::Result<core::PodRequest> request = common::InvalidArgument("not decoded");
    std::vector<std::string> hard_fields, soft_fields;  // not evaluated: refused / told in the Scheduled event
    size_t fingerprint = 0;                             // of spec, labels and annotations: a change requeues the pod
    int64_t first_seen_ms = 0;                          // steady; for the end-to-end latency
    int64_t created_ms = 0;
    std::string queue = sched::kDefaultQueue;  // its GPU queue
    core::GpuAmount demand;                    // what it asks of the queue
    bool coscheduling = false;                 // its minimum is its PodGroup's minMember (OnPodGroup)
  };
  struct BindTask {
    core::PodRequest request;
    core::Allocation allocation;
    std::string namespace_, name;
    int64_t first_seen_ms = 0;
    std::vector<std::string> soft_fields;  // not evaluated: told in the Scheduled event
  };

  // A pod placed on a node (sched/victims.h): bound, or assumed (placed by this scheduler, its binding not seen yet;
  // such an entry counts only while its allocation is held on that node).
  using Running = sched::PlacedPod;
  // The room held for a pod that preempted, and whom it evicts.
  struct Victim {
    common::PodUid uid;
    std::string namespace_, name;
  };
  struct Nomination {
    core::Allocation reserved;    // charged under the uid "nominated/<pod uid>"
    std::vector<Victim> victims;  // those a budget covers first (their eviction may be refused)
    // The preemptor as inter-pod constraints see it on the held node while the room is held (its labels and
    // anti-affinity; assumed, so never a victim itself), as kube-scheduler counts nominated pods.
    Running as_pod;
    std::vector<std::string> reclaimed_from;  // the queue of each victim taken to give back a guarantee
  };

  SchedulerCore(ClusterCache& cache, ports::Binder& binder, EventSink events, SchedulerCoreOptions options,
                std::unique_ptr<policy::PlacementPolicy> policy,
                std::vector<std::unique_ptr<policy::PlacementPolicy>> scorers);
  // The pod's nomination, its room given back to the node; nullopt when it has none. Mirror write lock held.
  std::optional<Nomination> TakeNomination(const std::string& uid);
  // Charges a nomination's room and records it. Mirror write lock held.
  bool HoldNomination(const std::string& uid, Nomination nomination, core::ClusterState& state);
  // Gives back a pod's held room, if any, and with `wake` wakes what the room blocked.
  void DropNomination(const std::string& uid, bool wake = true);
  // The best node to preempt on and its victims, or nullopt. Mirror write lock held.
  // `queue`: the pod's; `reclaim`: the pod is within its queue's guarantee, so pods of queues borrowing beyond
  // theirs may be victims too.
  std::optional<Nomination> PlanPreemption(const core::PodRequest& request, const core::ClusterState& state,
                                           const sched::CycleResult& result,
                                           const sched::InterPodConstraints& inter_pod, const std::string& queue,
                                           bool reclaim);
  using VictimPool = sched::VictimPool;
  // Whether anyone could be a victim (CollectVictims' rules, before any node is looked at): a placed pod of `queue`
  // below `priority`, or with `reclaim` a queue borrowing beyond its guarantee. Takes mu_.
  [[nodiscard]] bool AnyPossibleVictim(int32_t priority, const std::string& queue, bool reclaim) const;
  // The possible victims (sched::CollectVictims), node by node, of a preemptor of `priority` in `queue` on the nodes
  // `views`, with the budgets that count them: `reclaim` lets pods of queues borrowing beyond their guarantee be
  // victims too. Nodes where evicting every possible victim would free less GPU compute than `need_milli` are left
  // out; `with_pods`: each victim as inter-pod constraints see it too (VictimPool::Node::pods). Mirror lock held;
  // takes mu_.
  VictimPool CollectVictims(const core::ClusterState& state, const std::vector<const core::NodeView*>& views,
                            int32_t priority, const std::string& queue, bool reclaim, int64_t need_milli,
                            bool with_pods);
  // Whether the reclaimed victims among `set` (on pool node `node`) may be taken, counting what `taken` holds
  // already per queue (and adding theirs when allowed).
  bool ReclaimAllowed(const VictimPool& pool, size_t node, const sched::VictimSet& set, const std::string& queue,
                      std::map<std::string, core::GpuAmount>& taken) const;
  // A gang is never left running short: victims whose groups would fall below their minimum take the other placed
  // members of their groups along (added to `set`, its priority sum and count included). False when that cannot
  // be: another member is still being bound, or of `queue` and of `priority` or higher, or of another queue that
  // may not give back what it holds (MayReclaim, counting the set's victims of that queue). Takes mu_.
  bool WholeGangs(sched::VictimSet& set, int32_t priority, const std::string& queue);
  // The victims to evict, those a budget covers first (if the API server refuses one, nothing else has been
  // evicted); `reclaimed_from` gets the queue of each victim of another queue. nullopt when one is gone.
  std::optional<std::vector<Victim>> EvictionOrder(const std::vector<common::PodUid>& victims,
                                                   const std::vector<core::DisruptionBudget>& budgets,
                                                   const std::string& queue, std::vector<std::string>& reclaimed_from);
  // The room a pod will take (its allocation under the reservation uid), as a nomination without victims.
  static Nomination RoomFor(const core::PodRequest& request, const core::Allocation& allocation);
  // Gang preemption: rooms for `need` of `members` (uid, pending pod; each fits nowhere as the cluster is) with
  // victims chosen once for the whole group, member after member against one plan: the nodes as the victims
  // chosen so far and the rooms planned so far leave them. Each member takes the best candidate node
  // (PickCandidate; a node where earlier victims left room enough wins, having none); budgets count down and
  // reclaim limits add up across the whole group. nullopt when some member finds no node. Mirror write lock held.
  struct GangPreemption {
    std::vector<std::pair<std::string, Nomination>> rooms;  // by member uid (ScheduleGang adds the members that fit)
    std::vector<Victim> victims;                            // every victim once, those a budget covers first
    std::vector<std::string> reclaimed_from;
    size_t nodes = 0;  // nodes with victims
  };
  std::optional<GangPreemption> PlanGangPreemption(const std::vector<std::pair<std::string, const Pending*>>& members,
                                                   size_t need, const core::ClusterState& state,
                                                   const std::string& queue, bool reclaim);
  // Nominates every member, evicts the victims; false when an eviction failed (every room is then given back).
  bool PreemptForGang(const std::string& uid, const Pending& pod, const GangPreemption& plan);
  // Moves every pod to the queue it belongs to now (after the queues changed). mu_ held; returns the pending pods
  // whose queue changed, to requeue.
  std::vector<sched::QueuedPod> Remap();
  // The pod as the scheduling queue knows it.
  static sched::QueuedPod Queued(const std::string& uid, const Pending& pod);
  // Nominates, evicts, counts the reclaims; false when an eviction failed (the room is then given back).
  bool Preempt(const std::string& uid, const Pending& pod, const Nomination& plan);
  // Evicts `victims` in order for pod `uid`, each with a Preempted event ("Preempted by <by>"), and counts them;
  // stops at the first eviction that fails (nothing after it is evicted): a FailedPreemption event on the pod
  // ("<where>evicting ns/name failed: ..."), counted, and "evicting ns/name: <why>" returned. nullopt: all gone.
  std::optional<std::string> EvictAll(const std::string& uid, const Pending& pod, const std::vector<Victim>& victims,
                                      const std::string& by, const std::string& where);
  // The pod's inter-pod constraints, counted over the placed pods (PodOnNode). Mirror lock held.
  sched::InterPodConstraints PrepareInterPod(const core::PodRequest& request, const core::ClusterState& state);
  // The snapshot of one attempt for `request` (live metrics, its interference forecast over every live node); what
  // it borrows stays in `hold`. Caller holds the cache's lock.
  policy::Snapshot SnapshotFor(const core::PodRequest& request, const core::ClusterState& state,
                               sched::SnapshotBuilder::Hold& hold);
  // A pod that held room on `node` is gone: wakes the pods blocked by capacity that pass the node's filters now
  // (every such pod if a policy filters by a snapshot). Takes the cache's read lock. Returns how many.
  // The parked pods are offered the room in the order they would be tried, and only those that fit what the
  // earlier ones left move (each carries the node as its ticket).
  size_t WakeForRoomOn(const common::NodeName& node);
  // After the attempt of a pod woken for a node's room: if it did not take that room, or it was the last pod
  // counted into it, the room is offered again (the pod itself passed by until the node changes).
  void ReofferRoom(const sched::QueuedPod& popped);
  // Offers again the room of nodes whose woken pods gave it up without an attempt (SchedulingQueue).
  void ReofferOrphanedRooms();
  // A pod of `queue` left: its pods that found no victims because the queue was beyond its guarantee, and that are
  // within it now, are woken (they may reclaim). Returns how many.
  size_t WakeWithinGuarantee(const std::string& queue);
  // One attempt of a popped pod: its cycle, preemption or gang, reserve and dispatch of its bind.
  void Attempt(const sched::QueuedPod& popped);
  // Records a placement this scheduler assumed (Running::assumed) and wakes what waits for a pod to be placed.
  void RecordAssumed(const std::string& uid, const Pending& pod, const core::Allocation& allocation);
  // Drops assumed entries whose allocation is no longer held (forgotten, expired); returns how many.
  size_t DropStaleAssumed();
  // Whether a placed pod counts: bound, or assumed with its allocation still held on its node. Mirror lock held.
  static bool Counts(const Running& r, const core::ClusterState& state);
  // Keeps with_anti_affinity_ and assumed_ in step with running_[uid] (r), or drops all three. mu_ held.
  void Reindex(const std::string& uid, const Running& r);
  void Unplace(const std::string& uid);
  void Recount(const std::string& uid, const Running* r);  // counted_ and priorities_by_queue_ for uid; mu_ held
  void Ungroup(const std::string& uid);                    // drops uid from placed_by_group_ and group_of_; mu_ held
  // Gangs. The members of `group` placed (bound or assumed); mu_ held.
  size_t PlacedInGroup(const std::string& group) const;
  // Places a gang that still lacks members (the popped pod `uid` is one): reserves min-available minus placed
  // pending members against one state, one after the other, and binds them all, or reserves none and parks every
  // pending member with the reason. `lock` is the cache's write lock, held on entry and released on return.
  void ScheduleGang(const std::string& uid, const Pending& pod, const std::string& group, size_t placed,
                    std::unique_lock<std::shared_mutex>& lock, std::chrono::steady_clock::time_point started);
  // Why the pod may not join the queue its label names (it then waits, counted in its namespace's queue); empty
  // when it names none or may.
  [[nodiscard]] std::string QueueJoinRefusal(const Pending& pod) const;
  void Count(uint64_t SchedulerStats::*counter);  // one more, under mu_
  // FailedScheduling; the pod waits for an event that may free `blockers`, or with `backoff` for its backoff.
  void Unschedulable(const std::string& uid, const Pending& pod, std::string message, uint32_t blockers,
                     bool backoff = false);
  void Bind(BindTask task);
  void Dispatch(BindTask task);
  void Loop();
  void Worker();
  void Emit(PodEvent event) const;
  // Log lines below options_.min_log_level are dropped.
  void Log(common::LogLevel level, const std::string& message) const;
  void Log(common::LogLevel level, const std::string& message, std::initializer_list<common::LogField> fields) const;
  void ObserveAttempt(std::chrono::steady_clock::time_point started) const;
  void ObserveE2e(double seconds) const;

  ClusterCache& cache_;
  ports::Binder& binder_;
  EventSink events_;
  const SchedulerCoreOptions options_;
  const common::Clock& clock_;
  std::unique_ptr<policy::PlacementPolicy> policy_;
  std::vector<std::unique_ptr<policy::PlacementPolicy>> scorers_;  // options_.weights's policies, in its order
  sched::GpuQueues gpu_queues_;
  std::atomic<bool> capacity_stale_{true};  // a node changed: the queues' capacity is summed again
  sched::SchedulingQueue queue_;

  // Scheduling thread only (ScheduleOne): the runner's caches and the tie-break generator.
  sched::CycleRunner runner_;
  sched::SnapshotBuilder snapshots_;
  bool wants_forecast_ = false;  // a policy of the profile reads an interference forecast, and a model is given
  bool hint_room_ = true;        // WakeForRoomOn may match pods against the node's filters (no policy reads inputs)
  common::Rng rng_;
  // Requests that fit nowhere and found no victims at fit_nowhere_epoch_ (the cluster's FreedGeneration plus
  // placed_epoch_): another pod that asks the same of the same queue fails alike until the epoch moves.
  struct FitNowhere {
    core::PodRequest request;
    std::string queue;
    bool reclaim = false;
    std::string summary;
    uint32_t blockers = 0;
  };
  static constexpr size_t kFitNowhereMax = 64;
  // Preemption looks for candidates as kube-scheduler's DefaultPreemption does (minCandidateNodesPercentage,
  // minCandidateNodesAbsolute): node after node, from where its last search stopped (candidate_offset_), until
  // max(10 % of the nodes, 100) nodes offer victims; it chooses among those. Nodes are collected in chunks.
  static constexpr size_t kMinCandidateNodes = 100;
  static constexpr size_t kMinCandidateNodesPercent = 10;
  static constexpr size_t kPreemptionChunk = 64;
  size_t candidate_offset_ = 0;
  std::vector<FitNowhere> fit_nowhere_;
  uint64_t fit_nowhere_epoch_ = 0;
  std::atomic<uint64_t> placed_epoch_{0};  // pods placed (bound, assumed): victims and queues changed

  mutable std::mutex mu_;
  std::unordered_map<std::string, Pending> pending_;    // GUARDED_BY(mu_), by uid
  std::unordered_map<std::string, Running> running_;    // GUARDED_BY(mu_), placed pods by uid
  std::unordered_set<std::string> with_anti_affinity_;  // GUARDED_BY(mu_), uids in running_ with anti-affinity
  std::unordered_set<std::string> assumed_;             // GUARDED_BY(mu_), uids in running_ that are assumed
  // GUARDED_BY(mu_): placed gang members by group (namespace/pod-group), and each one's group.
  std::unordered_map<std::string, std::unordered_set<std::string>> placed_by_group_;
  std::unordered_map<std::string, std::string> group_of_;
  // GUARDED_BY(mu_): the placed pods that may be victims (bound, not leaving), by uid with their queue and
  // priority, and the priorities of each queue's (AnyPossibleVictim). Kept in step by Recount.
  std::unordered_map<std::string, std::pair<std::string, int32_t>> counted_;
  std::unordered_map<std::string, std::multiset<int32_t>> priorities_by_queue_;
  std::map<std::string, core::DisruptionBudget> budgets_;   // GUARDED_BY(mu_), by namespace/name
  std::unordered_map<std::string, int32_t> pod_group_min_;  // GUARDED_BY(mu_): PodGroups' minMember by ns/name
  // GUARDED_BY(mu_): namespace labels, replaced (never changed in place) on each change, so that an attempt keeps
  // the version it started with.
  std::shared_ptr<const sched::NamespaceLabels> namespaces_;
  // GUARDED_BY(the cache's lock, written under its write lock): nominations by pod uid. Lock order: the cache's
  // lock, then mu_ (never the cache's while mu_ is held).
  std::unordered_map<std::string, Nomination> nominations_;
  SchedulerStats stats_;  // GUARDED_BY(mu_)
  // GUARDED_BY(mu_): the GpuQueue objects by name (read, or why not), and the queues left out with why.
  std::map<std::string, common::Result<core::QueueSpec>> queue_objects_;
  std::map<std::string, std::string> queue_specs_seen_;  // GUARDED_BY(mu_): each object's spec as last read
  std::map<std::string, std::string> queue_errors_;

  // The scheduling thread's wake-ups and the bind workers' tasks.
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool wake_ = false;           // GUARDED_BY(loop_mu_)
  bool stop_ = false;           // GUARDED_BY(loop_mu_)
  std::deque<BindTask> binds_;  // GUARDED_BY(loop_mu_)
  std::condition_variable bind_cv_;
  bool started_ = false;
  std::thread loop_;
  std::vector<std::thread> workers_;
};

}  // namespace gpusched::sched
