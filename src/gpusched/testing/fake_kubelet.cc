#include "gpusched/testing/fake_kubelet.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <sys/stat.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpusched::testing {
namespace {

namespace pb = ::v1beta1;
namespace pr = ::v1;

constexpr auto kRpcTimeout = std::chrono::seconds(30);

common::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) {
    return common::Status::Ok();
  }
  common::StatusCode code = common::StatusCode::kInternal;
  switch (s.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      code = common::StatusCode::kInvalidArgument;
      break;
    case grpc::StatusCode::NOT_FOUND:
      code = common::StatusCode::kNotFound;
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      code = common::StatusCode::kFailedPrecondition;
      break;
    case grpc::StatusCode::ABORTED:
      code = common::StatusCode::kAborted;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      code = common::StatusCode::kUnavailable;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      code = common::StatusCode::kDeadlineExceeded;
      break;
    default:
      break;
  }
  return {code, s.error_message()};
}

std::chrono::system_clock::time_point Deadline() { return std::chrono::system_clock::now() + kRpcTimeout; }

}  // namespace

struct FakeKubelet::Impl {
  struct Endpoint {
    std::string resource;
    std::unique_ptr<pb::DevicePlugin::Stub> stub;
    std::optional<FakePluginOptions> options;        // GUARDED_BY(mu)
    std::optional<std::vector<FakeDevice>> devices;  // GUARDED_BY(mu)
    std::shared_ptr<grpc::ClientContext> stream;     // GUARDED_BY(mu)
  };
  struct PodState {
    FakePodSpec spec;
    bool listed = false;
    std::map<std::string, std::map<std::string, std::vector<std::string>>> devices;  // container -> resource -> ids
  };

  class Registration final : public pb::Registration::Service {
   public:
    explicit Registration(Impl& impl) : impl_(impl) {}
    grpc::Status Register(grpc::ServerContext* /*ctx*/, const pb::RegisterRequest* req, pb::Empty* /*resp*/) override {
      return impl_.OnRegister(*req);
    }

   private:
    Impl& impl_;
  };

  class PodResources final : public pr::PodResourcesLister::Service {
   public:
    explicit PodResources(Impl& impl) : impl_(impl) {}
    grpc::Status List(grpc::ServerContext* /*ctx*/, const pr::ListPodResourcesRequest* /*req*/,
                      pr::ListPodResourcesResponse* resp) override {
      std::lock_guard lock(impl_.mu);
      for (const auto& [key, pod] : impl_.pods) {
        if (!pod.listed) {
          continue;
        }
        auto* p = resp->add_pod_resources();
        p->set_name(pod.spec.name);
        p->set_namespace_(pod.spec.namespace_);
        for (const auto& c : pod.spec.containers) {
          if (c.init) {
            continue;  // v1 lists app (and restartable init) containers only
          }
          auto* out = p->add_containers();
          out->set_name(c.name);
          auto d = pod.devices.find(c.name);
          if (d == pod.devices.end()) {
            continue;
          }
          for (const auto& [resource, ids] : d->second) {
            for (const auto& id : ids) {
              auto* cd = out->add_devices();
              cd->set_resource_name(resource);
              cd->add_device_ids(id);
            }
          }
        }
      }
      return grpc::Status::OK;
    }
    grpc::Status GetAllocatableResources(grpc::ServerContext* /*ctx*/, const pr::AllocatableResourcesRequest* /*req*/,
                                         pr::AllocatableResourcesResponse* /*resp*/) override {
      return grpc::Status::OK;
    }

   private:
    Impl& impl_;
  };

  explicit Impl(FakeKubeletOptions o) : options(std::move(o)) {
    if (options.pod_resources_socket.empty()) {
      options.pod_resources_socket = options.dir + "/pod-resources/kubelet.sock";
    }
  }

  std::string KubeletSocket() const { return options.dir + "/kubelet.sock"; }

