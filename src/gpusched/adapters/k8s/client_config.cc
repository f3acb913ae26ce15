#include "gpusched/adapters/k8s/client_config.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace gpusched::adapters::k8s {
namespace {

using common::InvalidArgument;
using common::Result;
using common::Status;

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return common::NotFound(what + ": cannot read " + path);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    return "";
  }
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string ResolvePath(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) {
    return path;
  }
  return (std::filesystem::path(base_dir) / path).string();
}

// A scalar child as a string; "" when absent. Non-scalars are an error naming the key.
Result<std::string> Scalar(const YAML::Node& node, const char* key, const std::string& where) {
  const YAML::Node child = node[key];
  if (!child.IsDefined() || child.IsNull()) {
    return std::string();
  }
  if (!child.IsScalar()) {
    return InvalidArgument(where + "." + key + " must be a string");
  }
  return child.Scalar();
}

// Finds the entry with `name` in a list of {name, <field>: {...}} and returns its <field> map.
Result<YAML::Node> FindNamed(const YAML::Node& root, const char* list, const char* field, const std::string& name,
                             const std::string& source) {
  const YAML::Node entries = root[list];
  if (!entries.IsDefined() || !entries.IsSequence()) {
    return InvalidArgument(source + ": missing key '" + list + "' (a list)");
  }
  for (const YAML::Node& entry : entries) {
    if (entry.IsMap() && entry["name"].IsDefined() && entry["name"].IsScalar() && entry["name"].Scalar() == name) {
      const YAML::Node body = entry[field];
      if (!body.IsDefined() || !body.IsMap()) {
        return InvalidArgument(source + ": " + list + "[name=" + name + "] has no '" + field + "' map");
      }
      return body;
    }
  }
  return InvalidArgument(source + ": no entry named '" + name + "' in '" + list + "'");
}

// Reads either `key-data` (base64) or `key` (a file path relative to base_dir). `where` names the YAML location.
Result<std::string> DataOrFile(const YAML::Node& node, const std::string& key, const std::string& where,
                               const std::string& base_dir) {
  const std::string data_key = key + "-data";
  GPUSCHED_ASSIGN_OR_RETURN(data, Scalar(node, data_key.c_str(), where));
  if (!data.empty()) {
    auto decoded = DecodeBase64(data);
    if (!decoded.ok()) {
      return InvalidArgument(where + "." + data_key + ": " + decoded.status().message());
    }
    return std::move(decoded).value();
  }
  GPUSCHED_ASSIGN_OR_RETURN(file, Scalar(node, key.c_str(), where));
  if (file.empty()) {
    return std::string();
  }
  auto contents = ReadFile(ResolvePath(base_dir, file), where + "." + key);
  if (!contents.ok()) {
    return InvalidArgument(contents.status().message());
  }
  return std::move(contents).value();
}

bool FileExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read at start-up
  return v == nullptr ? "" : v;
}

}  // namespace

