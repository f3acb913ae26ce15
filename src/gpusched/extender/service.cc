#include "gpusched/extender/service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <string_view>
#include <thread>

#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"
#include "gpusched/extender/wire.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/policy/registry.h"
#include "gpusched/policy/target_workload.h"
#include "gpusched/sched/allocation_text.h"
#include "gpusched/sched/cycle_runner.h"
#include "gpusched/sched/interference_forecast.h"
#include "gpusched/sched/preemption.h"
#include "gpusched/sched/victims.h"

namespace gpusched::extender {
namespace {

using nlohmann::json;

constexpr size_t kPodCacheSize = 4096;

std::atomic<uint64_t> next_service_id{1};

Reply BadRequest(const common::Status& s) { return Reply{.status = 400, .body = EncodeBindingResult(s.message())}; }

std::string FilterError(std::string_view message) {
  return EncodeFilterResult(FilterResult{.error = std::string(message)});
}

// The CycleRunner of this thread for (service, policy): runners own a score cache and are single-threaded.
sched::CycleRunner& RunnerFor(uint64_t service, const policy::PlacementPolicy& p) {
  thread_local std::map<std::pair<uint64_t, const policy::PlacementPolicy*>, std::unique_ptr<sched::CycleRunner>>
      runners;
  auto& r = runners[{service, &p}];
  if (!r) {
    r = std::make_unique<sched::CycleRunner>(
        p, sched::CycleOptions{.check_node_resources = false, .collect_reasons = true, .use_score_cache = true});
  }
  return *r;
}

int64_t ToExtenderScore(int64_t score) {
  const int64_t s = std::clamp<int64_t>(score, 0, policy::kMaxScore);
  return (s * 10 + policy::kMaxScore / 2) / policy::kMaxScore;
}

}  // namespace

common::Result<std::unique_ptr<ExtenderService>> ExtenderService::Create(ClusterMirror& mirror, ports::Binder& binder,
                                                                         PodLookup lookup, ServiceOptions options,
                                                                         ExtenderMetrics* metrics) {
  if (options.scheduler_names.empty()) {
    return common::InvalidArgument("extender: scheduler_names is empty (no pod could ever be bound)");
  }
  if (options.bind_filter_window_ms <= 0 || options.max_filter_records == 0 || options.max_filter_record_nodes == 0) {
    return common::InvalidArgument("extender: the bind filter window and the filter record caps must be positive");
  }
  std::unique_ptr<ExtenderService> s(
      new ExtenderService(mirror, binder, std::move(lookup), std::move(options), metrics));
  const policy::PolicyOptions policy_options{.target_workload = policy::DefaultTargetWorkload(),
                                             .load_aware = s->options_.load_aware,
                                             .interference_aware = s->options_.interference_aware};
  for (const auto& name : policy::PolicyNames()) {
    auto p = policy::MakePolicy(name, policy_options);
    if (!p.ok()) {
      return common::Internal("policy " + name + ": " + p.status().message());
    }
    s->policies_.emplace(name, std::move(p).value());
  }
  auto it = s->policies_.find(s->options_.policy);
  if (it == s->policies_.end()) {
    std::string names;
    for (const auto& [n, p] : s->policies_) {
      names += (names.empty() ? "" : ", ") + n;
    }
    return common::InvalidArgument("unknown policy \"" + s->options_.policy + "\"; choose one of " + names);
  }
  s->default_policy_ = it->second.get();
  for (const auto& [name, weight] : s->options_.weights) {
    auto w = s->policies_.find(name);
    if (w == s->policies_.end()) {
      return common::InvalidArgument("weights: unknown policy \"" + name + "\"");
    }
    s->weighted_.emplace_back(w->second.get(), weight);
  }
  return s;
}

ExtenderService::ExtenderService(ClusterMirror& mirror, ports::Binder& binder, PodLookup lookup, ServiceOptions options,
                                 ExtenderMetrics* metrics)
    : mirror_(mirror),
      binder_(binder),
      lookup_(std::move(lookup)),
      options_(std::move(options)),
      metrics_(metrics),
      id_(next_service_id.fetch_add(1)),
      clock_(options_.clock != nullptr ? options_.clock : &common::SystemClock::Instance()),
      rng_(options_.seed != 0 ? options_.seed
                              : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())),
      snapshots_(sched::SnapshotSources{.metrics = options_.metrics,
                                        .staleness_ms = options_.staleness_ms,
                                        .slowdown_model = options_.slowdown_model}) {}

