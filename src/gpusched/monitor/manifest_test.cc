#include "gpusched/monitor/manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace gpusched::monitor {
namespace {

using ::testing::HasSubstr;

TEST(ManifestTest, SplitsDocumentsAndReadsScalarsAsTheApiServerWould) {
  const std::string text = R"(# a comment before the first document
apiVersion: v1
kind: Pod
metadata:
  name: train
  labels: {team: "42"}
spec:
  containers:
  - name: main
    image: cuda:12
    args: ["--epochs", 3, "1.5", true]
    resources: {limits: {gpusched.io/gpu: 1}}
---
---
apiVersion: batch/v1
kind: Job
metadata: {generateName: sweep-}
spec:
  backoffLimit: 0
  template:
    spec: {restartPolicy: Never, containers: [{name: c, image: x}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {ratio: "0.5", empty: ~}
)";
  auto got = ParseManifests(text, "w.yaml");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  const auto& pod = (*got)[0];
  EXPECT_EQ(pod.Kind(), "Pod");
  EXPECT_EQ(pod.Wait(), WaitKind::kPod);
  EXPECT_EQ(pod.line, 2);
  EXPECT_EQ(pod.object["metadata"]["labels"]["team"], "42");  // quoted: stays a string
  const auto& args = pod.object["spec"]["containers"][0]["args"];
  EXPECT_TRUE(args[1].is_number_integer());
  EXPECT_TRUE(args[2].is_string());
  EXPECT_TRUE(args[3].is_boolean());
  EXPECT_EQ(pod.object["spec"]["containers"][0]["resources"]["limits"]["gpusched.io/gpu"], 1);
  EXPECT_EQ((*got)[1].Wait(), WaitKind::kJob);
  EXPECT_EQ((*got)[1].Name(), "sweep-*");
  EXPECT_EQ((*got)[1].line, 15);
  EXPECT_EQ((*got)[2].Wait(), WaitKind::kDeployment);
  EXPECT_EQ((*got)[3].Wait(), WaitKind::kNone);
  EXPECT_TRUE((*got)[3].object["data"]["empty"].is_null());
  EXPECT_EQ((*got)[3].object["data"]["ratio"], "0.5");
}

TEST(ManifestTest, AListIsItsItems) {
  auto got = ParseManifests(
      "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}}\n"
      "- {apiVersion: v1, kind: Pod, metadata: {name: b}}\n",
      "l.yaml");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].Name(), "b");
  EXPECT_EQ((*got)[1].line, 5);
}

TEST(ManifestTest, ErrorsNameFileAndLine) {
  struct Case {
    std::string name, text, want;
  };
  const std::vector<Case> cases = {
      {"bad yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n", "w.yaml:"},
      {"no kind", "apiVersion: v1\nmetadata: {name: a}\n", "w.yaml:1: the object has no kind"},
      {"no apiVersion", "---\nkind: Pod\nmetadata: {name: a}\n", "w.yaml:2: the object has no apiVersion"},
      {"no name", "apiVersion: v1\nkind: Pod\nmetadata: {labels: {a: b}}\n", "has no metadata.name"},
      {"not a mapping", "- a\n- b\n", "not a mapping"},
      {"second document", "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\nkind: Pod\n", "w.yaml:5:"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = ParseManifests(c.text, "w.yaml");
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(got.status().message(), HasSubstr(c.want));
  }
}

TEST(ManifestTest, LabelsObjectAndPodTemplates) {
  auto got = ParseManifests(R"(apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec: {template: {spec: {containers: []}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: c, labels: {keep: me}}
spec: {jobTemplate: {spec: {template: {metadata: {labels: {x: y}}}}}}
)",
                            "l.yaml");
  ASSERT_TRUE(got.ok()) << got.status();
  nlohmann::json job = (*got)[0].object;
  LabelForRun(job, "gm-1");
  EXPECT_EQ(job["metadata"]["labels"][std::string(kRunLabel)], "gm-1");
  EXPECT_EQ(job["spec"]["template"]["metadata"]["labels"][std::string(kRunLabel)], "gm-1");
  nlohmann::json cron = (*got)[1].object;
  LabelForRun(cron, "gm-1");
  EXPECT_EQ(cron["metadata"]["labels"]["keep"], "me");
  EXPECT_EQ(cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"][std::string(kRunLabel)], "gm-1");
  EXPECT_EQ(cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["x"], "y");
}

TEST(ManifestTest, LoadWorkloadsFromFilesAndDirectories) {
  const std::string dir = ::testing::TempDir() + "gpusched_monitor_manifests";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/set");
  std::ofstream(dir + "/set/b.yaml") << "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
  std::ofstream(dir + "/set/a.yml") << "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n";
  std::ofstream(dir + "/set/notes.txt") << "not yaml";
  std::ofstream(dir + "/empty.yaml") << "# nothing\n";
  auto got = LoadWorkloads({dir + "/set"});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].name, "a");
  EXPECT_EQ((*got)[1].name, "b");
  EXPECT_THAT(LoadWorkloads({dir + "/nope"}).status().message(), HasSubstr("no such file"));
  EXPECT_THAT(LoadWorkloads({dir + "/empty.yaml"}).status().message(), HasSubstr("no Kubernetes object"));
  std::filesystem::create_directories(dir + "/none");
  EXPECT_THAT(LoadWorkloads({dir + "/none"}).status().message(), HasSubstr("without .yaml"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpusched::monitor
