#include "gpusched/doctor/certificate.h"

#include <gtest/gtest.h>

#include "gpusched/doctor/certificate_test_util.h"

namespace gpusched::doctor {
namespace {

using std::chrono::hours;
using std::chrono::system_clock;

TEST(CertificateTest, ReadsSubjectAndValidityOfEveryCertificate) {
  // Whole seconds: X.509 times have no fractions.
  const auto t0 = system_clock::from_time_t(1'700'000'000);
  const std::string bundle = testutil::SelfSignedPem("ca-one", t0, t0 + hours(24)) +
                             testutil::SelfSignedPem("ca-two", t0 - hours(1), t0 + hours(48));
  auto certs = ParsePemCertificates(bundle);
  ASSERT_TRUE(certs.ok()) << certs.status();
  ASSERT_EQ(certs->size(), 2u);
  EXPECT_EQ((*certs)[0].subject, "CN=ca-one");
  EXPECT_EQ((*certs)[0].not_before, t0);
  EXPECT_EQ((*certs)[0].not_after, t0 + hours(24));
  EXPECT_EQ((*certs)[1].subject, "CN=ca-two");
  EXPECT_EQ((*certs)[1].not_after, t0 + hours(48));
}

TEST(CertificateTest, BadBundlesAreNamed) {
  struct Case {
    const char* name;
    std::string pem;
    std::string want;
  } cases[] = {
      {"empty", "", "no PEM certificate in it"},
      {"not PEM", "hello", "no PEM certificate in it"},
      {"a key, not a certificate", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
       "PEM block 1 is a PRIVATE KEY, not a CERTIFICATE"},
      {"garbage inside", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
       "certificate 1 does not parse"},
  };
  for (const Case& c : cases) {
    auto certs = ParsePemCertificates(c.pem);
    ASSERT_FALSE(certs.ok()) << c.name;
    EXPECT_NE(certs.status().message().find(c.want), std::string::npos) << c.name << ": " << certs.status();
  }
}

TEST(CertificateTest, FormatsUtc) { EXPECT_EQ(FormatUtc(system_clock::from_time_t(0)), "1970-01-01T00:00:00Z"); }

}  // namespace
}  // namespace gpusched::doctor