ExtenderService::~ExtenderService() = default;

common::Result<std::shared_ptr<ExtenderService::DecodedPod>> ExtenderService::DecodeObject(json object) {
  auto meta = kube::DecodePodMeta(object);
  if (!meta.ok()) {
    return common::InvalidArgument("extender request: " + meta.status().message());
  }
  auto decoded = std::make_shared<DecodedPod>();
  decoded->request = kube::DecodePodRequest(object, options_.resources);
  if (const std::string* p = meta->Annotation(kube::kAnnotationPolicy); p != nullptr) {
    decoded->policy = *p;
  }
  decoded->meta = std::move(meta).value();
  decoded->object = std::make_shared<const json>(std::move(object));
  return decoded;
}

common::Result<std::shared_ptr<const ExtenderService::DecodedPod>> ExtenderService::Decode(std::string_view pod_json) {
  const size_t hash = std::hash<std::string_view>{}(pod_json);
  {
    std::lock_guard lock(pods_mu_);
    // The hash alone could be made to collide: another pod's decoding would answer for this one.
    if (auto it = by_hash_.find(hash); it != by_hash_.end() && it->second->text == pod_json) {
      return it->second;
    }
  }
  json object = json::parse(pod_json, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded() || !object.is_object()) {
    return common::InvalidArgument("extender request: Pod is not valid JSON");
  }
  auto decoded = DecodeObject(std::move(object));
  if (!decoded.ok()) {
    return decoded.status();
  }
  (*decoded)->text = std::string(pod_json);
  std::shared_ptr<const DecodedPod> shared = std::move(decoded).value();
  std::lock_guard lock(pods_mu_);
  if (by_hash_.size() >= kPodCacheSize) {
    by_hash_.clear();
  }
  by_hash_.insert_or_assign(hash, shared);
  return shared;
}

void ExtenderService::RecordFilter(const std::string& uid, const std::vector<const NodeRef*>& passed) {
  if (uid.empty()) {
    return;  // nothing could bind it: bind requires the uid
  }
  std::vector<uint64_t> nodes;
  nodes.reserve(passed.size());
  for (const NodeRef* n : passed) {
    nodes.push_back(std::hash<std::string_view>{}(n->name));
  }
  // Unsorted: every filter records, one bind in many reads it back with a linear scan (a few microseconds for 5000
  // nodes), cheaper than sorting 5000 hashes per filter.
  const int64_t now = clock_->NowMs();
  std::lock_guard lock(filters_mu_);
  auto [it, inserted] = filtered_.try_emplace(uid);
  FilterRecord& record = it->second;
  if (inserted) {
    record.age = filter_order_.insert(filter_order_.end(), uid);
  } else {
    filtered_nodes_ -= record.nodes.size();
    filter_order_.splice(filter_order_.end(), filter_order_, record.age);  // the newest now
  }
  record.at_ms = now;
  filtered_nodes_ += nodes.size();
  record.nodes = std::move(nodes);
  TrimFilters(now);
}

void ExtenderService::TrimFilters(int64_t now_ms) {
  while (!filter_order_.empty()) {
    auto it = filtered_.find(filter_order_.front());
    const bool expired = now_ms - it->second.at_ms > options_.bind_filter_window_ms;
    // The newest record stays even when it alone is over the node cap (one request's worth, bounded by the body).
    const bool over = filter_order_.size() > 1 && (filtered_.size() > options_.max_filter_records ||
                                                   filtered_nodes_ > options_.max_filter_record_nodes);
    if (!expired && !over) {
      break;
    }
    filtered_nodes_ -= it->second.nodes.size();
    filtered_.erase(it);
    filter_order_.pop_front();
  }
}

