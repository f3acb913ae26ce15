// CertKeeper against FakeApiServer over mTLS on loopback: the CA Secret (create, the create race, rotation, bad
// contents), the caBundle patches of the two webhook configurations, and the serving pair on disk.

#include "gpusched/webhook/cert_keeper.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "gpusched/adapters/k8s/api_client.h"
#include "gpusched/kube/base64.h"
#include "gpusched/testing/fake_apiserver.h"
#include "gpusched/testing/test_pki.h"

namespace gpusched::webhook {
namespace {

using adapters::k8s::ApiClient;
using adapters::k8s::ClientConfig;
using nlohmann::json;
using std::chrono::hours;
using testing::FakeApiServer;
using testing::FakeApiServerOptions;

constexpr auto kDay = hours(24);
constexpr const char* kNs = "kube-system";
constexpr const char* kSecret = "gpusched-webhook-ca";
constexpr const char* kMutating = "mutatingwebhookconfigurations";
constexpr const char* kValidating = "validatingwebhookconfigurations";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

json Configuration(const std::string& name, const std::vector<std::string>& webhooks) {
  json list = json::array();
  for (const std::string& w : webhooks) {
    list.push_back(
        {{"name", w},
         {"admissionReviewVersions", {"v1"}},
         {"sideEffects", "None"},
         {"clientConfig", {{"service", {{"name", "gpusched-webhook"}, {"namespace", kNs}, {"path", "/validate"}}}}}});
  }
  return {{"metadata", {{"name", name}}}, {"webhooks", list}};
}

class CertKeeperTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::MakeTempDir("gpusched-cert-keeper-test"));
    ASSERT_FALSE(dir_->empty());
    auto pki = testing::MakeTestPki(*dir_ + "/pki");
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new testing::TestPki(*pki);
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr) {
      std::filesystem::remove_all(*dir_);
    }
    delete pki_;
    delete dir_;
    pki_ = nullptr;
    dir_ = nullptr;
  }

  void SetUp() override {
    server_ = std::make_unique<FakeApiServer>(FakeApiServerOptions{
        .cert_file = pki_->server_cert_file, .key_file = pki_->server_key_file, .client_ca_file = pki_->ca_file});
    ASSERT_TRUE(server_->Start().ok());
    auto client = ApiClient::Create(ClientConfig{.server = server_->url(),
                                                 .ca_pem = pki_->ca_pem,
                                                 .client_cert_pem = pki_->client_cert_pem,
                                                 .client_key_pem = pki_->client_key_pem,
                                                 .namespace_ = "default"});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(client).value();
    out_ = *dir_ + "/" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(out_);
    server_->UpsertWebhookConfiguration(kMutating, Configuration("gpusched-webhook", {"complete.gpu.gpusched.io"}));
    server_->UpsertWebhookConfiguration(
        kValidating, Configuration("gpusched-webhook", {"requests.gpu.gpusched.io", "allocation.gpu.gpusched.io"}));
    // Someone else's: never touched.
    server_->UpsertWebhookConfiguration(kValidating, Configuration("other", {"other.example.com"}));
  }

  void TearDown() override {
    client_.reset();
    server_.reset();
  }

  CertKeeperOptions Options(const std::string& replica = "a") const {
    return CertKeeperOptions{.namespace_ = kNs,
                             .secret_name = kSecret,
                             .service = "gpusched-webhook",
                             .extra_names = {"127.0.0.1"},
                             .mutating_configuration = "gpusched-webhook",
                             .validating_configuration = "gpusched-webhook",
                             .cert_file = out_ + "/" + replica + ".crt",
                             .key_file = out_ + "/" + replica + ".key",
                             .ca_validity = kDay * 3650,
                             .cert_validity = kDay * 30};
  }

  std::unique_ptr<CertKeeper> Keeper(const std::string& replica = "a") {
    return std::make_unique<CertKeeper>(*client_, Options(replica), [this] { return now_.load(); });
  }

  // The caBundle of every webhook of a configuration, decoded ("" where unset).
  std::vector<std::string> Bundles(const char* resource, const std::string& name) const {
    std::vector<std::string> out;
    auto config = server_->GetWebhookConfiguration(resource, name);
    EXPECT_TRUE(config.has_value());
    for (const json& w : (*config)["webhooks"]) {
      const std::string b64 = w["clientConfig"].value("caBundle", "");
      out.push_back(b64.empty() ? "" : kube::DecodeBase64(b64).value());
    }
    return out;
  }

  std::string SecretField(const std::string& key) const {
    auto secret = server_->GetSecret(kNs, kSecret);
    if (!secret.has_value() || !(*secret)["data"].contains(key)) {
      return "";
    }
    return kube::DecodeBase64((*secret)["data"][key].get<std::string>()).value();
  }

  int Writes() const {
    int n = 0;
    for (const auto& [key, count] : server_->RequestCounts()) {
      n += key.first == "GET" ? 0 : count;
    }
    return n;
  }

  static std::string* dir_;
  static testing::TestPki* pki_;
  std::unique_ptr<FakeApiServer> server_;
  std::unique_ptr<ApiClient> client_;
  std::string out_;
  // 2026-01-01T00:00:00Z, moved by hand.
  std::atomic<WallTime> now_{std::chrono::system_clock::from_time_t(1767225600)};
};

