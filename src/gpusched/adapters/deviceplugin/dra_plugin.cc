#include "gpusched/adapters/deviceplugin/dra_plugin.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "gpusched/common/log.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace gpusched::adapters::deviceplugin {
namespace {

namespace fs = std::filesystem;
namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;
namespace health = ::v1alpha1;
namespace reg = ::pluginregistration;
using common::LogLevel;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kCheckpointVersion = 1;
constexpr std::string_view kCheckpointKind = "gpusched.io/dra-checkpoint";
constexpr size_t kMaxUidLength = 128;
constexpr int64_t kBytesPerMiB = 1024 * 1024;

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && c != '-' && c != '.') {
      return false;
    }
    if ((i == 0 || i + 1 == s.size()) && !alnum) {
      return false;
    }
  }
  return true;
}

std::string Quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

// Which MPS limits a shared device's consumed capacity asks for.
struct ShareOf {
  bool whole = false;
  int64_t compute_milli_units = 0;  // percent x 1000
  int64_t memory_milli_bytes = 0;   // bytes x 1000
};

std::string ClaimName(const ClaimRef& ref) { return "ResourceClaim " + ref.namespace_ + "/" + ref.name; }

}  // namespace

common::Status ValidateOptions(const DraPluginOptions& o) {
  if (o.node_name.empty()) {
    return common::InvalidArgument("DRA plugin: node_name is required");
  }
  if (!IsDnsSubdomain(o.driver_name)) {
    return common::InvalidArgument("DRA plugin: driver name " + Quote(o.driver_name) +
                                   " is not a DNS subdomain (lower-case letters, digits, '-', '.')");
  }
  if (o.plugins_registry_dir.empty() || o.plugins_dir.empty() || o.cdi.spec_dir.empty() ||
      o.plugins_registry_dir[0] != '/' || o.plugins_dir[0] != '/' || o.cdi.spec_dir[0] != '/') {
    return common::InvalidArgument(
        "DRA plugin: plugins_registry_dir, plugins_dir and the CDI spec directory must be absolute paths");
  }
  const std::string kubelet_dir = o.kubelet_plugins_dir.empty() ? o.plugins_dir : o.kubelet_plugins_dir;
  for (const std::string& path :
       {o.plugins_registry_dir + "/" + o.driver_name + "-reg.sock", o.plugins_dir + "/" + o.driver_name + "/dra.sock",
        kubelet_dir + "/" + o.driver_name + "/dra.sock"}) {
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return common::InvalidArgument("DRA plugin: socket path " + path + " is longer than " +
                                     std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    }
  }
  const size_t slash = o.cdi_kind.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == o.cdi_kind.size() ||
      o.cdi_kind.find('/', slash + 1) != std::string::npos) {
    return common::InvalidArgument("DRA plugin: the CDI kind must be <vendor>/<class>, got " + Quote(o.cdi_kind));
  }
  if (o.compute_capacity.empty() || o.memory_capacity.empty()) {
    return common::InvalidArgument("DRA plugin: compute_capacity and memory_capacity must be named");
  }
  if (o.mps.pipe_host_dir.empty() || o.mps.pipe_container_dir.empty() || o.mps.pipe_host_dir[0] != '/' ||
      o.mps.pipe_container_dir[0] != '/') {
    return common::InvalidArgument("DRA plugin: the MPS pipe directories must be absolute paths");
  }
  if (o.max_claims_per_call < 1 || o.max_health_streams < 1 || o.max_message_bytes < 4096 ||
      o.max_concurrent_streams < 1 || o.max_threads < 4) {
    return common::InvalidArgument(
        "DRA plugin: max_claims_per_call, max_health_streams and max_concurrent_streams must be positive, "
        "max_message_bytes at least 4096, max_threads at least 4");
  }
  if (o.sample_interval.count() < 0 || o.poll_interval.count() <= 0 || o.health_resend.count() <= 0) {
    return common::InvalidArgument(
        "DRA plugin: poll_interval and health_resend must be positive, sample_interval >= 0");
  }
  return common::Status::Ok();
}

std::string DraDeviceName(int32_t index) { return "gpu-" + std::to_string(index); }

common::Result<int32_t> ParseDraDeviceName(std::string_view name) {
  constexpr std::string_view kPrefix = "gpu-";
  auto bad = [&] {
    return common::NotFound("device " + Quote(name) + " is not one of this driver's names (gpu-<index>)");
  };
  if (!name.starts_with(kPrefix)) {
    return bad();
  }
  const std::string_view digits = name.substr(kPrefix.size());
  const bool all_digits = std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits.empty() || digits.size() > 6 || !all_digits || (digits.size() > 1 && digits[0] == '0')) {
    return bad();
  }
  int32_t index = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    return bad();
  }
  return index;
}

common::Status CheckClaimRef(const ClaimRef& ref) {
  if (ref.uid.empty() || ref.namespace_.empty() || ref.name.empty()) {
    return common::InvalidArgument("claim " + Quote(ref.namespace_ + "/" + ref.name) + " uid " + Quote(ref.uid) +
                                   ": namespace, name and uid are all required");
  }
  if (ref.uid.size() > kMaxUidLength) {
    return common::InvalidArgument("claim " + ref.namespace_ + "/" + ref.name + ": uid is longer than " +
                                   std::to_string(kMaxUidLength) + " characters");
  }
  for (const char c : ref.uid) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    if (!ok) {
      return common::InvalidArgument("claim " + ref.namespace_ + "/" + ref.name + ": uid " + Quote(ref.uid) +
                                     " has a character other than letters, digits, '-' and '_'");
    }
  }
  return common::Status::Ok();
}

