#include "gpusched/daemon/config.h"

#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "gpusched/core/gpu_metrics.h"
#include "gpusched/daemon/yaml_fields.h"

namespace gpusched::daemon {

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

}  // namespace gpusched::daemon
