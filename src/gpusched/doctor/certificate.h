#pragma once

// The X.509 certificates of a PEM bundle (a webhook's caBundle), read with OpenSSL: subject and validity window.
// Pure: no clock; the caller compares the window with its own "now".

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::doctor {

struct CertificateInfo {
  std::string subject;  // one line, RFC 2253 ("CN=gpusched-webhook-ca,O=gpusched")
  std::chrono::system_clock::time_point not_before, not_after;
};

// Every CERTIFICATE block of `pem`, in order. InvalidArgument when there is none or one does not parse (with
// OpenSSL's reason); other PEM blocks (keys) are an error too, since a caBundle holds certificates only.
[[nodiscard]] common::Result<std::vector<CertificateInfo>> ParsePemCertificates(std::string_view pem);

// "2026-03-01T12:00:00Z".
[[nodiscard]] std::string FormatUtc(std::chrono::system_clock::time_point t);

}  // namespace gpusched::doctor