  grpc::Status OnRegister(const pb::RegisterRequest& r) {
    if (r.version() != "v1beta1") {
      return {grpc::StatusCode::INVALID_ARGUMENT, "unsupported version " + r.version()};
    }
    if (r.resource_name().empty() || r.endpoint().empty() || r.endpoint().find('/') != std::string::npos) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "bad resource name or endpoint"};
    }
    std::lock_guard lock(mu);
    if (!running) {
      return {grpc::StatusCode::UNAVAILABLE, "kubelet stopping"};
    }
    ++registrations[r.resource_name()];
    auto ep = std::make_shared<Endpoint>();
    ep->resource = r.resource_name();
    ep->stub = pb::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + options.dir + "/" + r.endpoint(), grpc::InsecureChannelCredentials()));
    if (auto old = endpoints.find(ep->resource); old != endpoints.end() && old->second->stream != nullptr) {
      old->second->stream->TryCancel();
    }
    endpoints[ep->resource] = ep;
    threads.emplace_back([this, ep] { Connect(ep); });
    return grpc::Status::OK;
  }

  // The kubelet's side of one registration: options, then the ListAndWatch stream until it ends.
  void Connect(const std::shared_ptr<Endpoint>& ep) {
    grpc::ClientContext octx;
    octx.set_deadline(Deadline());
    pb::DevicePluginOptions o;
    if (!ep->stub->GetDevicePluginOptions(&octx, pb::Empty(), &o).ok()) {
      return;
    }
    auto ctx = std::make_shared<grpc::ClientContext>();
    {
      std::lock_guard lock(mu);
      ep->options = FakePluginOptions{.pre_start_required = o.pre_start_required(),
                                      .get_preferred_allocation_available = o.get_preferred_allocation_available()};
      ep->stream = ctx;
    }
    auto reader = ep->stub->ListAndWatch(ctx.get(), pb::Empty());
    {
      // A Stop or a new registration that came before the call started could not cancel it.
      std::lock_guard lock(mu);
      auto it = endpoints.find(ep->resource);
      if (!running || it == endpoints.end() || it->second != ep) {
        ctx->TryCancel();
      }
    }
    pb::ListAndWatchResponse resp;
    while (reader->Read(&resp)) {
      std::vector<FakeDevice> list;
      for (const auto& d : resp.devices()) {
        FakeDevice fd{.id = d.id(), .health = d.health()};
        for (const auto& n : d.topology().nodes()) {
          fd.numa_nodes.push_back(n.id());
        }
        list.push_back(std::move(fd));
      }
      std::lock_guard lock(mu);
      ep->devices = std::move(list);
    }
    (void)reader->Finish();
  }

  std::shared_ptr<Endpoint> FindEndpoint(const std::string& resource) const {
    std::lock_guard lock(mu);
    auto it = endpoints.find(resource);
    return it == endpoints.end() ? nullptr : it->second;
  }

  void FreeLocked(const PodState& pod) {
    for (const auto& [container, by_resource] : pod.devices) {
      for (const auto& [resource, ids] : by_resource) {
        for (const auto& id : ids) {
          allocated[resource].erase(id);
        }
      }
    }
  }

  FakeKubeletOptions options;
  mutable std::mutex mu;
  bool running = false;                                        // GUARDED_BY(mu)
  std::map<std::string, int> registrations;                    // GUARDED_BY(mu)
  std::map<std::string, std::shared_ptr<Endpoint>> endpoints;  // GUARDED_BY(mu)
  std::vector<std::thread> threads;                            // GUARDED_BY(mu)
  std::map<std::string, PodState> pods;                        // GUARDED_BY(mu) by namespace/name
  std::map<std::string, std::set<std::string>> allocated;      // GUARDED_BY(mu) resource -> ids
  std::mutex admit_mu;                                         // one admission at a time
  std::mutex lifecycle_mu;                                     // Start/Stop/Restart
  std::unique_ptr<Registration> registration_service;
  std::unique_ptr<PodResources> pod_resources_service;
  std::unique_ptr<grpc::Server> registration_server, pod_resources_server;
};

