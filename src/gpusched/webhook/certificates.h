#pragma once

// The webhook's own PKI, pure (OpenSSL 3, no I/O, no clock: `now` is passed in): a CA, serving certificates issued
// from it for the webhook Service's DNS names, what a certificate says (validity, SANs), and when to renew.
// cert_keeper.h keeps the CA in a Secret and hands the serving pair to the server; nothing here knows Kubernetes
// beyond the Service DNS names.
//
// Keys are ECDSA P-256, signatures SHA-256, PEM throughout (certificates "CERTIFICATE", keys PKCS#8 "PRIVATE
// KEY"). Certificates start an hour before `now` (a node whose clock is a little behind still accepts them).
//   CA:      subject CN=<name>, basicConstraints critical CA:TRUE pathlen:0, keyUsage critical keyCertSign+cRLSign,
//            subjectKeyIdentifier.
//   serving: subject CN=<first DNS name or IP>, subjectAltName DNS:/IP: (kube-apiserver checks SANs only),
//            basicConstraints critical CA:FALSE, keyUsage critical digitalSignature, extendedKeyUsage serverAuth,
//            authorityKeyIdentifier; never valid past its CA.
//
// Renewal: a certificate is due when less than a third of its lifetime (notBefore to notAfter) is left, or it is
// not valid at `now` at all. The serving certificate (a year by default) is so re-issued after about eight months;
// the CA (ten years) rotates after about six and a half, and the old CA stays in caBundle until it expires, which
// is after every serving certificate it signed (they never outlive it).
//
// Thread-safety: every function is reentrant.

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::webhook {

using WallTime = std::chrono::system_clock::time_point;

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;
};

// What a certificate says, as far as renewal and tests care.
struct CertInfo {
  WallTime not_before, not_after;
  bool is_ca = false;
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;  // text form ("127.0.0.1", "::1")
};

// A new self-signed CA valid for `validity` from now. InvalidArgument for an empty name or a validity under a day.
[[nodiscard]] common::Result<CertAndKey> MakeCa(std::string_view common_name, WallTime now,
                                                std::chrono::seconds validity);

struct ServingCertOptions {
  // Names to put in subjectAltName: DNS names, or IPv4/IPv6 addresses (put in as IP SANs). At least one.
  std::vector<std::string> names;
  std::chrono::seconds validity{std::chrono::hours(24 * 365)};
};

// A new key and a serving certificate for it signed by `ca`, valid for options.validity from now or until the CA
// expires, whichever is first. InvalidArgument for a malformed name (naming it), a CA pair that does not parse or
// match, or a CA with less than an hour left.
[[nodiscard]] common::Result<CertAndKey> IssueServingCert(const CertAndKey& ca, const ServingCertOptions& options,
                                                          WallTime now);

// The first certificate of a PEM text. InvalidArgument when there is none or it does not parse.
[[nodiscard]] common::Result<CertInfo> ParseCertificate(std::string_view pem);

// OK when `pair` is a PEM certificate and the PEM private key that belongs to it; InvalidArgument saying which part
// is wrong otherwise.
[[nodiscard]] common::Status CheckKeyPair(const CertAndKey& pair);

// True when the first certificate of `cert_pem` is signed by the first one of `ca_pem` (its issuer name and
// signature); false also when either does not parse.
[[nodiscard]] bool IssuedBy(std::string_view cert_pem, std::string_view ca_pem);

// Less than a third of the certificate's lifetime left at `now`, or not valid at `now`.
[[nodiscard]] bool NeedsRenewal(const CertInfo& cert, WallTime now);

// The names a client uses for Service <service> in <ns>: service, service.ns, service.ns.svc,
// service.ns.svc.cluster.local.
[[nodiscard]] std::vector<std::string> ServiceDnsNames(std::string_view service, std::string_view ns);

// OK for an IPv4 or IPv6 address, or a DNS name of RFC 1123 labels (lower case, at most 253 characters, an optional
// leading "*."); InvalidArgument naming it otherwise.
[[nodiscard]] common::Status CheckSubjectAltName(std::string_view name);

}  // namespace gpusched::webhook
