#include "gpusched/scheduler/config.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "gpusched/daemon/config.h"
#include "gpusched/daemon/yaml_fields.h"
#include "gpusched/policy/registry.h"

namespace gpusched::scheduler {
namespace {

using daemon::Bad;

// Stricter than daemon::As: a mapping or a list where a scalar is due is the wrong type too.
template <typename T>
common::Result<T> As(const YAML::Node& node, const std::string& source, const std::string& key) {
  if (!node.IsScalar() && !std::is_same_v<T, std::vector<std::string>>) {
    return Bad(source, "\"" + key + "\" has the wrong type");
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(source, "\"" + key + "\" has the wrong type");
  }
}

common::Result<int> Seconds(const YAML::Node& node, const std::string& source, const std::string& key, int lo, int hi) {
  GPUSCHED_ASSIGN_OR_RETURN(v, As<int>(node, source, key));
  if (v < lo || v > hi) {
    return Bad(source, "\"" + key + "\" must be " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    out += (out.empty() ? "" : ", ") + n;
  }
  return out;
}

}  // namespace

std::vector<std::string> SchedulerPolicyNames() { return policy::PolicyNames(); }

namespace {

// A policy that reads live metrics needs a metrics source; one that reads a forecast needs interference.enabled.
common::Status CheckInputs(const SchedulerConfig& c, const std::string& name, const std::string& where,
                           const std::string& source) {
  auto p = policy::MakePolicy(name, policy::PolicyOptions{.target_workload = policy::DefaultTargetWorkload()});
  if (!p.ok()) {
    return Bad(source, "\"" + where + "\": " + p.status().message());
  }
  const policy::Inputs reads = (*p)->Reads();
  if (reads.gpu_metrics && c.metrics_sources.empty()) {
    return Bad(source, "\"" + where + "\": " + name +
                           " reads live GPU metrics: configure metrics.prometheus or metrics.influxdb");
  }
  if (reads.interference_forecast && !c.interference_enabled) {
    return Bad(source, "\"" + where + "\": " + name +
                           " reads an interference forecast: set interference.enabled (and start with "
                           "--interference-model FILE)");
  }
  return common::Status::Ok();
}

}  // namespace

common::Result<SchedulerConfig> ParseSchedulerConfig(const std::string& yaml, const std::string& source) {
  GPUSCHED_ASSIGN_OR_RETURN(root, daemon::ConfigRoot(yaml, source));
  SchedulerConfig c;
  if (root.IsNull()) {
    return c;
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "schedulerNames") {
      if (!v.IsSequence() || v.size() == 0) {
        return Bad(source, "\"schedulerNames\" must be a non-empty list of names");
      }
      GPUSCHED_ASSIGN_OR_RETURN(names, As<std::vector<std::string>>(v, source, key));
      for (const auto& n : names) {
        if (n.empty()) {
          return Bad(source, "\"schedulerNames\" has an empty name");
        }
      }
      c.scheduler_names = std::move(names);
    } else if (key == "policy") {
      GPUSCHED_ASSIGN_OR_RETURN(p, As<std::string>(v, source, key));
      const auto servable = SchedulerPolicyNames();
      if (std::find(servable.begin(), servable.end(), p) == servable.end()) {
        return Bad(source, "unknown policy \"" + p + "\" (known: " + JoinNames(servable) + ")");
      }
      c.policy = std::move(p);
    } else if (key == "weights") {
      if (!v.IsMap()) {
        return Bad(source, "\"weights\" must map policy names to weights");
      }
      const auto servable = SchedulerPolicyNames();
      c.weights.clear();
      for (const auto& w : v) {
        const std::string name = w.first.as<std::string>();
        if (std::find(servable.begin(), servable.end(), name) == servable.end()) {
          return Bad(source, "\"weights." + name + "\": not a policy (choose among " + JoinNames(servable) + ")");
        }
        GPUSCHED_ASSIGN_OR_RETURN(weight, As<double>(w.second, source, "weights." + name));
        if (!(weight > 0) || weight > 1e6) {
          return Bad(source, "\"weights." + name + "\" must be a positive number (at most 1000000)");
        }
        c.weights.emplace_back(name, weight);
      }
    } else if (key == "listen") {
      GPUSCHED_ASSIGN_OR_RETURN(listen, As<std::string>(v, source, key));
      if (auto s = daemon::ParseListen(listen, c.host, c.port); !s.ok()) {
        return Bad(source, s.message());
      }
    } else if (key == "kubeconfig") {
      GPUSCHED_ASSIGN_OR_RETURN(path, As<std::string>(v, source, key));
      c.kubeconfig = std::move(path);
    } else if (key == "bindWorkers") {
      GPUSCHED_ASSIGN_OR_RETURN(n, Seconds(v, source, key, 1, 64));
      c.bind_workers = n;
    } else if (key == "podInitialBackoffSeconds") {
      GPUSCHED_ASSIGN_OR_RETURN(n, Seconds(v, source, key, 1, 3600));
      c.initial_backoff_seconds = n;
    } else if (key == "podMaxBackoffSeconds") {
      GPUSCHED_ASSIGN_OR_RETURN(n, Seconds(v, source, key, 1, 3600));
      c.max_backoff_seconds = n;
    } else if (key == "assumedPodTtlSeconds") {
      // Shorter than a stalled watch takes to detect, an assumption could expire while the watch that would show its
      // Binding is stuck, and its GPUs be given twice.
      GPUSCHED_ASSIGN_OR_RETURN(n, Seconds(v, source, key, kMinAssumedTtlSeconds, 3600));
      c.assumed_ttl_seconds = n;
    } else if (key == "gpushareMemoryUnit" || key == "geniusLabels" || key == "shareWithin" ||
               key == "ketiSharePercent") {
      if (auto st = daemon::ParseResourceCompat(key, v, source, c.resources); !st.ok()) {
        return st;
      }
    } else if (key == "preemption") {
      if (!v.IsMap()) {
        return Bad(source, "\"preemption\" must be a mapping (enabled, evictionGracePeriodSeconds)");
      }
      for (const auto& pk : v) {
        const std::string sub = pk.first.as<std::string>();
        if (sub == "enabled") {
          GPUSCHED_ASSIGN_OR_RETURN(on, As<bool>(pk.second, source, "preemption.enabled"));
          c.preemption = on;
        } else if (sub == "evictionGracePeriodSeconds") {
          GPUSCHED_ASSIGN_OR_RETURN(n, Seconds(pk.second, source, "preemption.evictionGracePeriodSeconds", 0, 3600));
          c.eviction_grace_period_seconds = n;
        } else {
          return Bad(source, "unknown key \"preemption." + sub + "\"");
        }
      }
    } else if (key == "leaderElection") {
      if (auto st = daemon::ParseLeaderElection(v, source, c.leader_election); !st.ok()) {
        return st;
      }
    } else if (daemon::IsLiveInputKey(key)) {
      if (auto st = daemon::ParseLiveInput(key, v, source, c, c.resources); !st.ok()) {
        return st;
      }
    } else {
      return Bad(source, "unknown key \"" + key + "\"");
    }
  }
  if (c.max_backoff_seconds < c.initial_backoff_seconds) {
    return Bad(source, "\"podMaxBackoffSeconds\" is below \"podInitialBackoffSeconds\"");
  }
  GPUSCHED_RETURN_IF_ERROR(CheckInputs(c, c.policy, "policy", source));
  for (const auto& [name, weight] : c.weights) {
    GPUSCHED_RETURN_IF_ERROR(CheckInputs(c, name, "weights." + name, source));
  }
  return c;
}

common::Result<SchedulerConfig> LoadSchedulerConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return common::InvalidArgument("cannot read the config file " + path);
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseSchedulerConfig(text.str(), path);
}

}  // namespace gpusched::scheduler
