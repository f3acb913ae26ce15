#include "gpusched/kube/cluster_events.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using nlohmann::json;

json BoundPod() {
  return json::parse(R"({"metadata": {"name": "p", "namespace": "ml", "uid": "u1",
      "labels": {"team": "vision"},
      "annotations": {"gpusched.io/allocation":
        "{\"node\":\"n1\",\"id\":9,\"containers\":[{\"name\":\"main\",\"gpus\":[{\"index\":0,\"milli\":500,\"memory\":1000}]}]}"}},
    "spec": {"nodeName": "n1", "priority": 5,
      "containers": [{"name": "main", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                      "ports": [{"containerPort": 80, "hostPort": 8080}]}]},
    "status": {"phase": "Running"}})");
}

TEST(DecodePodUpdateTest, ABoundPodWithItsAllocationAndRequests) {
  auto u = DecodePodUpdate(BoundPod(), "team", /*with_requests=*/true);
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->uid.str(), "u1");
  EXPECT_EQ(u->key, "ml/p");
  EXPECT_EQ(u->node_name, "n1");
  EXPECT_FALSE(u->terminal);
  EXPECT_EQ(u->priority, 5);
  EXPECT_EQ(u->app, "vision") << "the configured label, without the gpusched.io/app annotation";
  ASSERT_TRUE(u->annotated);
  ASSERT_TRUE(u->allocation.has_value()) << u->allocation_error;
  EXPECT_EQ(u->allocation->id, 9U);
  EXPECT_EQ(u->allocation->node.str(), "n1");
  ASSERT_TRUE(u->requests.has_value()) << u->requests_error;
  EXPECT_EQ(u->requests->cpu.value(), 250);
  EXPECT_EQ(u->requests->memory.value(), 1024);
  EXPECT_EQ(u->requests->host_ports.size(), 1U);
  // Without requests asked for, none are read.
  EXPECT_FALSE(DecodePodUpdate(BoundPod(), "", false)->requests.has_value());
}

TEST(DecodePodUpdateTest, UnboundTerminalAndBrokenPods) {
  json pending = BoundPod();
  pending["spec"].erase("nodeName");
  auto p = DecodePodUpdate(pending, "", true);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->node_name.empty());
  EXPECT_TRUE(p->annotated) << "the annotation is noted even before the bind shows";
  EXPECT_FALSE(p->allocation.has_value() || p->requests.has_value() || p->priority.has_value());

  json done = BoundPod();
  done["status"]["phase"] = "Succeeded";
  EXPECT_TRUE(DecodePodUpdate(done, "", true)->terminal);

  json bad = BoundPod();
  bad["metadata"]["annotations"]["gpusched.io/allocation"] = "{not json";
  auto b = DecodePodUpdate(bad, "", false);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->annotated);
  EXPECT_FALSE(b->allocation.has_value());
  EXPECT_FALSE(b->allocation_error.empty());

  json no_uid = BoundPod();
  no_uid["metadata"].erase("uid");
  EXPECT_EQ(DecodePodUpdate(no_uid, "", false).status().code(), common::StatusCode::kInvalidArgument);
  EXPECT_FALSE(DecodePodUpdate(json::array(), "", false).ok());
}

TEST(DecodeNodeNameTest, NameOrError) {
  EXPECT_EQ(DecodeNodeName(json::parse(R"({"metadata": {"name": "n1"}})"))->str(), "n1");
  EXPECT_FALSE(DecodeNodeName(json::parse(R"({"metadata": {"name": ""}})")).ok());
  EXPECT_FALSE(DecodeNodeName(json::parse(R"({"metadata": {}})")).ok());
  EXPECT_FALSE(DecodeNodeName(json()).ok());
}

}  // namespace
}  // namespace gpusched::kube
