#include "gpusched/adapters/k8s/client_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp, setenv, unsetenv

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpusched::adapters::k8s {
namespace {

using common::StatusCode;
using ::testing::HasSubstr;

// Stand-in PEM bytes and their base64 (`echo CERT | base64`).
constexpr char kCaPem[] = "CA PEM\n";
constexpr char kCaPemB64[] = "Q0EgUEVNCg==";
constexpr char kCertB64[] = "Q0VSVAo=";  // "CERT\n"
constexpr char kKeyB64[] = "S0VZCg==";   // "KEY\n"

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpusched-kubeconfig-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& contents) const {
    const std::string p = path_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << contents;
    return p;
  }

 private:
  std::string path_;
};

// Sets an environment variable for the scope, restoring the old value.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) {
      old_ = old;
    }
    if (value == nullptr) {
      unsetenv(name);
    } else {
      setenv(name, value, 1);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

std::string Kubeconfig(const std::string& cluster, const std::string& user, const std::string& extra_contexts = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
         "clusters:\n- name: c1\n  cluster:\n" +
         cluster + "users:\n- name: u1\n  user:\n" + user +
         "contexts:\n- name: main\n  context:\n    cluster: c1\n    user: u1\n    namespace: gpu\n" + extra_contexts;
}

TEST(KubeconfigTest, DataVariants) {
  TempDir dir;
  const std::string path = dir.Write(
      "config",
      Kubeconfig("    server: https://10.0.0.1:6443/\n    certificate-authority-data: " + std::string(kCaPemB64) + "\n",
                 "    client-certificate-data: " + std::string(kCertB64) + "\n    client-key-data: " + kKeyB64 +
                     "\n    token: abc\n"));
  auto config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->client_cert_pem, "CERT\n");
  EXPECT_EQ(config->client_key_pem, "KEY\n");
  EXPECT_EQ(config->token, "abc");
  EXPECT_EQ(config->namespace_, "gpu");
  EXPECT_FALSE(config->insecure_skip_verify);
}

TEST(KubeconfigTest, FileVariantsRelativeToTheKubeconfig) {
  TempDir dir;
  dir.Write("pki/ca.crt", kCaPem);
  dir.Write("pki/client.crt", "CERT\n");
  dir.Write("/abs-key", "KEY\n");
  dir.Write("token", "tok-from-file\n");
  const std::string path = dir.Write(
      "config",
      Kubeconfig("    server: https://h:1\n    certificate-authority: pki/ca.crt\n    insecure-skip-tls-verify: true\n",
                 "    client-certificate: pki/client.crt\n    client-key: " + dir.path() +
                     "/abs-key\n    tokenFile: token\n"));
  auto config = LoadKubeconfig(dir.path() + "/config");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->client_cert_pem, "CERT\n");
  EXPECT_EQ(config->client_key_pem, "KEY\n");
  EXPECT_EQ(config->token, "tok-from-file");
  EXPECT_EQ(config->token_file, dir.path() + "/token");
  EXPECT_TRUE(config->insecure_skip_verify);
}

TEST(KubeconfigTest, NamedContextAndDefaultNamespace) {
  TempDir dir;
  const std::string path =
      dir.Write("config", Kubeconfig("    server: https://h:1\n", "    token: t\n",
                                     "- name: other\n  context:\n    cluster: c1\n    user: u1\n"));
  auto config = LoadKubeconfig(path, "other");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->namespace_, "default");
}

struct BadCase {
  std::string name;
  std::string text;
  std::string context;
  std::string want;  // a substring of the error
};

