#include "gpusched/webhook/certificates.h"

#include <arpa/inet.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <ctime>
#include <memory>

namespace gpusched::webhook {
namespace {

using common::InvalidArgument;
using common::Result;
using common::Status;

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Pkey = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Ext = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using Bn = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using Constraints = std::unique_ptr<BASIC_CONSTRAINTS, Deleter<BASIC_CONSTRAINTS, BASIC_CONSTRAINTS_free>>;

constexpr auto kBackdate = std::chrono::hours(1);

// OpenSSL's queued errors as one line (and the queue emptied): "what: reason; reason".
std::string OpenSslError(const std::string& what) {
  std::string out = what;
  bool first = true;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += first ? ": " : "; ";
    out += buf;
    first = false;
  }
  return out;
}

Status Failed(const std::string& what) { return common::Internal(OpenSslError(what)); }

Bio MemBio(std::string_view text) { return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size()))); }

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

Result<X509Ptr> ReadCert(std::string_view pem, const char* what) {
  if (pem.find("-----BEGIN CERTIFICATE-----") == std::string_view::npos) {
    return InvalidArgument(std::string(what) + " holds no PEM certificate");
  }
  Bio bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return InvalidArgument(OpenSslError(std::string(what) + " is not a valid PEM certificate"));
  }
  return cert;
}

Result<Pkey> ReadKey(std::string_view pem, const char* what) {
  if (pem.find("PRIVATE KEY-----") == std::string_view::npos) {
    return InvalidArgument(std::string(what) + " holds no PEM private key");
  }
  Bio bio = MemBio(pem);
  Pkey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return InvalidArgument(OpenSslError(std::string(what) + " is not a valid PEM private key"));
  }
  return key;
}

Result<std::string> CertPem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return Failed("cannot encode the certificate");
  }
  return BioText(bio.get());
}

Result<std::string> KeyPem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Failed("cannot encode the private key");
  }
  return BioText(bio.get());
}

Result<Pkey> NewKey() {
  Pkey key(EVP_EC_gen("P-256"));
  if (key == nullptr) {
    return Failed("cannot make an ECDSA P-256 key");
  }
  return key;
}

WallTime FromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    return WallTime{};
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Status AddExt(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  Ext ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (ext == nullptr || X509_add_ext(cert, ext.get(), -1) != 1) {
    return Failed(std::string("cannot add ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return Status::Ok();
}

// A certificate for `key` with a random serial, subject CN=`cn`, issuer = `issuer` (or itself), valid [from, to].
Result<X509Ptr> NewCert(EVP_PKEY* key, std::string_view cn, X509* issuer, WallTime from, WallTime to) {
  X509Ptr cert(X509_new());
  Bn serial(BN_new());
  if (cert == nullptr || serial == nullptr || X509_set_version(cert.get(), X509_VERSION_3) != 1 ||
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr ||
      ASN1_TIME_set(X509_getm_notBefore(cert.get()), std::chrono::system_clock::to_time_t(from)) == nullptr ||
      ASN1_TIME_set(X509_getm_notAfter(cert.get()), std::chrono::system_clock::to_time_t(to)) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Failed("cannot build the certificate");
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string name(cn);
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), issuer != nullptr ? X509_get_subject_name(issuer) : subject) != 1) {
    return Failed("cannot set the certificate's names");
  }
  return cert;
}

bool IsIp(std::string_view name) {
  const std::string s(name);
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

}  // namespace

Status CheckSubjectAltName(std::string_view name) {
  const std::string quoted = "'" + std::string(name) + "'";
  if (name.empty()) {
    return InvalidArgument("an empty certificate name");
  }
  if (IsIp(name)) {
    return Status::Ok();
  }
  if (name.size() > 253) {
    return InvalidArgument("certificate name " + quoted + " is longer than 253 characters");
  }
  std::string_view rest = name;
  if (rest.starts_with("*.")) {
    rest.remove_prefix(2);
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t dot = rest.find('.', start);
    if (dot == std::string_view::npos) {
      dot = rest.size();
    }
    const std::string_view label = rest.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return InvalidArgument("certificate name " + quoted +
                             " is neither an IP address nor a DNS name (labels of 1 to 63 characters, not starting "
                             "or ending with '-', separated by '.')");
    }
    for (const char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return InvalidArgument("certificate name " + quoted + " holds '" + std::string(1, c) +
                               "': a DNS name has lower-case letters, digits, '-' and '.' only");
      }
    }
    start = dot + 1;
  }
  return Status::Ok();
}

std::vector<std::string> ServiceDnsNames(std::string_view service, std::string_view ns) {
  const std::string s(service), n(ns);
  return {s, s + "." + n, s + "." + n + ".svc", s + "." + n + ".svc.cluster.local"};
}

