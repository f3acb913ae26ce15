#include "gpusched/webhook/certificates.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "gpusched/kube/base64.h"
#include "gpusched/webhook/cert_keeper.h"

namespace gpusched::webhook {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

constexpr auto kDay = hours(24);
// 2026-01-01T00:00:00Z: a fixed "now"; nothing here reads the real clock.
const WallTime kNow = std::chrono::system_clock::from_time_t(1767225600);

X509* ReadX509(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

// OpenSSL's own verification of `leaf` against the trusted `ca_pems`, at `at`, for TLS server use and, when set, for
// `host` (a DNS name) or `ip`: what a TLS client such as kube-apiserver checks (X509_V_OK = 0, else the reason).
int Verify(const std::string& leaf_pem, const std::vector<std::string>& ca_pems, WallTime at,
           const std::string& host = "", const std::string& ip = "") {
  X509_STORE* store = X509_STORE_new();
  for (const std::string& pem : ca_pems) {
    X509* ca = ReadX509(pem);
    EXPECT_NE(ca, nullptr);
    X509_STORE_add_cert(store, ca);
    X509_free(ca);
  }
  X509* leaf = ReadX509(leaf_pem);
  EXPECT_NE(leaf, nullptr);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_time(param, std::chrono::system_clock::to_time_t(at));
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  if (!host.empty()) {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  }
  if (!ip.empty()) {
    X509_VERIFY_PARAM_set1_ip_asc(param, ip.c_str());
  }
  const int ok = X509_verify_cert(ctx);
  const int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_free(leaf);
  X509_STORE_free(store);
  return err;
}

CertAndKey Ca(WallTime now = kNow, seconds validity = kDay * 3650) {
  auto ca = MakeCa("test-ca", now, validity);
  EXPECT_TRUE(ca.ok()) << ca.status().message();
  return ca.ok() ? *ca : CertAndKey{};
}

TEST(ServingCertTest, TheCaIsACaValidForItsLifetime) {
  const CertAndKey ca = Ca();
  EXPECT_TRUE(CheckKeyPair(ca).ok());
  auto info = ParseCertificate(ca.cert_pem);
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_TRUE(info->is_ca);
  EXPECT_EQ(info->common_name, "test-ca");
  EXPECT_EQ(info->not_before, kNow - hours(1));  // an hour back for clocks a little behind
  EXPECT_EQ(info->not_after, kNow + kDay * 3650);
  EXPECT_NE(ca.key_pem.find("-----BEGIN PRIVATE KEY-----"), std::string::npos);
}

TEST(ServingCertTest, ServingCertCarriesTheServiceNamesAndVerifiesAgainstItsCa) {
  const CertAndKey ca = Ca();
  std::vector<std::string> names = ServiceDnsNames("gpusched-webhook", "kube-system");
  ASSERT_EQ(names, (std::vector<std::string>{"gpusched-webhook", "gpusched-webhook.kube-system",
                                             "gpusched-webhook.kube-system.svc",
                                             "gpusched-webhook.kube-system.svc.cluster.local"}));
  names.push_back("127.0.0.1");
  auto leaf = IssueServingCert(ca, {.names = names, .validity = kDay * 365}, kNow);
  ASSERT_TRUE(leaf.ok()) << leaf.status().message();
  EXPECT_TRUE(CheckKeyPair(*leaf).ok());
  auto info = ParseCertificate(leaf->cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->is_ca);
  EXPECT_EQ(info->common_name, "gpusched-webhook");
  EXPECT_EQ(info->dns_names, ServiceDnsNames("gpusched-webhook", "kube-system"));
  EXPECT_EQ(info->ip_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(info->not_after, kNow + kDay * 365);
  EXPECT_TRUE(IssuedBy(leaf->cert_pem, ca.cert_pem));

  // What kube-apiserver checks: the chain, server use, the name it dials.
  EXPECT_EQ(Verify(leaf->cert_pem, {ca.cert_pem}, kNow, "gpusched-webhook.kube-system.svc"), X509_V_OK);
  EXPECT_EQ(Verify(leaf->cert_pem, {ca.cert_pem}, kNow, "", "127.0.0.1"), X509_V_OK);
  EXPECT_EQ(Verify(leaf->cert_pem, {ca.cert_pem}, kNow, "other.kube-system.svc"), X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(Verify(leaf->cert_pem, {ca.cert_pem}, kNow, "", "10.0.0.1"), X509_V_ERR_IP_ADDRESS_MISMATCH);
  // Not from another CA, and not after it expires.
  const CertAndKey other = Ca();
  EXPECT_NE(Verify(leaf->cert_pem, {other.cert_pem}, kNow), X509_V_OK);
  EXPECT_FALSE(IssuedBy(leaf->cert_pem, other.cert_pem));
  EXPECT_EQ(Verify(leaf->cert_pem, {ca.cert_pem}, kNow + kDay * 366), X509_V_ERR_CERT_HAS_EXPIRED);
  // A bundle of the old and the new CA trusts certificates of both (the rotation overlap).
  EXPECT_EQ(Verify(leaf->cert_pem, {other.cert_pem, ca.cert_pem}, kNow), X509_V_OK);
}

TEST(ServingCertTest, ServingCertNeverOutlivesItsCa) {
  const CertAndKey ca = Ca(kNow, kDay * 100);
  auto leaf = IssueServingCert(ca, {.names = {"a.b.svc"}, .validity = kDay * 365}, kNow + kDay * 10);
  ASSERT_TRUE(leaf.ok()) << leaf.status().message();
  EXPECT_EQ(ParseCertificate(leaf->cert_pem)->not_after, kNow + kDay * 100);  // capped at the CA's end
  // A CA with less than an hour left issues nothing.
  auto late = IssueServingCert(ca, {.names = {"a.b.svc"}}, kNow + kDay * 100 - std::chrono::minutes(30));
  EXPECT_EQ(late.status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_NE(late.status().message().find("rotate it first"), std::string::npos) << late.status().message();
}

TEST(ServingCertTest, BadInputIsNamed) {
  const CertAndKey ca = Ca();
  struct Case {
    std::string name;
    CertAndKey ca;
    std::vector<std::string> names;
    std::string want;
  };
  const CertAndKey other = Ca();
  const std::vector<Case> cases = {
      {.name = "no names", .ca = ca, .names = {}, .want = "at least one DNS name or IP address"},
      {.name = "upper case", .ca = ca, .names = {"Webhook.svc"}, .want = "'Webhook.svc' holds 'W'"},
      {.name = "empty label", .ca = ca, .names = {"a..svc"}, .want = "'a..svc' is neither an IP address"},
      {.name = "comma (would inject a SAN)", .ca = ca, .names = {"a.svc,IP:1.2.3.4"}, .want = "holds ','"},
      {.name = "CA not PEM",
       .ca = {.cert_pem = "junk", .key_pem = ca.key_pem},
       .names = {"a"},
       .want = "the CA certificate holds no PEM certificate"},
      {.name = "key of another CA",
       .ca = {.cert_pem = ca.cert_pem, .key_pem = other.key_pem},
       .names = {"a"},
       .want = "the CA key does not belong to the CA certificate"},
  };
  for (const Case& c : cases) {
    auto leaf = IssueServingCert(c.ca, {.names = c.names}, kNow);
    ASSERT_FALSE(leaf.ok()) << c.name;
    EXPECT_EQ(leaf.status().code(), common::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(leaf.status().message().find(c.want), std::string::npos) << c.name << ": " << leaf.status().message();
  }
  EXPECT_TRUE(CheckSubjectAltName("*.gpusched-webhook.kube-system.svc").ok());
  EXPECT_TRUE(CheckSubjectAltName("::1").ok());
  EXPECT_FALSE(MakeCa("", kNow, kDay * 10).ok());
  EXPECT_FALSE(MakeCa("x", kNow, hours(2)).ok());
  EXPECT_FALSE(ParseCertificate("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").ok());
}

TEST(ServingCertTest, RenewalIsDueWithAThirdOfTheLifetimeLeft) {
  // A 90-day certificate from kNow - 1h: due once less than 30 days are left, i.e. after kNow + 60 days - 1h.
  const CertInfo cert{.not_before = kNow - hours(1), .not_after = kNow - hours(1) + kDay * 90};
  struct Case {
    std::string name;
    WallTime now;
    bool want;
  };
  const std::vector<Case> cases = {
      {.name = "fresh", .now = kNow, .want = false},
      {.name = "half way", .now = kNow + kDay * 45, .want = false},
      {.name = "just over a third left", .now = kNow - hours(1) + kDay * 60 - seconds(1), .want = false},
      {.name = "exactly a third left", .now = kNow - hours(1) + kDay * 60, .want = false},
      {.name = "under a third left", .now = kNow - hours(1) + kDay * 60 + seconds(1), .want = true},
      {.name = "expired", .now = kNow + kDay * 91, .want = true},
      {.name = "not yet valid (clock went back)", .now = kNow - hours(2), .want = true},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NeedsRenewal(cert, c.now), c.want) << c.name;
  }
}

nlohmann::json SecretWith(const std::map<std::string, std::string>& data) {
  nlohmann::json d = nlohmann::json::object();
  for (const auto& [k, v] : data) {
    d[k] = kube::EncodeBase64(v);
  }
  return {{"metadata", {{"name", "ca"}, {"namespace", "ns"}, {"resourceVersion", "7"}}}, {"data", d}};
}

TEST(CaSecretTest, RoundTripsAndBundlesThePreviousCaUntilItExpires) {
  const CertAndKey old_ca = Ca(kNow - kDay * 100, kDay * 200);  // ends at kNow + 100 days
  const CaSecret secret{.ca = Ca(), .previous_cert_pem = old_ca.cert_pem, .resource_version = "7"};
  auto decoded = DecodeCaSecret(EncodeCaSecret(secret, "ns", "ca"), "Secret ns/ca");
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->ca.cert_pem, secret.ca.cert_pem);
  EXPECT_EQ(decoded->ca.key_pem, secret.ca.key_pem);
  EXPECT_EQ(decoded->previous_cert_pem, old_ca.cert_pem);
  EXPECT_EQ(decoded->resource_version, "7");
  EXPECT_EQ(CaBundle(*decoded, kNow), secret.ca.cert_pem + old_ca.cert_pem);  // both during the overlap
  EXPECT_EQ(CaBundle(*decoded, kNow + kDay * 101), secret.ca.cert_pem);       // the old one gone once expired
}

TEST(CaSecretTest, BadContentsNameTheSecretAndTheKey) {
  const CertAndKey ca = Ca();
  auto leaf = IssueServingCert(ca, {.names = {"x"}}, kNow);
  ASSERT_TRUE(leaf.ok());
  struct Case {
    std::string name;
    nlohmann::json secret;
    std::string want;
  };
  nlohmann::json not_base64 = SecretWith({{"ca.crt", ca.cert_pem}, {"ca.key", ca.key_pem}});
  not_base64["data"]["ca.key"] = "!!!";
  const std::vector<Case> cases = {
      {.name = "no data", .secret = {{"metadata", {{"name", "ca"}}}}, .want = "Secret ns/ca: data has no ca.crt"},
      {.name = "no key", .secret = SecretWith({{"ca.crt", ca.cert_pem}}), .want = "Secret ns/ca: data has no ca.key"},
      {.name = "key not base64", .secret = not_base64, .want = "Secret ns/ca: data.ca.key is not base64"},
      {.name = "bad PEM",
       .secret = SecretWith({{"ca.crt", "hello"}, {"ca.key", ca.key_pem}}),
       .want = "Secret ns/ca: data.ca.crt and data.ca.key: the certificate holds no PEM certificate (delete the "
               "Secret to have a new CA made)"},
      {.name = "truncated PEM",
       .secret = SecretWith({{"ca.crt", ca.cert_pem.substr(0, 100)}, {"ca.key", ca.key_pem}}),
       .want = "Secret ns/ca: data.ca.crt and data.ca.key: the certificate is not a valid PEM certificate"},
      {.name = "key of another certificate",
       .secret = SecretWith({{"ca.crt", ca.cert_pem}, {"ca.key", leaf->key_pem}}),
       .want = "the key does not belong to the certificate"},
      {.name = "a serving certificate, not a CA",
       .secret = SecretWith({{"ca.crt", leaf->cert_pem}, {"ca.key", leaf->key_pem}}),
       .want = "Secret ns/ca: data.ca.crt is not a CA certificate"},
      {.name = "bad previous CA",
       .secret = SecretWith({{"ca.crt", ca.cert_pem}, {"ca.key", ca.key_pem}, {"previous-ca.crt", "x"}}),
       .want = "Secret ns/ca: data.previous-ca.crt:"},
  };
  for (const Case& c : cases) {
    auto decoded = DecodeCaSecret(c.secret, "Secret ns/ca");
    ASSERT_FALSE(decoded.ok()) << c.name;
    EXPECT_EQ(decoded.status().code(), common::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(decoded.status().message().find(c.want), std::string::npos)
        << c.name << ": " << decoded.status().message();
  }
}

TEST(CaSecretTest, OptionsAreChecked) {
  const CertKeeperOptions good{.namespace_ = "kube-system",
                               .secret_name = "gpusched-webhook-ca",
                               .service = "gpusched-webhook",
                               .extra_names = {"127.0.0.1"},
                               .mutating_configuration = "gpusched-webhook",
                               .validating_configuration = "gpusched-webhook",
                               .cert_file = "/tmp/x/tls.crt",
                               .key_file = "/tmp/x/tls.key"};
  EXPECT_TRUE(CheckCertKeeperOptions(good).ok());
  struct Case {
    std::string name;
    CertKeeperOptions options;
    std::string want;
  };
  std::vector<Case> cases;
  auto with = [&](std::string name, auto change, std::string want) {
    CertKeeperOptions o = good;
    change(o);
    cases.push_back({.name = std::move(name), .options = o, .want = std::move(want)});
  };
  with(
      "no namespace", [](auto& o) { o.namespace_.clear(); }, "give --namespace");
  with(
      "bad Secret name", [](auto& o) { o.secret_name = "Bad_Name"; },
      "--self-signed-ca-secret 'Bad_Name' is not a Kubernetes object name");
  with(
      "no names", [](auto& o) { o.service.clear(), o.extra_names.clear(); }, "give --service");
  with(
      "bad extra SAN", [](auto& o) { o.extra_names = {"a b"}; }, "--extra-san: certificate name 'a b'");
  with(
      "no configuration", [](auto& o) { o.mutating_configuration.clear(), o.validating_configuration.clear(); },
      "give --mutating-webhook-configuration and/or --validating-webhook-configuration");
  with(
      "service with a dot", [](auto& o) { o.service = "a.b"; }, "single DNS labels");
  for (const Case& c : cases) {
    const common::Status s = CheckCertKeeperOptions(c.options);
    EXPECT_EQ(s.code(), common::StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(s.message().find(c.want), std::string::npos) << c.name << ": " << s.message();
  }
}

}  // namespace
}  // namespace gpusched::webhook