FakeKubelet::FakeKubelet(FakeKubeletOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

FakeKubelet::~FakeKubelet() { Stop(); }

common::Status FakeKubelet::Start() {
  std::lock_guard life(impl_->lifecycle_mu);
  if (impl_->registration_server != nullptr) {
    return common::Status::Ok();
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(impl_->options.pod_resources_socket).parent_path(), ec);
  ::unlink(impl_->KubeletSocket().c_str());
  ::unlink(impl_->options.pod_resources_socket.c_str());
  impl_->registration_service = std::make_unique<Impl::Registration>(*impl_);
  impl_->pod_resources_service = std::make_unique<Impl::PodResources>(*impl_);
  {
    std::lock_guard lock(impl_->mu);
    impl_->running = true;
  }
  grpc::ServerBuilder rb;
  rb.AddListeningPort("unix:" + impl_->KubeletSocket(), grpc::InsecureServerCredentials());
  rb.RegisterService(impl_->registration_service.get());
  impl_->registration_server = rb.BuildAndStart();
  grpc::ServerBuilder pb_builder;
  pb_builder.AddListeningPort("unix:" + impl_->options.pod_resources_socket, grpc::InsecureServerCredentials());
  pb_builder.RegisterService(impl_->pod_resources_service.get());
  impl_->pod_resources_server = pb_builder.BuildAndStart();
  if (impl_->registration_server == nullptr || impl_->pod_resources_server == nullptr) {
    return common::Unavailable("fake kubelet: cannot listen on " + impl_->KubeletSocket() + " or " +
                               impl_->options.pod_resources_socket);
  }
  return common::Status::Ok();
}

void FakeKubelet::Stop() {
  std::lock_guard life(impl_->lifecycle_mu);
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(impl_->mu);
    impl_->running = false;
    for (auto& [resource, ep] : impl_->endpoints) {
      if (ep->stream != nullptr) {
        ep->stream->TryCancel();
      }
    }
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (impl_->registration_server != nullptr) {
    impl_->registration_server->Shutdown(deadline);
    impl_->registration_server->Wait();
    impl_->registration_server.reset();
  }
  if (impl_->pod_resources_server != nullptr) {
    impl_->pod_resources_server->Shutdown(deadline);
    impl_->pod_resources_server->Wait();
    impl_->pod_resources_server.reset();
  }
  {
    std::lock_guard lock(impl_->mu);
    threads.swap(impl_->threads);
  }
  for (auto& t : threads) {
    t.join();
  }
  std::lock_guard lock(impl_->mu);
  impl_->endpoints.clear();
}

common::Status FakeKubelet::Restart() {
  Stop();
  // The kubelet wipes the sockets of its device plugin directory when it starts.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(impl_->options.dir, ec)) {
    if (entry.is_socket(ec)) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
  return Start();
}

std::string FakeKubelet::kubelet_socket() const { return impl_->KubeletSocket(); }
std::string FakeKubelet::pod_resources_socket() const { return impl_->options.pod_resources_socket; }

int FakeKubelet::registrations(const std::string& resource) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->registrations.find(resource);
  return it == impl_->registrations.end() ? 0 : it->second;
}

std::optional<FakePluginOptions> FakeKubelet::plugin_options(const std::string& resource) const {
  auto ep = impl_->FindEndpoint(resource);
  if (ep == nullptr) {
    return std::nullopt;
  }
  std::lock_guard lock(impl_->mu);
  return ep->options;
}

std::optional<std::vector<FakeDevice>> FakeKubelet::Devices(const std::string& resource) const {
  auto ep = impl_->FindEndpoint(resource);
  if (ep == nullptr) {
    return std::nullopt;
  }
  std::lock_guard lock(impl_->mu);
  return ep->devices;
}

bool FakeKubelet::WaitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