namespace {

// users[].user.exec: apiVersion, command, args, env [{name, value}], provideClusterInfo, interactiveMode,
// installHint. gpusched runs plugins without a terminal: interactiveMode Always is refused.
Result<ExecPluginConfig> ParseExecPlugin(const YAML::Node& node, const std::string& where,
                                         const std::string& base_dir) {
  if (!node.IsMap()) {
    return InvalidArgument(where + " must be a mapping");
  }
  static const std::set<std::string> kKeys = {"apiVersion",         "command",         "args",       "env",
                                              "provideClusterInfo", "interactiveMode", "installHint"};
  for (const auto& kv : node) {
    if (!kKeys.contains(kv.first.as<std::string>())) {
      return InvalidArgument(where + ": unknown key '" + kv.first.as<std::string>() + "'");
    }
  }
  ExecPluginConfig exec;
  exec.source = where;
  GPUSCHED_ASSIGN_OR_RETURN(api_version, Scalar(node, "apiVersion", where));
  if (api_version != "client.authentication.k8s.io/v1" && api_version != "client.authentication.k8s.io/v1beta1") {
    return InvalidArgument(where + ".apiVersion must be client.authentication.k8s.io/v1 or /v1beta1, got '" +
                           api_version + "'");
  }
  exec.api_version = api_version;
  GPUSCHED_ASSIGN_OR_RETURN(command, Scalar(node, "command", where));
  if (command.empty()) {
    return InvalidArgument(where + ": missing key 'command'");
  }
  // As kubectl: a command with a path separator is relative to the kubeconfig, a bare name is looked up on PATH.
  exec.command = command.find('/') == std::string::npos ? command : ResolvePath(base_dir, command);
  if (const YAML::Node& args = node["args"]; args.IsDefined() && !args.IsNull()) {
    if (!args.IsSequence()) {
      return InvalidArgument(where + ".args must be a list");
    }
    for (const auto& a : args) {
      exec.args.push_back(a.as<std::string>());
    }
  }
  if (const YAML::Node& env = node["env"]; env.IsDefined() && !env.IsNull()) {
    if (!env.IsSequence()) {
      return InvalidArgument(where + ".env must be a list of {name, value}");
    }
    for (const auto& e : env) {
      if (!e.IsMap() || !e["name"].IsDefined() || !e["name"].IsScalar() || e["name"].Scalar().empty()) {
        return InvalidArgument(where + ".env: every entry needs a name");
      }
      const YAML::Node& value = e["value"];
      exec.env.emplace_back(e["name"].Scalar(), value.IsDefined() && value.IsScalar() ? value.Scalar() : "");
    }
  }
  GPUSCHED_ASSIGN_OR_RETURN(provide, Scalar(node, "provideClusterInfo", where));
  if (!provide.empty() && provide != "true" && provide != "false") {
    return InvalidArgument(where + ".provideClusterInfo must be true or false, got '" + provide + "'");
  }
  exec.provide_cluster_info = provide == "true";
  GPUSCHED_ASSIGN_OR_RETURN(interactive, Scalar(node, "interactiveMode", where));
  if (interactive == "Always") {
    return InvalidArgument(where +
                           ".interactiveMode Always needs a terminal, which a daemon has not (use a plugin "
                           "that works with Never or IfAvailable)");
  }
  if (!interactive.empty() && interactive != "Never" && interactive != "IfAvailable") {
    return InvalidArgument(where + ".interactiveMode must be Never, IfAvailable or Always, got '" + interactive + "'");
  }
  GPUSCHED_ASSIGN_OR_RETURN(hint, Scalar(node, "installHint", where));
  exec.install_hint = hint;
  return exec;
}

}  // namespace

Result<ClientConfig> ParseKubeconfig(const std::string& text, const std::string& source, const std::string& base_dir,
                                     const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": not valid YAML: " + e.what());
  }
  if (!root.IsMap()) {
    return InvalidArgument(source + ": not a kubeconfig (expected a YAML map with kind: Config)");
  }
  try {
    std::string context_name = context;
    if (context_name.empty()) {
      GPUSCHED_ASSIGN_OR_RETURN(current, Scalar(root, "current-context", source));
      if (current.empty()) {
        return InvalidArgument(source + ": missing key 'current-context' and no context was given");
      }
      context_name = current;
    }
    GPUSCHED_ASSIGN_OR_RETURN(ctx, FindNamed(root, "contexts", "context", context_name, source));
    const std::string ctx_where = source + ": contexts[name=" + context_name + "].context";
    GPUSCHED_ASSIGN_OR_RETURN(cluster_name, Scalar(ctx, "cluster", ctx_where));
    if (cluster_name.empty()) {
      return InvalidArgument(ctx_where + ": missing key 'cluster'");
    }
    GPUSCHED_ASSIGN_OR_RETURN(user_name, Scalar(ctx, "user", ctx_where));
    GPUSCHED_ASSIGN_OR_RETURN(ns, Scalar(ctx, "namespace", ctx_where));

    ClientConfig config;
    config.namespace_ = ns.empty() ? "default" : ns;

    GPUSCHED_ASSIGN_OR_RETURN(cluster, FindNamed(root, "clusters", "cluster", cluster_name, source));
    const std::string cl_where = source + ": clusters[name=" + cluster_name + "].cluster";
    GPUSCHED_ASSIGN_OR_RETURN(server, Scalar(cluster, "server", cl_where));
    if (server.empty()) {
      return InvalidArgument(cl_where + ": missing key 'server'");
    }
    while (!server.empty() && server.back() == '/') {
      server.pop_back();
    }
    config.server = server;
    GPUSCHED_ASSIGN_OR_RETURN(ca, DataOrFile(cluster, "certificate-authority", cl_where, base_dir));
    config.ca_pem = ca;
    GPUSCHED_ASSIGN_OR_RETURN(insecure, Scalar(cluster, "insecure-skip-tls-verify", cl_where));
    if (!insecure.empty() && insecure != "true" && insecure != "false") {
      return InvalidArgument(cl_where + ".insecure-skip-tls-verify must be true or false, got '" + insecure + "'");
    }
    config.insecure_skip_verify = insecure == "true";

    if (!user_name.empty()) {
      GPUSCHED_ASSIGN_OR_RETURN(user, FindNamed(root, "users", "user", user_name, source));
      const std::string us_where = source + ": users[name=" + user_name + "].user";
      for (const char* unsupported : {"auth-provider", "username", "password"}) {
        if (user[unsupported].IsDefined()) {
          return InvalidArgument(us_where + "." + unsupported +
                                 " is not supported (use a token, tokenFile, a client certificate or an exec plugin)");
        }
      }
      if (user["exec"].IsDefined()) {
        GPUSCHED_ASSIGN_OR_RETURN(exec, ParseExecPlugin(user["exec"], us_where + ".exec", base_dir));
        config.exec = std::move(exec);
      }
      GPUSCHED_ASSIGN_OR_RETURN(token, Scalar(user, "token", us_where));
      config.token = token;
      GPUSCHED_ASSIGN_OR_RETURN(token_file, Scalar(user, "tokenFile", us_where));
      if (!token_file.empty()) {
        config.token_file = ResolvePath(base_dir, token_file);
        auto contents = ReadFile(config.token_file, us_where + ".tokenFile");
        if (!contents.ok()) {
          return InvalidArgument(contents.status().message());
        }
        config.token = Trim(std::move(contents).value());
      }
      GPUSCHED_ASSIGN_OR_RETURN(cert, DataOrFile(user, "client-certificate", us_where, base_dir));
      GPUSCHED_ASSIGN_OR_RETURN(key, DataOrFile(user, "client-key", us_where, base_dir));
      if (cert.empty() != key.empty()) {
        return InvalidArgument(us_where + ": missing key '" +
                               std::string(cert.empty() ? "client-certificate(-data)" : "client-key(-data)") +
                               "' (a client certificate needs both)");
      }
      config.client_cert_pem = cert;
      config.client_key_pem = key;
    }
    return config;
  } catch (const YAML::Exception& e) {
    return InvalidArgument(source + ": malformed kubeconfig: " + e.what());
  }
}