std::string ClaimCdiSpecPath(const DraPluginOptions& options, std::string_view uid) {
  return options.cdi.spec_dir + "/" + options.driver_name + "-claim_" + std::string(uid) + ".json";
}

std::string DraCheckpointPath(const DraPluginOptions& options) {
  return options.plugins_dir + "/" + options.driver_name + "/checkpoint.json";
}

common::Result<PreparedClaim> PrepareClaim(const DraPluginOptions& options, const ClaimRef& ref,
                                           const core::dra::ResourceClaim& claim,
                                           std::span<const ports::GpuSample> gpus) {
  const std::string who = ClaimName(ref);
  if (claim.uid != ref.uid) {
    return common::FailedPrecondition(who + " has UID " + claim.uid + ", the kubelet asked for UID " + ref.uid +
                                      " (deleted and created again?); not prepared");
  }
  if (!claim.allocation.has_value()) {
    return common::FailedPrecondition(who + " is not allocated; not prepared");
  }
  if (claim.deallocation_requested) {
    return common::FailedPrecondition(who + " is being deleted or deallocated; not prepared");
  }
  const core::dra::ClaimAllocation& alloc = *claim.allocation;
  if (alloc.node.str() != options.node_name) {
    return common::FailedPrecondition(
        who + " is allocated to " +
        (alloc.node.str().empty() ? std::string("no single node") : "node " + alloc.node.str()) + ", this is node " +
        options.node_name + "; not prepared");
  }
  const std::string pool = options.pool_name.empty() ? options.node_name : options.pool_name;

  // The claim's results of this driver, merged per device (two requests may share one device).
  std::map<int32_t, ShareOf> shares;
  std::map<int32_t, std::vector<std::string>> requests_of;
  std::vector<std::pair<std::string, int32_t>> order;  // device name and GPU index, first appearance
  for (const core::dra::DeviceResult& r : alloc.devices) {
    if (r.driver != options.driver_name) {
      continue;
    }
    if (r.pool != pool) {
      return common::FailedPrecondition(who + ": device " + r.device + " is in pool " + Quote(r.pool) +
                                        ", this node's pool is " + Quote(pool) + "; not prepared");
    }
    auto index = ParseDraDeviceName(r.device);
    if (!index.ok()) {
      return common::NotFound(who + ": " + index.status().message() + "; not prepared");
    }
    const bool known = std::any_of(gpus.begin(), gpus.end(),
                                   [&](const ports::GpuSample& g) { return g.index == *index && !g.uuid.empty(); });
    if (!known) {
      return common::NotFound(who + ": device " + r.device + " is not a GPU of this node (it has " +
                              std::to_string(gpus.size()) + " GPUs); not prepared");
    }
    auto [it, fresh] = shares.try_emplace(*index);
    if (fresh) {
      order.emplace_back(r.device, *index);
    }
    requests_of[*index].push_back(r.request);
    if (r.consumed_capacity.empty()) {
      it->second.whole = true;
      continue;
    }
    for (const auto& [capacity, amount] : r.consumed_capacity) {
      if (amount.milli < 0) {
        return common::FailedPrecondition(who + ": device " + r.device + " consumes a negative " + capacity);
      }
      if (capacity == options.compute_capacity) {
        it->second.compute_milli_units += amount.milli;
      } else if (capacity == options.memory_capacity) {
        it->second.memory_milli_bytes += amount.milli;
      }
    }
  }
  if (shares.empty()) {
    return common::FailedPrecondition(who + " has no devices of driver " + options.driver_name + "; not prepared");
  }

  // Each GPU's share, in the shape the device plugin's environment builder takes.
  std::vector<core::GpuShare> gpu_shares;
  json devices = json::array();
  PreparedClaim out{.uid = ref.uid, .namespace_ = ref.namespace_, .name = ref.name};
  for (const auto& [device, index] : order) {
    const ports::GpuSample& g =
        *std::find_if(gpus.begin(), gpus.end(), [&](const ports::GpuSample& s) { return s.index == index; });
    auto node = GpuDeviceNode(options.cdi, g);
    if (!node.ok()) {
      return common::NotFound(who + ": " + node.status().message() + "; not prepared");
    }
    const ShareOf& share = shares.at(index);
    core::GpuShare gs{.index = g.index, .uuid = g.uuid, .exclusive = share.whole, .numa_node = g.numa_node};
    if (!share.whole) {
      // percent x 1000 -> MilliGpu (1000 = the GPU): / 100; capped at the whole GPU.
      gs.milli = common::MilliGpu{std::min<int64_t>(1000, share.compute_milli_units / 100)};
      gs.memory = common::MiB{share.memory_milli_bytes / 1000 / kBytesPerMiB};
      if (share.memory_milli_bytes > 0 && gs.memory.value() == 0) {
        return common::FailedPrecondition(who + ": device " + device + " consumes less than 1 MiB of " +
                                          options.memory_capacity + ", too little to limit");
      }
    }
    gpu_shares.push_back(gs);
    const std::string cdi_name = ref.uid + "-" + device;
    devices.push_back({{"name", cdi_name}, {"containerEdits", {{"deviceNodes", json::array({*node})}}}});
    out.devices.push_back(PreparedDevice{.requests = requests_of.at(index),
                                         .pool = pool,
                                         .device = device,
                                         .cdi_device_ids = {options.cdi_kind + "=" + cdi_name}});
  }

  const ContainerEnv env = BuildContainerEnv(gpu_shares, options.mps);
  const bool limited = env.envs.contains(std::string(kEnvMpsPipeDirectory));
  if (limited && options.mps_daemon) {
    if (common::Status s = options.mps_daemon(); !s.ok()) {
      return common::Unavailable(who + " shares a GPU with MPS limits, but the MPS control daemon does not answer (" +
                                 s.message() + "); not prepared");
    }
  }
  json edits = CommonContainerEdits(options.cdi);
  json env_list = json::array();
  for (const auto& [k, v] : env.envs) {
    env_list.push_back(k + "=" + v);
  }
  edits["env"] = std::move(env_list);
  for (const MountSpec& m : env.mounts) {
    edits["mounts"].push_back({{"hostPath", m.host_path},
                               {"containerPath", m.container_path},
                               {"options", json::array({m.read_only ? "ro" : "rw", "nosuid", "nodev", "bind"})}});
  }
  out.cdi_spec = {
      {"cdiVersion", "0.5.0"}, {"kind", options.cdi_kind}, {"devices", std::move(devices)}, {"containerEdits", edits}};
  return out;
}