common::Result<FakeContainerResponse> FakeKubelet::Allocate(const std::string& resource,
                                                            const std::vector<std::string>& device_ids) {
  auto ep = impl_->FindEndpoint(resource);
  if (ep == nullptr) {
    return common::FailedPrecondition("fake kubelet: no device plugin registered for " + resource);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  pb::AllocateRequest req;
  auto* cr = req.add_container_requests();
  for (const auto& id : device_ids) {
    cr->add_devices_ids(id);
  }
  pb::AllocateResponse resp;
  common::Status s = FromGrpc(ep->stub->Allocate(&ctx, req, &resp));
  if (!s.ok()) {
    return s;
  }
  if (resp.container_responses_size() != 1) {
    return common::Internal("fake kubelet: Allocate returned " + std::to_string(resp.container_responses_size()) +
                            " container responses for 1 request");
  }
  FakeContainerResponse out;
  const auto& c = resp.container_responses(0);
  for (const auto& [k, v] : c.envs()) {
    out.envs[k] = v;
  }
  for (const auto& m : c.mounts()) {
    out.mounts.push_back(
        FakeMount{.container_path = m.container_path(), .host_path = m.host_path(), .read_only = m.read_only()});
  }
  for (const auto& [k, v] : c.annotations()) {
    out.annotations[k] = v;
  }
  for (const auto& d : c.cdi_devices()) {
    out.cdi_devices.push_back(d.name());
  }
  return out;
}

common::Result<std::vector<std::string>> FakeKubelet::GetPreferredAllocation(
    const std::string& resource, const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  auto ep = impl_->FindEndpoint(resource);
  if (ep == nullptr) {
    return common::FailedPrecondition("fake kubelet: no device plugin registered for " + resource);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  pb::PreferredAllocationRequest req;
  auto* cr = req.add_container_requests();
  for (const auto& id : available) {
    cr->add_available_deviceids(id);
  }
  for (const auto& id : must_include) {
    cr->add_must_include_deviceids(id);
  }
  cr->set_allocation_size(size);
  pb::PreferredAllocationResponse resp;
  common::Status s = FromGrpc(ep->stub->GetPreferredAllocation(&ctx, req, &resp));
  if (!s.ok()) {
    return s;
  }
  if (resp.container_responses_size() != 1) {
    return common::Internal("fake kubelet: GetPreferredAllocation returned the wrong number of answers");
  }
  const auto& ids = resp.container_responses(0).deviceids();
  return std::vector<std::string>(ids.begin(), ids.end());
}

common::Status FakeKubelet::PreStartContainer(const std::string& resource, const std::vector<std::string>& device_ids) {
  auto ep = impl_->FindEndpoint(resource);
  if (ep == nullptr) {
    return common::FailedPrecondition("fake kubelet: no device plugin registered for " + resource);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  pb::PreStartContainerRequest req;
  for (const auto& id : device_ids) {
    req.add_devices_ids(id);
  }
  pb::PreStartContainerResponse resp;
  return FromGrpc(ep->stub->PreStartContainer(&ctx, req, &resp));
}

common::Result<std::vector<FakeContainerAdmission>> FakeKubelet::AdmitPod(const FakePodSpec& pod) {
  std::unique_lock admit(impl_->admit_mu, std::defer_lock);
  if (impl_->options.serial_admission) {
    admit.lock();
  }
  const std::string key = pod.Key();
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->pods.contains(key)) {
      return common::AlreadyExists("fake kubelet: pod " + key + " was admitted already");
    }
    impl_->pods[key] = Impl::PodState{.spec = pod, .listed = impl_->options.list_admitting_pod};
  }
  auto reject = [&](const common::Status& why) {
    std::lock_guard lock(impl_->mu);
    impl_->FreeLocked(impl_->pods[key]);
    impl_->pods.erase(key);
    return common::Status(why.code(), "pod " + key + " rejected (UnexpectedAdmissionError): " + why.message());
  };
  std::vector<const FakeContainerSpec*> order;
  for (bool init : {true, false}) {
    for (const auto& c : pod.containers) {
      if (c.init == init) {
        order.push_back(&c);
      }
    }
  }
  std::vector<FakeContainerAdmission> out;
  for (const FakeContainerSpec* c : order) {
    for (const auto& [resource, count] : c->devices) {
      auto ep = impl_->FindEndpoint(resource);
      if (ep == nullptr) {
        return reject(common::FailedPrecondition("no device plugin for " + resource));
      }
      bool preferred_available = false;
      std::vector<std::string> free_ids;
      {
        std::lock_guard lock(impl_->mu);
        preferred_available = ep->options.has_value() && ep->options->get_preferred_allocation_available;
        for (const auto& d : ep->devices.value_or(std::vector<FakeDevice>{})) {
          if (d.health == "Healthy" && !impl_->allocated[resource].contains(d.id)) {
            free_ids.push_back(d.id);
          }
        }
      }
      std::vector<std::string> preferred;
      if (impl_->options.use_preferred_allocation && preferred_available) {
        auto p = GetPreferredAllocation(resource, free_ids, {}, static_cast<int>(count));
        if (p.ok()) {
          preferred = std::move(p).value();
        }
      }
      std::vector<std::string> ids;
      bool enough = false;
      {
        std::lock_guard lock(impl_->mu);
        auto& taken = impl_->allocated[resource];
        for (const auto* list : {&preferred, &free_ids}) {
          for (const auto& id : *list) {
            if (static_cast<int64_t>(ids.size()) < count && !taken.contains(id) &&
                std::find(free_ids.begin(), free_ids.end(), id) != free_ids.end() &&
                std::find(ids.begin(), ids.end(), id) == ids.end()) {
              ids.push_back(id);
            }
          }
        }
        enough = static_cast<int64_t>(ids.size()) == count;
        if (enough) {
          for (const auto& id : ids) {
            taken.insert(id);  // before the RPC, as the kubelet's device manager does
          }
        }
      }
      if (!enough) {
        return reject(common::ResourceExhausted("not enough free " + resource + " devices"));
      }
      auto resp = Allocate(resource, ids);
      {
        // Recorded (and so listed by PodResources) once Allocate returned; a rejection frees them again.
        std::lock_guard lock(impl_->mu);
        impl_->pods[key].devices[c->name][resource] = ids;
      }
      if (!resp.ok()) {
        return reject(resp.status());
      }
      out.push_back(FakeContainerAdmission{
          .container = c->name, .resource = resource, .device_ids = ids, .response = std::move(resp).value()});
    }
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->pods[key].listed = true;
  }
  for (auto& a : out) {
    auto opts = plugin_options(a.resource);
    if (opts.has_value() && opts->pre_start_required) {
      a.pre_start = PreStartContainer(a.resource, a.device_ids);
    }
  }
  return out;
}

void FakeKubelet::RemovePod(const std::string& ns, const std::string& name) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->pods.find(ns + "/" + name);
  if (it == impl_->pods.end()) {
    return;
  }
  impl_->FreeLocked(it->second);
  impl_->pods.erase(it);
}