std::string* CertKeeperTest::dir_ = nullptr;
testing::TestPki* CertKeeperTest::pki_ = nullptr;

TEST_F(CertKeeperTest, FirstSyncMakesTheCaFillsCaBundleAndWritesTheServingPair) {
  auto keeper = Keeper();
  auto report = keeper->Sync();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ca_created);
  EXPECT_FALSE(report->ca_adopted);
  EXPECT_TRUE(report->cert_issued);
  EXPECT_EQ(report->patched,
            (std::vector<std::string>{"MutatingWebhookConfiguration gpusched-webhook (1 webhook)",
                                      "ValidatingWebhookConfiguration gpusched-webhook (2 webhooks)"}));

  const std::string ca = SecretField("ca.crt");
  ASSERT_FALSE(ca.empty());
  EXPECT_TRUE(CheckKeyPair({.cert_pem = ca, .key_pem = SecretField("ca.key")}).ok());
  EXPECT_EQ(SecretField("previous-ca.crt"), "");
  EXPECT_EQ(Bundles(kMutating, "gpusched-webhook"), std::vector<std::string>{ca});
  EXPECT_EQ(Bundles(kValidating, "gpusched-webhook"), (std::vector<std::string>{ca, ca}));
  EXPECT_EQ(Bundles(kValidating, "other"), std::vector<std::string>{""});  // only the named configurations
  EXPECT_EQ(keeper->ca_bundle(), ca);

  // The pair on disk: the key private to the process, the certificate from the CA for the Service's names.
  const CertAndKey pair{.cert_pem = ReadAll(Options().cert_file), .key_pem = ReadAll(Options().key_file)};
  EXPECT_TRUE(CheckKeyPair(pair).ok());
  EXPECT_EQ(pair.cert_pem, keeper->cert_pem());
  EXPECT_TRUE(IssuedBy(pair.cert_pem, ca));
  auto info = ParseCertificate(pair.cert_pem);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->dns_names, ServiceDnsNames("gpusched-webhook", kNs));
  EXPECT_EQ(info->ip_addresses, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(info->not_after, now_.load() + kDay * 30);
  struct stat st {};
  ASSERT_EQ(::stat(Options().key_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  EXPECT_FALSE(std::filesystem::exists(Options().key_file + ".tmp"));

  // Again: nothing to do, nothing written.
  const int writes = Writes();
  auto again = keeper->Sync();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->ca_created || again->ca_rotated || again->cert_issued);
  EXPECT_TRUE(again->patched.empty());
  EXPECT_EQ(Writes(), writes);
  EXPECT_EQ(ReadAll(Options().cert_file), pair.cert_pem);
}

TEST_F(CertKeeperTest, ASecondReplicaUsesTheSameCa) {
  ASSERT_TRUE(Keeper("a")->Sync().ok());
  const std::string ca = SecretField("ca.crt");
  const int writes = Writes();
  auto b = Keeper("b");
  auto report = b->Sync();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->ca_created);
  EXPECT_TRUE(report->patched.empty());  // caBundle already right
  EXPECT_EQ(Writes(), writes);
  EXPECT_EQ(SecretField("ca.crt"), ca);
  EXPECT_TRUE(IssuedBy(ReadAll(Options("b").cert_file), ca));
  EXPECT_NE(ReadAll(Options("b").cert_file), ReadAll(Options("a").cert_file));  // its own key and certificate
}

