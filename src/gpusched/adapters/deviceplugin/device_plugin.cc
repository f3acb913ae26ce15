#include "gpusched/adapters/deviceplugin/device_plugin.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "gpusched/adapters/deviceplugin/device_ids.h"
#include "gpusched/adapters/deviceplugin/handoff.h"
#include "gpusched/common/backoff.h"
#include "gpusched/common/log.h"
#include "gpusched/common/log_fields.h"

namespace gpusched::adapters::deviceplugin {
namespace {

namespace pb = ::v1beta1;
using Clock = std::chrono::steady_clock;
using common::LogLevel;

const std::set<std::string, std::less<>>& SupportedResources() {
  static const std::set<std::string, std::less<>> names(std::begin(kube::kCountableGpuResources),
                                                        std::end(kube::kCountableGpuResources));
  return names;
}

struct SocketIdentity {
  ino_t inode = 0;
  int64_t ctime_ns = 0;
  bool operator==(const SocketIdentity&) const = default;
};

std::optional<SocketIdentity> Identify(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return std::nullopt;
  }
  return SocketIdentity{.inode = st.st_ino,
                        .ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
}

grpc::StatusCode ToGrpc(common::StatusCode code) {
  switch (code) {
    case common::StatusCode::kOk:
      return grpc::StatusCode::OK;
    case common::StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case common::StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case common::StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case common::StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case common::StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case common::StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case common::StatusCode::kUnauthenticated:
      return grpc::StatusCode::UNAUTHENTICATED;
    case common::StatusCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case common::StatusCode::kAborted:
      return grpc::StatusCode::ABORTED;
    case common::StatusCode::kDeadlineExceeded:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case common::StatusCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::UNKNOWN;
}

grpc::Status ToGrpc(const common::Status& s) { return {ToGrpc(s.code()), s.message()}; }

std::string Join(std::span<const std::string> ids) {
  std::string out;
  for (const auto& id : ids) {
    out += (out.empty() ? "" : ",") + id;
  }
  return out;
}

// Fields of a sample that the device list depends on.
bool SameDevices(const std::vector<ports::GpuSample>& a, const std::vector<ports::GpuSample>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].index != b[i].index || a[i].uuid != b[i].uuid || a[i].healthy != b[i].healthy ||
        a[i].numa_node != b[i].numa_node) {
      return false;
    }
  }
  return true;
}

}  // namespace

common::Status ValidateOptions(const DevicePluginOptions& o) {
  if (o.node_name.empty()) {
    return common::InvalidArgument("device plugin: node_name is required");
  }
  if (o.plugin_dir.empty() || o.kubelet_socket.empty() || o.socket_prefix.empty()) {
    return common::InvalidArgument("device plugin: plugin_dir, kubelet_socket and socket_prefix must be set");
  }
  if (o.resources.empty()) {
    return common::InvalidArgument("device plugin: no resources to serve");
  }
  std::set<std::string> seen;
  for (const auto& r : o.resources) {
    if (!SupportedResources().contains(r)) {
      return common::InvalidArgument("device plugin: unsupported resource \"" + r +
                                     "\" (supported: gpusched.io/gpu, nvidia.com/gpu, keti.com/mpsgpu)");
    }
    if (!seen.insert(r).second) {
      return common::InvalidArgument("device plugin: resource " + r + " listed twice");
    }
    const std::string path = o.plugin_dir + "/" + SocketName(o.socket_prefix, r);
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return common::InvalidArgument("device plugin: socket path " + path + " is longer than " +
                                     std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    }
  }
  if (o.replicas < 1 || o.replicas > kMaxReplicas) {
    return common::InvalidArgument("device plugin: replicas must be 1.." + std::to_string(kMaxReplicas) + ", got " +
                                   std::to_string(o.replicas));
  }
  if (o.nvidia_gpu_replicas < 1 || o.nvidia_gpu_replicas > kMaxReplicas) {
    return common::InvalidArgument("device plugin: nvidia_gpu_replicas must be 1.." + std::to_string(kMaxReplicas) +
                                   ", got " + std::to_string(o.nvidia_gpu_replicas));
  }
  if (o.poll_interval.count() <= 0 || o.initial_backoff.count() <= 0 || o.max_backoff < o.initial_backoff ||
      o.rpc_timeout.count() <= 0 || o.sample_interval.count() < 0) {
    return common::InvalidArgument(
        "device plugin: poll_interval, initial_backoff and rpc_timeout must be positive, max_backoff >= "
        "initial_backoff, sample_interval >= 0");
  }
  if (UsesCdi(o.device_list_strategy) && (o.cdi.kind.find('/') == std::string::npos || o.cdi.spec_dir.empty())) {
    return common::InvalidArgument("device plugin: the CDI kind must be <vendor>/<class> and the spec directory set");
  }
  if (o.mps.pipe_host_dir.empty() || o.mps.pipe_container_dir.empty() || o.mps.pipe_host_dir[0] != '/' ||
      o.mps.pipe_container_dir[0] != '/') {
    return common::InvalidArgument("device plugin: the MPS pipe directories must be absolute paths");
  }
  return common::Status::Ok();
}