std::string ExtenderService::CheckFiltered(const std::string& uid, const std::string& node, std::string* reason) {
  const int64_t now = clock_->NowMs();
  const std::string window = std::to_string(options_.bind_filter_window_ms / 1000) + "s";
  std::lock_guard lock(filters_mu_);
  auto it = filtered_.find(uid);
  if (it == filtered_.end() || now - it->second.at_ms > options_.bind_filter_window_ms) {
    *reason = it == filtered_.end() ? "not_filtered" : "filter_expired";
    const std::string when = it == filtered_.end()
                                 ? "no filter for this pod within the last " + window
                                 : "its last filter was " + std::to_string((now - it->second.at_ms) / 1000) +
                                       "s ago, over the " + window + " window";
    TrimFilters(now);
    return "node " + node + " did not pass gpusched's filter for this pod (" + when +
           "); kube-scheduler filters before it binds";
  }
  const uint64_t h = std::hash<std::string_view>{}(node);
  if (std::find(it->second.nodes.begin(), it->second.nodes.end(), h) == it->second.nodes.end()) {
    *reason = "node_not_filtered";
    return "node " + node + " did not pass gpusched's filter for this pod (" + std::to_string(it->second.nodes.size()) +
           " other node(s) did)";
  }
  return "";
}

void ExtenderService::ConsumeFilter(const std::string& uid) {
  std::lock_guard lock(filters_mu_);
  if (auto it = filtered_.find(uid); it != filtered_.end()) {
    filtered_nodes_ -= it->second.nodes.size();
    filter_order_.erase(it->second.age);
    filtered_.erase(it);
  }
}

policy::Inputs ExtenderService::DefaultReads() const {
  if (weighted_.empty()) {
    return default_policy_->Reads();
  }
  policy::Inputs reads;
  for (const auto& [p, weight] : weighted_) {
    reads |= p->Reads();
  }
  return reads;
}

bool ExtenderService::WantsForecast(std::span<const policy::PlacementPolicy* const> policies) const {
  return snapshots_.WantsForecast(policies);
}

policy::Snapshot ExtenderService::MakeSnapshot(const core::PodRequest& pod, const core::ClusterState& state,
                                               std::span<const size_t> slots, bool forecast, SnapshotHold& hold) const {
  // Only the nodes this request is about: a forecast of a 5000-node cluster per request would cost milliseconds.
  return snapshots_.Build(
      pod.app, state, slots, [this](const common::PodUid& uid) { return mirror_.AppOf(uid); }, forecast, hold);
}

const policy::PlacementPolicy* ExtenderService::PolicyFor(const DecodedPod& pod) const {
  if (pod.policy.empty()) {
    return default_policy_;
  }
  auto it = policies_.find(pod.policy);
  return it == policies_.end() ? nullptr : it->second.get();
}

std::optional<Reply> ExtenderService::RefuseUnsynced(std::string_view verb,
                                                     std::string (*encode)(std::string_view message)) {
  if (!options_.sync_gate) {
    return std::nullopt;
  }
  const std::string waiting = options_.sync_gate();
  if (waiting.empty()) {
    return std::nullopt;
  }
  if (metrics_ != nullptr) {
    metrics_->NotSynced(verb);
  }
  return Reply{.status = 503,
               .body = encode(std::string(verb) + " refused: not synced: waiting for " + waiting +
                              " (the extender answers once its caches hold every pod and node; retry)")};
}

