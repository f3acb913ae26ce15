#pragma once

// CertKeeper: `gpusched webhook --self-signed-ca-secret` makes and keeps its own serving certificate, so that an
// install needs no cert-manager and no step by hand. The certificate logic is certificates.h; this is the
// Kubernetes part, through adapters/k8s's ApiClient.
//
// The CA lives in a Secret (type Opaque, data ca.crt, ca.key, and previous-ca.crt while an old CA is still trusted)
// that every replica shares; each replica issues its own serving certificate from it, kept in memory and written to
// two files (cert_file, key_file) that the server loads and daemon::TlsReloader re-reads when they change.
//
// Sync, one pass (the daemon calls it at start, then every few minutes):
//   1. GET the Secret. Missing (404): make a CA and create it; a 409 AlreadyExists means another replica won the
//      race: GET again and use its CA. Contents that do not decode (data missing, not base64, not a PEM CA and its
//      key) are InvalidArgument naming the Secret and the key, and nothing is changed (no write, no patch, no file).
//   2. The CA due for renewal (certificates.h: under a third of its lifetime left): a new CA replaces it and the old
//      certificate moves to previous-ca.crt; the update carries the Secret's resourceVersion, and a 409 (another
//      replica rotated it first) means GET again and use that one.
//   3. caBundle = ca.crt, then previous-ca.crt while it has not expired. Each named MutatingWebhookConfiguration and
//      ValidatingWebhookConfiguration is read and, where any of its webhooks carries another caBundle, patched with
//      one JSON patch: for each webhook a "test" of its name (so that a concurrent reorder fails the patch rather
//      than patching the wrong entry) and an "add" of clientConfig.caBundle. Only those two objects are touched.
//   4. The serving certificate is issued (and both files rewritten, each by rename) when there is none yet in this
//      process, when it is not from the current CA, or when it is due for renewal. This comes after step 3, so that
//      a certificate from a new CA is served only once caBundle trusts that CA.
// An error at any step returns it; what earlier steps did stays done, and the next Sync starts over.
//
// Thread-safety: Sync from one thread at a time (the daemon's certificate thread); the accessors from any thread.

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/webhook/certificates.h"

namespace gpusched::adapters::k8s {
class ApiClient;
}

namespace gpusched::webhook {

struct CertKeeperOptions {
  std::string namespace_;                // of the Secret (and the Service)
  std::string secret_name;               // the CA Secret
  std::string service;                   // the webhook's Service: its four DNS names go in the certificate ("" = none)
  std::vector<std::string> extra_names;  // more SANs (IP addresses or DNS names): tests, out-of-cluster use
  std::string mutating_configuration;    // caBundle patched in every webhook of these ("" = none)
  std::string validating_configuration;
  std::string cert_file, key_file;  // where the serving pair is written
  std::chrono::seconds ca_validity{std::chrono::hours(24 * 3650)};
  std::chrono::seconds cert_validity{std::chrono::hours(24 * 365)};
};

// What one Sync did, for the log.
struct SyncReport {
  bool ca_created = false;           // this replica made the CA
  bool ca_adopted = false;           // another replica's CA, created or rotated while this one tried (409)
  bool ca_rotated = false;           // this replica rotated the CA
  std::vector<std::string> patched;  // "MutatingWebhookConfiguration gpusched-webhook (2 webhooks)"
  bool cert_issued = false;          // a new serving certificate was written
  WallTime cert_not_after{};         // of the certificate being served
};

// The Secret's contents, decoded and checked.
struct CaSecret {
  CertAndKey ca;
  std::string previous_cert_pem;  // "" when none
  std::string resource_version;
};

// Decodes a Secret object. `where` names it in errors ("Secret kube-system/gpusched-webhook-ca").
[[nodiscard]] common::Result<CaSecret> DecodeCaSecret(const nlohmann::json& secret, std::string_view where);
// The Secret object for `ca` (with metadata.resourceVersion when set).
[[nodiscard]] nlohmann::json EncodeCaSecret(const CaSecret& ca, std::string_view ns, std::string_view name);
// ca.crt, then previous-ca.crt when it has not expired at `now`.
[[nodiscard]] std::string CaBundle(const CaSecret& ca, WallTime now);

// InvalidArgument naming the first option that is wrong (a name that is not a DNS-1123 name, no SAN at all, a
// missing file path, no webhook configuration).
[[nodiscard]] common::Status CheckCertKeeperOptions(const CertKeeperOptions& options);

class CertKeeper {
 public:
  using Now = std::function<WallTime()>;
  // `client` outlives the keeper. `now` is the wall clock (tests pass a fake).
  CertKeeper(adapters::k8s::ApiClient& client, CertKeeperOptions options, Now now);
  CertKeeper(const CertKeeper&) = delete;
  CertKeeper& operator=(const CertKeeper&) = delete;

  [[nodiscard]] common::Result<SyncReport> Sync();

  // The serving certificate last written ("" before the first one), and the CA bundle last made sure of.
  [[nodiscard]] std::string cert_pem() const;
  [[nodiscard]] std::string ca_bundle() const;
  // The SANs the serving certificate carries.
  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }

 private:
  common::Result<CaSecret> LoadOrCreateCa(SyncReport& report);
  common::Result<CaSecret> RotateCa(CaSecret current, SyncReport& report);
  // The CA Secret at `path` as it is now (after a lost race), errors prefixed with where_.
  common::Result<CaSecret> ReadCaSecret(const std::string& path);
  common::Status PatchBundle(const std::string& resource, const std::string& kind, const std::string& name,
                             const std::string& bundle, SyncReport& report);
  common::Status WriteServingPair(const CertAndKey& pair);

  adapters::k8s::ApiClient& client_;
  const CertKeeperOptions options_;
  const Now now_;
  const std::string where_;  // "Secret <ns>/<name>"
  std::vector<std::string> names_;

  mutable std::mutex mu_;
  std::string cert_pem_;   // GUARDED_BY(mu_)
  std::string ca_bundle_;  // GUARDED_BY(mu_)
};

}  // namespace gpusched::webhook