// EKS-style: a plugin on PATH with args and env; GKE-style: provideClusterInfo; a relative path is the kubeconfig's.
TEST(KubeconfigTest, ExecPlugins) {
  TempDir dir;
  const std::string eks = dir.Write(
      "eks", Kubeconfig("    server: https://h:1\n",
                        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: aws\n"
                        "      args: [--region, eu-west-1, eks, get-token, --cluster-name, gpu]\n"
                        "      env:\n      - {name: AWS_PROFILE, value: ml}\n      interactiveMode: IfAvailable\n"
                        "      installHint: install the AWS CLI\n"));
  auto config = LoadKubeconfig(eks);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->exec.api_version, "client.authentication.k8s.io/v1beta1");
  EXPECT_EQ(config->exec.command, "aws");
  EXPECT_EQ(config->exec.args,
            (std::vector<std::string>{"--region", "eu-west-1", "eks", "get-token", "--cluster-name", "gpu"}));
  EXPECT_EQ(config->exec.env, (std::vector<std::pair<std::string, std::string>>{{"AWS_PROFILE", "ml"}}));
  EXPECT_FALSE(config->exec.provide_cluster_info);
  EXPECT_EQ(config->exec.install_hint, "install the AWS CLI");
  EXPECT_THAT(config->exec.source, HasSubstr(eks + ": users[name=u1].user.exec"));
  EXPECT_TRUE(config->token.empty());
  const std::string gke =
      dir.Write("sub/gke", Kubeconfig("    server: https://h:1\n",
                                      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                                      "      command: bin/gke-gcloud-auth-plugin\n      provideClusterInfo: true\n"));
  config = LoadKubeconfig(gke);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->exec.command, dir.path() + "/sub/bin/gke-gcloud-auth-plugin");
  EXPECT_TRUE(config->exec.provide_cluster_info);
}

TEST(KubeconfigTest, ErrorsNameTheFileAndTheKey) {
  const std::string ok_cluster = "    server: https://h:1\n";
  const std::vector<BadCase> cases = {
      {.name = "not yaml", .text = "a: [1, 2", .want = "not valid YAML"},
      {.name = "not a map", .text = "- 1\n", .want = "not a kubeconfig"},
      {.name = "no current context",
       .text = "apiVersion: v1\nkind: Config\nclusters: []\n",
       .want = "missing key 'current-context'"},
      {.name = "unknown context",
       .text = Kubeconfig(ok_cluster, "    token: t\n"),
       .context = "nope",
       .want = "no entry named 'nope' in 'contexts'"},
      {.name = "no server",
       .text = Kubeconfig("    insecure-skip-tls-verify: true\n", "    token: t\n"),
       .want = "clusters[name=c1].cluster: missing key 'server'"},
      {.name = "bad base64",
       .text = Kubeconfig(ok_cluster + "    certificate-authority-data: '***'\n", "    token: t\n"),
       .want = "certificate-authority-data: invalid base64"},
      {.name = "missing ca file",
       .text = Kubeconfig(ok_cluster + "    certificate-authority: nope.crt\n", "    token: t\n"),
       .want = "certificate-authority: cannot read"},
      {.name = "cert without key",
       .text = Kubeconfig(ok_cluster, "    client-certificate-data: " + std::string(kCertB64) + "\n"),
       .want = "missing key 'client-key(-data)'"},
      {.name = "exec plugin without apiVersion",
       .text = Kubeconfig(ok_cluster, "    exec:\n      command: aws\n"),
       .want = "users[name=u1].user.exec.apiVersion must be client.authentication.k8s.io/v1 or /v1beta1"},
      {.name = "exec plugin without command",
       .text = Kubeconfig(ok_cluster, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"),
       .want = "users[name=u1].user.exec: missing key 'command'"},
      {.name = "exec plugin that needs a terminal",
       .text = Kubeconfig(ok_cluster,
                          "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: login\n"
                          "      interactiveMode: Always\n"),
       .want = "interactiveMode Always needs a terminal"},
      {.name = "exec plugin with a bad env entry",
       .text = Kubeconfig(ok_cluster,
                          "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: x\n"
                          "      env: [{value: v}]\n"),
       .want = "exec.env: every entry needs a name"},
      {.name = "auth-provider",
       .text = Kubeconfig(ok_cluster, "    auth-provider:\n      name: gcp\n"),
       .want = "users[name=u1].user.auth-provider is not supported"},
      {.name = "bad bool",
       .text = Kubeconfig(ok_cluster + "    insecure-skip-tls-verify: maybe\n", "    token: t\n"),
       .want = "insecure-skip-tls-verify must be true or false"},
  };
  TempDir dir;
  for (const BadCase& c : cases) {
    const std::string path = dir.Write("config", c.text);
    auto config = LoadKubeconfig(path, c.context);
    ASSERT_FALSE(config.ok()) << c.name;
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument) << c.name << ": " << config.status();
    EXPECT_THAT(config.status().message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(config.status().message(), HasSubstr(c.want)) << c.name;
  }
  auto missing = LoadKubeconfig(dir.path() + "/absent");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.path() + "/absent"));
}