Reply ExtenderService::Filter(std::string body) {
  if (auto refused = RefuseUnsynced("filter", &FilterError); refused.has_value()) {
    return *std::move(refused);
  }
  auto args = DecodeExtenderArgs(std::move(body));
  if (!args.ok()) {
    if (metrics_ != nullptr) {
      metrics_->FilterRejection("invalid_request");
    }
    return BadRequest(args.status());
  }
  auto pod = Decode(args->pod);
  if (!pod.ok()) {
    return BadRequest(pod.status());
  }
  FilterResult result{.full_nodes = args->full_nodes};
  const DecodedPod& p = **pod;
  // Every answer is recorded: bind takes only a node that passed for this pod UID (a later filter of the same pod
  // replaces the record, also when nothing passed).
  auto answer = [&] {
    RecordFilter(p.meta.uid.str(), result.passed);
    return Reply{.status = 200, .body = EncodeFilterResult(result)};
  };
  auto fail_all = [&](const std::string& reason, std::string_view category) {
    for (const auto& n : args->nodes) {
      result.failed.emplace_back(n.name, reason);
      result.failed_unresolvable.emplace_back(n.name, reason);
    }
    if (metrics_ != nullptr) {
      metrics_->FilterRejection(category, static_cast<double>(args->nodes.size()));
    }
    return answer();
  };
  if (!p.request.ok()) {
    return fail_all(p.request.status().message(), "invalid_request");
  }
  const core::PodRequest& request = *p.request;
  if (!request.RequestsGpu()) {
    for (const auto& n : args->nodes) {
      result.passed.push_back(&n);
    }
    return answer();
  }
  const policy::PlacementPolicy* pol = PolicyFor(p);
  if (pol == nullptr) {
    return fail_all("pod " + request.name + ": unknown policy \"" + p.policy + "\" in annotation " +
                        std::string(kube::kAnnotationPolicy),
                    "unknown_policy");
  }
  auto lock = mirror_.ReadLock();
  const core::ClusterState& state = mirror_.state();
  const common::MiB largest = mirror_.LargestGpuMemory();
  for (const auto& c : request.containers) {
    if (c.memory_per_gpu > largest) {
      lock.unlock();
      return fail_all("pod " + request.name + ": container " + c.container + " asks for " +
                          std::to_string(c.memory_per_gpu.value()) +
                          " MiB per GPU; the largest GPU in the cluster has " + std::to_string(largest.value()) +
                          " MiB",
                      "gpu_unresolvable");
    }
  }
  std::vector<size_t> slots;
  std::vector<const NodeRef*> known;
  slots.reserve(args->nodes.size());
  known.reserve(args->nodes.size());
  size_t unknown = 0;
  for (const auto& n : args->nodes) {
    if (auto slot = state.SlotOf(n.name); slot.has_value()) {
      slots.push_back(*slot);
      known.push_back(&n);
    } else {
      ++unknown;
      result.failed.emplace_back(n.name, "node " + n.name + " is not in gpusched's node cache (no Node seen yet)");
    }
  }
  std::vector<sched::CycleRunner::NodeEval> evals;
  sched::CycleRunner& runner = RunnerFor(id_, *pol);
  SnapshotHold hold;
  const policy::Snapshot snapshot = MakeSnapshot(request, state, slots, WantsForecast(std::span(&pol, 1)), hold);
  runner.Evaluate(request, state, slots, snapshot, evals);
  size_t busy = 0;
  size_t never = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (evals[i].fits) {
      result.passed.push_back(known[i]);
      continue;
    }
    policy::Fit fit = runner.Filter(request, state.View(slots[i]), snapshot);
    if (fit.code == policy::Fit::Code::kUnresolvable) {
      ++never;
      result.failed_unresolvable.emplace_back(known[i]->name, fit.reason);
    } else {
      ++busy;
    }
    result.failed.emplace_back(known[i]->name, std::move(fit.reason));
  }
  lock.unlock();
  if (metrics_ != nullptr) {
    if (busy > 0) metrics_->FilterRejection("gpu_capacity", static_cast<double>(busy));
    if (never > 0) metrics_->FilterRejection("gpu_unresolvable", static_cast<double>(never));
    if (unknown > 0) metrics_->FilterRejection("unknown_node", static_cast<double>(unknown));
  }
  return answer();
}

