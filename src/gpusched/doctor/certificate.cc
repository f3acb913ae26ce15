#include "gpusched/doctor/certificate.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstring>
#include <ctime>
#include <memory>

namespace gpusched::doctor {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct OpenSslFree {
  void operator()(void* p) const { OPENSSL_free(p); }
};

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) {
    return "unknown error";
  }
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

common::Result<std::chrono::system_clock::time_point> TimeOf(const ASN1_TIME* t) {
  struct tm tm {};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) {
    return common::InvalidArgument("a validity time does not parse: " + OpenSslError());
  }
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string Subject(X509* cert) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0) {
    return "?";
  }
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string("(empty subject)");
}

}  // namespace

common::Result<std::vector<CertificateInfo>> ParsePemCertificates(std::string_view pem) {
  std::vector<CertificateInfo> out;
  if (pem.size() > static_cast<size_t>(INT32_MAX)) {
    return common::InvalidArgument("the PEM bundle is too large");
  }
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) {
    return common::Internal("BIO_new_mem_buf: " + OpenSslError());
  }
  ERR_clear_error();
  for (int block = 1;; ++block) {
    char* name_raw = nullptr;
    char* header_raw = nullptr;
    unsigned char* data_raw = nullptr;
    long len = 0;
    if (PEM_read_bio(bio.get(), &name_raw, &header_raw, &data_raw, &len) != 1) {
      const unsigned long e = ERR_peek_last_error();
      if (ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
        ERR_clear_error();
        break;  // the end of the bundle
      }
      return common::InvalidArgument("PEM block " + std::to_string(block) + " does not parse: " + OpenSslError());
    }
    std::unique_ptr<char, OpenSslFree> name(name_raw);
    std::unique_ptr<char, OpenSslFree> header(header_raw);
    std::unique_ptr<unsigned char, OpenSslFree> data(data_raw);
    if (std::strcmp(name.get(), "CERTIFICATE") != 0) {
      return common::InvalidArgument("PEM block " + std::to_string(block) + " is a " + name.get() +
                                     ", not a CERTIFICATE");
    }
    const unsigned char* p = data.get();
    std::unique_ptr<X509, X509Free> cert(d2i_X509(nullptr, &p, len));
    if (!cert) {
      return common::InvalidArgument("certificate " + std::to_string(block) + " does not parse: " + OpenSslError());
    }
    CertificateInfo info{.subject = Subject(cert.get())};
    GPUSCHED_ASSIGN_OR_RETURN(nb, TimeOf(X509_get0_notBefore(cert.get())));
    GPUSCHED_ASSIGN_OR_RETURN(na, TimeOf(X509_get0_notAfter(cert.get())));
    info.not_before = nb;
    info.not_after = na;
    out.push_back(std::move(info));
  }
  if (out.empty()) {
    return common::InvalidArgument("no PEM certificate in it");
  }
  return out;
}

std::string FormatUtc(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  struct tm tm {};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace gpusched::doctor
