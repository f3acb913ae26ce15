#include "gpusched/adapters/deviceplugin/mps_control.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/common/log.h"
#include "gpusched/kube/annotations.h"
#include "gpusched/kube/objects.h"
#include "gpusched/proc/subprocess.h"

namespace gpusched::adapters::deviceplugin {

namespace {

constexpr size_t kMaxServers = 1024;  // get_server_list lines read; more is an error, not a silent cut

// A client's compute share in percent, or nullopt when none of its shared GPUs has compute (memory-only).
std::optional<int64_t> ComputePercent(const MpsClient& c) {
  std::optional<int64_t> pct;
  for (const auto& g : c.gpus) {
    if (!g.exclusive && g.milli.value() > 0) {
      const int64_t p = std::clamp<int64_t>(g.milli.value() / 10, 1, 100);
      pct = pct ? std::min(*pct, p) : p;
    }
  }
  return pct;
}

bool Shared(const MpsClient& c) {
  return std::any_of(c.gpus.begin(), c.gpus.end(),
                     [](const core::GpuShare& g) { return !g.exclusive && !g.uuid.empty(); });
}

// The smallest shares over `clients` (pointers into the caller's span), with the fallbacks where none gives one.
MpsLimits Smallest(const std::vector<const MpsClient*>& clients, const MpsPlanOptions& o) {
  MpsLimits out;
  std::optional<int64_t> pct;
  std::map<std::string, int64_t> mem;
  for (const MpsClient* c : clients) {
    if (auto p = ComputePercent(*c)) {
      pct = pct ? std::min(*pct, *p) : *p;
    }
    for (const auto& g : c->gpus) {
      if (g.exclusive || g.uuid.empty() || g.memory.value() <= 0) {
        continue;
      }
      auto [it, fresh] = mem.emplace(g.uuid.str(), g.memory.value());
      if (!fresh) {
        it->second = std::min(it->second, g.memory.value());
      }
    }
  }
  out.thread_percentage = pct.value_or(o.fallback_thread_percentage);
  std::set<std::string> gpus(o.gpus.begin(), o.gpus.end());
  for (const auto& [uuid, mib] : mem) {
    gpus.insert(uuid);
  }
  for (const std::string& uuid : gpus) {
    if (auto it = mem.find(uuid); it != mem.end()) {
      out.pinned_mib[uuid] = it->second;
    } else if (o.fallback_pinned_mib > 0) {
      out.pinned_mib[uuid] = o.fallback_pinned_mib;
    }
  }
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

class ProcessMpsRunner : public MpsControlRunner {
 public:
  explicit ProcessMpsRunner(ProcessMpsRunnerOptions o) : o_(std::move(o)) {}

  common::Result<std::string> Run(std::string_view command) override {
    auto r = proc::RunCommand({o_.control}, proc::CommandOptions{.env = {{"CUDA_MPS_PIPE_DIRECTORY", o_.pipe_dir},
                                                                         {"CUDA_MPS_LOG_DIRECTORY", o_.log_dir}},
                                                                 .input = std::string(command) + "\n",
                                                                 .timeout = o_.timeout});
    if (!r.ok()) {
      return r.status();
    }
    if (r->timed_out) {
      return common::Unavailable(o_.control + " did not answer within " + std::to_string(o_.timeout.count()) + " ms");
    }
    if (r->exit_code != 0) {
      std::string said = r->output;
      if (!r->errors.empty()) {
        said += (said.empty() ? "" : "; ") + r->errors;
      }
      return common::Unavailable(o_.control + " exited with " + std::to_string(r->exit_code) +
                                 (said.empty() ? "" : ": " + said.substr(0, 200)));
    }
    return r->output;
  }

  std::optional<int64_t> ProcessUid(int64_t pid) override {
    std::ifstream in(o_.proc_dir + "/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("Uid:")) {
        std::istringstream fields(line.substr(4));
        int64_t real = -1;
        if (fields >> real && real >= 0) {
          return real;
        }
        return std::nullopt;
      }
    }
    return std::nullopt;
  }

  std::string DaemonIdentity() override {
    std::ifstream in(o_.pipe_dir + "/nvidia-cuda-mps-control.pid");
    std::string text(64, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
    return Trim(text);
  }

 private:
  ProcessMpsRunnerOptions o_;
};

const nlohmann::json* Field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

}  // namespace

MpsPlan PlanMpsLimits(std::span<const MpsClient> clients, std::span<const MpsServer> servers,
                      const MpsPlanOptions& options) {
  std::vector<const MpsClient*> all;
  for (const MpsClient& c : clients) {
    if (Shared(c)) {
      all.push_back(&c);
    }
  }
  MpsPlan plan;
  plan.defaults = Smallest(all, options);
  for (const MpsServer& s : servers) {
    if (!s.uid.has_value()) {
      plan.servers[s.pid] = plan.defaults;
      continue;
    }
    std::vector<const MpsClient*> mine;
    for (const MpsClient* c : all) {
      if (!c->uid.has_value() || *c->uid == *s.uid) {
        mine.push_back(c);
      }
    }
    plan.servers[s.pid] = mine.empty() ? plan.defaults : Smallest(mine, options);
  }
  return plan;
}

std::vector<std::string> MpsCommands(const std::optional<MpsPlan>& from, const MpsPlan& to) {
  std::vector<std::string> out;
  auto limits = [&out](const MpsLimits* was, const MpsLimits& want, const std::string& pct_prefix,
                       const std::string& mem_prefix) {
    if (was == nullptr || was->thread_percentage != want.thread_percentage) {
      out.push_back(pct_prefix + std::to_string(want.thread_percentage));
    }
    for (const auto& [uuid, mib] : want.pinned_mib) {
      const auto it = was == nullptr ? want.pinned_mib.end() : was->pinned_mib.find(uuid);
      if (was == nullptr || it == was->pinned_mib.end() || it->second != mib) {
        out.push_back(mem_prefix + uuid + " " + std::to_string(mib) + "M");
      }
    }
  };
  limits(from ? &from->defaults : nullptr, to.defaults, "set_default_active_thread_percentage ",
         "set_default_device_pinned_mem_limit ");
  for (const auto& [pid, want] : to.servers) {
    const MpsLimits* was = nullptr;
    if (from) {
      if (auto it = from->servers.find(pid); it != from->servers.end()) {
        was = &it->second;
      }
    }
    const std::string p = std::to_string(pid);
    limits(was, want, "set_active_thread_percentage " + p + " ", "set_device_pinned_mem_limit " + p + " ");
  }
  return out;
}

std::optional<int64_t> ContainerUid(const nlohmann::json& pod, std::string_view container) {
  const nlohmann::json* spec = Field(pod, "spec");
  if (spec == nullptr) {
    return std::nullopt;
  }
  const bool init = container.starts_with("init:");
  const std::string_view name = init ? container.substr(5) : container;
  const nlohmann::json* list = Field(*spec, init ? "initContainers" : "containers");
  const nlohmann::json* found = nullptr;
  if (list != nullptr && list->is_array()) {
    for (const auto& c : *list) {
      const nlohmann::json* n = Field(c, "name");
      if (n != nullptr && n->is_string() && n->get_ref<const std::string&>() == name) {
        found = &c;
        break;
      }
    }
  }
  if (found == nullptr) {
    return std::nullopt;
  }
  const nlohmann::json* sc = Field(*found, "securityContext");
  const nlohmann::json* ape = sc != nullptr ? Field(*sc, "allowPrivilegeEscalation") : nullptr;
  const nlohmann::json* privileged = sc != nullptr ? Field(*sc, "privileged") : nullptr;
  if (ape == nullptr || !ape->is_boolean() || ape->get<bool>() ||
      (privileged != nullptr && privileged->is_boolean() && privileged->get<bool>())) {
    return std::nullopt;  // it may become another uid
  }
  const nlohmann::json* uid = sc != nullptr ? Field(*sc, "runAsUser") : nullptr;
  if (uid == nullptr) {
    const nlohmann::json* psc = Field(*spec, "securityContext");
    uid = psc != nullptr ? Field(*psc, "runAsUser") : nullptr;
  }
  if (uid == nullptr || !uid->is_number_integer() || uid->get<int64_t>() <= 0) {
    return std::nullopt;
  }
  return uid->get<int64_t>();
}

std::vector<MpsClient> MpsClientsFromPods(std::span<const nlohmann::json> pods, std::string_view node) {
  std::vector<MpsClient> out;
  for (const nlohmann::json& pod : pods) {
    auto meta = kube::DecodePodMeta(pod);
    if (!meta.ok() || meta->node_name != node || meta->Terminal()) {
      continue;
    }
    const std::string* text = meta->Annotation(kube::kAnnotationAllocation);
    if (text == nullptr) {
      continue;
    }
    auto allocation = kube::DecodeAllocation(*text, meta->uid);
    if (!allocation.ok() || allocation->node.str() != node) {
      continue;
    }
    for (const auto& c : allocation->containers) {
      MpsClient client{.pod_key = meta->Key(), .container = c.container, .uid = ContainerUid(pod, c.container)};
      for (const auto& g : c.gpus) {
        if (!g.exclusive && !g.uuid.empty()) {
          client.gpus.push_back(g);
        }
      }
      if (!client.gpus.empty()) {
        out.push_back(std::move(client));
      }
    }
  }
  return out;
}

std::unique_ptr<MpsControlRunner> NewProcessMpsRunner(ProcessMpsRunnerOptions options) {
  return std::make_unique<ProcessMpsRunner>(std::move(options));
}

MpsController::MpsController(MpsControlRunner& runner, MpsPlanOptions options)
    : runner_(runner), options_(std::move(options)) {}

common::Status MpsController::ValidateOptions() const {
  if (options_.fallback_thread_percentage < 1 || options_.fallback_thread_percentage > 100) {
    return common::InvalidArgument("MPS: the fallback active thread percentage must be 1..100 (got " +
                                   std::to_string(options_.fallback_thread_percentage) + ")");
  }
  if (options_.fallback_pinned_mib < 0) {
    return common::InvalidArgument("MPS: the fallback pinned memory limit must be >= 0 MiB (got " +
                                   std::to_string(options_.fallback_pinned_mib) + ")");
  }
  for (const std::string& uuid : options_.gpus) {
    if (uuid.empty() || uuid.find_first_of(" \t\n") != std::string::npos) {
      return common::InvalidArgument("MPS: GPU UUID \"" + uuid + "\" is empty or has white space");
    }
  }
  return common::Status::Ok();
}

common::Status MpsController::Apply(std::span<const MpsClient> clients) {
  std::lock_guard lock(mu_);
  common::Status s = ApplyLocked(clients);
  if (!s.ok()) {
    ++failures_;
    applied_.reset();  // not known what the daemon has now: the next round sends everything
  }
  return s;
}

common::Status MpsController::ApplyLocked(std::span<const MpsClient> clients) {
  for (const MpsClient& c : clients) {
    for (const auto& g : c.gpus) {
      if (g.uuid.str().find_first_of(" \t\n") != std::string::npos) {
        return common::InvalidArgument("MPS: client " + c.pod_key + " names GPU \"" + g.uuid.str() +
                                       "\" with white space");
      }
    }
  }
  // A restarted control daemon forgot every limit (NVIDIA: "the set value is lost if a quit command is executed").
  const std::string identity = runner_.DaemonIdentity();
  bool restarted = !identity_.empty() && identity != identity_;
  if (applied_.has_value() && !restarted) {
    auto pct = runner_.Run("get_default_active_thread_percentage");
    if (!pct.ok()) {
      return common::Unavailable("MPS: get_default_active_thread_percentage: " + pct.status().message());
    }
    const std::string text = Trim(*pct);
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (text.empty() || end == text.c_str()) {
      return common::Unavailable("MPS: get_default_active_thread_percentage answered \"" + text.substr(0, 80) +
                                 "\", not a number");
    }
    restarted = static_cast<int64_t>(value + 0.5) != applied_->defaults.thread_percentage;
  }
  if (restarted) {
    ++restarts_seen_;
    common::Log(common::LogLevel::kWarn, "MPS: the control daemon restarted; setting every limit again");
    applied_.reset();
  }
  auto list = runner_.Run("get_server_list");
  if (!list.ok()) {
    return common::Unavailable("MPS: get_server_list: " + list.status().message());
  }
  std::vector<MpsServer> servers;
  std::istringstream lines(*list);
  for (std::string line; std::getline(lines, line);) {
    const std::string t = Trim(line);
    if (t.empty()) {
      continue;
    }
    auto pid = ParseInt(t);
    if (!pid.has_value() || *pid <= 0) {
      return common::Unavailable("MPS: get_server_list answered \"" + t.substr(0, 80) + "\", not a server PID");
    }
    if (servers.size() >= kMaxServers) {
      return common::Unavailable("MPS: get_server_list lists more than " + std::to_string(kMaxServers) + " servers");
    }
    servers.push_back(MpsServer{.pid = *pid, .uid = runner_.ProcessUid(*pid)});
  }
  MpsPlan plan = PlanMpsLimits(clients, servers, options_);
  for (const std::string& command : MpsCommands(applied_, plan)) {
    auto r = runner_.Run(command);
    if (!r.ok()) {
      return common::Unavailable("MPS: " + command + ": " + r.status().message());
    }
    ++commands_sent_;
    if (const std::string said = Trim(*r); !said.empty()) {
      common::Log(common::LogLevel::kInfo, "MPS: " + command + ": " + said.substr(0, 200));
    }
  }
  applied_ = std::move(plan);
  identity_ = identity;
  return common::Status::Ok();
}

void MpsController::SetGpus(std::vector<std::string> gpus) {
  std::erase_if(gpus, [](const std::string& g) { return g.empty() || g.find_first_of(" \t\n") != std::string::npos; });
  std::lock_guard lock(mu_);
  options_.gpus = std::move(gpus);
}

std::optional<MpsPlan> MpsController::applied() const {
  std::lock_guard lock(mu_);
  return applied_;
}

uint64_t MpsController::commands_sent() const {
  std::lock_guard lock(mu_);
  return commands_sent_;
}

uint64_t MpsController::restarts_seen() const {
  std::lock_guard lock(mu_);
  return restarts_seen_;
}

uint64_t MpsController::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

}  // namespace gpusched::adapters::deviceplugin
