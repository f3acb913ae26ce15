#include "gpusched/doctor/expected_setup.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace gpusched::doctor {
namespace {

constexpr std::string_view kSchedulerConfigMap = "gpusched-scheduler";
constexpr std::string_view kSchedulerConfigKey = "scheduler.yaml";
constexpr std::string_view kAgentDaemonSet = "gpusched-agent";

struct Document {
  YAML::Node node;
  std::string file;
};

// "deploy/extender" + "../base/agent" -> "deploy/base/agent".
std::string Join(const std::string& dir, const std::string& entry) {
  std::vector<std::string> parts;
  auto push = [&parts](const std::string& path) {
    size_t start = 0;
    while (start <= path.size()) {
      const size_t slash = std::min(path.find('/', start), path.size());
      const std::string part = path.substr(start, slash - start);
      if (part == "..") {
        if (!parts.empty()) {
          parts.pop_back();
        }
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      start = slash + 1;
    }
  };
  push(dir);
  push(entry);
  std::string out;
  for (const auto& p : parts) {
    out += (out.empty() ? "" : "/") + p;
  }
  return out;
}

const DeployFile* Find(std::span<const DeployFile> files, const std::string& path) {
  for (const DeployFile& f : files) {
    if (f.path == path) {
      return &f;
    }
  }
  return nullptr;
}

common::Result<std::vector<YAML::Node>> LoadAll(const DeployFile& file) {
  try {
    return YAML::LoadAll(std::string(file.text));
  } catch (const YAML::Exception& e) {
    return common::InvalidArgument(std::string(file.path) + ": " + e.what());
  }
}

std::string Str(const YAML::Node& n, const std::string& fallback = "") {
  return n && n.IsScalar() ? n.as<std::string>() : fallback;
}

// The documents of the kustomization in `dir`, following its resources.
common::Status Collect(std::span<const DeployFile> files, const std::string& dir, std::set<std::string>& seen,
                       std::vector<Document>& out) {
  const std::string kpath = dir + "/kustomization.yaml";
  const DeployFile* k = Find(files, kpath);
  if (k == nullptr) {
    return common::NotFound(kpath + " is not among the manifests built into this binary");
  }
  if (!seen.insert(dir).second) {
    return common::Status::Ok();
  }
  GPUSCHED_ASSIGN_OR_RETURN(docs, LoadAll(*k));
  if (docs.empty() || !docs[0]["resources"] || !docs[0]["resources"].IsSequence()) {
    return common::InvalidArgument(kpath + ": no resources list");
  }
  for (const YAML::Node& entry : docs[0]["resources"]) {
    const std::string path = Join(dir, Str(entry));
    if (Find(files, path + "/kustomization.yaml") != nullptr) {
      if (auto s = Collect(files, path, seen, out); !s.ok()) {
        return s;
      }
      continue;
    }
    const DeployFile* f = Find(files, path);
    if (f == nullptr) {
      return common::NotFound(kpath + ": resource " + Str(entry) + " (" + path +
                              ") is not among the manifests built into this binary");
    }
    GPUSCHED_ASSIGN_OR_RETURN(objects, LoadAll(*f));
    for (YAML::Node& o : objects) {
      if (o.IsMap() && o["kind"]) {
        out.push_back({.node = o, .file = std::string(f->path)});
      }
    }
  }
  return common::Status::Ok();
}

std::vector<std::string> Strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n && n.IsSequence()) {
    for (const auto& v : n) {
      out.push_back(Str(v));
    }
  }
  return out;
}

std::vector<Grant> GrantsOf(const YAML::Node& rules, const std::string& ns, const std::string& role) {
  std::vector<Grant> out;
  if (!rules || !rules.IsSequence()) {
    return out;
  }
  for (const YAML::Node& rule : rules) {
    std::vector<std::string> names = Strings(rule["resourceNames"]);
    if (names.empty()) {
      names.push_back("");
    }
    for (const std::string& group : Strings(rule["apiGroups"])) {
      for (const std::string& resource : Strings(rule["resources"])) {
        const size_t slash = resource.find('/');
        for (const std::string& verb : Strings(rule["verbs"])) {
          for (const std::string& name : names) {
            out.push_back({.verb = verb,
                           .group = group,
                           .resource = resource.substr(0, slash),
                           .subresource = slash == std::string::npos ? "" : resource.substr(slash + 1),
                           .name = name,
                           .namespace_ = ns,
                           .role = role});
          }
        }
      }
    }
  }
  return out;
}