TEST_F(CertKeeperTest, LosingTheCreateRaceAdoptsTheWinnersCa) {
  ASSERT_TRUE(Keeper("a")->Sync().ok());  // replica a created the Secret...
  const std::string ca = SecretField("ca.crt");
  // ...after replica b's GET had found nothing: b's create gets the real 409 AlreadyExists.
  server_->FailNext("GET", "get-secret", 404, "secrets \"gpusched-webhook-ca\" not found");
  auto report = Keeper("b")->Sync();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(server_->RequestCount("POST", "create-secret"), 2);
  EXPECT_FALSE(report->ca_created);
  EXPECT_TRUE(report->ca_adopted);
  EXPECT_EQ(SecretField("ca.crt"), ca);
  EXPECT_TRUE(IssuedBy(ReadAll(Options("b").cert_file), ca));
}

TEST_F(CertKeeperTest, TheServingCertificateIsReissuedWithAThirdOfItsLifetimeLeft) {
  auto keeper = Keeper();
  ASSERT_TRUE(keeper->Sync().ok());
  const std::string first = keeper->cert_pem();
  const int writes = Writes();
  // 30 days from now - 1 h: due after 20 days - 1 h. At 19 days nothing happens; at 21 a new one is written.
  now_ = now_.load() + kDay * 19;
  ASSERT_TRUE(keeper->Sync().ok());
  EXPECT_EQ(keeper->cert_pem(), first);
  now_ = now_.load() + kDay * 2;
  auto report = keeper->Sync();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->cert_issued);
  EXPECT_NE(keeper->cert_pem(), first);
  EXPECT_EQ(ReadAll(Options().cert_file), keeper->cert_pem());
  EXPECT_TRUE(IssuedBy(keeper->cert_pem(), SecretField("ca.crt")));
  EXPECT_EQ(Writes(), writes);  // the same CA: no API write
}

TEST_F(CertKeeperTest, TheCaRotatesBeforeItExpiresAndBothAreTrustedMeanwhile) {
  auto a = Keeper("a");
  auto b = Keeper("b");
  ASSERT_TRUE(a->Sync().ok());
  ASSERT_TRUE(b->Sync().ok());
  const std::string old_ca = SecretField("ca.crt");
  // 10 years: due with under 3 1/3 years left, i.e. after about 6 2/3 years.
  now_ = now_.load() + kDay * 365 * 7;
  auto report = a->Sync();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ca_rotated);
  EXPECT_TRUE(report->cert_issued);
  const std::string new_ca = SecretField("ca.crt");
  EXPECT_NE(new_ca, old_ca);
  EXPECT_EQ(SecretField("previous-ca.crt"), old_ca);
  EXPECT_EQ(Bundles(kMutating, "gpusched-webhook"), std::vector<std::string>{new_ca + old_ca});
  EXPECT_EQ(Bundles(kValidating, "gpusched-webhook"), (std::vector<std::string>{new_ca + old_ca, new_ca + old_ca}));
  EXPECT_TRUE(IssuedBy(a->cert_pem(), new_ca));

  // Replica b takes the new CA at its next sync: no second rotation, its certificate re-issued from the new CA.
  auto b_report = b->Sync();
  ASSERT_TRUE(b_report.ok()) << b_report.status();
  EXPECT_FALSE(b_report->ca_rotated);
  EXPECT_TRUE(b_report->patched.empty());
  EXPECT_TRUE(b_report->cert_issued);
  EXPECT_TRUE(IssuedBy(b->cert_pem(), new_ca));
  EXPECT_EQ(SecretField("ca.crt"), new_ca);

  // Once the old CA has expired it leaves caBundle.
  now_ = now_.load() + kDay * 365 * 4;
  auto later = a->Sync();
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(Bundles(kMutating, "gpusched-webhook"), std::vector<std::string>{new_ca});
}

