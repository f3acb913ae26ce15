#include "gpusched/adapters/k8s/exec_credential.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "gpusched/kube/base64.h"
#include "gpusched/proc/subprocess.h"

namespace gpusched::adapters::k8s {

using common::InvalidArgument;
using common::Result;
using nlohmann::json;

Result<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text) {
  int year = 0;
  int month = 0;
  int day = 0;
  int hour = 0;
  int minute = 0;
  int second = 0;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second, &consumed) !=
          6 ||
      month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return InvalidArgument("not an RFC 3339 time: '" + text + "'");
  }
  size_t pos = static_cast<size_t>(consumed);
  if (pos < text.size() && text[pos] == '.') {  // fractional seconds: dropped
    ++pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      ++pos;
    }
  }
  long offset_s = 0;
  const std::string zone = text.substr(pos);
  if (zone == "Z" || zone == "z") {
    offset_s = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int oh = 0;
    int om = 0;
    if (std::sscanf(zone.c_str() + 1, "%2d:%2d", &oh, &om) != 2) {
      return InvalidArgument("not an RFC 3339 time: '" + text + "'");
    }
    offset_s = (zone[0] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
  } else {
    return InvalidArgument("not an RFC 3339 time (no zone): '" + text + "'");
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const time_t utc = timegm(&tm) - offset_s;
  // system_clock counts nanoseconds: it ends in 2262. A later time (a token "valid forever") is its end.
  using std::chrono::system_clock;
  const auto last =
      std::chrono::duration_cast<std::chrono::seconds>(system_clock::time_point::max().time_since_epoch());
  if (utc >= last.count()) {
    return system_clock::time_point::max();
  }
  return system_clock::from_time_t(utc);
}

Result<ExecCredential> ParseExecCredential(const std::string& json_text, const std::string& api_version,
                                           const std::string& where) {
  const json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgument(where + " did not print an ExecCredential (not a JSON object): '" +
                           json_text.substr(0, 120) + "'");
  }
  if (doc.value("kind", "") != "ExecCredential") {
    return InvalidArgument(where + " printed kind '" + doc.value("kind", "") + "', not ExecCredential");
  }
  if (doc.value("apiVersion", "") != api_version) {
    return InvalidArgument(where + " printed apiVersion '" + doc.value("apiVersion", "") + "', but " + api_version +
                           " was asked for");
  }
  const json status = doc.contains("status") && doc["status"].is_object() ? doc["status"] : json::object();
  ExecCredential cred;
  if (status.contains("token") && status["token"].is_string()) {
    cred.token = status["token"].get<std::string>();
  }
  if (cred.token.empty()) {
    if (status.contains("clientCertificateData")) {
      return InvalidArgument(where + " returned a client certificate; gpusched needs a plugin that returns a token");
    }
    return InvalidArgument(where + " printed an ExecCredential without status.token");
  }
  if (status.contains("expirationTimestamp") && status["expirationTimestamp"].is_string()) {
    auto when = ParseRfc3339(status["expirationTimestamp"].get<std::string>());
    if (!when.ok()) {
      return InvalidArgument(where + ": status.expirationTimestamp: " + when.status().message());
    }
    cred.expires = *when;
  }
  return cred;
}

std::string ExecInfo(const ExecPluginConfig& plugin, const ClientConfig& cluster) {
  json spec = {{"interactive", false}};
  if (plugin.provide_cluster_info) {
    json c = {{"server", cluster.server}};
    if (!cluster.ca_pem.empty()) {
      c["certificate-authority-data"] = kube::EncodeBase64(cluster.ca_pem);
    }
    if (cluster.insecure_skip_verify) {
      c["insecure-skip-tls-verify"] = true;
    }
    spec["cluster"] = std::move(c);
  }
  return json{{"apiVersion", plugin.api_version}, {"kind", "ExecCredential"}, {"spec", std::move(spec)}}.dump();
}

Result<ExecCredential> RunExecPlugin(const ClientConfig& config, std::chrono::milliseconds timeout) {
  const ExecPluginConfig& plugin = config.exec;
  std::vector<std::string> argv = {plugin.command};
  argv.insert(argv.end(), plugin.args.begin(), plugin.args.end());
  proc::CommandOptions options{.env = plugin.env, .timeout = timeout, .max_output = size_t{1} << 20};
  options.env.emplace_back("KUBERNETES_EXEC_INFO", ExecInfo(plugin, config));
  const std::string where = plugin.source + " (" + plugin.command + ")";
  auto run = proc::RunCommand(argv, options);
  if (!run.ok()) {
    return common::Unavailable(where + ": " + run.status().message() +
                               (plugin.install_hint.empty() ? "" : " (" + plugin.install_hint + ")"));
  }
  if (run->timed_out) {
    return common::Unavailable(where + " did not finish within " + std::to_string(timeout.count()) + " ms");
  }
  if (run->exit_code != 0) {
    return common::Unavailable(where + " exited with " + std::to_string(run->exit_code) +
                               (run->errors.empty() ? "" : ": " + run->errors.substr(0, 300)));
  }
  return ParseExecCredential(run->output, plugin.api_version, where);
}

}  // namespace gpusched::adapters::k8s