common::Result<ExpectedSetup> Build(std::string_view mode, const std::vector<Document>& docs) {
  ExpectedSetup setup{.mode = std::string(mode)};
  // (kind, namespace, name) -> rules
  std::map<std::tuple<std::string, std::string, std::string>, YAML::Node> roles;
  for (const Document& d : docs) {
    const std::string kind = Str(d.node["kind"]);
    const YAML::Node meta = d.node["metadata"];
    const std::string name = Str(meta["name"]);
    const std::string ns = Str(meta["namespace"]);
    if (kind == "CustomResourceDefinition") {
      setup.crds.push_back({.kind = kind, .namespace_ = "", .name = name, .file = d.file});
    } else if (kind == "MutatingWebhookConfiguration" || kind == "ValidatingWebhookConfiguration") {
      setup.webhook_configurations.push_back({.kind = kind, .namespace_ = "", .name = name, .file = d.file});
    } else if (kind == "ServiceAccount") {
      setup.service_accounts.push_back({.namespace_ = ns.empty() ? "default" : ns, .name = name, .file = d.file});
    } else if (kind == "ClusterRole" || kind == "Role") {
      roles[{kind, kind == "Role" ? ns : "", name}] = d.node["rules"];
    } else if (kind == "ConfigMap" && name == kSchedulerConfigMap) {
      const std::string text = Str(d.node["data"][std::string(kSchedulerConfigKey)]);
      YAML::Node config;
      try {
        config = YAML::Load(text);
      } catch (const YAML::Exception& e) {
        return common::InvalidArgument(d.file + ": ConfigMap " + name + " " + std::string(kSchedulerConfigKey) + ": " +
                                       e.what());
      }
      const YAML::Node le = config["leaderElection"];
      if (le && le["enabled"] && le["enabled"].as<bool>(false)) {
        setup.lease = LeaseRef{.namespace_ = Str(le["namespace"], ns),
                               .name = Str(le["name"], "gpusched-scheduler"),
                               .duration_seconds = le["leaseDurationSeconds"].as<int64_t>(15),
                               .file = d.file};
      }
    } else if (kind == "DaemonSet" && name == kAgentDaemonSet) {
      AgentRef agent{.namespace_ = ns, .file = d.file};
      const YAML::Node labels = d.node["spec"]["selector"]["matchLabels"];
      if (labels && labels.IsMap()) {
        for (const auto& kv : labels) {
          agent.label_selector += (agent.label_selector.empty() ? "" : ",") + Str(kv.first) + "=" + Str(kv.second);
        }
      }
      const YAML::Node containers = d.node["spec"]["template"]["spec"]["containers"];
      if (containers && containers.IsSequence() && containers.size() > 0) {
        const YAML::Node c = containers[0];
        const YAML::Node probe = c["readinessProbe"]["httpGet"];
        agent.readiness_path = Str(probe["path"], "/readyz");
        const std::string port = Str(probe["port"]);
        for (const auto& p : c["ports"]) {
          if (Str(p["name"]) == port || Str(p["containerPort"]) == port || port.empty()) {
            agent.port = p["containerPort"].as<int>(0);
            break;
          }
        }
      }
      if (agent.port <= 0) {
        return common::InvalidArgument(d.file + ": DaemonSet " + name + ": no port for its readiness probe");
      }
      setup.agent = std::move(agent);
    }
  }
  for (const Document& d : docs) {
    const std::string kind = Str(d.node["kind"]);
    if (kind != "ClusterRoleBinding" && kind != "RoleBinding") {
      continue;
    }
    const std::string bns = Str(d.node["metadata"]["namespace"]);
    const std::string ref_kind = Str(d.node["roleRef"]["kind"]);
    const std::string ref_name = Str(d.node["roleRef"]["name"]);
    auto role = roles.find({ref_kind, ref_kind == "Role" ? bns : "", ref_name});
    if (role == roles.end()) {
      continue;  // a bootstrap role: its rules are not in deploy/
    }
    const std::string grant_ns = kind == "RoleBinding" ? bns : "";
    const std::string role_name = ref_kind + " " + (ref_kind == "Role" ? bns + "/" : "") + ref_name;
    for (const YAML::Node& subject : d.node["subjects"]) {
      if (Str(subject["kind"]) != "ServiceAccount") {
        continue;
      }
      const std::string sns = Str(subject["namespace"], bns);
      const std::string sname = Str(subject["name"]);
      for (ServiceAccountGrants& sa : setup.service_accounts) {
        if (sa.namespace_ == sns && sa.name == sname) {
          for (Grant& g : GrantsOf(role->second, grant_ns, role_name)) {
            sa.grants.push_back(std::move(g));
          }
        }
      }
    }
  }
  for (ServiceAccountGrants& sa : setup.service_accounts) {
    std::sort(sa.grants.begin(), sa.grants.end());
    sa.grants.erase(std::unique(sa.grants.begin(), sa.grants.end()), sa.grants.end());
  }
  return setup;
}

}  // namespace

std::string Grant::Describe() const {
  std::string s = verb + " " + resource;
  if (!group.empty()) {
    s += "." + group;
  }
  if (!subresource.empty()) {
    s += "/" + subresource;
  }
  if (!name.empty()) {
    s += " " + name;
  }
  if (!namespace_.empty()) {
    s += " in " + namespace_;
  }
  return s;
}

std::string ServiceAccountGrants::Username() const { return "system:serviceaccount:" + namespace_ + ":" + name; }

std::vector<std::string> Modes() { return {"scheduler", "extender", "agent"}; }

common::Result<ExpectedSetup> ExpectedSetupOf(std::string_view mode, std::span<const DeployFile> files) {
  const auto modes = Modes();
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    return common::InvalidArgument("unknown mode '" + std::string(mode) + "' (known: scheduler, extender, agent)");
  }
  std::vector<Document> docs;
  std::set<std::string> seen;
  try {
    if (auto s = Collect(files, "deploy/" + std::string(mode), seen, docs); !s.ok()) {
      return s;
    }
    return Build(mode, docs);
  } catch (const YAML::Exception& e) {
    return common::InvalidArgument("deploy/" + std::string(mode) + ": " + e.what());
  }
}

}  // namespace gpusched::doctor