TEST_F(CertKeeperTest, ARotationThatLosesTheRaceChangesNothingAndIsRetried) {
  auto a = Keeper("a");
  ASSERT_TRUE(a->Sync().ok());
  const auto before = server_->GetSecret(kNs, kSecret);
  const std::string bundle = Bundles(kMutating, "gpusched-webhook")[0];
  now_ = now_.load() + kDay * 365 * 7;
  server_->FailNext("PUT", "update-secret", 409, "the object has been modified");
  auto report = a->Sync();
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), common::StatusCode::kAborted);
  EXPECT_NE(report.status().message().find("Secret kube-system/gpusched-webhook-ca: changed while"), std::string::npos)
      << report.status();
  EXPECT_EQ(server_->GetSecret(kNs, kSecret), before);
  EXPECT_EQ(Bundles(kMutating, "gpusched-webhook")[0], bundle);
  ASSERT_TRUE(a->Sync().ok());  // the next one rotates
  EXPECT_NE(SecretField("ca.crt"), "");
  EXPECT_NE(server_->GetSecret(kNs, kSecret), before);
}

TEST_F(CertKeeperTest, BadPemInTheSecretIsNamedAndChangesNothing) {
  server_->UpsertSecret(
      {{"metadata", {{"name", kSecret}, {"namespace", kNs}}},
       {"data", {{"ca.crt", kube::EncodeBase64("not a certificate")}, {"ca.key", kube::EncodeBase64("not a key")}}}});
  const auto before = server_->GetSecret(kNs, kSecret);
  auto report = Keeper()->Sync();
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_NE(report.status().message().find("Secret kube-system/gpusched-webhook-ca: data.ca.crt and data.ca.key: "
                                           "the certificate holds no PEM certificate"),
            std::string::npos)
      << report.status();
  EXPECT_EQ(server_->GetSecret(kNs, kSecret), before);
  EXPECT_EQ(Writes(), 0);
  EXPECT_EQ(Bundles(kMutating, "gpusched-webhook"), std::vector<std::string>{""});
  EXPECT_FALSE(std::filesystem::exists(Options().cert_file));
  EXPECT_FALSE(std::filesystem::exists(Options().key_file));
}

TEST_F(CertKeeperTest, AMissingConfigurationIsNamedAndNoCertificateIsServed) {
  CertKeeperOptions options = Options();
  options.validating_configuration = "absent";
  CertKeeper keeper(*client_, options, [this] { return now_.load(); });
  auto report = keeper.Sync();
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), common::StatusCode::kNotFound);
  EXPECT_NE(report.status().message().find("ValidatingWebhookConfiguration absent: "), std::string::npos)
      << report.status();
  EXPECT_FALSE(std::filesystem::exists(options.cert_file));
}

TEST_F(CertKeeperTest, TheFakeRefusesStaleUpdatesAndDuplicateCreatesLikeTheApiServer) {
  ASSERT_TRUE(Keeper()->Sync().ok());
  json secret = *server_->GetSecret(kNs, kSecret);
  const std::string path = std::string("/api/v1/namespaces/") + kNs + "/secrets";
  auto dup = client_->Request("POST", path, secret.dump());
  EXPECT_EQ(dup.status().code(), common::StatusCode::kAlreadyExists) << dup.status();
  ASSERT_TRUE(client_->Request("PUT", path + "/" + kSecret, secret.dump()).ok());
  auto stale = client_->Request("PUT", path + "/" + kSecret, secret.dump());  // the rv it carries is old now
  EXPECT_EQ(stale.status().code(), common::StatusCode::kAborted) << stale.status();
  EXPECT_EQ(client_->Get(path + "/absent").status().code(), common::StatusCode::kNotFound);
  // A JSON patch whose test fails is 422 and changes nothing.
  const std::string config = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpusched-webhook";
  const auto before = server_->GetWebhookConfiguration(kMutating, "gpusched-webhook");
  auto failed = client_->Request(
      "PATCH", config,
      R"([{"op":"test","path":"/webhooks/0/name","value":"x"},{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"eA=="}])",
      "application/json-patch+json");
  EXPECT_EQ(failed.status().code(), common::StatusCode::kInvalidArgument) << failed.status();
  EXPECT_EQ(server_->GetWebhookConfiguration(kMutating, "gpusched-webhook"), before);
}

}  // namespace
}  // namespace gpusched::webhook
