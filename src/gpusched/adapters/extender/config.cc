#include "gpusched/adapters/extender/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "gpusched/core/gpu_metrics.h"
#include "gpusched/net/http_server.h"

namespace gpusched::adapters::extender {
namespace {

common::Status Bad(const std::string& source, const std::string& what) {
  return common::InvalidArgument(source + ": " + what);
}

template <typename T>
common::Result<T> As(const YAML::Node& node, const std::string& source, const std::string& key) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(source, "\"" + key + "\" has the wrong type");
  }
}

// A YAML list of names, none empty (tls.allowedClientNames, schedulerNames).
common::Result<std::vector<std::string>> NameList(const YAML::Node& node, const std::string& source,
                                                  const std::string& key, std::string_view what) {
  if (!node.IsSequence()) {
    return Bad(source, "\"" + key + "\" must be a list of " + std::string(what));
  }
  GPUSCHED_ASSIGN_OR_RETURN(names, As<std::vector<std::string>>(node, source, key));
  for (const auto& n : names) {
    if (n.empty()) {
      return Bad(source, "\"" + key + "\" has an empty name");
    }
  }
  return names;
}

}  // namespace

common::Status ParseListen(const std::string& listen, std::string& host, int& port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return common::InvalidArgument("listen address \"" + listen + "\" is not host:port");
  }
  std::string h = listen.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') {
    h = h.substr(1, h.size() - 2);
  }
  int p = 0;
  for (size_t i = colon + 1; i < listen.size(); ++i) {
    const char c = listen[i];
    if (c < '0' || c > '9' || p > 65535) {
      return common::InvalidArgument("listen address \"" + listen + "\" has a bad port");
    }
    p = p * 10 + (c - '0');
  }
  if (p > 65535) {
    return common::InvalidArgument("listen address \"" + listen + "\" has a bad port");
  }
  host = h.empty() ? "0.0.0.0" : h;
  port = p;
  return common::Status::Ok();
}

common::Status ParseLeaderElection(const YAML::Node& node, const std::string& source, LeaderElectionConfig& out) {
  if (!node.IsMap()) {
    return Bad(source, "\"leaderElection\" must be a mapping");
  }
  for (const auto& l : node) {
    const std::string lk = l.first.as<std::string>();
    const std::string where = "leaderElection." + lk;
    if (lk == "enabled") {
      GPUSCHED_ASSIGN_OR_RETURN(enabled, As<bool>(l.second, source, where));
      out.enabled = enabled;
    } else if (lk == "namespace" || lk == "name") {
      GPUSCHED_ASSIGN_OR_RETURN(text, As<std::string>(l.second, source, where));
      if (text.empty()) {
        return Bad(source, "\"" + where + "\" is empty");
      }
      (lk == "namespace" ? out.namespace_ : out.name) = text;
    } else if (lk == "leaseDurationSeconds" || lk == "renewDeadlineSeconds" || lk == "retryPeriodSeconds") {
      GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(l.second, source, where));
      if (seconds < 1 || seconds > 3600) {
        return Bad(source, "\"" + where + "\" must be 1..3600");
      }
      (lk == "leaseDurationSeconds"   ? out.lease_duration_seconds
       : lk == "renewDeadlineSeconds" ? out.renew_deadline_seconds
                                      : out.retry_period_seconds) = seconds;
    } else {
      return Bad(source, "unknown key \"" + where + "\"");
    }
  }
  if (!(out.retry_period_seconds < out.renew_deadline_seconds &&
        out.renew_deadline_seconds < out.lease_duration_seconds)) {
    return Bad(source,
               "leaderElection needs retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds (a leader "
               "that cannot renew must stop before another may take over)");
  }
  return common::Status::Ok();
}

common::Status ParseResourceCompat(const std::string& key, const YAML::Node& node, const std::string& source,
                                   kube::ResourceConfig& resources) {
  if (key == "gpushareMemoryUnit") {
    GPUSCHED_ASSIGN_OR_RETURN(unit, As<std::string>(node, source, key));
    if (unit != "GiB" && unit != "MiB") {
      return Bad(source, "\"gpushareMemoryUnit\" must be GiB or MiB, not \"" + unit + "\"");
    }
    resources.gpushare_memory_unit_mib = unit == "GiB" ? 1024 : 1;
    return common::Status::Ok();
  }
  if (key == "geniusLabels") {
    GPUSCHED_ASSIGN_OR_RETURN(on, As<bool>(node, source, key));
    resources.genius_labels = on;
    return common::Status::Ok();
  }
  if (key == "ketiSharePercent") {
    GPUSCHED_ASSIGN_OR_RETURN(pct, As<int>(node, source, key));
    if (pct < 1 || pct > 100) {
      return Bad(source, "\"ketiSharePercent\" must be 1..100, not " + std::to_string(pct));
    }
    resources.keti_share_percent = pct;
    return common::Status::Ok();
  }
  if (key == "shareWithin") {
    GPUSCHED_ASSIGN_OR_RETURN(text, As<std::string>(node, source, key));
    auto mode = core::ParseShareWithin(text);
    if (!mode.ok()) {
      return Bad(source, mode.status().message());
    }
    resources.share_within = *mode;
    return common::Status::Ok();
  }
  return Bad(source, "unknown key \"" + key + "\"");
}

