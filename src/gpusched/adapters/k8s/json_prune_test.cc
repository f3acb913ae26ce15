#include "gpusched/adapters/k8s/json_prune.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::adapters::k8s {
namespace {

using json = nlohmann::json;

// A pod as the API server lists it, with everything SchedulingPrune drops and everything it keeps.
const char* kPod = R"({
  "metadata": {"name": "web-0", "namespace": "team-a", "uid": "u-1", "resourceVersion": "42",
               "labels": {"app": "web"},
               "annotations": {"gpusched.io/allocation": "{}", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
               "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
  "spec": {"nodeName": "n1", "priority": -5, "volumes": [{"name": "data"}],
           "containers": [{"name": "main", "env": [{"name": "A"}], "command": ["sh"], "ports": [{"hostPort": 80}],
                           "resources": {"limits": {"gpusched.io/gpu": "1"}}},
                          {"name": "side", "livenessProbe": {}, "volumeMounts": []}],
           "initContainers": [{"name": "init", "args": ["x"]}],
           "tolerations": [{"key": "gpu", "operator": "Exists", "tolerationSeconds": 300}]},
  "status": {"phase": "Running", "containerStatuses": [{}], "conditions": [{"type": "Ready"}]}
})";

TEST(JsonPruneTest, ReadingPrunedEqualsParsingThenPruning) {
  PrunedReader reader;
  auto read = reader.Parse(kPod, SchedulingPrune(), "pod");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  json expected = json::parse(kPod);
  SchedulingPrune().Apply(expected);
  EXPECT_EQ(*read, expected);
  EXPECT_FALSE(read->at("metadata").contains("managedFields"));
  EXPECT_FALSE(read->at("metadata").at("annotations").contains("kubectl.kubernetes.io/last-applied-configuration"));
  EXPECT_TRUE(read->at("metadata").at("annotations").contains("gpusched.io/allocation"));
  EXPECT_FALSE(read->at("spec").contains("volumes"));
  EXPECT_FALSE(read->at("spec").at("containers").at(0).contains("env"));
  EXPECT_FALSE(read->at("spec").at("containers").at(0).contains("command"));
  EXPECT_FALSE(read->at("spec").at("containers").at(1).contains("livenessProbe"));
  EXPECT_FALSE(read->at("spec").at("initContainers").at(0).contains("args"));
  EXPECT_EQ(read->at("spec").at("containers").at(0).at("ports").at(0).at("hostPort"), 80);
  EXPECT_FALSE(read->at("status").contains("containerStatuses"));
  EXPECT_EQ(read->at("status").at("conditions").size(), 1u);
}

TEST(JsonPruneTest, NumbersAreTypedAsNlohmannTypesThem) {
  PrunedReader reader;
  const char* text = R"({"u": 7, "i": -7, "d": 1.5, "big": 18446744073709551615, "b": true, "n": null})";
  auto read = reader.Parse(text, JsonPrune(), "numbers");
  ASSERT_TRUE(read.ok());
  const json expected = json::parse(text);
  for (const char* key : {"u", "i", "d", "big", "b", "n"}) {
    EXPECT_EQ(read->at(key).type(), expected.at(key).type()) << key;
    EXPECT_EQ(read->at(key), expected.at(key)) << key;
  }
}

TEST(JsonPruneTest, TextSimdjsonRefusesIsReadByNlohmannAndStillPruned) {
  PrunedReader reader;
  // An integer beyond 64 bits: nlohmann reads it as a double.
  const char* text =
      R"({"metadata": {"name": "x", "managedFields": []}, "spec": {"n": 123456789012345678901234567890}})";
  JsonPrune prune;
  prune.Under("metadata").Drop("managedFields");
  auto read = reader.Parse(text, prune, "big");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_FALSE(read->at("metadata").contains("managedFields"));
  EXPECT_TRUE(read->at("spec").at("n").is_number_float());
}

TEST(JsonPruneTest, RepeatedKeysKeepTheLastValue) {
  PrunedReader reader;
  auto read = reader.Parse(R"({"a": 1, "a": 2})", JsonPrune(), "repeated");
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read, json::parse(R"({"a": 1, "a": 2})"));
  EXPECT_EQ(read->at("a"), 2);
}

TEST(JsonPruneTest, TextThatIsNotJsonIsAnErrorNamingTheSource) {
  PrunedReader reader;
  for (const char* bad : {"", "{", "{\"a\": }", "[1, 2", "nope"}) {
    auto read = reader.Parse(bad, SchedulingPrune(), "GET /api/v1/pods: HTTP 200");
    ASSERT_FALSE(read.ok()) << bad;
    EXPECT_NE(read.status().ToString().find("GET /api/v1/pods: HTTP 200: the response is not JSON"), std::string::npos)
        << read.status().ToString();
  }
  // The reader is still good after errors.
  EXPECT_TRUE(reader.Parse("[1]", JsonPrune(), "ok").ok());
}

TEST(JsonPruneTest, ARuleAppliesToEveryElementOfAnArrayAndItemsOfAList) {
  JsonPrune list;
  list.Under("items") = SchedulingPrune();
  const std::string text = std::string(R"({"metadata": {"resourceVersion": "9", "managedFields": 1}, "items": [)") +
                           kPod + "," + kPod + "]}";
  PrunedReader reader;
  auto read = reader.Parse(text, list, "list");
  ASSERT_TRUE(read.ok());
  // The list's own metadata is not an item's: only items are pruned.
  EXPECT_TRUE(read->at("metadata").contains("managedFields"));
  ASSERT_EQ(read->at("items").size(), 2u);
  for (const json& item : read->at("items")) {
    EXPECT_FALSE(item.at("metadata").contains("managedFields"));
    EXPECT_FALSE(item.at("spec").contains("volumes"));
  }
  json applied = json::parse(text);
  list.Apply(applied);
  EXPECT_EQ(*read, applied);
}

}  // namespace
}  // namespace gpusched::adapters::k8s