void FakeKubelet::RecordDevices(const std::string& ns, const std::string& name, const std::string& container,
                                const std::string& resource, const std::vector<std::string>& device_ids) {
  std::lock_guard lock(impl_->mu);
  auto& pod = impl_->pods[ns + "/" + name];
  pod.spec.namespace_ = ns;
  pod.spec.name = name;
  pod.listed = true;
  const bool known = std::any_of(pod.spec.containers.begin(), pod.spec.containers.end(),
                                 [&](const FakeContainerSpec& c) { return c.name == container; });
  if (!known) {
    pod.spec.containers.push_back(FakeContainerSpec{.name = container});
  }
  pod.devices[container][resource] = device_ids;
}

// ---------------------------------------------------------------------------------------------------------------
// FakeDraKubelet

namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace drahealth = ::v1alpha1;
namespace reg = ::pluginregistration;

constexpr const char* kHealthService = "v1alpha1.DRAResourceHealth";

template <class Req>
void FillClaims(Req& req, const std::vector<FakeClaim>& claims) {
  for (const auto& c : claims) {
    auto* pc = req.add_claims();
    pc->set_namespace_(c.namespace_);
    pc->set_uid(c.uid);
    pc->set_name(c.name);
  }
}

template <class Resp>
std::map<std::string, FakePrepareResult> PrepareAnswers(const Resp& resp) {
  std::map<std::string, FakePrepareResult> out;
  for (const auto& [uid, r] : resp.claims()) {
    FakePrepareResult fr{.error = r.error()};
    for (const auto& d : r.devices()) {
      fr.devices.push_back(
          FakePreparedDevice{.requests = {d.request_names().begin(), d.request_names().end()},
                             .pool = d.pool_name(),
                             .device = d.device_name(),
                             .cdi_device_ids = {d.cdi_device_ids().begin(), d.cdi_device_ids().end()}});
    }
    out[uid] = std::move(fr);
  }
  return out;
}

template <class Resp>
std::map<std::string, std::string> UnprepareAnswers(const Resp& resp) {
  std::map<std::string, std::string> out;
  for (const auto& [uid, r] : resp.claims()) {
    out[uid] = r.error();
  }
  return out;
}

const char* HealthName(drahealth::HealthStatus h) {
  switch (h) {
    case drahealth::HEALTHY:
      return "HEALTHY";
    case drahealth::UNHEALTHY:
      return "UNHEALTHY";
    default:
      return "UNKNOWN";
  }
}

}  // namespace

struct FakeDraKubelet::Impl {
  struct Plugin {
    std::string reg_socket;
    std::pair<ino_t, int64_t> identity;  // inode and ctime (ns): a socket created again differs
    FakeDraRegistration info;
    std::shared_ptr<grpc::Channel> channel;               // null when refused
    std::shared_ptr<grpc::ClientContext> health_ctx;      // GUARDED_BY(mu)
    std::optional<std::vector<FakeDeviceHealth>> health;  // GUARDED_BY(mu)
    int health_updates = 0;                               // GUARDED_BY(mu)
  };

