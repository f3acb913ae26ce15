#include "gpusched/extender/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "gpusched/core/gpu_metrics.h"
#include "gpusched/daemon/yaml_fields.h"
#include "gpusched/net/http_server.h"

namespace gpusched::extender {
namespace {

using daemon::As;
using daemon::Bad;
using daemon::NameList;

}  // namespace

common::Result<ExtenderConfig> ParseExtenderConfig(const std::string& yaml, const std::string& source) {
  GPUSCHED_ASSIGN_OR_RETURN(root, daemon::ConfigRoot(yaml, source));
  ExtenderConfig c;
  if (root.IsNull()) {
    return c;
  }
  static const std::set<std::string> kKeys = {"listen",         "healthListen",
                                              "pathPrefix",     "tls",
                                              "weights",        "policy",
                                              "resourceNames",  "maxBodyBytes",
                                              "threads",        "readTimeoutSeconds",
                                              "kubeconfig",     "metrics",
                                              "loadAware",      "interference",
                                              "maxConnections", "idleTimeoutSeconds",
                                              "schedulerNames", "bindFilterWindowSeconds",
                                              "leaderElection", "gpushareMemoryUnit",
                                              "geniusLabels",   "maxConnectionsPerPeer",
                                              "shareWithin",    "ketiSharePercent"};
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (!kKeys.contains(key)) {
      return Bad(source, "unknown key \"" + key + "\"");
    }
    const YAML::Node& v = kv.second;
    if (key == "listen") {
      GPUSCHED_ASSIGN_OR_RETURN(listen, As<std::string>(v, source, key));
      if (auto s = ParseListen(listen, c.host, c.port); !s.ok()) {
        return Bad(source, s.message());
      }
    } else if (key == "healthListen") {
      GPUSCHED_ASSIGN_OR_RETURN(listen, As<std::string>(v, source, key));
      if (auto s = ParseListen(listen, c.health_host, c.health_port); !s.ok()) {
        return Bad(source, "\"healthListen\": " + s.message());
      }
    } else if (key == "pathPrefix") {
      GPUSCHED_ASSIGN_OR_RETURN(prefix, As<std::string>(v, source, key));
      while (!prefix.empty() && prefix.back() == '/') {
        prefix.pop_back();
      }
      if (!prefix.empty() && prefix.front() != '/') {
        return Bad(source, "\"pathPrefix\" must start with /");
      }
      c.path_prefix = prefix;
    } else if (key == "tls") {
      if (!v.IsMap()) {
        return Bad(source, "\"tls\" must be a mapping with certFile and keyFile");
      }
      for (const auto& t : v) {
        const std::string tk = t.first.as<std::string>();
        if (tk == "allowedClientNames") {
          GPUSCHED_ASSIGN_OR_RETURN(names, NameList(t.second, source, "tls." + tk, "names"));
          c.tls_allowed_client_names = std::move(names);
          continue;
        }
        if (tk == "reloadIntervalSeconds") {
          GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(t.second, source, "tls." + tk));
          if (seconds < 1 || seconds > 86400) {
            return Bad(source, "\"tls.reloadIntervalSeconds\" must be 1..86400");
          }
          c.tls_reload_interval = std::chrono::milliseconds(int64_t{seconds} * 1000);
          continue;
        }
        GPUSCHED_ASSIGN_OR_RETURN(value, As<std::string>(t.second, source, "tls." + tk));
        if (tk == "certFile") {
          c.tls_cert_file = value;
        } else if (tk == "keyFile") {
          c.tls_key_file = value;
        } else if (tk == "clientCAFile") {
          c.tls_client_ca_file = value;
        } else {
          return Bad(source, "unknown key \"tls." + tk + "\"");
        }
      }
      if (c.tls_cert_file.empty() != c.tls_key_file.empty()) {
        return Bad(source, "\"tls\" needs both certFile and keyFile");
      }
    } else if (key == "policy") {
      GPUSCHED_ASSIGN_OR_RETURN(policy, As<std::string>(v, source, key));
      c.policy = policy;
    } else if (key == "weights") {
      if (!v.IsMap()) {
        return Bad(source, "\"weights\" must map policy names to weights");
      }
      c.weights.clear();
      for (const auto& w : v) {
        const std::string name = w.first.as<std::string>();
        GPUSCHED_ASSIGN_OR_RETURN(weight, As<double>(w.second, source, "weights." + name));
        if (!(weight > 0) || weight > 1e6) {
          return Bad(source, "\"weights." + name + "\" must be a positive number");
        }
        c.weights.emplace_back(name, weight);
      }
    } else if (key == "gpushareMemoryUnit" || key == "geniusLabels" || key == "shareWithin" ||
               key == "ketiSharePercent") {
      if (auto st = ParseResourceCompat(key, v, source, c.resources); !st.ok()) {
        return st;
      }
    } else if (key == "resourceNames") {
      if (!v.IsSequence()) {
        return Bad(source, "\"resourceNames\" must be a list");
      }
      c.resources.enabled.clear();
      for (const auto& n : v) {
        GPUSCHED_ASSIGN_OR_RETURN(name, As<std::string>(n, source, key));
        if (!kube::AllGpuResourceNames().contains(name)) {
          std::string known;
          for (const auto& k : kube::AllGpuResourceNames()) {
            known += (known.empty() ? "" : ", ") + k;
          }
          return Bad(source, "unknown resource name \"" + name + "\"; known: " + known);
        }
        c.resources.enabled.insert(name);
      }
    } else if (key == "maxBodyBytes") {
      GPUSCHED_ASSIGN_OR_RETURN(bytes, As<int64_t>(v, source, key));
      if (bytes < 1024) {
        return Bad(source, "\"maxBodyBytes\" must be at least 1024");
      }
      c.max_body_bytes = static_cast<size_t>(bytes);
    } else if (key == "threads") {
      GPUSCHED_ASSIGN_OR_RETURN(threads, As<int>(v, source, key));
      if (threads < 1 || threads > 1024) {
        return Bad(source, "\"threads\" must be 1..1024");
      }
      c.threads = threads;
    } else if (key == "readTimeoutSeconds") {
      GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(v, source, key));
      if (seconds < 1 || seconds > 3600) {
        return Bad(source, "\"readTimeoutSeconds\" must be 1..3600");
      }
      c.read_timeout_seconds = seconds;
    } else if (key == "maxConnections") {
      GPUSCHED_ASSIGN_OR_RETURN(connections, As<int64_t>(v, source, key));
      if (connections < 1 || connections > 1000000) {
        return Bad(source, "\"maxConnections\" must be 1..1000000");
      }
      c.max_connections = static_cast<size_t>(connections);
    } else if (key == "maxConnectionsPerPeer") {
      GPUSCHED_ASSIGN_OR_RETURN(connections, As<int64_t>(v, source, key));
      if (connections < 1 || connections > 1000000) {
        return Bad(source, "\"maxConnectionsPerPeer\" must be 1..1000000");
      }
      c.max_connections_per_peer = static_cast<size_t>(connections);
    } else if (key == "idleTimeoutSeconds" || key == "bindFilterWindowSeconds") {
      GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(v, source, key));
      if (seconds < 1 || seconds > 3600) {
        return Bad(source, "\"" + key + "\" must be 1..3600");
      }
      (key == "idleTimeoutSeconds" ? c.idle_timeout_seconds : c.bind_filter_window_seconds) = seconds;
    } else if (key == "leaderElection") {
      if (auto st = ParseLeaderElection(v, source, c.leader_election); !st.ok()) {
        return st;
      }
    } else if (key == "schedulerNames") {
      GPUSCHED_ASSIGN_OR_RETURN(names, NameList(v, source, key, "scheduler names"));
      c.scheduler_names = std::move(names);  // an empty list is refused by ValidateExtenderConfig
    } else if (IsLiveInputKey(key)) {
      if (auto st = ParseLiveInput(key, v, source, c, c.resources); !st.ok()) {
        return st;
      }
    } else if (key == "kubeconfig") {
      GPUSCHED_ASSIGN_OR_RETURN(path, As<std::string>(v, source, key));
      c.kubeconfig = path;
    }
  }
  if (auto s = ValidateExtenderConfig(c, source); !s.ok()) {
    return s;
  }
  return c;
}