Reply ExtenderService::Prioritize(std::string body) {
  if (auto refused = RefuseUnsynced("prioritize", &EncodeBindingResult); refused.has_value()) {
    return *std::move(refused);
  }
  auto args = DecodeExtenderArgs(std::move(body));
  if (!args.ok()) {
    return BadRequest(args.status());
  }
  auto pod = Decode(args->pod);
  if (!pod.ok()) {
    return BadRequest(pod.status());
  }
  std::vector<std::pair<std::string, int64_t>> scores;
  scores.reserve(args->nodes.size());
  for (const auto& n : args->nodes) {
    scores.emplace_back(n.name, 0);
  }
  const DecodedPod& p = **pod;
  const policy::PlacementPolicy* pol = PolicyFor(p);
  if (!p.request.ok() || !p.request->RequestsGpu() || pol == nullptr) {
    return Reply{.status = 200, .body = EncodeHostPriorityList(scores)};
  }
  const core::PodRequest& request = *p.request;
  auto lock = mirror_.ReadLock();
  const core::ClusterState& state = mirror_.state();
  std::vector<size_t> slots;
  std::vector<size_t> index;  // position in scores
  for (size_t i = 0; i < args->nodes.size(); ++i) {
    if (auto slot = state.SlotOf(args->nodes[i].name); slot.has_value()) {
      slots.push_back(*slot);
      index.push_back(i);
    }
  }
  // One policy (the pod's, or the configured one), or the configured weighted mix when the pod names none.
  std::vector<std::pair<const policy::PlacementPolicy*, double>> mix;
  if (p.policy.empty() && !weighted_.empty()) {
    mix = weighted_;
  } else {
    mix.emplace_back(pol, 1.0);
  }
  std::vector<const policy::PlacementPolicy*> used;
  std::vector<sched::ScoreWeight> runners;
  for (const auto& [policy, weight] : mix) {
    used.push_back(policy);
    runners.push_back(sched::ScoreWeight{.runner = &RunnerFor(id_, *policy), .weight = weight});
  }
  SnapshotHold hold;
  const policy::Snapshot snapshot = MakeSnapshot(request, state, slots, WantsForecast(used), hold);
  std::vector<double> mixed;
  sched::MixScores(runners, request, state, slots, snapshot, mixed);
  lock.unlock();
  for (size_t i = 0; i < mixed.size(); ++i) {
    scores[index[i]].second = ToExtenderScore(std::llround(mixed[i]));
  }
  return Reply{.status = 200, .body = EncodeHostPriorityList(scores)};
}

