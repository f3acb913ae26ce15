#include "gpusched/webhook/webhook_config.h"

#include <algorithm>
#include <set>

#include <yaml-cpp/yaml.h>

#include "gpusched/daemon/yaml_fields.h"

namespace gpusched::webhook {
namespace {

using daemon::Bad;

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Kubernetes' DNS-1123 label: what a namespace name must be.
bool IsDnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '-'; });
}

// Kubernetes' DNS-1123 subdomain: what spec.schedulerName must be.
bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) {
    return false;
  }
  size_t start = 0;
  while (true) {
    const size_t dot = s.find('.', start);
    const std::string_view label =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty() || !IsAlnum(label.front()) || !IsAlnum(label.back()) ||
        !std::all_of(label.begin(), label.end(), [](char c) { return IsAlnum(c) || c == '-'; })) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

common::Result<std::string> String(const YAML::Node& node, const std::string& source, const std::string& key) {
  if (!node.IsScalar()) {
    return Bad(source, "\"" + key + "\" must be a string");
  }
  return node.Scalar();
}

common::Result<std::vector<std::string>> StringList(const YAML::Node& node, const std::string& source,
                                                    const std::string& key) {
  if (!node.IsSequence()) {
    return Bad(source, "\"" + key + "\" must be a list of strings");
  }
  std::vector<std::string> out;
  for (const auto& item : node) {
    GPUSCHED_ASSIGN_OR_RETURN(s, String(item, source, key));
    if (s.empty()) {
      return Bad(source, "\"" + key + "\" has an empty entry");
    }
    out.push_back(std::move(s));
  }
  return out;
}

common::Status CheckSchedulerName(const std::string& name, const std::string& source, const std::string& key) {
  if (!IsDnsSubdomain(name)) {
    return Bad(source, "\"" + key + "\": \"" + name + "\" is not a valid schedulerName (a DNS-1123 subdomain)");
  }
  return common::Status::Ok();
}

common::Status CheckNamespace(const std::string& ns, const std::string& source, const std::string& key) {
  if (!IsDnsLabel(ns)) {
    return Bad(source, "\"" + key + "\": \"" + ns + "\" is not a valid namespace name");
  }
  return common::Status::Ok();
}

}  // namespace

constexpr std::string_view kGeniusGpuLabels[] = {kube::kLabelGeniusGpuNumber, kube::kLabelGeniusMemoryEach,
                                                 kube::kLabelGeniusMemoryTotal};

bool WebhookConfig::MayWriteAllocation(const UserInfo& user) const {
  if (std::find(allowed_users.begin(), allowed_users.end(), user.username) != allowed_users.end()) {
    return true;
  }
  return std::any_of(user.groups.begin(), user.groups.end(), [&](const std::string& g) {
    return std::find(allowed_groups.begin(), allowed_groups.end(), g) != allowed_groups.end();
  });
}

bool WebhookConfig::HasGeniusGpuLabels(const nlohmann::json& pod) const {
  if (!resources.genius_labels || !pod.is_object()) {
    return false;
  }
  auto metadata = pod.find("metadata");
  if (metadata == pod.end() || !metadata->is_object()) {
    return false;
  }
  auto labels = metadata->find("labels");
  if (labels == metadata->end() || !labels->is_object()) {
    return false;
  }
  return std::any_of(std::begin(kGeniusGpuLabels), std::end(kGeniusGpuLabels),
                     [&](std::string_view key) { return labels->contains(key); });
}

common::Result<WebhookConfig> ParseWebhookConfig(const std::string& yaml, const std::string& source) {
  GPUSCHED_ASSIGN_OR_RETURN(root, daemon::ConfigRoot(yaml, source));
  WebhookConfig c;
  if (root.IsNull()) {
    return c;
  }
  static const std::set<std::string> kKeys = {"allowedUsers",   "allowedGroups", "schedulerName", "namespaces",
                                              "schedulerNames", "resourceNames", "geniusLabels"};
  std::string scheduler_name;
  std::vector<std::string> namespaces;
  bool has_scheduler_name = false;
  bool has_namespaces = false;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) {
      return Bad(source, "keys must be strings");
    }
    const std::string key = kv.first.Scalar();
    if (!kKeys.contains(key)) {
      return Bad(source, "unknown key \"" + key +
                             "\" (known: allowedUsers, allowedGroups, schedulerName, "
                             "namespaces, schedulerNames, resourceNames, geniusLabels)");
    }
    const YAML::Node& v = kv.second;
    if (key == "allowedUsers") {
      GPUSCHED_ASSIGN_OR_RETURN(users, StringList(v, source, key));
      c.allowed_users = std::move(users);
    } else if (key == "allowedGroups") {
      GPUSCHED_ASSIGN_OR_RETURN(groups, StringList(v, source, key));
      c.allowed_groups = std::move(groups);
    } else if (key == "schedulerName") {
      GPUSCHED_ASSIGN_OR_RETURN(name, String(v, source, key));
      GPUSCHED_RETURN_IF_ERROR(CheckSchedulerName(name, source, key));
      scheduler_name = std::move(name);
      has_scheduler_name = true;
    } else if (key == "namespaces") {
      GPUSCHED_ASSIGN_OR_RETURN(list, StringList(v, source, key));
      for (const auto& ns : list) {
        GPUSCHED_RETURN_IF_ERROR(CheckNamespace(ns, source, key));
      }
      namespaces = std::move(list);
      has_namespaces = true;
    } else if (key == "schedulerNames") {
      if (!v.IsMap()) {
        return Bad(source, "\"schedulerNames\" must map namespaces to scheduler names");
      }
      for (const auto& e : v) {
        GPUSCHED_ASSIGN_OR_RETURN(ns, String(e.first, source, key));
        GPUSCHED_RETURN_IF_ERROR(CheckNamespace(ns, source, key));
        GPUSCHED_ASSIGN_OR_RETURN(name, String(e.second, source, key + "." + ns));
        GPUSCHED_RETURN_IF_ERROR(CheckSchedulerName(name, source, key + "." + ns));
        c.scheduler_names[ns] = name;
      }
    } else if (key == "geniusLabels") {
      if (!v.IsScalar() || (v.Scalar() != "true" && v.Scalar() != "false")) {
        return Bad(source, "\"geniusLabels\" must be true or false");
      }
      c.resources.genius_labels = v.Scalar() == "true";
    } else if (key == "resourceNames") {
      GPUSCHED_ASSIGN_OR_RETURN(names, StringList(v, source, key));
      c.resources.enabled.clear();
      for (const auto& name : names) {
        if (!kube::AllGpuResourceNames().contains(name)) {
          std::string known;
          for (const auto& k : kube::AllGpuResourceNames()) {
            known += (known.empty() ? "" : ", ") + k;
          }
          return Bad(source, "unknown resource name \"" + name + "\"; known: " + known);
        }
        c.resources.enabled.insert(name);
      }
    }
  }
  if (has_scheduler_name != has_namespaces) {
    return Bad(source, "\"schedulerName\" and \"namespaces\" go together: the namespaces whose GPU pods get it");
  }
  for (const auto& ns : namespaces) {
    if (c.scheduler_names.contains(ns)) {
      return Bad(source, "namespace \"" + ns + "\" is in both \"namespaces\" and \"schedulerNames\"");
    }
    c.scheduler_names[ns] = scheduler_name;
  }
  return c;
}

}  // namespace gpusched::webhook
