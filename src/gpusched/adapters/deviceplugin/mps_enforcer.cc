#include "gpusched/adapters/deviceplugin/mps_enforcer.h"

#include <set>
#include <utility>

#include "gpusched/common/log.h"

namespace gpusched::adapters::deviceplugin {

MpsEnforcer::MpsEnforcer(MpsControlRunner& runner, MpsEnforcerOptions options)
    : options_(std::move(options)), controller_(runner, options_.plan) {}

MpsEnforcer::~MpsEnforcer() { Stop(); }

common::Status MpsEnforcer::Start() {
  GPUSCHED_RETURN_IF_ERROR(controller_.ValidateOptions());
  if (!options_.pods || !options_.get_pod) {
    return common::InvalidArgument("MPS enforcer: no pod source");
  }
  if (options_.interval.count() <= 0 || options_.admitted_rounds <= 0) {
    return common::InvalidArgument("MPS enforcer: the interval and admitted rounds must be positive");
  }
  RoundNow();
  worker_.Start([this] {
    while (!worker_.WaitFor(options_.interval)) {
      RoundNow();
    }
  });
  return common::Status::Ok();
}

void MpsEnforcer::Stop() { worker_.Stop(); }

std::vector<MpsClient> MpsEnforcer::Clients(const MpsClient* extra) {
  const std::vector<nlohmann::json> pods = options_.pods();
  std::vector<MpsClient> clients = MpsClientsFromPods(pods, options_.node);
  std::set<std::string> listed;
  for (const auto& p : pods) {
    auto meta = kube::DecodePodMeta(p);
    if (meta.ok()) {
      listed.insert(meta->Key());
    }
  }
  std::lock_guard lock(mu_);
  for (auto it = admitted_.begin(); it != admitted_.end();) {
    if (listed.contains(it->second.client.pod_key) || it->second.rounds >= options_.admitted_rounds) {
      it = admitted_.erase(it);
      continue;
    }
    if (extra == nullptr) {
      ++it->second.rounds;
    }
    clients.push_back(it->second.client);
    ++it;
  }
  if (extra != nullptr) {
    std::erase_if(clients, [extra](const MpsClient& c) {
      return c.pod_key == extra->pod_key && c.container == extra->container;
    });
    clients.push_back(*extra);
  }
  return clients;
}

common::Status MpsEnforcer::Admit(const kube::PodMeta& pod, const std::string& entry,
                                  std::span<const core::GpuShare> shares) {
  MpsClient client{.pod_key = pod.Key(), .container = entry};
  for (const auto& g : shares) {
    if (!g.exclusive && !g.uuid.empty()) {
      client.gpus.push_back(g);
    }
  }
  if (client.gpus.empty()) {
    return common::Status::Ok();
  }
  auto object = options_.get_pod(pod.namespace_, pod.name);
  if (!object.ok()) {
    return common::Unavailable("MPS: reading pod " + pod.Key() + " for its uid: " + object.status().message());
  }
  client.uid = ContainerUid(*object, entry);
  const std::vector<MpsClient> clients = Clients(&client);
  common::Status s = controller_.Apply(clients);
  std::lock_guard lock(mu_);
  if (s.ok()) {
    admitted_[client.pod_key + "\n" + client.container] = Admitted{.client = client};
  }
  status_ = s;
  return s;
}

void MpsEnforcer::OnSamples(std::span<const ports::GpuSample> samples) {
  std::vector<std::string> gpus;
  for (const auto& s : samples) {
    if (!s.uuid.empty()) {
      gpus.push_back(s.uuid.str());
    }
  }
  controller_.SetGpus(std::move(gpus));
}

void MpsEnforcer::RoundNow() {
  const std::vector<MpsClient> clients = Clients(nullptr);
  common::Status s = controller_.Apply(clients);
  std::lock_guard lock(mu_);
  if (s.ok() != status_.ok()) {
    common::Log(s.ok() ? common::LogLevel::kInfo : common::LogLevel::kError,
                s.ok() ? "MPS: limits set in the control daemon for " + std::to_string(clients.size()) + " client(s)"
                       : "MPS: cannot set the limits: " + s.message() +
                             " (containers with MPS limits are refused until it works)");
  }
  status_ = std::move(s);
}

common::Status MpsEnforcer::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

std::string MpsEnforcer::RenderMetrics() const {
  std::string out;
  auto metric = [&out](const char* name, const char* type, const char* help, uint64_t value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(value) + "\n";
  };
  metric("gpusched_agent_mps_limits_ok", "gauge", "1 while the last round set the MPS limits in the control daemon.",
         status().ok() ? 1 : 0);
  metric("gpusched_agent_mps_limit_commands_total", "counter", "MPS control commands that set a limit.",
         controller_.commands_sent());
  metric("gpusched_agent_mps_limit_failures_total", "counter", "Rounds that could not set the MPS limits.",
         controller_.failures());
  metric("gpusched_agent_mps_daemon_restarts_seen_total", "counter",
         "MPS control daemon restarts noticed (every limit set again).", controller_.restarts_seen());
  return out;
}

}  // namespace gpusched::adapters::deviceplugin