TEST(InClusterConfigTest, ReadsServiceAccountDir) {
  TempDir dir;
  dir.Write("token", "sa-token\n");
  dir.Write("ca.crt", kCaPem);
  dir.Write("namespace", "kube-system");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto config = InClusterConfig(dir.path());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
  EXPECT_EQ(config->token, "sa-token");
  EXPECT_EQ(config->token_file, dir.path() + "/token");
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->namespace_, "kube-system");
}

TEST(InClusterConfigTest, Errors) {
  TempDir dir;
  {
    ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
    EXPECT_EQ(InClusterConfig(dir.path()).status().code(), StatusCode::kFailedPrecondition);
  }
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto no_token = InClusterConfig(dir.path());
  EXPECT_THAT(no_token.status().message(), HasSubstr(dir.path() + "/token"));
}

TEST(ResolveClientConfigTest, Order) {
  TempDir dir;
  const std::string a = dir.Write("a", Kubeconfig("    server: https://a:1\n", "    token: t\n"));
  const std::string b = dir.Write("b", Kubeconfig("    server: https://b:1\n", "    token: t\n"));
  ScopedEnv home("HOME", dir.path().c_str());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
  {
    ScopedEnv kubeconfig("KUBECONFIG", (b + ":" + a).c_str());
    EXPECT_EQ(ResolveClientConfig(a)->server, "https://a:1");   // the flag wins
    EXPECT_EQ(ResolveClientConfig("")->server, "https://b:1");  // then $KUBECONFIG's first entry
  }
  ScopedEnv kubeconfig("KUBECONFIG", nullptr);
  auto none = ResolveClientConfig("");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr("$KUBECONFIG (unset)"));
  EXPECT_THAT(none.status().message(), HasSubstr(dir.path() + "/.kube/config (not found)"));
  dir.Write(".kube/config", Kubeconfig("    server: https://home:1\n", "    token: t\n"));
  EXPECT_EQ(ResolveClientConfig("")->server, "https://home:1");
  {
    ScopedEnv in_cluster_host("KUBERNETES_SERVICE_HOST", "10.0.0.1");
    ScopedEnv in_cluster_port("KUBERNETES_SERVICE_PORT", "443");
    auto in_cluster = ResolveClientConfig("");  // in-cluster beats ~/.kube/config; the default sa dir is absent
    EXPECT_FALSE(in_cluster.ok());
    EXPECT_THAT(in_cluster.status().message(), HasSubstr("in-cluster"));
    auto with_context = ResolveClientConfig("", "prod");
    EXPECT_EQ(with_context.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(with_context.status().message(), HasSubstr("--context prod: the in-cluster configuration has no"));
  }
}

// --context picks a context of whichever kubeconfig applies.
TEST(ResolveClientConfigTest, Context) {
  TempDir dir;
  const std::string both = dir.Write("both",
                                     "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
                                     "clusters:\n- name: c1\n  cluster: {server: 'https://a:1'}\n"
                                     "- name: c2\n  cluster: {server: 'https://b:2'}\n"
                                     "users:\n- name: u1\n  user: {token: t}\n"
                                     "contexts:\n- name: main\n  context: {cluster: c1, user: u1}\n"
                                     "- name: other\n  context: {cluster: c2, user: u1}\n");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
  EXPECT_EQ(ResolveClientConfig(both)->server, "https://a:1");
  EXPECT_EQ(ResolveClientConfig(both, "other")->server, "https://b:2");
  ScopedEnv kubeconfig("KUBECONFIG", both.c_str());
  EXPECT_EQ(ResolveClientConfig("", "other")->server, "https://b:2");
  EXPECT_THAT(ResolveClientConfig("", "nope").status().message(), HasSubstr("no entry named 'nope' in 'contexts'"));
}

TEST(Base64Test, Decodes) {
  EXPECT_EQ(*DecodeBase64("aGVsbG8="), "hello");
  EXPECT_EQ(*DecodeBase64("aGVs\nbG8"), "hello");
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_FALSE(DecodeBase64("aGV*").ok());
}

}  // namespace
}  // namespace gpusched::adapters::k8s
