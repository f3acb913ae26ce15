// The gRPC client behind NewKubeletPodResources (pod_resources.h).
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <utility>

#include "gpusched/adapters/deviceplugin/pod_resources.h"
#include "podresources/v1/api.grpc.pb.h"

namespace gpusched::adapters::deviceplugin {
namespace {

// gRPC's reconnect backoff grows to 120 s by default; the kubelet's socket comes back within seconds of a kubelet
// restart, so cap it at 1 s.
std::shared_ptr<grpc::Channel> Channel(const std::string& socket_path) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel("unix:" + socket_path, grpc::InsecureChannelCredentials(), args);
}

class KubeletPodResources final : public PodResourcesSource {
 public:
  KubeletPodResources(std::string socket_path, std::chrono::milliseconds timeout)
      : socket_path_(std::move(socket_path)),
        timeout_(timeout),
        stub_(::v1::PodResourcesLister::NewStub(Channel(socket_path_))) {}

  common::Result<std::vector<KubeletPod>> List() override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout_);
    ::v1::ListPodResourcesRequest req;
    ::v1::ListPodResourcesResponse resp;
    grpc::Status s = stub_->List(&ctx, req, &resp);
    if (!s.ok()) {
      return common::Unavailable("List on " + socket_path_ + ": " + s.error_message() + " (gRPC code " +
                                 std::to_string(s.error_code()) + ")");
    }
    std::vector<KubeletPod> out;
    out.reserve(static_cast<size_t>(resp.pod_resources_size()));
    for (const auto& p : resp.pod_resources()) {
      KubeletPod pod{.namespace_ = p.namespace_(), .name = p.name()};
      for (const auto& c : p.containers()) {
        KubeletContainer container{.name = c.name()};
        // Kubelets since 1.21 send one entry per device; older ones one per resource. Merge either way.
        for (const auto& d : c.devices()) {
          auto& ids = container.devices[d.resource_name()];
          ids.insert(ids.end(), d.device_ids().begin(), d.device_ids().end());
        }
        pod.containers.push_back(std::move(container));
      }
      out.push_back(std::move(pod));
    }
    return out;
  }

 private:
  const std::string socket_path_;
  const std::chrono::milliseconds timeout_;
  std::unique_ptr<::v1::PodResourcesLister::Stub> stub_;
};

}  // namespace

std::unique_ptr<PodResourcesSource> NewKubeletPodResources(std::string socket_path, std::chrono::milliseconds timeout) {
  return std::make_unique<KubeletPodResources>(std::move(socket_path), timeout);
}

}  // namespace gpusched::adapters::deviceplugin