Result<CertAndKey> MakeCa(std::string_view common_name, WallTime now, std::chrono::seconds validity) {
  if (common_name.empty()) {
    return InvalidArgument("the CA needs a name");
  }
  if (validity < std::chrono::hours(24)) {
    return InvalidArgument("a CA must be valid for at least a day");
  }
  GPUSCHED_ASSIGN_OR_RETURN(key, NewKey());
  GPUSCHED_ASSIGN_OR_RETURN(cert, NewCert(key.get(), common_name, nullptr, now - kBackdate, now + validity));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE,pathlen:0"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) {
    return Failed("cannot sign the CA certificate");
  }
  GPUSCHED_ASSIGN_OR_RETURN(cert_pem, CertPem(cert.get()));
  GPUSCHED_ASSIGN_OR_RETURN(key_pem, KeyPem(key.get()));
  return CertAndKey{.cert_pem = std::move(cert_pem), .key_pem = std::move(key_pem)};
}

Result<CertAndKey> IssueServingCert(const CertAndKey& ca, const ServingCertOptions& options, WallTime now) {
  if (options.names.empty()) {
    return InvalidArgument("a serving certificate needs at least one DNS name or IP address");
  }
  if (options.validity < std::chrono::hours(1)) {
    return InvalidArgument("a serving certificate must be valid for at least an hour");
  }
  std::string san;
  for (const std::string& name : options.names) {
    GPUSCHED_RETURN_IF_ERROR(CheckSubjectAltName(name));
    san += (san.empty() ? "" : ",") + std::string(IsIp(name) ? "IP:" : "DNS:") + name;
  }
  GPUSCHED_ASSIGN_OR_RETURN(ca_cert, ReadCert(ca.cert_pem, "the CA certificate"));
  GPUSCHED_ASSIGN_OR_RETURN(ca_key, ReadKey(ca.key_pem, "the CA key"));
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the CA key does not belong to the CA certificate");
  }
  const WallTime ca_end = FromAsn1(X509_get0_notAfter(ca_cert.get()));
  if (ca_end - now < std::chrono::hours(1)) {
    return InvalidArgument("the CA expires within the hour: rotate it first");
  }
  const WallTime end = std::min(now + options.validity, ca_end);
  GPUSCHED_ASSIGN_OR_RETURN(key, NewKey());
  GPUSCHED_ASSIGN_OR_RETURN(cert, NewCert(key.get(), options.names.front(), ca_cert.get(), now - kBackdate, end));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert.get(), cert.get(), nullptr, nullptr, 0);
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_ext_key_usage, "serverAuth"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  GPUSCHED_RETURN_IF_ERROR(AddExt(cert.get(), &ctx, NID_subject_alt_name, san));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) <= 0) {
    return Failed("cannot sign the serving certificate");
  }
  GPUSCHED_ASSIGN_OR_RETURN(cert_pem, CertPem(cert.get()));
  GPUSCHED_ASSIGN_OR_RETURN(key_pem, KeyPem(key.get()));
  return CertAndKey{.cert_pem = std::move(cert_pem), .key_pem = std::move(key_pem)};
}

Result<CertInfo> ParseCertificate(std::string_view pem) {
  GPUSCHED_ASSIGN_OR_RETURN(cert, ReadCert(pem, "the text"));
  CertInfo info{.not_before = FromAsn1(X509_get0_notBefore(cert.get())),
                .not_after = FromAsn1(X509_get0_notAfter(cert.get()))};
  if (info.not_before == WallTime{} || info.not_after == WallTime{}) {
    return InvalidArgument("the certificate's validity does not parse");
  }
  Constraints bc(
      static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(cert.get(), NID_basic_constraints, nullptr, nullptr)));
  info.is_ca = bc != nullptr && bc->ca != 0;
  char cn[256];
  if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert.get()), NID_commonName, cn, sizeof(cn)) > 0) {
    info.common_name = cn;
  }
  Names names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type == GEN_DNS) {
      const ASN1_STRING* s = n->d.dNSName;
      info.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                  static_cast<size_t>(ASN1_STRING_length(s)));
    } else if (n->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* s = n->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      const int len = ASN1_STRING_length(s);
      if ((len == 4 || len == 16) &&
          inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(s), text, sizeof(text)) != nullptr) {
        info.ip_addresses.emplace_back(text);
      }
    }
  }
  ERR_clear_error();
  return info;
}

Status CheckKeyPair(const CertAndKey& pair) {
  GPUSCHED_ASSIGN_OR_RETURN(cert, ReadCert(pair.cert_pem, "the certificate"));
  GPUSCHED_ASSIGN_OR_RETURN(key, ReadKey(pair.key_pem, "the key"));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the key does not belong to the certificate");
  }
  return Status::Ok();
}

bool IssuedBy(std::string_view cert_pem, std::string_view ca_pem) {
  auto cert = ReadCert(cert_pem, "the certificate");
  auto ca = ReadCert(ca_pem, "the CA");
  const bool issued = cert.ok() && ca.ok() && X509_check_issued(ca->get(), cert->get()) == X509_V_OK &&
                      X509_verify(cert->get(), X509_get0_pubkey(ca->get())) == 1;
  ERR_clear_error();
  return issued;
}

bool NeedsRenewal(const CertInfo& cert, WallTime now) {
  if (now < cert.not_before || now >= cert.not_after) {
    return true;
  }
  return (cert.not_after - now) * 3 < cert.not_after - cert.not_before;
}

}  // namespace gpusched::webhook