Result<ClientConfig> LoadKubeconfig(const std::string& path, const std::string& context) {
  auto text = ReadFile(path, "kubeconfig");
  if (!text.ok()) {
    return text.status();
  }
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return ParseKubeconfig(*text, path, base_dir, context);
}

Result<ClientConfig> InClusterConfig(const std::string& sa_dir) {
  std::string host = Env("KUBERNETES_SERVICE_HOST");
  const std::string port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return common::FailedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a pod?)");
  }
  if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";
  }
  ClientConfig config;
  config.server = "https://" + host + ":" + port;
  config.token_file = sa_dir + "/token";
  GPUSCHED_ASSIGN_OR_RETURN(token, ReadFile(config.token_file, "in-cluster config: service-account token"));
  config.token = Trim(token);
  if (config.token.empty()) {
    return InvalidArgument("in-cluster config: " + config.token_file + " is empty");
  }
  GPUSCHED_ASSIGN_OR_RETURN(ca, ReadFile(sa_dir + "/ca.crt", "in-cluster config: service-account CA"));
  config.ca_pem = ca;
  auto ns = ReadFile(sa_dir + "/namespace", "in-cluster config: namespace");
  config.namespace_ = ns.ok() && !Trim(*ns).empty() ? Trim(*ns) : "default";
  return config;
}

Result<ClientConfig> ResolveClientConfig(const std::string& explicit_path, const std::string& context) {
  if (!explicit_path.empty()) {
    return LoadKubeconfig(explicit_path, context);
  }
  std::vector<std::string> tried = {"--kubeconfig (not given)"};
  const std::string env = Env("KUBECONFIG");
  if (!env.empty()) {
    const std::string first = env.substr(0, env.find(':'));
    if (!first.empty()) {
      auto config = LoadKubeconfig(first, context);
      if (!config.ok()) {
        return Status(config.status().code(), "$KUBECONFIG: " + config.status().message());
      }
      return config;
    }
  }
  tried.emplace_back("$KUBECONFIG (unset)");
  if (!Env("KUBERNETES_SERVICE_HOST").empty()) {
    if (!context.empty()) {
      return common::InvalidArgument("--context " + context +
                                     ": the in-cluster configuration has no contexts (give --kubeconfig too)");
    }
    return InClusterConfig();
  }
  tried.emplace_back("in-cluster (KUBERNETES_SERVICE_HOST unset)");
  const std::string home = Env("HOME");
  if (!home.empty()) {
    const std::string path = home + "/.kube/config";
    if (FileExists(path)) {
      return LoadKubeconfig(path, context);
    }
    tried.push_back(path + " (not found)");
  } else {
    tried.emplace_back("~/.kube/config ($HOME unset)");
  }
  std::string message = "no Kubernetes client configuration found; tried:";
  for (size_t i = 0; i < tried.size(); ++i) {
    message += (i == 0 ? " " : ", ") + tried[i];
  }
  return common::NotFound(message);
}

}  // namespace gpusched::adapters::k8s