  explicit Impl(FakeDraKubeletOptions o) : options(std::move(o)) {}

  // One pass of the plugin watcher.
  void Scan() {
    std::map<std::string, std::pair<ino_t, int64_t>> seen;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(options.registry_dir, ec)) {
      const std::string path = entry.path().string();
      struct stat st {};
      if (!path.ends_with("-reg.sock") || ::stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
        continue;
      }
      seen[path] = {st.st_ino, static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec};
    }
    std::vector<std::pair<std::string, std::pair<ino_t, int64_t>>> fresh;
    {
      std::lock_guard lock(mu);
      for (auto it = by_socket.begin(); it != by_socket.end();) {
        auto s = seen.find(it->first);
        if (s == seen.end() || s->second != it->second->identity) {
          Deregister(*it->second);
          it = by_socket.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& [path, identity] : seen) {
        if (!by_socket.contains(path)) {
          fresh.emplace_back(path, identity);
        }
      }
    }
    for (const auto& [path, identity] : fresh) {
      Register(path, identity);
    }
  }

  void Deregister(Plugin& p) {  // mu held
    if (p.health_ctx != nullptr) {
      p.health_ctx->TryCancel();
    }
    if (auto d = by_driver.find(p.info.name); d != by_driver.end() && d->second.get() == &p) {
      by_driver.erase(d);
    }
  }

  void Register(const std::string& path, std::pair<ino_t, int64_t> identity) {
    auto p = std::make_shared<Plugin>();
    p->reg_socket = path;
    p->identity = identity;
    auto stub = reg::Registration::NewStub(grpc::CreateChannel("unix:" + path, grpc::InsecureChannelCredentials()));
    reg::PluginInfo info;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      if (!stub->GetInfo(&ctx, reg::InfoRequest(), &info).ok()) {
        return;  // not serving yet: the next scan tries again
      }
    }
    p->info =
        FakeDraRegistration{.type = info.type(),
                            .name = info.name(),
                            .endpoint = info.endpoint(),
                            .supported_versions = {info.supported_versions().begin(), info.supported_versions().end()}};
    if (p->info.type != "DRAPlugin") {
      p->info.error = "plugin type " + p->info.type + " is not DRAPlugin";
    } else if (p->info.name.empty() || p->info.endpoint.empty()) {
      p->info.error = "the plugin's name and endpoint must be set";
    } else {
      for (const auto& v : p->info.supported_versions) {
        if (std::find(options.services.begin(), options.services.end(), v) != options.services.end()) {
          p->info.chosen_service = v;
          break;
        }
      }
      if (p->info.chosen_service.empty()) {
        std::string theirs;
        std::string ours;
        for (const auto& v : p->info.supported_versions) {
          theirs += (theirs.empty() ? "" : ", ") + v;
        }
        for (const auto& v : options.services) {
          ours += (ours.empty() ? "" : ", ") + v;
        }
        p->info.error =
            "none of the services supported by the plugin (" + theirs + ") are supported by the kubelet (" + ours + ")";
      }
    }
    {
      // Recorded before the plugin hears the outcome, as the kubelet's plugin manager has the plugin by then.
      std::lock_guard lock(mu);
      if (!running) {
        return;
      }
      by_socket[path] = p;
      last[p->info.name] = p->info;
      if (p->info.error.empty()) {
        ++accepted[p->info.name];
        p->channel = grpc::CreateChannel("unix:" + p->info.endpoint, grpc::InsecureChannelCredentials());
        by_driver[p->info.name] = p;
        const bool health =
            options.watch_health && std::find(p->info.supported_versions.begin(), p->info.supported_versions.end(),
                                              kHealthService) != p->info.supported_versions.end();
        if (health) {
          p->health_ctx = std::make_shared<grpc::ClientContext>();
          threads.emplace_back([this, p] { WatchHealth(p); });
        }
      }
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    reg::RegistrationStatus status;
    status.set_plugin_registered(p->info.error.empty());
    status.set_error(p->info.error);
    reg::RegistrationStatusResponse resp;
    (void)stub->NotifyRegistrationStatus(&ctx, status, &resp);
  }

