#include "gpusched/webhook/cert_keeper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/kube/base64.h"

namespace gpusched::webhook {
namespace {

using common::InvalidArgument;
using common::Result;
using common::Status;
using common::StatusCode;
using nlohmann::json;

constexpr const char* kCaCert = "ca.crt";
constexpr const char* kCaKey = "ca.key";
constexpr const char* kPreviousCaCert = "previous-ca.crt";
constexpr const char* kAdmissionApi = "/apis/admissionregistration.k8s.io/v1/";

// A DNS-1123 subdomain (what Secrets, Services and webhook configurations are named by).
Status CheckObjectName(const std::string& flag_name, const std::string& value) {
  if (value.empty()) {
    return Status::Ok();
  }
  if (value.starts_with("*") || value.find_first_of(":") != std::string::npos || !CheckSubjectAltName(value).ok()) {
    return InvalidArgument(flag_name + " '" + value +
                           "' is not a Kubernetes object name (lower-case letters, digits, '-' and '.')");
  }
  return Status::Ok();
}

// Writes `text` to `path` through a temporary file in the same directory and a rename, so that a reader sees the
// old contents or the new, never a part.
Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return common::Unavailable("cannot write " + tmp + ": " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return common::Unavailable("cannot write " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return common::Unavailable("cannot write " + tmp + ": " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return common::Unavailable("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  return Status::Ok();
}

Result<std::string> DataField(const json& data, const char* key, std::string_view where, bool required) {
  if (!data.is_object() || !data.contains(key)) {
    if (!required) {
      return std::string();
    }
    return InvalidArgument(std::string(where) + ": data has no " + key);
  }
  if (!data[key].is_string()) {
    return InvalidArgument(std::string(where) + ": data." + key + " is not a string");
  }
  auto decoded = kube::DecodeBase64(data[key].get<std::string>());
  if (!decoded.ok()) {
    return InvalidArgument(std::string(where) + ": data." + key + " is not base64: " + decoded.status().message());
  }
  return std::move(decoded).value();
}

}  // namespace

Result<CaSecret> DecodeCaSecret(const json& secret, std::string_view where) {
  const std::string w(where);
  const std::string hint = " (delete the Secret to have a new CA made)";
  if (!secret.is_object()) {
    return InvalidArgument(w + ": not a JSON object");
  }
  const json data = secret.contains("data") ? secret["data"] : json::object();
  CaSecret out;
  GPUSCHED_ASSIGN_OR_RETURN(cert, DataField(data, kCaCert, w, true));
  GPUSCHED_ASSIGN_OR_RETURN(key, DataField(data, kCaKey, w, true));
  GPUSCHED_ASSIGN_OR_RETURN(previous, DataField(data, kPreviousCaCert, w, false));
  out.ca = CertAndKey{.cert_pem = std::move(cert), .key_pem = std::move(key)};
  out.previous_cert_pem = std::move(previous);
  if (Status s = CheckKeyPair(out.ca); !s.ok()) {
    return InvalidArgument(w + ": data." + kCaCert + " and data." + kCaKey + ": " + s.message() + hint);
  }
  auto info = ParseCertificate(out.ca.cert_pem);
  if (!info.ok() || !info->is_ca) {
    return InvalidArgument(w + ": data." + kCaCert + " is not a CA certificate (basicConstraints CA:TRUE)" + hint);
  }
  if (!out.previous_cert_pem.empty()) {
    if (auto previous_info = ParseCertificate(out.previous_cert_pem); !previous_info.ok()) {
      return InvalidArgument(w + ": data." + kPreviousCaCert + ": " + previous_info.status().message() + hint);
    }
  }
  if (secret.contains("metadata") && secret["metadata"].is_object()) {
    out.resource_version = secret["metadata"].value("resourceVersion", "");
  }
  return out;
}

json EncodeCaSecret(const CaSecret& ca, std::string_view ns, std::string_view name) {
  json data = {{kCaCert, kube::EncodeBase64(ca.ca.cert_pem)}, {kCaKey, kube::EncodeBase64(ca.ca.key_pem)}};
  if (!ca.previous_cert_pem.empty()) {
    data[kPreviousCaCert] = kube::EncodeBase64(ca.previous_cert_pem);
  }
  json meta = {{"name", name},
               {"namespace", ns},
               {"labels", {{"app.kubernetes.io/managed-by", "gpusched-webhook"}}},
               {"annotations",
                {{"gpusched.io/description",
                  "The CA of gpusched webhook's serving certificates; kept and rotated by the webhook "
                  "(--self-signed-ca-secret). Deleting it makes a new CA at the next start."}}}};
  if (!ca.resource_version.empty()) {
    meta["resourceVersion"] = ca.resource_version;
  }
  return {{"apiVersion", "v1"}, {"kind", "Secret"}, {"metadata", meta}, {"type", "Opaque"}, {"data", data}};
}

std::string CaBundle(const CaSecret& ca, WallTime now) {
  std::string bundle = ca.ca.cert_pem;
  if (!ca.previous_cert_pem.empty()) {
    auto info = ParseCertificate(ca.previous_cert_pem);
    if (info.ok() && now < info->not_after) {
      if (!bundle.empty() && bundle.back() != '\n') {
        bundle += '\n';
      }
      bundle += ca.previous_cert_pem;
    }
  }
  return bundle;
}

Status CheckCertKeeperOptions(const CertKeeperOptions& o) {
  if (o.namespace_.empty()) {
    return InvalidArgument("the namespace of the CA Secret is unknown: give --namespace");
  }
  if (o.secret_name.empty()) {
    return InvalidArgument("--self-signed-ca-secret needs a Secret name");
  }
  for (const auto& [flag, value] : {std::pair{"--namespace", &o.namespace_},
                                    {"--self-signed-ca-secret", &o.secret_name},
                                    {"--service", &o.service},
                                    {"--mutating-webhook-configuration", &o.mutating_configuration},
                                    {"--validating-webhook-configuration", &o.validating_configuration}}) {
    GPUSCHED_RETURN_IF_ERROR(CheckObjectName(flag, *value));
  }
  if (o.service.find('.') != std::string::npos || o.namespace_.find('.') != std::string::npos) {
    return InvalidArgument("--service and --namespace are single DNS labels (no '.')");
  }
  for (const std::string& name : o.extra_names) {
    if (Status s = CheckSubjectAltName(name); !s.ok()) {
      return InvalidArgument("--extra-san: " + s.message());
    }
  }
  if (o.service.empty() && o.extra_names.empty()) {
    return InvalidArgument("the serving certificate needs a name: give --service (and --extra-san for more)");
  }
  if (o.mutating_configuration.empty() && o.validating_configuration.empty()) {
    return InvalidArgument(
        "give --mutating-webhook-configuration and/or --validating-webhook-configuration: the configurations "
        "whose caBundle the webhook fills (else kube-apiserver cannot trust its certificate)");
  }
  if (o.cert_file.empty() || o.key_file.empty()) {
    return InvalidArgument("the serving certificate needs a file to be written to");
  }
  if (o.ca_validity < std::chrono::hours(24) || o.cert_validity < std::chrono::hours(1) ||
      o.cert_validity > o.ca_validity) {
    return InvalidArgument(
        "the CA must be valid for at least a day, the serving certificate for at least an hour "
        "and no longer than the CA");
  }
  return Status::Ok();
}

CertKeeper::CertKeeper(adapters::k8s::ApiClient& client, CertKeeperOptions options, Now now)
    : client_(client),
      options_(std::move(options)),
      now_(std::move(now)),
      where_("Secret " + options_.namespace_ + "/" + options_.secret_name) {
  if (!options_.service.empty()) {
    names_ = ServiceDnsNames(options_.service, options_.namespace_);
  }
  for (const std::string& n : options_.extra_names) {
    if (std::find(names_.begin(), names_.end(), n) == names_.end()) {
      names_.push_back(n);
    }
  }
}

std::string CertKeeper::cert_pem() const {
  std::lock_guard lock(mu_);
  return cert_pem_;
}

std::string CertKeeper::ca_bundle() const {
  std::lock_guard lock(mu_);
  return ca_bundle_;
}

Result<CaSecret> CertKeeper::LoadOrCreateCa(SyncReport& report) {
  const std::string collection = "/api/v1/namespaces/" + options_.namespace_ + "/secrets";
  const std::string path = collection + "/" + options_.secret_name;
  auto got = client_.Get(path);
  if (got.ok()) {
    return DecodeCaSecret(*got, where_);
  }
  if (got.status().code() != StatusCode::kNotFound) {
    return Status(got.status().code(), where_ + ": " + got.status().message());
  }
  GPUSCHED_ASSIGN_OR_RETURN(ca, MakeCa("gpusched-webhook-ca", now_(), options_.ca_validity));
  const json secret = EncodeCaSecret(CaSecret{.ca = ca}, options_.namespace_, options_.secret_name);
  auto created = client_.Request("POST", collection, secret.dump());
  if (created.ok()) {
    report.ca_created = true;
    return DecodeCaSecret(*created, where_);
  }
  if (created.status().code() != StatusCode::kAlreadyExists) {
    return Status(created.status().code(), where_ + ": cannot create it: " + created.status().message());
  }
  // Another replica created it between our GET and POST: its CA is the one.
  GPUSCHED_ASSIGN_OR_RETURN(theirs, ReadCaSecret(path));
  report.ca_adopted = true;
  return theirs;
}

Result<CaSecret> CertKeeper::ReadCaSecret(const std::string& path) {
  auto got = client_.Get(path);
  if (!got.ok()) {
    return Status(got.status().code(), where_ + ": " + got.status().message());
  }
  return DecodeCaSecret(*got, where_);
}

Result<CaSecret> CertKeeper::RotateCa(CaSecret current, SyncReport& report) {
  const WallTime now = now_();
  GPUSCHED_ASSIGN_OR_RETURN(fresh, MakeCa("gpusched-webhook-ca", now, options_.ca_validity));
  CaSecret next{.ca = fresh, .resource_version = current.resource_version};
  if (auto old = ParseCertificate(current.ca.cert_pem); old.ok() && now < old->not_after) {
    next.previous_cert_pem = current.ca.cert_pem;  // still trusted until it expires
  }
  const std::string path = "/api/v1/namespaces/" + options_.namespace_ + "/secrets/" + options_.secret_name;
  auto updated = client_.Request("PUT", path, EncodeCaSecret(next, options_.namespace_, options_.secret_name).dump());
  if (updated.ok()) {
    report.ca_rotated = true;
    return DecodeCaSecret(*updated, where_);
  }
  if (updated.status().code() != StatusCode::kAborted) {
    return Status(updated.status().code(), where_ + ": cannot rotate the CA: " + updated.status().message());
  }
  // A stale resourceVersion: another replica wrote it first (rotated too, most likely). Use what it wrote.
  GPUSCHED_ASSIGN_OR_RETURN(theirs, ReadCaSecret(path));
  auto info = ParseCertificate(theirs.ca.cert_pem);
  if (!info.ok() || NeedsRenewal(*info, now)) {
    return common::Aborted(where_ + ": changed while its CA was being rotated; tried again at the next sync");
  }
  report.ca_adopted = true;
  return theirs;
}

Status CertKeeper::PatchBundle(const std::string& resource, const std::string& kind, const std::string& name,
                               const std::string& bundle, SyncReport& report) {
  const std::string path = kAdmissionApi + resource + "/" + name;
  const std::string want = kube::EncodeBase64(bundle);
  // Two tries: a patch whose "test" fails (the list changed between GET and PATCH) reads the object again.
  for (int attempt = 0;; ++attempt) {
    auto got = client_.Get(path);
    if (!got.ok()) {
      return Status(got.status().code(), kind + " " + name + ": " + got.status().message());
    }
    const json& webhooks = got->contains("webhooks") ? (*got)["webhooks"] : json::array();
    if (!webhooks.is_array()) {
      return InvalidArgument(kind + " " + name + ": webhooks is not a list");
    }
    json ops = json::array();
    for (size_t i = 0; i < webhooks.size(); ++i) {
      const json& w = webhooks[i];
      const std::string at = "/webhooks/" + std::to_string(i);
      std::string have;
      if (w.contains("clientConfig") && w["clientConfig"].is_object()) {
        have = w["clientConfig"].value("caBundle", "");
      }
      if (have == want) {
        continue;
      }
      ops.push_back({{"op", "test"}, {"path", at + "/name"}, {"value", w.value("name", "")}});
      if (!w.contains("clientConfig")) {
        ops.push_back({{"op", "add"}, {"path", at + "/clientConfig"}, {"value", json::object()}});
      }
      ops.push_back({{"op", "add"}, {"path", at + "/clientConfig/caBundle"}, {"value", want}});
    }
    if (ops.empty()) {
      return Status::Ok();
    }
    auto patched = client_.Request("PATCH", path, ops.dump(), "application/json-patch+json");
    if (patched.ok()) {
      size_t count = 0;
      for (const json& op : ops) {
        if (op["op"] == "test") {
          ++count;
        }
      }
      report.patched.push_back(kind + " " + name + " (" + std::to_string(count) + " webhook" + (count == 1 ? "" : "s") +
                               ")");
      return Status::Ok();
    }
    if (attempt == 0 && patched.status().code() == StatusCode::kInvalidArgument) {
      continue;  // 422: a "test" failed
    }
    return Status(patched.status().code(),
                  kind + " " + name + ": cannot patch its caBundle: " + patched.status().message());
  }
}

Status CertKeeper::WriteServingPair(const CertAndKey& pair) {
  // The key first: the reloader loads a pair only once it reads the same bytes twice, and a key without its
  // certificate fails to load and is tried again.
  GPUSCHED_RETURN_IF_ERROR(WriteFileAtomically(options_.key_file, pair.key_pem, 0600));
  return WriteFileAtomically(options_.cert_file, pair.cert_pem, 0644);
}

Result<SyncReport> CertKeeper::Sync() {
  SyncReport report;
  GPUSCHED_ASSIGN_OR_RETURN(loaded, LoadOrCreateCa(report));
  CaSecret ca = std::move(loaded);
  auto ca_info = ParseCertificate(ca.ca.cert_pem);
  if (!ca_info.ok()) {
    return InvalidArgument(where_ + ": " + ca_info.status().message());
  }
  if (NeedsRenewal(*ca_info, now_())) {
    GPUSCHED_ASSIGN_OR_RETURN(rotated, RotateCa(std::move(ca), report));
    ca = std::move(rotated);
  }
  const std::string bundle = CaBundle(ca, now_());
  if (!options_.mutating_configuration.empty()) {
    GPUSCHED_RETURN_IF_ERROR(PatchBundle("mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
                                         options_.mutating_configuration, bundle, report));
  }
  if (!options_.validating_configuration.empty()) {
    GPUSCHED_RETURN_IF_ERROR(PatchBundle("validatingwebhookconfigurations", "ValidatingWebhookConfiguration",
                                         options_.validating_configuration, bundle, report));
  }
  {
    std::lock_guard lock(mu_);
    ca_bundle_ = bundle;
  }
  std::string current = cert_pem();
  bool issue = current.empty() || !IssuedBy(current, ca.ca.cert_pem);
  if (!issue) {
    auto info = ParseCertificate(current);
    issue = !info.ok() || NeedsRenewal(*info, now_());
    if (info.ok()) {
      report.cert_not_after = info->not_after;
    }
  }
  if (issue) {
    GPUSCHED_ASSIGN_OR_RETURN(
        pair, IssueServingCert(ca.ca, ServingCertOptions{.names = names_, .validity = options_.cert_validity}, now_()));
    GPUSCHED_RETURN_IF_ERROR(WriteServingPair(pair));
    GPUSCHED_ASSIGN_OR_RETURN(info, ParseCertificate(pair.cert_pem));
    report.cert_issued = true;
    report.cert_not_after = info.not_after;
    std::lock_guard lock(mu_);
    cert_pem_ = std::move(pair.cert_pem);
  }
  return report;
}

}  // namespace gpusched::webhook