common::Status ValidateExtenderConfig(const ExtenderConfig& config, const std::string& source) {
  if (config.tls_cert_file.empty() != config.tls_key_file.empty()) {
    return Bad(source, "\"tls\" needs both certFile and keyFile");
  }
  if (!config.tls_client_ca_file.empty() && config.tls_cert_file.empty()) {
    return Bad(source,
               "\"tls.clientCAFile\" needs tls.certFile and tls.keyFile (client certificates are asked for over "
               "TLS only)");
  }
  if (!config.tls_allowed_client_names.empty() && config.tls_client_ca_file.empty()) {
    return Bad(source,
               "\"tls.allowedClientNames\" needs tls.clientCAFile (the names are read from client certificates "
               "that CA signed)");
  }
  if (!net::IsLoopbackHost(config.host)) {
    std::string missing;
    const std::pair<const char*, bool> needed[] = {{"tls.certFile", config.tls_cert_file.empty()},
                                                   {"tls.keyFile", config.tls_key_file.empty()},
                                                   {"tls.clientCAFile", config.tls_client_ca_file.empty()},
                                                   {"tls.allowedClientNames", config.tls_allowed_client_names.empty()}};
    for (const auto& [key, absent] : needed) {
      if (absent) {
        missing += (missing.empty() ? "" : ", ") + std::string(key);
      }
    }
    if (!missing.empty()) {
      return Bad(source, "\"listen\" address " + config.host +
                             " is not loopback: only kube-scheduler may call the extender, so this needs " + missing +
                             " (client certificates; or listen on 127.0.0.1 beside kube-scheduler)");
    }
  }
  if (!config.health_host.empty() && config.health_port != 0 && config.health_port == config.port) {
    return Bad(source, "\"healthListen\" and \"listen\" name the same port " + std::to_string(config.port) +
                           ": the probe listener needs its own");
  }
  if (config.scheduler_names.empty()) {
    return Bad(source, "\"schedulerNames\" must name at least one scheduler (default: [default-scheduler])");
  }
  return common::Status::Ok();
}

common::Result<ExtenderConfig> LoadExtenderConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return common::NotFound("extender config " + path + " cannot be read");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseExtenderConfig(ss.str(), path);
}

}  // namespace gpusched::extender