bool IsLiveInputKey(const std::string& key) { return key == "metrics" || key == "loadAware" || key == "interference"; }

common::Status ParseLiveInput(const std::string& key, const YAML::Node& v, const std::string& source,
                              LiveInputsConfig& out, kube::ResourceConfig& resources) {
  if (key == "metrics") {
    if (!v.IsMap()) {
      return Bad(source, "\"metrics\" must be a mapping");
    }
    for (const auto& m : v) {
      const std::string mk = m.first.as<std::string>();
      if (mk == "refreshSeconds" || mk == "stalenessSeconds") {
        GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(m.second, source, "metrics." + mk));
        if (seconds < 1 || seconds > 86400) {
          return Bad(source, "\"metrics." + mk + "\" must be 1..86400");
        }
        (mk == "refreshSeconds" ? out.metrics_refresh_seconds : out.metrics_staleness_seconds) = seconds;
      } else if (mk == "prometheus" || mk == "influxdb") {
        MetricsSourceConfig src{.kind = mk};
        if (!m.second.IsMap()) {
          return Bad(source, "\"metrics." + mk + "\" must be a mapping");
        }
        for (const auto& f : m.second) {
          const std::string fk = f.first.as<std::string>();
          const std::string where = "metrics." + mk + "." + fk;
          if (fk == "url" || fk == "database" || fk == "uuidLabel") {
            GPUSCHED_ASSIGN_OR_RETURN(text, As<std::string>(f.second, source, where));
            (fk == "url" ? src.url : fk == "database" ? src.database : src.uuid_label) = text;
          } else if (fk == "timeoutSeconds") {
            GPUSCHED_ASSIGN_OR_RETURN(seconds, As<int>(f.second, source, where));
            if (seconds < 1 || seconds > 600) {
              return Bad(source, "\"" + where + "\" must be 1..600");
            }
            src.timeout_seconds = seconds;
          } else if (fk == "queries") {
            if (!f.second.IsMap()) {
              return Bad(source, "\"" + where + "\" must map metric names to queries");
            }
            for (const auto& q : f.second) {
              const std::string metric = q.first.as<std::string>();
              bool known = false;
              for (size_t i = 0; i < core::kGpuMetricCount; ++i) {
                known = known || core::GpuMetricName(static_cast<core::GpuMetric>(i)) == metric;
              }
              if (!known) {
                return Bad(source, "unknown metric \"" + where + "." + metric + "\"");
              }
              GPUSCHED_ASSIGN_OR_RETURN(query, As<std::string>(q.second, source, where + "." + metric));
              src.queries[metric] = query;
            }
          } else {
            return Bad(source, "unknown key \"" + where + "\"");
          }
        }
        if (src.url.empty()) {
          return Bad(source, "\"metrics." + mk + ".url\" is required");
        }
        if (mk == "influxdb" && src.database.empty()) {
          return Bad(source, "\"metrics.influxdb.database\" is required");
        }
        out.metrics_sources.push_back(std::move(src));
      } else {
        return Bad(source, "unknown key \"metrics." + mk + "\"");
      }
    }
  } else if (key == "loadAware") {
    if (!v.IsMap()) {
      return Bad(source, "\"loadAware\" must map weight names to integers");
    }
    static const std::set<std::string> kWeights = {"memorySize",  "memoryBandwidth", "compute", "gpuUtil",
                                                   "memoryUsed",  "memoryCopyUtil",  "power",   "temperature",
                                                   "encoderUtil", "decoderUtil"};
    for (const auto& w : v) {
      const std::string wk = w.first.as<std::string>();
      if (wk == "models") {
        if (!w.second.IsSequence()) {
          return Bad(source, "\"loadAware.models\" must be a list");
        }
        for (const auto& m : w.second) {
          GpuModelConfig model;
          if (!m.IsMap()) {
            return Bad(source, "\"loadAware.models\" entries must be mappings");
          }
          for (const auto& f : m) {
            const std::string fk = f.first.as<std::string>();
            const std::string where = "loadAware.models." + fk;
            if (fk == "name") {
              GPUSCHED_ASSIGN_OR_RETURN(name, As<std::string>(f.second, source, where));
              model.name = name;
            } else if (fk == "aliases") {
              GPUSCHED_ASSIGN_OR_RETURN(aliases, As<std::vector<std::string>>(f.second, source, where));
              model.aliases = aliases;
            } else if (fk == "memoryMib" || fk == "bandwidthGBps" || fk == "tdpW") {
              GPUSCHED_ASSIGN_OR_RETURN(n, As<int64_t>(f.second, source, where));
              (fk == "memoryMib" ? model.memory_mib : fk == "bandwidthGBps" ? model.bandwidth_gbps : model.tdp_w) = n;
            } else if (fk == "fp32Tflops") {
              GPUSCHED_ASSIGN_OR_RETURN(tflops, As<double>(f.second, source, where));
              model.fp32_tflops = tflops;
            } else {
              return Bad(source, "unknown key \"" + where + "\"");
            }
          }
          if (model.name.empty()) {
            return Bad(source, "\"loadAware.models\": an entry has no name");
          }
          out.gpu_models.push_back(std::move(model));
        }
        continue;
      }
      if (!kWeights.contains(wk)) {
        return Bad(source, "unknown key \"loadAware." + wk + "\"");
      }
      GPUSCHED_ASSIGN_OR_RETURN(weight, As<int64_t>(w.second, source, "loadAware." + wk));
      if (weight < 0 || weight > 1000000) {
        return Bad(source, "\"loadAware." + wk + "\" must be 0..1000000");
      }
      out.load_aware_weights[wk] = weight;
    }
  } else if (key == "interference") {
    if (!v.IsMap()) {
      return Bad(source, "\"interference\" must be a mapping");
    }
    for (const auto& f : v) {
      const std::string fk = f.first.as<std::string>();
      const std::string where = "interference." + fk;
      if (fk == "enabled") {
        GPUSCHED_ASSIGN_OR_RETURN(enabled, As<bool>(f.second, source, where));
        out.interference_enabled = enabled;
      } else if (fk == "appLabel") {
        GPUSCHED_ASSIGN_OR_RETURN(label, As<std::string>(f.second, source, where));
        resources.app_label = label;
      } else if (fk == "objective") {
        GPUSCHED_ASSIGN_OR_RETURN(objective, As<std::string>(f.second, source, where));
        if (objective == "sum") {
          out.interference_aware.objective = policy::InterferenceAwareOptions::Objective::kSum;
        } else if (objective == "incoming") {
          out.interference_aware.objective = policy::InterferenceAwareOptions::Objective::kIncomingOnly;
        } else {
          return Bad(source, "\"" + where + "\" must be sum or incoming, not \"" + objective + "\"");
        }
      } else if (fk == "avoidPredictedOom" || fk == "refuseHarmfulPairs") {
        GPUSCHED_ASSIGN_OR_RETURN(flag, As<bool>(f.second, source, where));
        (fk == "avoidPredictedOom" ? out.interference_aware.avoid_predicted_oom
                                   : out.interference_aware.refuse_harmful_pairs) = flag;
      } else if (fk == "minSharingGain") {
        GPUSCHED_ASSIGN_OR_RETURN(gain, As<double>(f.second, source, where));
        if (!(gain >= 0 && gain <= 1)) {
          return Bad(source, "\"" + where + "\" must be within 0..1");
        }
        out.interference_aware.min_sharing_gain = gain;
      } else if (fk == "interferenceWeight" || fk == "packingWeight") {
        GPUSCHED_ASSIGN_OR_RETURN(weight, As<int64_t>(f.second, source, where));
        if (weight < 0 || weight > 1000000) {
          return Bad(source, "\"" + where + "\" must be 0..1000000");
        }
        (fk == "interferenceWeight" ? out.interference_aware.interference_weight
                                    : out.interference_aware.packing_weight) = weight;
      } else {
        return Bad(source, "unknown key \"" + where + "\"");
      }
    }
    if (out.interference_aware.interference_weight == 0 && out.interference_aware.packing_weight == 0) {
      return Bad(source, "\"interference.interferenceWeight\" and \"interference.packingWeight\" are both 0");
    }
  } else {
    return Bad(source, "unknown key \"" + key + "\"");
  }
  return common::Status::Ok();
}

common::Result<ExtenderConfig> ParseExtenderConfig(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Bad(source, std::string("not valid YAML: ") + e.what());
  }
  ExtenderConfig c;
  if (root.IsNull()) {
    return c;
  }
  if (!root.IsMap()) {
    return Bad(source, "the top level must be a mapping");
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

}  // namespace gpusched::adapters::extender
