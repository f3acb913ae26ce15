#include "gpusched/adapters/k8s/exec_credential.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace gpusched::adapters::k8s {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr char kV1[] = "client.authentication.k8s.io/v1";

TEST(ExecCredentialTest, ParsesATokenAndItsExpiry) {
  auto c = ParseExecCredential(R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                                   "status": {"token": "k8s-aws-v1.abc", "expirationTimestamp": "2026-11-26T13:14:15Z"}})",
                               kV1, "plugin");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "k8s-aws-v1.abc");
  ASSERT_TRUE(c->expires.has_value());
  EXPECT_EQ(std::chrono::system_clock::to_time_t(*c->expires), 1795698855);
  auto forever = ParseExecCredential(
      R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t"}})", kV1,
      "plugin");
  ASSERT_TRUE(forever.ok()) << forever.status();
  EXPECT_FALSE(forever->expires.has_value());
}

TEST(ExecCredentialTest, BadOutputIsAClearError) {
  struct Case {
    std::string text;
    std::string want;
  };
  const Case cases[] = {
      {"not json", "did not print an ExecCredential (not a JSON object)"},
      {R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "Pod"})", "printed kind 'Pod'"},
      {R"({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential", "status": {"token": "t"}})",
       "printed apiVersion 'client.authentication.k8s.io/v1beta1', but client.authentication.k8s.io/v1 was asked"},
      {R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {}})",
       "without status.token"},
      {R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
           "status": {"clientCertificateData": "x", "clientKeyData": "y"}})",
       "returned a client certificate"},
      {R"({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
           "status": {"token": "t", "expirationTimestamp": "tomorrow"}})",
       "status.expirationTimestamp: not an RFC 3339 time"},
  };
  for (const Case& c : cases) {
    auto r = ParseExecCredential(c.text, kV1, "plugin x");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.want)) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr("plugin x")) << c.text;
  }
}

TEST(ExecCredentialTest, Rfc3339) {
  auto t = [](const char* s) { return std::chrono::system_clock::to_time_t(*ParseRfc3339(s)); };
  EXPECT_EQ(t("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(t("1970-01-01T01:00:00+01:00"), 0);
  EXPECT_EQ(t("1969-12-31T23:30:00-00:30"), 0);
  EXPECT_EQ(t("2026-11-26T13:14:15.123456789Z"), 1795698855);
  EXPECT_EQ(*ParseRfc3339("2999-01-01T00:00:00Z"), std::chrono::system_clock::time_point::max());  // past 2262
  EXPECT_FALSE(ParseRfc3339("2026-11-26 13:14:15").ok());
  EXPECT_FALSE(ParseRfc3339("2026-11-26T13:14:15").ok());
  EXPECT_FALSE(ParseRfc3339("2026-13-26T13:14:15Z").ok());
}

TEST(ExecCredentialTest, ExecInfoCarriesTheClusterOnlyWhenAsked) {
  ClientConfig cluster{.server = "https://10.0.0.1:6443", .ca_pem = "CA PEM\n"};
  ExecPluginConfig plugin{.api_version = kV1, .command = "x"};
  auto info = nlohmann::json::parse(ExecInfo(plugin, cluster));
  EXPECT_EQ(info["kind"], "ExecCredential");
  EXPECT_EQ(info["apiVersion"], kV1);
  EXPECT_EQ(info["spec"], (nlohmann::json{{"interactive", false}}));
  plugin.provide_cluster_info = true;
  info = nlohmann::json::parse(ExecInfo(plugin, cluster));
  EXPECT_EQ(info["spec"]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"], "Q0EgUEVNCg==");
}

class ExecPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpusched-exec-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Script(const std::string& text) {
    const std::string path = dir_ + "/plugin";
    std::ofstream(path) << "#!/bin/sh\n" << text;
    chmod(path.c_str(), 0755);
    return path;
  }
  std::string dir_;
};

// The plugin sees its args, its env and KUBERNETES_EXEC_INFO, and what it prints becomes the credential.
TEST_F(ExecPluginTest, RunsThePluginWithItsArgsAndEnvironment) {
  ClientConfig config{.server = "https://h:1"};
  config.exec = ExecPluginConfig{.api_version = kV1,
                                 .command = Script("echo \"$KUBERNETES_EXEC_INFO\" > \"$OUT\"\n"
                                                   "printf '{\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\","
                                                   "\"status\":{\"token\":\"%s-%s\"}}' "
                                                   "client.authentication.k8s.io/v1 \"$1\" \"$TEAM\"\n"),
                                 .args = {"get-token"},
                                 .env = {{"TEAM", "ml"}, {"OUT", dir_ + "/info"}},
                                 .source = "kubeconfig: users[name=u].user.exec"};
  auto c = RunExecPlugin(config, milliseconds(10000));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->token, "get-token-ml");
  std::ifstream info(dir_ + "/info");
  const auto seen = nlohmann::json::parse(info);
  EXPECT_EQ(seen["spec"]["interactive"], false);
}

TEST_F(ExecPluginTest, FailuresSayWhatFailed) {
  ClientConfig config{.server = "https://h:1"};
  config.exec = ExecPluginConfig{.api_version = kV1,
                                 .command = Script("echo 'error: no credentials for profile ml' >&2\nexit 2\n"),
                                 .source = "kubeconfig: users[name=u].user.exec"};
  auto failed = RunExecPlugin(config, milliseconds(10000));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("kubeconfig: users[name=u].user.exec"));
  EXPECT_THAT(failed.status().message(), HasSubstr("exited with 2: error: no credentials for profile ml"));
  config.exec.command = dir_ + "/absent";
  config.exec.install_hint = "install the cloud CLI";
  auto missing = RunExecPlugin(config, milliseconds(10000));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("cannot run " + dir_ + "/absent"));
  EXPECT_THAT(missing.status().message(), HasSubstr("(install the cloud CLI)"));
  config.exec.command = Script("sleep 60\n");
  auto slow = RunExecPlugin(config, milliseconds(200));
  ASSERT_FALSE(slow.ok());
  EXPECT_THAT(slow.status().message(), HasSubstr("did not finish within 200 ms"));
}

}  // namespace
}  // namespace gpusched::adapters::k8s
