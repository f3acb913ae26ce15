#include "gpusched/testing/test_pki.h"

#include <stdlib.h>  // mkdtemp

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace gpusched::testing {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (const char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Runs a shell command in `dir`, its output going to dir/openssl.log; the log is in the error.
common::Status Run(const std::string& dir, const std::string& command) {
  const std::string log = dir + "/openssl.log";
  const std::string full = "cd " + Quote(dir) + " && (" + command + ") >" + Quote(log) + " 2>&1";
  const int rc = std::system(full.c_str());  // NOLINT(concurrency-mt-unsafe): test set-up
  if (rc != 0) {
    return common::Internal("test PKI: `" + command + "` failed (" + std::to_string(rc) + "): " + ReadAll(log));
  }
  return common::Status::Ok();
}

constexpr char kEcKey[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe)
  std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    return "";
  }
  return tmpl;
}

common::Result<TestPki> MakeTestPki(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return common::Internal("test PKI: cannot create " + dir + ": " + ec.message());
  }
  const std::string ca = std::string("openssl req -x509 ") + kEcKey +
                         " -days 3650 -keyout ca.key -out ca.crt -subj /CN=gpusched-test-ca"
                         " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign";
  const std::string other_ca = std::string("openssl req -x509 ") + kEcKey +
                               " -days 3650 -keyout other-ca.key -out other-ca.crt -subj /CN=unrelated-ca"
                               " -addext basicConstraints=critical,CA:TRUE";
  const std::string server =
      std::string("openssl req ") + kEcKey +
      " -keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth\\n"
      "basicConstraints=CA:FALSE\\nkeyUsage=critical,digitalSignature,keyEncipherment\\n' > server.ext && "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out server.crt "
      "-extfile server.ext";
  const std::string client =
      std::string("openssl req ") + kEcKey +
      " -keyout client.key -out client.csr -subj /O=system:masters/CN=gpusched && "
      "printf 'extendedKeyUsage=clientAuth\\nbasicConstraints=CA:FALSE\\n"
      "keyUsage=critical,digitalSignature,keyEncipherment\\n' > client.ext && "
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out client.crt "
      "-extfile client.ext";
  // The same client identity, signed by the unrelated CA: what an attacker with their own CA presents.
  const std::string other_client =
      std::string("openssl req ") + kEcKey +
      " -keyout other-client.key -out other-client.csr -subj /O=system:masters/CN=gpusched && "
      "openssl x509 -req -in other-client.csr -CA other-ca.crt -CAkey other-ca.key -CAcreateserial -days 3650 "
      "-out other-client.crt -extfile client.ext";
  for (const std::string* command : {&ca, &other_ca, &server, &client, &other_client}) {
    GPUSCHED_RETURN_IF_ERROR(Run(dir, *command));
  }
  TestPki pki;
  pki.dir = dir;
  pki.ca_file = dir + "/ca.crt";
  pki.other_ca_file = dir + "/other-ca.crt";
  pki.server_cert_file = dir + "/server.crt";
  pki.server_key_file = dir + "/server.key";
  pki.client_cert_file = dir + "/client.crt";
  pki.client_key_file = dir + "/client.key";
  pki.other_client_cert_file = dir + "/other-client.crt";
  pki.other_client_key_file = dir + "/other-client.key";
  pki.ca_pem = ReadAll(pki.ca_file);
  pki.client_cert_pem = ReadAll(pki.client_cert_file);
  pki.client_key_pem = ReadAll(pki.client_key_file);
  if (pki.ca_pem.empty() || pki.client_cert_pem.empty() || pki.client_key_pem.empty()) {
    return common::Internal("test PKI: openssl wrote empty files in " + dir);
  }
  return pki;
}

std::string EncodeBase64(const std::string& bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t{static_cast<unsigned char>(bytes[i])} << 16U) |
                       (uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8U) |
                       uint32_t{static_cast<unsigned char>(bytes[i + 2])};
    out += kAlphabet[(v >> 18U) & 63U];
    out += kAlphabet[(v >> 12U) & 63U];
    out += kAlphabet[(v >> 6U) & 63U];
    out += kAlphabet[v & 63U];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t{static_cast<unsigned char>(bytes[i])} << 16U;
    if (rest == 2) {
      v |= uint32_t{static_cast<unsigned char>(bytes[i + 1])} << 8U;
    }
    out += kAlphabet[(v >> 18U) & 63U];
    out += kAlphabet[(v >> 12U) & 63U];
    out += rest == 2 ? kAlphabet[(v >> 6U) & 63U] : '=';
    out += '=';
  }
  return out;
}

std::string WriteKubeconfig(const TestPki& pki, const std::string& server, const std::string& path,
                            const std::string& token) {
  std::ofstream out(path);
  if (!out) {
    return "";
  }
  out << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
      << "clusters:\n- name: test\n  cluster:\n    server: " << server
      << "\n    certificate-authority-data: " << EncodeBase64(pki.ca_pem) << "\n"
      << "users:\n- name: test\n  user:\n    client-certificate-data: " << EncodeBase64(pki.client_cert_pem)
      << "\n    client-key-data: " << EncodeBase64(pki.client_key_pem) << "\n";
  if (!token.empty()) {
    out << "    token: " << token << "\n";
  }
  out << "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: default\n";
  out.close();
  return out ? path : "";
}

}  // namespace gpusched::testing