std::string SocketName(std::string_view prefix, std::string_view resource) {
  std::string name(resource);
  std::replace(name.begin(), name.end(), '/', '-');
  std::replace(name.begin(), name.end(), '.', '-');
  return std::string(prefix) + "-" + name + ".sock";
}

int ReplicasFor(const DevicePluginOptions& options, std::string_view resource) {
  return resource == "nvidia.com/gpu" ? options.nvidia_gpu_replicas : options.replicas;
}

struct DevicePlugin::Impl {
  class Service;
  struct Server {
    std::string resource;
    std::string socket_path;
    std::unique_ptr<Service> service;
    std::unique_ptr<grpc::Server> server;
  };
  struct NodeState {
    std::vector<PodView> pods;
    std::vector<KubeletPod> kubelet;
  };

  Impl(DevicePluginOptions o, ports::DeviceInventory& inv, PodSource& p, PodResourcesSource& pr)
      : options(std::move(o)), inventory(inv), pods(p), pod_resources(pr) {}

  // Device list.
  pb::ListAndWatchResponse DeviceList(std::string_view resource);
  void ApplySamples(common::Result<std::vector<ports::GpuSample>> samples);
  std::vector<ports::GpuSample> Gpus() const {
    std::lock_guard lock(mu);
    return gpus;
  }

  // Allocate side; allocate_mu held.
  common::Result<NodeState> ReadNodeState();
  // `fresh`: PodSource::FreshPodsOnNode (a quorum read) instead of PodsOnNode (the informer's view).
  common::Result<NodeState> ReadPods(std::vector<KubeletPod> kubelet, bool fresh = false);
  common::Result<ContainerEnv> AllocateOne(const std::string& resource, const std::vector<std::string>& ids);
  std::vector<std::string> Prefer(const std::string& resource, const pb::ContainerPreferredAllocationRequest& r);
  common::Status CheckPreStart(const std::string& resource, const std::vector<std::string>& ids);
  // A Warning Event on the pod, through options.events (when set), and the refusal's one log line, with the pod's
  // fields (the gRPC side logs the refusals of pods that could not be identified).
  void Tell(const PodView& pod, const std::string& reason, const std::string& message) {
    refusal_logged = true;
    common::Log(LogLevel::kWarn, "device plugin: " + message,
                {{"pod", pod.meta.Key()}, {"node", options.node_name}, {"reason", reason}});
    if (options.events != nullptr) {
      options.events->Record(ports::PodEvent{.namespace_ = pod.meta.namespace_,
                                             .name = pod.meta.name,
                                             .uid = pod.meta.uid.str(),
                                             .type = "Warning",
                                             .reason = reason,
                                             .message = message});
    }
  }

  // Supervisor.
  void Run();
  common::Status ServeAndRegister();
  void StopServers();
  bool OurSocketsExist() const;
  void SetRegistration(bool ok, std::string error);
  std::string KubeletSocketPath() const { return options.plugin_dir + "/" + options.kubelet_socket; }

  const DevicePluginOptions options;
  ports::DeviceInventory& inventory;
  PodSource& pods;
  PodResourcesSource& pod_resources;

  mutable std::mutex mu;
  mutable std::condition_variable cv;  // devices changed, registration changed, stopping
  std::vector<ports::GpuSample> gpus;  // GUARDED_BY(mu) in index order
  bool sample_ok = true;               // GUARDED_BY(mu)
  uint64_t version = 0;                // GUARDED_BY(mu) bumped when the device list changes
  bool stopping = false;               // GUARDED_BY(mu)
  bool registered = false;             // GUARDED_BY(mu)
  uint64_t registrations = 0;          // GUARDED_BY(mu)
  std::string last_error;              // GUARDED_BY(mu)
  std::set<common::GpuUuid> cdi_gpus;  // GUARDED_BY(mu) the GPUs the CDI spec on disk has a device for
  std::string cdi_error;               // GUARDED_BY(mu) why a GPU is not there; "" when all are
  bool cdi_written = false;            // GUARDED_BY(mu) the spec on disk is the one for `gpus`

  std::mutex allocate_mu;
  HandoffLedger ledger;         // GUARDED_BY(allocate_mu)
  bool refusal_logged = false;  // GUARDED_BY(allocate_mu) Tell logged the refusal of the call in progress
  std::atomic<uint64_t> allocations{0};
  std::atomic<uint64_t> refusals{0};