  void WatchHealth(const std::shared_ptr<Plugin>& p) {
    std::shared_ptr<grpc::ClientContext> ctx;
    {
      std::lock_guard lock(mu);
      ctx = p->health_ctx;
      if (!running || ctx == nullptr) {
        return;
      }
    }
    auto stub = drahealth::DRAResourceHealth::NewStub(p->channel);
    auto reader = stub->NodeWatchResources(ctx.get(), drahealth::NodeWatchResourcesRequest());
    {
      // A Stop or deregistration that came before the call started could not cancel it.
      std::lock_guard lock(mu);
      auto it = by_driver.find(p->info.name);
      if (!running || it == by_driver.end() || it->second != p) {
        ctx->TryCancel();
      }
    }
    drahealth::NodeWatchResourcesResponse resp;
    while (reader->Read(&resp)) {
      std::vector<FakeDeviceHealth> list;
      for (const auto& d : resp.devices()) {
        list.push_back(FakeDeviceHealth{.pool = d.device().pool_name(),
                                        .device = d.device().device_name(),
                                        .health = HealthName(d.health()),
                                        .last_updated = d.last_updated_time()});
      }
      std::lock_guard lock(mu);
      p->health = std::move(list);
      ++p->health_updates;
    }
    (void)reader->Finish();
  }

  void Watch() {
    for (;;) {
      Scan();
      std::unique_lock lock(mu);
      if (cv.wait_for(lock, options.poll, [&] { return !running; })) {
        return;
      }
    }
  }

  std::shared_ptr<Plugin> Find(const std::string& driver) const {
    std::lock_guard lock(mu);
    auto it = by_driver.find(driver);
    return it == by_driver.end() ? nullptr : it->second;
  }

  FakeDraKubeletOptions options;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool running = false;                                              // GUARDED_BY(mu)
  std::map<std::string, std::shared_ptr<Plugin>> by_socket;          // GUARDED_BY(mu)
  std::map<std::string, std::shared_ptr<Plugin>> by_driver;          // GUARDED_BY(mu) registered ones
  std::map<std::string, FakeDraRegistration> last;                   // GUARDED_BY(mu)
  std::map<std::string, int> accepted;                               // GUARDED_BY(mu)
  std::map<std::string, std::map<std::string, FakeClaim>> prepared;  // GUARDED_BY(mu) driver -> uid -> claim
  std::vector<std::thread> threads;                                  // GUARDED_BY(mu)
  std::mutex lifecycle_mu;
  std::thread watcher;
};

FakeDraKubelet::FakeDraKubelet(FakeDraKubeletOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

FakeDraKubelet::~FakeDraKubelet() { Stop(); }

common::Status FakeDraKubelet::Start() {
  std::lock_guard life(impl_->lifecycle_mu);
  if (impl_->watcher.joinable()) {
    return common::Status::Ok();
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(impl_->options.registry_dir, ec)) {
    return common::FailedPrecondition("fake DRA kubelet: " + impl_->options.registry_dir + " is not a directory");
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->running = true;
  }
  impl_->watcher = std::thread([this] { impl_->Watch(); });
  return common::Status::Ok();
}

void FakeDraKubelet::Stop() {
  std::lock_guard life(impl_->lifecycle_mu);
  if (!impl_->watcher.joinable()) {
    return;
  }
  {
    std::lock_guard lock(impl_->mu);
    impl_->running = false;
    for (auto& [path, p] : impl_->by_socket) {
      impl_->Deregister(*p);
    }
  }
  impl_->cv.notify_all();
  impl_->watcher.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(impl_->mu);
    threads.swap(impl_->threads);
  }
  for (auto& t : threads) {
    t.join();
  }
  std::lock_guard lock(impl_->mu);
  impl_->by_socket.clear();
  impl_->by_driver.clear();
}

common::Result<std::map<std::string, FakePrepareResult>> FakeDraKubelet::Restart(const std::string& driver,
                                                                                 std::chrono::milliseconds timeout) {
  Stop();
  GPUSCHED_RETURN_IF_ERROR(Start());
  if (!FakeKubelet::WaitFor([&] { return impl_->Find(driver) != nullptr; }, timeout)) {
    return common::Unavailable("fake DRA kubelet: driver " + driver + " did not register again after the restart");
  }
  return NodePrepareResources(driver, prepared_claims(driver));
}

std::optional<FakeDraRegistration> FakeDraKubelet::registration(const std::string& driver) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->last.find(driver);
  return it == impl_->last.end() ? std::nullopt : std::optional<FakeDraRegistration>(it->second);
}