Reply ExtenderService::Bind(std::string body) {
  // Before anything else: an unsynced mirror would choose GPUs that bound pods hold.
  if (auto refused = RefuseUnsynced("bind", &EncodeBindingResult); refused.has_value()) {
    if (metrics_ != nullptr) {
      metrics_->Bind(false);
      metrics_->BindRefused("not_synced");
    }
    return *std::move(refused);
  }
  // Set once the pod is known (the cache's pod has the uid kube-scheduler sent): refusals from then on are told to
  // it as an Event too.
  std::optional<ports::PodEvent> about;
  auto tell = [&](std::string type, std::string reason, std::string message) {
    if (about.has_value() && options_.events != nullptr) {
      ports::PodEvent e = *about;
      e.type = std::move(type);
      e.reason = std::move(reason);
      e.message = std::move(message);
      options_.events->Record(std::move(e));
    }
  };
  auto refuse = [&](int status, std::string_view reason, const std::string& message) {
    if (metrics_ != nullptr) {
      metrics_->Bind(false);
      metrics_->BindRefused(reason);
    }
    if (about.has_value()) {
      common::Log(common::LogLevel::kInfo, message,
                  {{"pod", about->namespace_ + "/" + about->name}, {"reason", std::string(reason)}});
    }
    tell("Warning", "GPUBindRefused", "gpusched extender: " + message);
    return Reply{.status = status, .body = EncodeBindingResult(message)};
  };
  auto args = DecodeBindingArgs(std::move(body));
  if (!args.ok()) {
    return refuse(400, "invalid_request", "bind refused: " + args.status().message());
  }
  const std::string key = args->pod_namespace + "/" + args->pod_name;
  const std::string what = "bind of pod " + key + " to node " + args->node + " refused: ";
  if (args->pod_uid.empty()) {
    return refuse(400, "no_uid", what + "PodUID is required (kube-scheduler always sends it)");
  }
  if (options_.bind_gate) {
    if (std::string why = options_.bind_gate(); !why.empty()) {
      return refuse(503, "not_leader", what + why);
    }
  }
  // The pod as the API server has it (the watch cache), never as the caller describes it. kube-scheduler's own
  // watch may be a few milliseconds ahead of this one (a pod created just now, or re-created under its name): give
  // the cache up to pod_cache_wait_ms to show the pod with the uid kube-scheduler names before refusing.
  auto look = [&] { return lookup_ ? lookup_(args->pod_namespace, args->pod_name) : std::nullopt; };
  std::optional<json> object = look();
  const auto wait_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.pod_cache_wait_ms);
  auto stale = [&] {
    if (!object.has_value()) {
      return true;
    }
    auto cached = kube::DecodePodMeta(*object);
    return cached.ok() && cached->uid.str() != args->pod_uid;
  };
  while (stale() && std::chrono::steady_clock::now() < wait_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    object = look();
  }
  if (!object.has_value()) {
    return refuse(404, "unknown_pod", what + "the pod is not in gpusched's pod cache");
  }
  auto decoded = DecodeObject(std::move(*object));
  if (!decoded.ok()) {
    return refuse(400, "invalid_pod", what + decoded.status().message());
  }
  const std::shared_ptr<const DecodedPod> pod = std::move(decoded).value();
  const kube::PodMeta& meta = pod->meta;
  if (meta.uid.str() != args->pod_uid) {
    // The cached uid stays out of the message: it is not the caller's to learn.
    return refuse(409, "uid_mismatch",
                  what + "PodUID " + args->pod_uid + " is not the uid of the pod of that name (recreated?)");
  }
  about = ports::PodEvent{.namespace_ = args->pod_namespace, .name = args->pod_name, .uid = args->pod_uid};
  if (!meta.node_name.empty()) {
    return refuse(409, "already_bound", what + "the pod is already bound to node " + meta.node_name);
  }
  if (meta.deleting) {
    return refuse(409, "terminating", what + "the pod is terminating (metadata.deletionTimestamp is set)");
  }
  const std::string scheduler = meta.scheduler_name.empty() ? "default-scheduler" : meta.scheduler_name;
  if (std::find(options_.scheduler_names.begin(), options_.scheduler_names.end(), scheduler) ==
      options_.scheduler_names.end()) {
    std::string names;
    for (const auto& n : options_.scheduler_names) {
      names += (names.empty() ? "" : ", ") + n;
    }
    return refuse(403, "other_scheduler",
                  what + "the pod's schedulerName is " + scheduler + ", not one gpusched binds for (" + names + ")");
  }
  std::string filter_reason;
  if (std::string why = CheckFiltered(args->pod_uid, args->node, &filter_reason); !why.empty()) {
    return refuse(403, filter_reason, what + why);
  }
  if (!pod->request.ok()) {
    return refuse(400, "invalid_pod", what + pod->request.status().message());
  }
  core::PodRequest request = *pod->request;
  const policy::PlacementPolicy* pol = PolicyFor(*pod);
  if (pol == nullptr) {
    return refuse(
        400, "unknown_policy",
        what + "unknown policy \"" + pod->policy + "\" in annotation " + std::string(kube::kAnnotationPolicy));
  }
  const common::NodeName node(args->node);
  core::Allocation allocation{.pod = request.uid, .node = node, .share_group = request.GpuShareGroup()};
  if (request.RequestsGpu()) {
    auto lock = mirror_.WriteLock();
    core::ClusterState& state = mirror_.state();
    const core::NodeView* view = state.Find(node);
    if (view == nullptr) {
      return refuse(404, "unknown_node", what + "the node is not in gpusched's node cache");
    }
    if (const core::Allocation* held = state.FindAllocation(request.uid); held != nullptr) {
      // A retry after a bind whose outcome is unknown, to the same node: send the same allocation again (if the
      // first Binding landed, this one gets 409 and the watch confirms). Anything else waits for the watch.
      if (mirror_.BindState(request.uid) != sched::ClusterCache::HeldForBind::kResend || held->node != node) {
        return refuse(409, "already_allocated",
                      what + "the pod already holds an allocation on node " + held->node.str() +
                          " (bound, a bind in flight, or one whose outcome the watch has not shown yet)");
      }
      allocation = *held;
    } else {
      // 200 from here on: kube-scheduler shows the Error of a 200 in the pod's events, and these happen to it too.
      policy::Fit fit = pol->Filter(request, *view);
      if (!fit.fits()) {
        return refuse(200, "no_fit", what + "the pod no longer fits: " + fit.reason);
      }
      {
        SnapshotHold hold;
        const std::optional<size_t> slot = state.SlotOf(view->name());
        const std::vector<size_t> one = slot.has_value() ? std::vector<size_t>{*slot} : std::vector<size_t>{};
        const policy::Snapshot snapshot = MakeSnapshot(request, state, one, WantsForecast(std::span(&pol, 1)), hold);
        std::lock_guard rng_lock(rng_mu_);
        allocation.containers = pol->SelectGpusWithSnapshot(request, *view, snapshot, rng_);
      }
      allocation.id = mirror_.NextAllocationId();
      if (auto s = state.Assume(allocation); !s.ok()) {
        return refuse(200, "no_fit", what + s.message());
      }
    }
    // Whatever happens to this thread from here on, the assumption cannot outlive its deadline.
    mirror_.BindStarting(request, options_.bind_in_flight_ms);
  }
  // The API calls run without the lock: filters and other binds go on meanwhile.
  const common::Status s = binder_.Bind(request, allocation);
  if (request.RequestsGpu()) {
    // The GPUs stay taken while the outcome is unknown (the Binding may have been written), until the watch shows
    // the pod or the TTL ends; a bind that failed gives them back.
    (void)mirror_.FinishBind(request.uid, node, s, options_.assumed_ttl_ms);
  }
  if (!s.ok()) {
    const bool unknown = ports::BindOutcomeUnknown(s);
    if (metrics_ != nullptr) {
      metrics_->Bind(false);
      if (unknown) {
        metrics_->BindUnknown();
      }
    }
    const std::string failed =
        "bind: pod " + key + " to " + args->node + ": " + s.message() +
        (unknown ? " (outcome unknown: its GPUs stay assumed until the watch shows the pod, at most " +
                       std::to_string(options_.assumed_ttl_ms / 1000) + " s)"
                 : "");
    common::Log(common::LogLevel::kWarn, failed,
                {{"pod", key}, {"node", args->node}, {"reason", unknown ? "bind_outcome_unknown" : "bind_failed"}});
    tell("Warning", "GPUBindFailed", "gpusched extender: " + failed);
    return Reply{.status = 200, .body = EncodeBindingResult(failed)};
  }
  ConsumeFilter(args->pod_uid);
  const std::string gpus = sched::DescribeGpus(allocation);
  common::Log(common::LogLevel::kInfo, "extender: pod " + key + " bound to " + args->node,
              {{"pod", key}, {"node", args->node}, {"gpus", gpus}, {"allocation", std::to_string(allocation.id)}});
  if (!gpus.empty()) {
    tell(
        "Normal", "GPUsAssigned",
        "gpusched assigned " + gpus + " on node " + args->node + " (allocation " + std::to_string(allocation.id) + ")");
  }
  if (metrics_ != nullptr) {
    metrics_->Bind(true);
  }
  return Reply{.status = 200, .body = EncodeBindingResult("")};
}