  std::mutex start_mu;
  bool started = false;         // GUARDED_BY(start_mu)
  std::vector<Server> servers;  // supervisor thread only (and Stop, after joining it)
  std::thread supervisor;
};

class DevicePlugin::Impl::Service final : public pb::DevicePlugin::Service {
 public:
  Service(Impl& impl, std::string resource) : impl_(impl), resource_(std::move(resource)) {}

  // Ends the open ListAndWatch streams (they notice within 100 ms).
  void Close() {
    closing_ = true;
    impl_.cv.notify_all();
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* /*ctx*/, const pb::Empty* /*req*/,
                                      pb::DevicePluginOptions* out) override {
    out->set_pre_start_required(impl_.options.verify_pre_start);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const pb::Empty* /*req*/,
                            grpc::ServerWriter<pb::ListAndWatchResponse>* writer) override {
    std::optional<uint64_t> sent;
    std::unique_lock lock(impl_.mu);
    while (!impl_.stopping && !closing_ && !ctx->IsCancelled()) {
      if (sent != impl_.version) {
        sent = impl_.version;
        lock.unlock();
        pb::ListAndWatchResponse list = impl_.DeviceList(resource_);
        const bool ok = writer->Write(list);
        lock.lock();
        if (!ok) {
          break;  // the kubelet went away
        }
        continue;
      }
      impl_.cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext* /*ctx*/, const pb::PreferredAllocationRequest* req,
                                      pb::PreferredAllocationResponse* resp) override {
    std::lock_guard lock(impl_.allocate_mu);
    for (const auto& r : req->container_requests()) {
      auto* out = resp->add_container_responses();
      for (auto& id : impl_.Prefer(resource_, r)) {
        out->add_deviceids(std::move(id));
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext* /*ctx*/, const pb::AllocateRequest* req,
                        pb::AllocateResponse* resp) override {
    std::lock_guard lock(impl_.allocate_mu);
    for (const auto& r : req->container_requests()) {
      const std::vector<std::string> ids(r.devices_ids().begin(), r.devices_ids().end());
      impl_.refusal_logged = false;
      auto env = impl_.AllocateOne(resource_, ids);
      if (!env.ok()) {
        ++impl_.refusals;
        if (!impl_.refusal_logged) {
          common::Log(LogLevel::kWarn, "device plugin: Allocate " + resource_ + " [" + Join(ids) +
                                           "] refused: " + env.status().ToString());
        }
        return ToGrpc(env.status());
      }
      auto* out = resp->add_container_responses();
      for (const auto& [k, v] : env->envs) {
        (*out->mutable_envs())[k] = v;
      }
      for (const auto& m : env->mounts) {
        auto* pm = out->add_mounts();
        pm->set_container_path(m.container_path);
        pm->set_host_path(m.host_path);
        pm->set_read_only(m.read_only);
      }
      for (const auto& [k, v] : env->annotations) {
        (*out->mutable_annotations())[k] = v;
      }
      for (const auto& name : env->cdi_devices) {
        out->add_cdi_devices()->set_name(name);
      }
      ++impl_.allocations;
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext* /*ctx*/, const pb::PreStartContainerRequest* req,
                                 pb::PreStartContainerResponse* /*resp*/) override {
    std::lock_guard lock(impl_.allocate_mu);
    const std::vector<std::string> ids(req->devices_ids().begin(), req->devices_ids().end());
    impl_.refusal_logged = false;
    common::Status s = impl_.CheckPreStart(resource_, ids);
    if (!s.ok()) {
      ++impl_.refusals;
      if (!impl_.refusal_logged) {
        common::Log(LogLevel::kError,
                    "device plugin: PreStartContainer " + resource_ + " [" + Join(ids) + "] refused: " + s.ToString());
      }
    }
    return ToGrpc(s);
  }

 private:
  Impl& impl_;
  const std::string resource_;
  std::atomic<bool> closing_{false};
};

pb::ListAndWatchResponse DevicePlugin::Impl::DeviceList(std::string_view resource) {
  const int replicas = ReplicasFor(options, resource);
  pb::ListAndWatchResponse out;
  std::lock_guard lock(mu);
  for (const auto& g : gpus) {
    const bool healthy = sample_ok && g.healthy;
    for (auto& id : DeviceIdsFor(g, replicas)) {
      auto* d = out.add_devices();
      d->set_id(std::move(id));
      d->set_health(std::string(healthy ? kHealthy : kUnhealthy));
      if (g.numa_node >= 0) {
        d->mutable_topology()->add_nodes()->set_id(g.numa_node);
      }
    }
  }
  return out;
}

void DevicePlugin::Impl::ApplySamples(common::Result<std::vector<ports::GpuSample>> samples) {
  std::lock_guard lock(mu);
  if (!samples.ok()) {
    if (sample_ok) {
      common::Log(LogLevel::kError, "device plugin: GPU inventory failed (" + samples.status().ToString() +
                                        "); every device is now Unhealthy");
      sample_ok = false;
      ++version;
      cv.notify_all();
    }
    return;
  }
  std::vector<ports::GpuSample> next = std::move(samples).value();
  std::sort(next.begin(), next.end(),
            [](const ports::GpuSample& a, const ports::GpuSample& b) { return a.index < b.index; });
  const bool changed = !sample_ok || !SameDevices(gpus, next);
  gpus = std::move(next);
  sample_ok = true;
  if (UsesCdi(options.device_list_strategy) && (changed || !cdi_written)) {
    CdiSpec spec = BuildCdiSpec(options.cdi, gpus);
    common::Status written = WriteCdiSpec(options.cdi, spec.spec);
    cdi_written = written.ok();
    cdi_gpus = written.ok() ? std::move(spec.gpus) : std::set<common::GpuUuid>{};
    std::string error = written.ok() ? spec.problems : written.message();
    if (!error.empty() && error != cdi_error) {  // once per problem, not at every sample that retries the write
      common::Log(LogLevel::kError, "device plugin: CDI spec " + CdiSpecPath(options.cdi) + ": " + error);
    }
    cdi_error = std::move(error);
  }
  if (changed) {
    ++version;
    cv.notify_all();
  }
}

common::Result<DevicePlugin::Impl::NodeState> DevicePlugin::Impl::ReadNodeState() {
  auto kubelet = pod_resources.List();
  if (!kubelet.ok()) {
    return common::Unavailable("kubelet PodResources API: " + kubelet.status().message());
  }
  return ReadPods(std::move(kubelet).value());
}

common::Result<DevicePlugin::Impl::NodeState> DevicePlugin::Impl::ReadPods(std::vector<KubeletPod> kubelet,
                                                                           bool fresh) {
  NodeState out;
  out.kubelet = std::move(kubelet);
  auto list = fresh ? pods.FreshPodsOnNode() : pods.PodsOnNode();
  if (!list.ok()) {
    return common::Unavailable("reading the pods of node " + options.node_name + ": " + list.status().message());
  }
  const std::set<std::string, std::less<>> resources(options.resources.begin(), options.resources.end());
  std::set<std::string> keys;
  auto add = [&](const nlohmann::json& object) {
    auto view = DecodePodView(object, resources);
    if (!view.ok()) {
      common::Log(LogLevel::kWarn, "device plugin: skipping a pod: " + view.status().message());
      return;
    }
    if (view->meta.node_name != options.node_name || !keys.insert(view->meta.Key()).second) {
      return;
    }
    out.pods.push_back(std::move(view).value());
  };
  for (const auto& object : *list) {
    add(object);
  }
  // A pod the kubelet lists was bound before this call; if the pod read missed it, read it alone.
  for (const KubeletPod& kp : out.kubelet) {
    if (keys.contains(kp.Key())) {
      continue;
    }
    auto object = pods.GetPod(kp.namespace_, kp.name);
    if (!object.ok()) {
      if (object.status().code() == common::StatusCode::kNotFound) {
        continue;  // deleted: it is not being admitted
      }
      return common::Unavailable("reading pod " + kp.Key() + " (listed by the kubelet): " + object.status().message());
    }
    add(*object);
  }
  return out;
}

common::Result<ContainerEnv> DevicePlugin::Impl::AllocateOne(const std::string& resource,
                                                             const std::vector<std::string>& ids) {
  const std::vector<ports::GpuSample> node_gpus = Gpus();
  const int replicas = ReplicasFor(options, resource);
  std::set<std::string> known;
  for (const auto& g : node_gpus) {
    for (auto& id : DeviceIdsFor(g, replicas)) {
      known.insert(std::move(id));
    }
  }
  std::set<std::string> seen;
  for (const auto& id : ids) {
    if (!known.contains(id)) {
      return common::InvalidArgument("unknown " + resource + " device id \"" + id + "\" (not advertised by node " +
                                     options.node_name + ")");
    }
    if (!seen.insert(id).second) {
      return common::InvalidArgument("device id \"" + id + "\" passed twice");
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(state, ReadNodeState());
  const HandoffRequest request{.node = options.node_name, .resource = resource, .device_ids = ids};
  auto found = FindTarget(request, state.pods, state.kubelet, ledger);
  // The pod source may lag (pod_source.h). With a kubelet that lists the pod under admission, as kubelets do, the
  // lagging view decides as a current one would; when it does not look like that case (no pod or several fit, the
  // pod it picks is not one the kubelet lists, or is being deleted: the kubelet admits no such pod, so the one it
  // lists under that name may be a new pod the watch has not delivered yet), decide once more on a quorum read.
  const bool listed = found.ok() && !found->pod->meta.deleting &&
                      std::any_of(state.kubelet.begin(), state.kubelet.end(),
                                  [&](const KubeletPod& kp) { return kp.Key() == found->pod->meta.Key(); });
  if (!listed && (found.ok() || found.status().code() == common::StatusCode::kNotFound ||
                  found.status().code() == common::StatusCode::kAborted)) {
    GPUSCHED_ASSIGN_OR_RETURN(current, ReadPods(state.kubelet, /*fresh=*/true));
    state = std::move(current);
    found = FindTarget(request, state.pods, state.kubelet, ledger);
  }
  GPUSCHED_ASSIGN_OR_RETURN(target, std::move(found));
  const PodView& pod = *target.pod;
  const ContainerView& container = pod.containers[target.container];
  // From here on the pod is known: a refusal is told to it as an Event as well as to the kubelet.
  auto handed = [&]() -> common::Result<ContainerEnv> {
    GPUSCHED_ASSIGN_OR_RETURN(named, SharesFor(request, pod, container));
    GPUSCHED_ASSIGN_OR_RETURN(shares, ResolveShares(options.node_name, pod, container, std::move(named), node_gpus));
    // The annotation is anyone's to write: never hand out a GPU that another pod's allocation conflicts with.
    GPUSCHED_RETURN_IF_ERROR(CheckGpuConflicts(ConflictCheck{.node = options.node_name,
                                                             .stage = ConflictStage::kAllocate,
                                                             .pod = &pod,
                                                             .container = &container,
                                                             .shares = &shares},
                                               state.pods, state.kubelet, ledger, node_gpus));
    std::string uuids;
    for (const auto& share : shares.gpus) {
      uuids += (uuids.empty() ? "" : ",") + share.uuid.str();
    }
    // --- MPS: shareWithin, then the limits set in the control daemon (share_within.h, mps_enforcer.h) ---
    GPUSCHED_RETURN_IF_ERROR(
        CheckShareWithin(options.share_within, pod.meta, shares.gpus, state.pods, state.kubelet, ledger));
    // --- end MPS ---
    ContainerEnv env = BuildContainerEnv(shares.gpus, options.mps);
    ApplyDeviceList(env, shares.gpus, resource,
                    DeviceListOptions{.strategy = options.device_list_strategy, .cdi_kind = options.cdi.kind});
    if (UsesCdi(options.device_list_strategy)) {
      std::lock_guard state_lock(mu);
      for (const auto& share : shares.gpus) {
        if (!cdi_gpus.contains(share.uuid)) {
          return common::FailedPrecondition("GPU " + std::to_string(share.index) + " (" + share.uuid.str() +
                                            ") has no device in the CDI spec " + CdiSpecPath(options.cdi) +
                                            (cdi_error.empty() ? "" : ": " + cdi_error));
        }
      }
    }
    if (options.mps_daemon && env.envs.contains(std::string(kEnvMpsPipeDirectory))) {
      // MPS limits without a control daemon are silently ignored by CUDA: refuse rather than hand out a whole GPU.
      if (common::Status daemon = options.mps_daemon(); !daemon.ok()) {
        std::string limits;
        for (const auto& key : {kEnvMpsThreadPercentage, kEnvMpsMemLimit}) {
          if (auto it = env.envs.find(std::string(key)); it != env.envs.end()) {
            limits += (limits.empty() ? "" : ", ") + it->first + "=" + it->second;
          }
        }
        return common::FailedPrecondition("container " + container.name + " of pod " + pod.meta.Key() +
                                          " shares GPU(s) " + uuids + " with MPS limits (" + limits +
                                          "), but the MPS control daemon of node " + options.node_name +
                                          " does not answer: " + daemon.message() +
                                          "; the limits would not be enforced (gpusched agent --mps run starts it)");
      }
    }
    // --- MPS ---
    if (options.mps_admit && env.envs.contains(std::string(kEnvMpsPipeDirectory))) {
      GPUSCHED_RETURN_IF_ERROR(options.mps_admit(pod.meta, shares.entry, shares.gpus));
    }
    // --- end MPS ---
    ledger.Record(HandoffLedger::Entry{.uid = pod.meta.uid,
                                       .pod_key = pod.meta.Key(),
                                       .container = container.name,
                                       .resource = resource,
                                       .device_ids = ids,
                                       .entry = shares.entry,
                                       .gpus = shares.gpus});
    std::set<common::PodUid> live;
    for (const auto& p : state.pods) {
      live.insert(p.meta.uid);
    }
    ledger.Retain(live);
    common::Log(LogLevel::kInfo, "device plugin: Allocate " + resource + " [" + Join(ids) + "] -> pod " +
                                     pod.meta.Key() + " container " + container.name + ": GPUs " + uuids + " (" +
                                     HandoffRuleName(target.rule) + ")");
    return env;
  }();
  if (!handed.ok()) {
    Tell(pod, "GPUHandoffRefused",
         "gpusched agent refused to hand GPUs to container " + container.name + " (" + resource + " [" + Join(ids) +
             "]): " + handed.status().message());
  }
  return handed;
}

std::vector<std::string> DevicePlugin::Impl::Prefer(const std::string& resource,
                                                    const pb::ContainerPreferredAllocationRequest& r) {
  const auto size = static_cast<size_t>(std::max(0, r.allocation_size()));
  const std::vector<std::string> available(r.available_deviceids().begin(), r.available_deviceids().end());
  std::vector<std::string> chosen(r.must_include_deviceids().begin(), r.must_include_deviceids().end());
  auto taken = [&](const std::string& id) { return std::find(chosen.begin(), chosen.end(), id) != chosen.end(); };

  // The GPUs the handoff will give this container, when it can tell already (it decides the same way as Allocate).
  std::vector<std::string> keys;
  const std::vector<std::string> placeholder(size, "?");
  const HandoffRequest request{.node = options.node_name, .resource = resource, .device_ids = placeholder};
  auto state = ReadNodeState();
  if (state.ok()) {
    auto target = FindTarget(request, state->pods, state->kubelet, ledger);
    if (target.ok()) {
      auto shares = SharesFor(request, *target->pod, target->pod->containers[target->container]);
      if (shares.ok()) {
        const auto node_gpus = Gpus();
        for (const auto& share : shares->gpus) {
          for (const auto& g : node_gpus) {
            if (share.uuid.empty() ? g.index == share.index : g.uuid == share.uuid) {
              keys.push_back(GpuKey(g, ReplicasFor(options, resource)));
            }
          }
        }
      }
    }
  }
  for (const auto& key : keys) {
    if (chosen.size() >= size) {
      break;
    }
    const bool have =
        std::any_of(chosen.begin(), chosen.end(), [&](const std::string& id) { return GpuKeyOf(id) == key; });
    if (have) {
      continue;
    }
    for (const auto& id : available) {
      if (GpuKeyOf(id) == key && !taken(id)) {
        chosen.push_back(id);
        break;
      }
    }
  }
  for (const auto& id : available) {
    if (chosen.size() >= size) {
      break;
    }
    if (!taken(id)) {
      chosen.push_back(id);
    }
  }
  if (chosen.size() > size) {
    chosen.resize(size);
  }
  return chosen;
}

common::Status DevicePlugin::Impl::CheckPreStart(const std::string& resource, const std::vector<std::string>& ids) {
  if (!options.verify_pre_start) {
    return common::Status::Ok();
  }
  auto kubelet = pod_resources.List();
  if (!kubelet.ok()) {
    return common::Unavailable("cannot check the handoff: kubelet PodResources API: " + kubelet.status().message());
  }
  // Who the kubelet itself recorded these ids for (exact: admission is complete by now).
  std::vector<std::string> want(ids);
  std::sort(want.begin(), want.end());
  const KubeletPod* recorded_pod = nullptr;
  const KubeletContainer* recorded = nullptr;
  for (const KubeletPod& kp : *kubelet) {
    for (const KubeletContainer& kc : kp.containers) {
      auto d = kc.devices.find(resource);
      if (d == kc.devices.end()) {
        continue;
      }
      std::vector<std::string> have = d->second;
      std::sort(have.begin(), have.end());
      if (have == want && recorded == nullptr) {
        recorded_pod = &kp;
        recorded = &kc;
      }
    }
  }
  auto entry = ledger.FindByDevices(resource, ids);
  if (entry.has_value() && recorded != nullptr &&
      (recorded_pod->Key() != entry->pod_key || recorded->name != entry->container)) {
    return common::FailedPrecondition("handoff mismatch: devices [" + Join(ids) + "] were handed to pod " +
                                      entry->pod_key + " container " + entry->container +
                                      " but the kubelet gave them to pod " + recorded_pod->Key() + " container " +
                                      recorded->name + "; refusing to start it with another pod's GPUs");
  }
  if (!entry.has_value() && recorded == nullptr) {
    // An init container (PodResources v1 lists only app and restartable init containers) this agent did not hand
    // out (it restarted since?).
    common::Log(LogLevel::kInfo, "device plugin: PreStartContainer " + resource + " [" + Join(ids) +
                                     "]: not handed out by this agent and not recorded by the kubelet; not checked");
    return common::Status::Ok();
  }
  const std::string pod_key = entry.has_value() ? entry->pod_key : recorded_pod->Key();
  const std::string container_name = entry.has_value() ? entry->container : recorded->name;

  // The GPUs must still not conflict with another pod that holds them ("Forged allocations").
  auto state = ReadPods(std::move(kubelet).value());
  if (!state.ok()) {
    return common::Unavailable("cannot check the handoff: " + state.status().message());
  }
  const PodView* pod = nullptr;
  for (const PodView& p : state->pods) {
    if (entry.has_value() ? p.meta.uid == entry->uid : p.meta.Key() == pod_key) {
      pod = &p;
    }
  }
  const ContainerView* container = nullptr;
  if (pod != nullptr) {
    for (const ContainerView& c : pod->containers) {
      if (c.name == container_name) {
        container = &c;
      }
    }
  }
  if (container == nullptr) {
    common::Log(LogLevel::kInfo, "device plugin: PreStartContainer " + resource + " [" + Join(ids) + "]: pod " +
                                     pod_key + " container " + container_name +
                                     " is no longer bound to this node; not checked");
    return common::Status::Ok();
  }
  const std::vector<ports::GpuSample> node_gpus = Gpus();
  ContainerShares shares;
  if (entry.has_value() && !entry->gpus.empty()) {
    shares = ContainerShares{.entry = entry->entry, .gpus = entry->gpus};
  } else {
    // Handed out before this agent started: what its annotation says is all there is to check. When that names no
    // GPUs of this node for it (another device plugin handed it out before gpusched's was installed, say), there is
    // no claim to check against anyone's, and refusing would only stop a running pod's restarts.
    const HandoffRequest request{.node = options.node_name, .resource = resource, .device_ids = ids};
    auto named = SharesFor(request, *pod, *container);
    auto resolved = named.ok() ? ResolveShares(options.node_name, *pod, *container, std::move(named).value(), node_gpus)
                               : common::Result<ContainerShares>(named.status());
    if (!resolved.ok()) {
      common::Log(LogLevel::kWarn, "device plugin: PreStartContainer " + resource + " [" + Join(ids) +
                                       "]: not handed out by this agent, and its allocation cannot be checked (" +
                                       resolved.status().message() + "); not checked");
      return common::Status::Ok();
    }
    shares = std::move(resolved).value();
  }
  common::Status conflict = CheckGpuConflicts(ConflictCheck{.node = options.node_name,
                                                            .stage = ConflictStage::kPreStart,
                                                            .pod = pod,
                                                            .container = container,
                                                            .shares = &shares},
                                              state->pods, state->kubelet, ledger, node_gpus);
  if (!conflict.ok()) {
    Tell(*pod, "GPUHandoffRefused",
         "gpusched agent refused to start container " + container->name + " (" + resource + " [" + Join(ids) +
             "]): " + conflict.message());
  }
  return conflict;
}

bool DevicePlugin::Impl::OurSocketsExist() const {
  return std::all_of(servers.begin(), servers.end(),
                     [](const Server& s) { return Identify(s.socket_path).has_value(); });
}

void DevicePlugin::Impl::StopServers() {
  for (auto& s : servers) {
    s.service->Close();
  }
  for (auto& s : servers) {
    s.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    s.server->Wait();
    ::unlink(s.socket_path.c_str());
  }
  servers.clear();
}

common::Status DevicePlugin::Impl::ServeAndRegister() {
  StopServers();
  for (const auto& resource : options.resources) {
    Server s{.resource = resource,
             .socket_path = options.plugin_dir + "/" + SocketName(options.socket_prefix, resource)};
    ::unlink(s.socket_path.c_str());
    s.service = std::make_unique<Service>(*this, resource);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + s.socket_path, grpc::InsecureServerCredentials());
    builder.RegisterService(s.service.get());
    s.server = builder.BuildAndStart();
    if (s.server == nullptr) {
      StopServers();
      return common::Unavailable("cannot serve " + resource + " on unix socket " + s.socket_path);
    }
    servers.push_back(std::move(s));
  }
  const std::string kubelet = KubeletSocketPath();
  auto channel = grpc::CreateChannel("unix:" + kubelet, grpc::InsecureChannelCredentials());
  auto stub = pb::Registration::NewStub(channel);
  for (const auto& s : servers) {
    pb::RegisterRequest req;
    req.set_version(std::string(kDevicePluginVersion));
    req.set_endpoint(SocketName(options.socket_prefix, s.resource));
    req.set_resource_name(s.resource);
    req.mutable_options()->set_pre_start_required(options.verify_pre_start);
    req.mutable_options()->set_get_preferred_allocation_available(true);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options.rpc_timeout);
    pb::Empty resp;
    grpc::Status st = stub->Register(&ctx, req, &resp);
    if (!st.ok()) {
      return common::Unavailable("registering " + s.resource + " with the kubelet at " + kubelet + ": " +
                                 st.error_message() + " (gRPC code " + std::to_string(st.error_code()) + ")");
    }
  }
  return common::Status::Ok();
}

void DevicePlugin::Impl::SetRegistration(bool ok, std::string error) {
  std::lock_guard lock(mu);
  registered = ok;
  if (ok) {
    ++registrations;
  }
  last_error = std::move(error);
  cv.notify_all();
}

void DevicePlugin::Impl::Run() {
  auto next_sample = Clock::now() + options.sample_interval;
  auto next_attempt = Clock::now();
  common::ExponentialBackoff backoff(options.initial_backoff, options.max_backoff);
  std::optional<SocketIdentity> registered_with;
  std::string last_logged;
  const std::string kubelet = KubeletSocketPath();
  for (;;) {
    {
      std::lock_guard lock(mu);
      if (stopping) {
        break;
      }
    }
    const auto now = Clock::now();
    if (options.sample_interval.count() > 0 && now >= next_sample) {
      ApplySamples(inventory.Sample());
      next_sample = now + options.sample_interval;
    }
    const auto id = Identify(kubelet);
    if (registered_with.has_value() && (!id.has_value() || *id != *registered_with || !OurSocketsExist())) {
      common::Log(LogLevel::kWarn, "device plugin: the kubelet restarted (" + kubelet +
                                       " changed or our sockets are gone); registering again");
      registered_with.reset();
      next_attempt = now;
      backoff.Reset();
      SetRegistration(false, "the kubelet restarted; registering again");
    }
    if (!registered_with.has_value() && now >= next_attempt) {
      common::Status s = id.has_value() ? ServeAndRegister()
                                        : common::Unavailable("kubelet socket " + kubelet +
                                                              " does not exist (is the kubelet running, and is " +
                                                              options.plugin_dir + " mounted into the agent?)");
      if (s.ok()) {
        registered_with = id;
        backoff.Reset();
        last_logged.clear();
        SetRegistration(true, "");
        common::Log(LogLevel::kInfo, "device plugin: registered with the kubelet at " + kubelet);
      } else {
        if (s.message() != last_logged) {
          common::Log(LogLevel::kWarn, "device plugin: " + s.message() + "; retrying with backoff");
          last_logged = s.message();
        }
        SetRegistration(false, s.message());
        next_attempt = now + backoff.Next();
      }
    }
    std::unique_lock lock(mu);
    cv.wait_for(lock, options.poll_interval, [&] { return stopping; });
  }
}

DevicePlugin::DevicePlugin(DevicePluginOptions options, ports::DeviceInventory& inventory, PodSource& pods,
                           PodResourcesSource& pod_resources)
    : impl_(std::make_unique<Impl>(std::move(options), inventory, pods, pod_resources)) {}

DevicePlugin::~DevicePlugin() { Stop(); }

common::Status DevicePlugin::Start() {
  std::lock_guard lock(impl_->start_mu);
  if (impl_->started) {
    return common::Status::Ok();
  }
  GPUSCHED_RETURN_IF_ERROR(ValidateOptions(impl_->options));
  auto samples = impl_->inventory.Sample();
  if (!samples.ok()) {
    return common::Unavailable("device plugin: the first GPU inventory sample failed: " + samples.status().message());
  }
  if (!UsesCdi(impl_->options.device_list_strategy)) {
    // A spec left by an earlier run with a CDI strategy would still resolve its devices: remove it.
    if (common::Status removed = RemoveCdiSpec(impl_->options.cdi); !removed.ok()) {
      common::Log(LogLevel::kWarn, "device plugin: " + removed.message());
    }
  }
  impl_->ApplySamples(std::move(samples));
  {
    std::lock_guard state_lock(impl_->mu);
    impl_->stopping = false;
  }
  impl_->started = true;
  impl_->supervisor = std::thread([this] { impl_->Run(); });
  return common::Status::Ok();
}

void DevicePlugin::Stop() {
  std::lock_guard lock(impl_->start_mu);
  if (!impl_->started) {
    return;
  }
  {
    std::lock_guard state_lock(impl_->mu);
    impl_->stopping = true;
    impl_->registered = false;
  }
  impl_->cv.notify_all();
  impl_->supervisor.join();
  impl_->StopServers();
  impl_->started = false;
}

void DevicePlugin::OnSamples(std::vector<ports::GpuSample> samples) { impl_->ApplySamples(std::move(samples)); }

bool DevicePlugin::registered() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registered;
}

bool DevicePlugin::WaitRegistered(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->registered; });
}

uint64_t DevicePlugin::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registrations;
}

std::string DevicePlugin::last_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_error;
}

uint64_t DevicePlugin::allocations() const { return impl_->allocations.load(); }
uint64_t DevicePlugin::refusals() const { return impl_->refusals.load(); }

}  // namespace gpusched::adapters::deviceplugin