int FakeDraKubelet::registrations(const std::string& driver) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->accepted.find(driver);
  return it == impl_->accepted.end() ? 0 : it->second;
}

common::Result<std::map<std::string, FakePrepareResult>> FakeDraKubelet::NodePrepareResources(
    const std::string& driver, const std::vector<FakeClaim>& claims, FakeDraApi api) {
  auto p = impl_->Find(driver);
  if (p == nullptr) {
    return common::FailedPrecondition("fake DRA kubelet: DRA driver " + driver + " is not registered");
  }
  const bool v1 = api == FakeDraApi::kV1 || (api == FakeDraApi::kChosen && p->info.chosen_service == "v1.DRAPlugin");
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  std::map<std::string, FakePrepareResult> out;
  if (v1) {
    drav1::NodePrepareResourcesRequest req;
    FillClaims(req, claims);
    drav1::NodePrepareResourcesResponse resp;
    GPUSCHED_RETURN_IF_ERROR(FromGrpc(drav1::DRAPlugin::NewStub(p->channel)->NodePrepareResources(&ctx, req, &resp)));
    out = PrepareAnswers(resp);
  } else {
    drav1beta1::NodePrepareResourcesRequest req;
    FillClaims(req, claims);
    drav1beta1::NodePrepareResourcesResponse resp;
    GPUSCHED_RETURN_IF_ERROR(
        FromGrpc(drav1beta1::DRAPlugin::NewStub(p->channel)->NodePrepareResources(&ctx, req, &resp)));
    out = PrepareAnswers(resp);
  }
  std::lock_guard lock(impl_->mu);
  for (const auto& c : claims) {
    auto it = out.find(c.uid);
    if (it != out.end() && it->second.error.empty()) {
      impl_->prepared[driver][c.uid] = c;
    }
  }
  return out;
}

common::Result<std::map<std::string, std::string>> FakeDraKubelet::NodeUnprepareResources(
    const std::string& driver, const std::vector<FakeClaim>& claims, FakeDraApi api) {
  auto p = impl_->Find(driver);
  if (p == nullptr) {
    return common::FailedPrecondition("fake DRA kubelet: DRA driver " + driver + " is not registered");
  }
  const bool v1 = api == FakeDraApi::kV1 || (api == FakeDraApi::kChosen && p->info.chosen_service == "v1.DRAPlugin");
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  std::map<std::string, std::string> out;
  if (v1) {
    drav1::NodeUnprepareResourcesRequest req;
    FillClaims(req, claims);
    drav1::NodeUnprepareResourcesResponse resp;
    GPUSCHED_RETURN_IF_ERROR(FromGrpc(drav1::DRAPlugin::NewStub(p->channel)->NodeUnprepareResources(&ctx, req, &resp)));
    out = UnprepareAnswers(resp);
  } else {
    drav1beta1::NodeUnprepareResourcesRequest req;
    FillClaims(req, claims);
    drav1beta1::NodeUnprepareResourcesResponse resp;
    GPUSCHED_RETURN_IF_ERROR(
        FromGrpc(drav1beta1::DRAPlugin::NewStub(p->channel)->NodeUnprepareResources(&ctx, req, &resp)));
    out = UnprepareAnswers(resp);
  }
  std::lock_guard lock(impl_->mu);
  for (const auto& c : claims) {
    auto it = out.find(c.uid);
    if (it != out.end() && it->second.empty()) {
      impl_->prepared[driver].erase(c.uid);
    }
  }
  return out;
}

std::vector<FakeClaim> FakeDraKubelet::prepared_claims(const std::string& driver) const {
  std::lock_guard lock(impl_->mu);
  std::vector<FakeClaim> out;
  if (auto it = impl_->prepared.find(driver); it != impl_->prepared.end()) {
    for (const auto& [uid, c] : it->second) {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<std::vector<FakeDeviceHealth>> FakeDraKubelet::Health(const std::string& driver) const {
  auto p = impl_->Find(driver);
  if (p == nullptr) {
    return std::nullopt;
  }
  std::lock_guard lock(impl_->mu);
  return p->health;
}

int FakeDraKubelet::health_updates(const std::string& driver) const {
  auto p = impl_->Find(driver);
  if (p == nullptr) {
    return 0;
  }
  std::lock_guard lock(impl_->mu);
  return p->health_updates;
}

}  // namespace gpusched::testing