json CheckpointJson(std::span<const PreparedClaim> claims) {
  json list = json::array();
  for (const PreparedClaim& c : claims) {
    json devices = json::array();
    for (const PreparedDevice& d : c.devices) {
      devices.push_back(
          {{"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"cdiDeviceIds", d.cdi_device_ids}});
    }
    list.push_back({{"uid", c.uid},
                    {"namespace", c.namespace_},
                    {"name", c.name},
                    {"devices", std::move(devices)},
                    {"cdiSpec", c.cdi_spec}});
  }
  return {{"kind", kCheckpointKind}, {"version", kCheckpointVersion}, {"claims", std::move(list)}};
}

common::Result<std::vector<PreparedClaim>> ParseCheckpoint(const json& doc) {
  auto bad = [](const std::string& what) { return common::InvalidArgument("DRA checkpoint: " + what); };
  if (!doc.is_object() || doc.value("kind", "") != kCheckpointKind) {
    return bad("not a checkpoint (kind is not " + std::string(kCheckpointKind) + ")");
  }
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"] != kCheckpointVersion) {
    return bad("unsupported version " + (doc.contains("version") ? doc["version"].dump() : std::string("(none)")) +
               " (this agent reads version " + std::to_string(kCheckpointVersion) + ")");
  }
  if (!doc.contains("claims") || !doc["claims"].is_array()) {
    return bad("\"claims\" is not a list");
  }
  auto str = [](const json& o, const char* key) -> std::optional<std::string> {
    if (!o.contains(key) || !o[key].is_string()) {
      return std::nullopt;
    }
    return o[key].get<std::string>();
  };
  auto strings = [](const json& o, const char* key) -> std::optional<std::vector<std::string>> {
    if (!o.contains(key) || !o[key].is_array()) {
      return std::nullopt;
    }
    std::vector<std::string> out;
    for (const json& v : o[key]) {
      if (!v.is_string()) {
        return std::nullopt;
      }
      out.push_back(v.get<std::string>());
    }
    return out;
  };
  std::vector<PreparedClaim> out;
  std::set<std::string> seen;
  for (size_t i = 0; i < doc["claims"].size(); ++i) {
    const json& c = doc["claims"][i];
    const std::string where = "claims[" + std::to_string(i) + "]";
    if (!c.is_object()) {
      return bad(where + " is not an object");
    }
    auto uid = str(c, "uid");
    auto ns = str(c, "namespace");
    auto name = str(c, "name");
    if (!uid || !ns || !name) {
      return bad(where + ": uid, namespace and name must be strings");
    }
    if (common::Status s = CheckClaimRef(ClaimRef{.namespace_ = *ns, .uid = *uid, .name = *name}); !s.ok()) {
      return bad(where + ": " + s.message());
    }
    if (!seen.insert(*uid).second) {
      return bad(where + ": uid " + *uid + " is listed twice");
    }
    if (!c.contains("cdiSpec") || !c["cdiSpec"].is_object() || !c.contains("devices") || !c["devices"].is_array()) {
      return bad(where + " (" + *uid + "): needs \"devices\" (a list) and \"cdiSpec\" (an object)");
    }
    PreparedClaim pc{.uid = *uid, .namespace_ = *ns, .name = *name, .cdi_spec = c["cdiSpec"]};
    for (const json& d : c["devices"]) {
      auto requests = d.is_object() ? strings(d, "requests") : std::nullopt;
      auto ids = d.is_object() ? strings(d, "cdiDeviceIds") : std::nullopt;
      auto pool = d.is_object() ? str(d, "pool") : std::nullopt;
      auto device = d.is_object() ? str(d, "device") : std::nullopt;
      if (!requests || !ids || !pool || !device) {
        return bad(where + " (" + *uid + "): a device needs requests, pool, device and cdiDeviceIds");
      }
      pc.devices.push_back(PreparedDevice{
          .requests = *std::move(requests), .pool = *pool, .device = *device, .cdi_device_ids = *std::move(ids)});
    }
    out.push_back(std::move(pc));
  }
  return out;
}

namespace {

// Writes `text` to `path` with mode 0600 so that a crash leaves either the old or the new file: a temporary file
// in the same directory, fsync, rename, fsync of the directory.
common::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return common::Unavailable("cannot create " + tmp + ": " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return common::Unavailable("cannot write " + tmp + ": " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return common::Unavailable("cannot sync " + tmp + ": " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return common::Unavailable("cannot rename " + tmp + " to " + path + ": " + why);
  }
  const std::string dir = fs::path(path).parent_path().string();
  if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return common::Status::Ok();
}

// Our directory: created 0700 when missing, and made 0700 when it exists (it is ours alone).
common::Status EnsurePrivateDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return common::Unavailable("cannot create " + dir + ": " + ec.message());
  }
  if (::chmod(dir.c_str(), 0700) != 0) {
    return common::Unavailable("cannot make " + dir + " private (0700): " + std::strerror(errno));
  }
  return common::Status::Ok();
}

// The generated types of one DRA API version (v1 and v1beta1 have the same messages in their own packages).
template <class Service_, class PrepareRequest_, class PrepareResponse_, class UnprepareRequest_,
          class UnprepareResponse_>
struct DraApi {
  using Service = Service_;
  using PrepareRequest = PrepareRequest_;
  using PrepareResponse = PrepareResponse_;
  using UnprepareRequest = UnprepareRequest_;
  using UnprepareResponse = UnprepareResponse_;
};
using DraV1 = DraApi<drav1::DRAPlugin::Service, drav1::NodePrepareResourcesRequest, drav1::NodePrepareResourcesResponse,
                     drav1::NodeUnprepareResourcesRequest, drav1::NodeUnprepareResourcesResponse>;
using DraV1beta1 = DraApi<drav1beta1::DRAPlugin::Service, drav1beta1::NodePrepareResourcesRequest,
                          drav1beta1::NodePrepareResourcesResponse, drav1beta1::NodeUnprepareResourcesRequest,
                          drav1beta1::NodeUnprepareResourcesResponse>;

template <class ClaimMsg>
ClaimRef RefOf(const ClaimMsg& c) {
  return ClaimRef{.namespace_ = c.namespace_(), .uid = c.uid(), .name = c.name()};
}

}  // namespace

struct DraPlugin::Impl {
  template <class Api>
  class DraService;
  class HealthService;
  class RegistrationService;

  Impl(DraPluginOptions o, ports::DeviceInventory& inv, ports::ResourceClaimReader& c)
      : options(std::move(o)), inventory(inv), claims(c) {
    if (options.pool_name.empty()) {
      options.pool_name = options.node_name;
    }
    if (options.kubelet_plugins_dir.empty()) {
      options.kubelet_plugins_dir = options.plugins_dir;
    }
  }

  std::string OurDir() const { return options.plugins_dir + "/" + options.driver_name; }
  std::string DraSocket() const { return OurDir() + "/dra.sock"; }
  std::string KubeletDraSocket() const { return options.kubelet_plugins_dir + "/" + options.driver_name + "/dra.sock"; }
  std::string RegistrationSocket() const {
    return options.plugins_registry_dir + "/" + options.driver_name + "-reg.sock";
  }

  // --- prepare side; prepare_mu held ---
  // The answer for one claim: its devices, or the reason it was not prepared.
  common::Result<PreparedClaim> PrepareOne(const ClaimRef& ref);
  common::Status UnprepareOne(const ClaimRef& ref);
  common::Status SaveCheckpoint();
  common::Status LoadAndRestore();

  // --- health ---
  void ApplySamples(common::Result<std::vector<ports::GpuSample>> samples);
  health::NodeWatchResourcesResponse HealthList();

  // --- serving ---
  common::Status Serve();
  void StopServers();
  bool SocketsExist() const;
  void Run();
  void SetError(std::string error) {
    std::lock_guard lock(mu);
    last_error = std::move(error);
    cv.notify_all();
  }

  DraPluginOptions options;
  ports::DeviceInventory& inventory;
  ports::ResourceClaimReader& claims;

  mutable std::mutex prepare_mu;
  std::map<std::string, PreparedClaim> prepared;  // GUARDED_BY(prepare_mu) by uid

  mutable std::mutex mu;
  mutable std::condition_variable cv;  // samples changed, registration changed, stopping
  std::vector<ports::GpuSample> gpus;  // GUARDED_BY(mu) in index order
  bool sample_ok = false;              // GUARDED_BY(mu)
  int64_t sampled_at = 0;              // GUARDED_BY(mu) Unix seconds of the last sample
  uint64_t version = 0;                // GUARDED_BY(mu) bumped when health changes
  bool stopping = false;               // GUARDED_BY(mu)
  bool registered = false;             // GUARDED_BY(mu)
  uint64_t registrations = 0;          // GUARDED_BY(mu)
  std::string last_error;              // GUARDED_BY(mu)
  int health_streams = 0;              // GUARDED_BY(mu)

  std::mutex start_mu;
  bool started = false;  // GUARDED_BY(start_mu)
  std::unique_ptr<DraService<DraV1>> v1_service;
  std::unique_ptr<DraService<DraV1beta1>> v1beta1_service;
  std::unique_ptr<HealthService> health_service;
  std::unique_ptr<RegistrationService> registration_service;
  std::unique_ptr<grpc::Server> dra_server;           // supervisor thread, Start and Stop (after joining it)
  std::unique_ptr<grpc::Server> registration_server;  // same
  std::thread supervisor;
};

// NodePrepareResources / NodeUnprepareResources for one API version (v1 and v1beta1 have the same messages).
template <class Api>
class DraPlugin::Impl::DraService final : public Api::Service {
 public:
  explicit DraService(Impl& impl) : impl_(impl) {}

  template <class Req, class Resp>
  grpc::Status Prepare(const Req* req, Resp* resp) {
    if (grpc::Status s = CheckSize(req->claims_size()); !s.ok()) {
      return s;
    }
    std::lock_guard lock(impl_.prepare_mu);
    for (const auto& c : req->claims()) {
      const ClaimRef ref = RefOf(c);
      auto& out = (*resp->mutable_claims())[c.uid()];
      out.Clear();
      auto prepared = impl_.PrepareOne(ref);
      if (!prepared.ok()) {
        common::Log(LogLevel::kWarn, "DRA plugin: NodePrepareResources " + ref.namespace_ + "/" + ref.name + " (" +
                                         ref.uid + ") refused: " + prepared.status().message());
        out.set_error(prepared.status().message());
        continue;
      }
      for (const PreparedDevice& d : prepared->devices) {
        auto* pd = out.add_devices();
        for (const auto& r : d.requests) {
          pd->add_request_names(r);
        }
        pd->set_pool_name(d.pool);
        pd->set_device_name(d.device);
        for (const auto& id : d.cdi_device_ids) {
          pd->add_cdi_device_ids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

  template <class Req, class Resp>
  grpc::Status Unprepare(const Req* req, Resp* resp) {
    if (grpc::Status s = CheckSize(req->claims_size()); !s.ok()) {
      return s;
    }
    std::lock_guard lock(impl_.prepare_mu);
    for (const auto& c : req->claims()) {
      const ClaimRef ref = RefOf(c);
      auto& out = (*resp->mutable_claims())[c.uid()];
      if (common::Status s = impl_.UnprepareOne(ref); !s.ok()) {
        common::Log(LogLevel::kWarn, "DRA plugin: NodeUnprepareResources " + ref.namespace_ + "/" + ref.name + " (" +
                                         ref.uid + ") failed: " + s.message());
        out.set_error(s.message());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status NodePrepareResources(grpc::ServerContext* /*ctx*/, const typename Api::PrepareRequest* req,
                                    typename Api::PrepareResponse* resp) override {
    return Prepare(req, resp);
  }
  grpc::Status NodeUnprepareResources(grpc::ServerContext* /*ctx*/, const typename Api::UnprepareRequest* req,
                                      typename Api::UnprepareResponse* resp) override {
    return Unprepare(req, resp);
  }

 private:
  grpc::Status CheckSize(int claims) const {
    if (claims > impl_.options.max_claims_per_call) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "DRA plugin: " + std::to_string(claims) +
                                                      " claims in one call, at most " +
                                                      std::to_string(impl_.options.max_claims_per_call)};
    }
    return grpc::Status::OK;
  }

  Impl& impl_;
};

class DraPlugin::Impl::HealthService final : public health::DRAResourceHealth::Service {
 public:
  explicit HealthService(Impl& impl) : impl_(impl) {}

  void Close() {
    closing_ = true;
    impl_.cv.notify_all();
  }

  grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const health::NodeWatchResourcesRequest* /*req*/,
                                  grpc::ServerWriter<health::NodeWatchResourcesResponse>* writer) override {
    std::unique_lock lock(impl_.mu);
    if (impl_.health_streams >= impl_.options.max_health_streams) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED,
              "DRA plugin: already " + std::to_string(impl_.health_streams) + " health streams open (the limit)"};
    }
    ++impl_.health_streams;
    std::optional<uint64_t> sent;
    auto sent_at = Clock::now();
    while (!impl_.stopping && !closing_ && !ctx->IsCancelled()) {
      if (sent != impl_.version || Clock::now() - sent_at >= impl_.options.health_resend) {
        sent = impl_.version;
        sent_at = Clock::now();
        lock.unlock();
        const health::NodeWatchResourcesResponse list = impl_.HealthList();
        const bool ok = writer->Write(list);
        lock.lock();
        if (!ok) {
          break;  // the kubelet went away
        }
        continue;
      }
      impl_.cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    --impl_.health_streams;
    return grpc::Status::OK;
  }

 private:
  Impl& impl_;
  std::atomic<bool> closing_{false};
};

class DraPlugin::Impl::RegistrationService final : public reg::Registration::Service {
 public:
  explicit RegistrationService(Impl& impl) : impl_(impl) {}

  grpc::Status GetInfo(grpc::ServerContext* /*ctx*/, const reg::InfoRequest* /*req*/, reg::PluginInfo* out) override {
    out->set_type(std::string(kDraPluginType));
    out->set_name(impl_.options.driver_name);
    out->set_endpoint(impl_.KubeletDraSocket());
    // Our order is our preference: kubelets 1.34+ take the first they know.
    out->add_supported_versions(std::string(kDraV1Service));
    out->add_supported_versions(std::string(kDraV1beta1Service));
    out->add_supported_versions(std::string(kDraHealthService));
    return grpc::Status::OK;
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* /*ctx*/, const reg::RegistrationStatus* status,
                                        reg::RegistrationStatusResponse* /*resp*/) override {
    std::lock_guard lock(impl_.mu);
    impl_.registered = status->plugin_registered();
    if (status->plugin_registered()) {
      ++impl_.registrations;
      impl_.last_error.clear();
      common::Log(LogLevel::kInfo, "DRA plugin: the kubelet registered driver " + impl_.options.driver_name +
                                       " (endpoint " + impl_.KubeletDraSocket() + ")");
    } else {
      impl_.last_error = "the kubelet refused the registration of DRA driver " + impl_.options.driver_name + ": " +
                         (status->error().empty() ? std::string("(no reason given)") : status->error());
      common::Log(LogLevel::kError, "DRA plugin: " + impl_.last_error);
    }
    impl_.cv.notify_all();
    return grpc::Status::OK;
  }

 private:
  Impl& impl_;
};

common::Result<PreparedClaim> DraPlugin::Impl::PrepareOne(const ClaimRef& ref) {
  GPUSCHED_RETURN_IF_ERROR(CheckClaimRef(ref));
  if (auto it = prepared.find(ref.uid); it != prepared.end()) {
    const PreparedClaim& known = it->second;
    if (known.namespace_ != ref.namespace_ || known.name != ref.name) {
      return common::FailedPrecondition("claim uid " + ref.uid + " was prepared as " + known.namespace_ + "/" +
                                        known.name + ", not " + ref.namespace_ + "/" + ref.name);
    }
    // Prepared already: the same answer; the spec is put back if it went missing (WriteCdiSpecFile writes only
    // when the file differs).
    GPUSCHED_RETURN_IF_ERROR(WriteCdiSpecFile(ClaimCdiSpecPath(options, ref.uid), known.cdi_spec));
    return known;
  }
  auto claim = claims.Get(ref.namespace_, ref.name);
  if (!claim.ok()) {
    return common::Status(claim.status().code(),
                          "cannot read " + ClaimName(ref) + ": " + claim.status().message() + "; not prepared");
  }
  std::vector<ports::GpuSample> node_gpus;
  {
    std::lock_guard lock(mu);
    if (!sample_ok) {
      return common::Unavailable("the GPU inventory cannot be read; " + ClaimName(ref) + " not prepared");
    }
    node_gpus = gpus;
  }
  GPUSCHED_ASSIGN_OR_RETURN(result, PrepareClaim(options, ref, *claim, node_gpus));
  const std::string spec_path = ClaimCdiSpecPath(options, ref.uid);
  GPUSCHED_RETURN_IF_ERROR(WriteCdiSpecFile(spec_path, result.cdi_spec));
  prepared[ref.uid] = result;
  if (common::Status s = SaveCheckpoint(); !s.ok()) {
    prepared.erase(ref.uid);
    (void)RemoveCdiSpecFile(spec_path);
    return common::Unavailable("cannot record " + ClaimName(ref) + " in the checkpoint (" + s.message() +
                               "); not prepared");
  }
  common::Log(LogLevel::kInfo, "DRA plugin: prepared " + ClaimName(ref) + " (" + ref.uid + "), " +
                                   std::to_string(result.devices.size()) + " device(s), CDI spec " + spec_path);
  return result;
}

common::Status DraPlugin::Impl::UnprepareOne(const ClaimRef& ref) {
  GPUSCHED_RETURN_IF_ERROR(CheckClaimRef(ref));
  auto it = prepared.find(ref.uid);
  if (it == prepared.end()) {
    // Unprepared already, or never prepared here. A spec under that name would still be ours: remove it.
    return RemoveCdiSpecFile(ClaimCdiSpecPath(options, ref.uid));
  }
  GPUSCHED_RETURN_IF_ERROR(RemoveCdiSpecFile(ClaimCdiSpecPath(options, ref.uid)));
  PreparedClaim removed = std::move(it->second);
  prepared.erase(it);
  if (common::Status s = SaveCheckpoint(); !s.ok()) {
    prepared[ref.uid] = std::move(removed);  // the kubelet will ask again; the checkpoint still lists it
    return common::Unavailable("cannot update the checkpoint: " + s.message());
  }
  common::Log(LogLevel::kInfo, "DRA plugin: unprepared " + ClaimName(ref) + " (" + ref.uid + ")");
  return common::Status::Ok();
}

common::Status DraPlugin::Impl::SaveCheckpoint() {
  std::vector<PreparedClaim> list;
  list.reserve(prepared.size());
  for (const auto& [uid, c] : prepared) {
    list.push_back(c);
  }
  return WriteFileAtomically(DraCheckpointPath(options), CheckpointJson(list).dump(1) + "\n");
}

common::Status DraPlugin::Impl::LoadAndRestore() {
  const std::string path = DraCheckpointPath(options);
  std::ifstream in(path);
  prepared.clear();
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return common::InvalidArgument("DRA plugin: the checkpoint " + path +
                                     " is not valid JSON; move it away to start without the claims it lists");
    }
    auto list = ParseCheckpoint(doc);
    if (!list.ok()) {
      return common::InvalidArgument("DRA plugin: " + path + ": " + list.status().message());
    }
    for (PreparedClaim& c : *list) {
      std::string uid = c.uid;
      prepared.emplace(std::move(uid), std::move(c));
    }
  } else if (fs::exists(path)) {
    return common::Unavailable("DRA plugin: cannot read the checkpoint " + path);
  }
  // Specs back after a reboot (tmpfs), and specs of ours nobody lists removed.
  for (const auto& [uid, c] : prepared) {
    GPUSCHED_RETURN_IF_ERROR(WriteCdiSpecFile(ClaimCdiSpecPath(options, uid), c.cdi_spec));
  }
  const std::string prefix = options.driver_name + "-claim_";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options.cdi.spec_dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (!file.starts_with(prefix) || !file.ends_with(".json")) {
      continue;
    }
    const std::string uid = file.substr(prefix.size(), file.size() - prefix.size() - 5);
    if (!prepared.contains(uid)) {
      common::Log(LogLevel::kWarn, "DRA plugin: removing CDI spec " + entry.path().string() +
                                       " of a claim the checkpoint does not list");
      std::error_code rm;
      fs::remove(entry.path(), rm);
    }
  }
  if (!prepared.empty()) {
    common::Log(LogLevel::kInfo,
                "DRA plugin: " + std::to_string(prepared.size()) + " prepared claim(s) restored from " + path);
  }
  return common::Status::Ok();
}

void DraPlugin::Impl::ApplySamples(common::Result<std::vector<ports::GpuSample>> samples) {
  std::lock_guard lock(mu);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (!samples.ok()) {
    if (sample_ok) {
      common::Log(LogLevel::kWarn, "DRA plugin: GPU inventory sample failed (" + samples.status().message() +
                                       "); device health UNKNOWN");
      sample_ok = false;
      ++version;
      cv.notify_all();
    }
    return;
  }
  std::vector<ports::GpuSample> next = std::move(samples).value();
  std::sort(next.begin(), next.end(),
            [](const ports::GpuSample& a, const ports::GpuSample& b) { return a.index < b.index; });
  bool changed = !sample_ok || next.size() != gpus.size();
  for (size_t i = 0; !changed && i < next.size(); ++i) {
    changed = next[i].index != gpus[i].index || next[i].healthy != gpus[i].healthy || next[i].uuid != gpus[i].uuid;
  }
  gpus = std::move(next);
  sample_ok = true;
  sampled_at = now;
  if (changed) {
    ++version;
    cv.notify_all();
  }
}

health::NodeWatchResourcesResponse DraPlugin::Impl::HealthList() {
  health::NodeWatchResourcesResponse out;
  std::lock_guard lock(mu);
  const int64_t at = sampled_at > 0 ? sampled_at : static_cast<int64_t>(std::time(nullptr));
  for (const ports::GpuSample& g : gpus) {
    auto* d = out.add_devices();
    d->mutable_device()->set_pool_name(options.pool_name);
    d->mutable_device()->set_device_name(DraDeviceName(g.index));
    d->set_health(!sample_ok ? health::UNKNOWN : g.healthy ? health::HEALTHY : health::UNHEALTHY);
    d->set_last_updated_time(at);
  }
  return out;
}

bool DraPlugin::Impl::SocketsExist() const {
  struct stat st {};
  return ::stat(DraSocket().c_str(), &st) == 0 && ::stat(RegistrationSocket().c_str(), &st) == 0;
}

void DraPlugin::Impl::StopServers() {
  if (health_service != nullptr) {
    health_service->Close();
  }
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
  // The registration socket first: the kubelet's plugin watcher sees it go and stops using the driver.
  if (registration_server != nullptr) {
    registration_server->Shutdown(deadline);
    registration_server->Wait();
    registration_server.reset();
    ::unlink(RegistrationSocket().c_str());
  }
  if (dra_server != nullptr) {
    dra_server->Shutdown(deadline);
    dra_server->Wait();
    dra_server.reset();
    ::unlink(DraSocket().c_str());
  }
  v1_service.reset();
  v1beta1_service.reset();
  health_service.reset();
  registration_service.reset();
  std::lock_guard lock(mu);
  registered = false;
}

common::Status DraPlugin::Impl::Serve() {
  StopServers();
  GPUSCHED_RETURN_IF_ERROR(EnsurePrivateDir(OurDir()));
  std::error_code ec;
  if (!fs::is_directory(options.plugins_registry_dir, ec)) {
    return common::Unavailable("DRA plugin: the kubelet's plugin registry " + options.plugins_registry_dir +
                               " does not exist (is it mounted into the agent?)");
  }
  auto configure = [&](grpc::ServerBuilder& b, const std::string& path, std::string_view name) {
    b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    b.SetMaxReceiveMessageSize(options.max_message_bytes);
    b.SetMaxSendMessageSize(options.max_message_bytes);
    b.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
    grpc::ResourceQuota quota("gpusched-dra-" + std::string(name));
    quota.SetMaxThreads(options.max_threads);
    b.SetResourceQuota(quota);
  };
  // The DRA socket first: the kubelet may call it as soon as it sees the registration socket.
  v1_service = std::make_unique<DraService<DraV1>>(*this);
  v1beta1_service = std::make_unique<DraService<DraV1beta1>>(*this);
  health_service = std::make_unique<HealthService>(*this);
  ::unlink(DraSocket().c_str());
  grpc::ServerBuilder dra;
  configure(dra, DraSocket(), "plugin");
  dra.RegisterService(v1_service.get());
  dra.RegisterService(v1beta1_service.get());
  dra.RegisterService(health_service.get());
  dra_server = dra.BuildAndStart();
  if (dra_server == nullptr) {
    StopServers();
    return common::Unavailable("DRA plugin: cannot serve on unix socket " + DraSocket());
  }
  ::chmod(DraSocket().c_str(), 0600);

  registration_service = std::make_unique<RegistrationService>(*this);
  ::unlink(RegistrationSocket().c_str());
  grpc::ServerBuilder rb;
  configure(rb, RegistrationSocket(), "registration");
  rb.RegisterService(registration_service.get());
  registration_server = rb.BuildAndStart();
  if (registration_server == nullptr) {
    StopServers();
    return common::Unavailable("DRA plugin: cannot serve on unix socket " + RegistrationSocket());
  }
  ::chmod(RegistrationSocket().c_str(), 0600);
  return common::Status::Ok();
}

void DraPlugin::Impl::Run() {
  auto next_sample = Clock::now() + options.sample_interval;
  for (;;) {
    {
      std::unique_lock lock(mu);
      if (cv.wait_for(lock, options.poll_interval, [&] { return stopping; })) {
        break;
      }
    }
    const auto now = Clock::now();
    if (options.sample_interval.count() > 0 && now >= next_sample) {
      ApplySamples(inventory.Sample());
      next_sample = now + options.sample_interval;
    }
    if (!SocketsExist()) {
      common::Log(LogLevel::kWarn, "DRA plugin: a socket of ours is gone (" + DraSocket() + ", " +
                                       RegistrationSocket() + "); serving again");
      common::Status s = Serve();
      SetError(s.ok() ? "" : s.message());
    }
  }
}

DraPlugin::DraPlugin(DraPluginOptions options, ports::DeviceInventory& inventory, ports::ResourceClaimReader& claims)
    : impl_(std::make_unique<Impl>(std::move(options), inventory, claims)) {}

DraPlugin::~DraPlugin() { Stop(); }

common::Status DraPlugin::Start() {
  std::lock_guard lock(impl_->start_mu);
  if (impl_->started) {
    return common::Status::Ok();
  }
  GPUSCHED_RETURN_IF_ERROR(ValidateOptions(impl_->options));
  auto samples = impl_->inventory.Sample();
  if (!samples.ok()) {
    return common::Unavailable("DRA plugin: the first GPU inventory sample failed: " + samples.status().message());
  }
  impl_->ApplySamples(std::move(samples));
  GPUSCHED_RETURN_IF_ERROR(EnsurePrivateDir(impl_->OurDir()));
  {
    std::lock_guard prepare_lock(impl_->prepare_mu);
    GPUSCHED_RETURN_IF_ERROR(impl_->LoadAndRestore());
  }
  GPUSCHED_RETURN_IF_ERROR(impl_->Serve());
  {
    std::lock_guard state_lock(impl_->mu);
    impl_->stopping = false;
    impl_->last_error.clear();
  }
  impl_->started = true;
  impl_->supervisor = std::thread([this] { impl_->Run(); });
  common::Log(LogLevel::kInfo, "DRA plugin: serving driver " + impl_->options.driver_name + " on " +
                                   impl_->DraSocket() + ", registration on " + impl_->RegistrationSocket());
  return common::Status::Ok();
}

void DraPlugin::Stop() {
  std::lock_guard lock(impl_->start_mu);
  if (!impl_->started) {
    return;
  }
  {
    std::lock_guard state_lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  impl_->supervisor.join();
  impl_->StopServers();
  impl_->started = false;
}

void DraPlugin::OnSamples(std::vector<ports::GpuSample> samples) { impl_->ApplySamples(std::move(samples)); }

bool DraPlugin::registered() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registered;
}

bool DraPlugin::WaitRegistered(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mu);
  return impl_->cv.wait_for(lock, timeout, [&] { return impl_->registered; });
}

uint64_t DraPlugin::registrations() const {
  std::lock_guard lock(impl_->mu);
  return impl_->registrations;
}

std::string DraPlugin::last_error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_error;
}

std::vector<PreparedClaim> DraPlugin::prepared() const {
  std::lock_guard lock(impl_->prepare_mu);
  std::vector<PreparedClaim> out;
  for (const auto& [uid, c] : impl_->prepared) {
    out.push_back(c);
  }
  return out;
}

std::string DraPlugin::registration_socket() const { return impl_->RegistrationSocket(); }
std::string DraPlugin::dra_socket() const { return impl_->DraSocket(); }

}  // namespace gpusched::adapters::deviceplugin