Reply ExtenderService::Preempt(std::string body) {
  if (auto refused = RefuseUnsynced("preempt", &EncodeBindingResult); refused.has_value()) {
    return *std::move(refused);
  }
  auto args = DecodePreemptionArgs(std::move(body));
  if (!args.ok()) {
    return BadRequest(args.status());
  }
  auto pod = Decode(args->pod);
  if (!pod.ok()) {
    return BadRequest(pod.status());
  }
  const DecodedPod& p = **pod;
  const policy::PlacementPolicy* pol = PolicyFor(p);
  if (!p.request.ok() || !p.request->RequestsGpu() || pol == nullptr) {
    // Nothing gpusched can add: the scheduler's own victims stand.
    return Reply{.status = 200, .body = EncodePreemptionResult(args->nodes)};
  }
  const core::PodRequest& request = *p.request;
  std::vector<std::pair<std::string, NodeVictims>> out;
  auto lock = mirror_.ReadLock();
  const core::ClusterState& state = mirror_.state();
  for (auto& [node_name, victims] : args->nodes) {
    const common::NodeName name(node_name);
    const core::NodeView* found = state.Find(name);
    if (found == nullptr) {
      continue;
    }
    core::NodeView view = *found;
    std::vector<std::string> chosen = victims.pod_uids;
    for (const auto& uid : victims.pod_uids) {
      if (const core::Allocation* a = state.FindAllocation(common::PodUid(uid)); a != nullptr && a->node == name) {
        sched::RemoveFromView(view, *a);
      }
    }
    if (!pol->Filter(request, view).fits()) {
      // kube-scheduler's victims are not enough for the GPUs: add GPU holders of lower priority, as the scheduler's
      // own preemption chooses them (sched::CollectVictims: known bound, of lower priority; then
      // sched::SelectVictimsOnNode: the least important go, the rest are spared). The extender keeps no GPU queues
      // or gangs, and kube-scheduler counts the budgets.
      std::unordered_map<common::PodUid, sched::PlacedPod> placed;
      for (const auto& uid : state.PodsOn(name)) {
        if (std::find(chosen.begin(), chosen.end(), uid.str()) != chosen.end()) {
          continue;  // off the view already
        }
        const core::Allocation* a = state.FindAllocation(uid);
        sched::PlacedPod& record = placed[uid];
        record.uid = uid;
        record.node = name;
        record.priority = mirror_.PriorityOf(uid);
        record.start_ms = static_cast<int64_t>(a->id >> 16);  // among equals a larger allocation id started later
        record.assumed = !state.IsConfirmed(uid);             // its bind is in flight: never a victim
      }
      const sched::VictimRules rules{.priority = request.priority, .need_milli = request.TotalGpuMilli().value()};
      const core::NodeView* one = &view;
      const sched::VictimPool pool = sched::CollectVictims(
          state, std::span(&one, 1),
          [&](const common::PodUid& uid) -> const sched::PlacedPod* {
            auto it = placed.find(uid);
            return it == placed.end() ? nullptr : &it->second;
          },
          rules);
      std::optional<sched::VictimSet> more;
      if (!pool.nodes.empty()) {
        more = sched::SelectVictimsOnNode(view, pool.nodes[0].potential, pool.allowed,
                                          [&](const core::NodeView& v) { return pol->Filter(request, v).fits(); });
      }
      if (!more.has_value()) {
        continue;  // even every lower-priority GPU holder is not enough: no candidate here
      }
      for (const auto& uid : more->victims) {
        chosen.push_back(uid.str());
      }
    }
    out.emplace_back(node_name,
                     NodeVictims{.pod_uids = std::move(chosen), .num_pdb_violations = victims.num_pdb_violations});
  }
  lock.unlock();
  return Reply{.status = 200, .body = EncodePreemptionResult(out)};
}

}  // namespace gpusched::extender
