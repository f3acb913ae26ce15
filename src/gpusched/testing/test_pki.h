#pragma once

// A throw-away PKI for TLS integration tests, made with the `openssl` CLI: a CA, a server certificate for
// 127.0.0.1 and localhost (subjectAltName), and a client certificate (CN=gpusched, O=system:masters) for mTLS.
// EC P-256 keys, so making one takes a few tens of milliseconds.

#include <string>

#include "gpusched/common/status.h"

namespace gpusched::testing {

struct TestPki {
  std::string dir, ca_pem, ca_file, server_cert_file, server_key_file, client_cert_file, client_key_file,
      client_cert_pem, client_key_pem;
  std::string other_ca_file;  // a second, unrelated CA (for "wrong CA" tests)
  // A client certificate with the same subject as client_cert_file, signed by the unrelated CA.
  std::string other_client_cert_file, other_client_key_file;
};

// Creates `dir` if needed and writes ca.{crt,key}, server.{crt,key}, client.{crt,key} other-ca.crt and
// other-client.{crt,key} there. Errors carry openssl's output.
[[nodiscard]] common::Result<TestPki> MakeTestPki(const std::string& dir);

// Writes a kubeconfig (context "test", namespace "default") that reaches `server` with the PKI's CA and client
// certificate as *-data fields, plus `token` when non-empty. Returns `path`, or "" when the file cannot be written.
std::string WriteKubeconfig(const TestPki& pki, const std::string& server, const std::string& path,
                            const std::string& token = "");

// Standard base64 with padding.
[[nodiscard]] std::string EncodeBase64(const std::string& bytes);

// A fresh directory under $TMPDIR (or /tmp) named prefix-XXXXXX; "" on failure.
std::string MakeTempDir(const std::string& prefix);

}  // namespace gpusched::testing
