#include "gpusched/webhook/webhook_config.h"

#include <gtest/gtest.h>

namespace gpusched::webhook {
namespace {

TEST(WebhookConfigTest, DefaultsAllowDeployedSchedulerIdentitiesOnly) {
  auto c = ParseWebhookConfig("", "w.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->allowed_users, (std::vector<std::string>{"system:serviceaccount:kube-system:gpusched-extender",
                                                        "system:serviceaccount:kube-system:gpusched-scheduler"}));
  EXPECT_TRUE(c->allowed_groups.empty());
  EXPECT_TRUE(c->scheduler_names.empty());
  EXPECT_EQ(c->resources.enabled, kube::AllGpuResourceNames());
  EXPECT_TRUE(c->resources.genius_labels);

  EXPECT_TRUE(c->MayWriteAllocation({.username = std::string(kExtenderUser)}));
  EXPECT_FALSE(c->MayWriteAllocation({.username = "alice", .groups = {"system:masters"}}));
  EXPECT_FALSE(c->MayWriteAllocation({.username = "system:serviceaccount:default:gpusched-extender"}));
}

TEST(WebhookConfigTest, ParsesEveryKey) {
  auto c = ParseWebhookConfig(R"yaml(
allowedUsers: [system:serviceaccount:gpu:my-extender]
allowedGroups: [gpusched-admins]
schedulerName: gpusched
namespaces: [ml, research]
schedulerNames: {vision: gpusched-vision.example.com}
resourceNames: [gpusched.io/gpu, gpusched.io/gpu-memory]
geniusLabels: false
)yaml",
                              "w.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->allowed_users, std::vector<std::string>{"system:serviceaccount:gpu:my-extender"});
  EXPECT_EQ(c->allowed_groups, std::vector<std::string>{"gpusched-admins"});
  EXPECT_EQ(c->scheduler_names,
            (std::map<std::string, std::string, std::less<>>{
                {"ml", "gpusched"}, {"research", "gpusched"}, {"vision", "gpusched-vision.example.com"}}));
  EXPECT_EQ(c->resources.enabled.size(), 2u);
  EXPECT_FALSE(c->resources.Enabled("aliyun.com/gpu-mem"));
  EXPECT_FALSE(c->resources.genius_labels);

  // allowedUsers replaces the default; a group admits its members.
  EXPECT_FALSE(c->MayWriteAllocation({.username = std::string(kExtenderUser)}));
  EXPECT_TRUE(c->MayWriteAllocation({.username = "bob", .groups = {"system:authenticated", "gpusched-admins"}}));
}

TEST(WebhookConfigTest, RefusesMistakesNamingTheKey) {
  struct Case {
    const char* yaml;
    const char* want;
  };
  const Case cases[] = {
      {"allowedUser: [a]", "unknown key \"allowedUser\""},
      {"- a", "top level must be a mapping"},
      {"geniusLabels: sometimes", "\"geniusLabels\" must be true or false"},
      {"allowedUsers: {a: b}", "\"allowedUsers\" must be a list of strings"},
      {"allowedUsers: [[a]]", "\"allowedUsers\" must be a string"},
      {"allowedUsers: ['']", "\"allowedUsers\" has an empty entry"},
      {"allowedGroups: admins", "\"allowedGroups\" must be a list"},
      {"schedulerName: gpusched", "\"schedulerName\" and \"namespaces\" go together"},
      {"namespaces: [ml]", "\"schedulerName\" and \"namespaces\" go together"},
      {"schedulerName: Gpu_Sched\nnamespaces: [ml]", "\"Gpu_Sched\" is not a valid schedulerName"},
      {"schedulerName: gpusched\nnamespaces: [ML]", "\"ML\" is not a valid namespace name"},
      {"schedulerName: gpusched\nnamespaces: [ml]\nschedulerNames: {ml: other}", "\"ml\" is in both"},
      {"schedulerNames: [ml]", "must map namespaces to scheduler names"},
      {"schedulerNames: {ml: 'a..b'}", "is not a valid schedulerName"},
      {"schedulerNames: {-ml: a}", "is not a valid namespace name"},
      {"resourceNames: [nvidia.com/gpus]", "unknown resource name \"nvidia.com/gpus\""},
      {"allowedUsers: [a", "not valid YAML"},
  };
  for (const auto& c : cases) {
    auto r = ParseWebhookConfig(c.yaml, "w.yaml");
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.status().code(), common::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status();
    EXPECT_EQ(r.status().message().rfind("w.yaml: ", 0), 0u) << r.status();
  }
}

}  // namespace
}  // namespace gpusched::webhook
