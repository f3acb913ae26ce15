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

// One decode per watch event gives the core everything it reads: a bound pod's priority label, gang and
// anti-affinity; a waiting pod's request, fields not evaluated and fingerprint, only when it is this scheduler's.
TEST(DecodeWatchedPodTest, EachKindOfPodCarriesWhatTheCoreReads) {
  const WatchedPodOptions options{.resources = ResourceConfig{.genius_labels = true},
                                  .ours = [](const std::string& name) { return name == "gpusched"; }};
  json bound = BoundPod();
  bound["spec"].erase("priority");
  bound["metadata"]["labels"]["genius/priority"] = "7";
  bound["metadata"]["annotations"]["gpusched.io/pod-group"] = "train";
  bound["metadata"]["annotations"]["gpusched.io/min-available"] = "3";
  bound["metadata"]["creationTimestamp"] = "2026-11-25T15:04:05Z";
  bound["spec"]["affinity"] = json::parse(R"({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
      [{"labelSelector": {"matchLabels": {"team": "vision"}}, "topologyKey": "kubernetes.io/hostname"}]}})");
  const core::WatchedPod b = DecodeWatchedPod(bound, options);
  ASSERT_TRUE(b.update.ok()) << b.update.status().message();
  EXPECT_EQ(b.uid.str(), "u1");
  EXPECT_EQ(b.Key(), "ml/p");
  EXPECT_EQ(b.node_name, "n1");
  EXPECT_EQ(b.priority, 7) << "the Genius label, no spec.priority";
  EXPECT_EQ(b.pod_group, "train");
  EXPECT_EQ(b.min_available, 3);
  EXPECT_EQ(b.created_ms, 1795619045000);
  EXPECT_EQ(b.anti_affinity.size(), 1U) << b.anti_affinity_error;
  EXPECT_FALSE(b.pending);
  EXPECT_FALSE(b.request.ok()) << "a bound pod's request is not read";

  json waiting = BoundPod();
  waiting["spec"].erase("nodeName");
  waiting["spec"]["schedulerName"] = "gpusched";
  waiting["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  waiting["spec"]["affinity"] = json::parse(R"({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
      [{"weight": 1, "podAffinityTerm": {"labelSelector": {}, "topologyKey": "zone"}}]}})");
  const core::WatchedPod w = DecodeWatchedPod(waiting, options);
  ASSERT_TRUE(w.pending);
  ASSERT_TRUE(w.request.ok()) << w.request.status().message();
  EXPECT_EQ(w.request->GpuCount(), 2);
  EXPECT_FALSE(w.unevaluated_soft.empty()) << "preferred pod affinity is placed with a warning";
  EXPECT_NE(w.fingerprint, 0U);
  json status_only = waiting;
  status_only["status"]["conditions"] = json::array({{{"type", "PodScheduled"}, {"status", "False"}}});
  EXPECT_EQ(DecodeWatchedPod(status_only, options).fingerprint, w.fingerprint) << "a status change requeues nothing";
  waiting["metadata"]["labels"]["x"] = "y";
  EXPECT_NE(DecodeWatchedPod(waiting, options).fingerprint, w.fingerprint);

  waiting["spec"]["schedulerName"] = "default-scheduler";
  const core::WatchedPod other = DecodeWatchedPod(waiting, options);
  EXPECT_FALSE(other.pending) << "another scheduler's pod";
  EXPECT_FALSE(other.request.ok());

  json no_uid = BoundPod();
  no_uid["metadata"].erase("uid");
  const core::WatchedPod n = DecodeWatchedPod(no_uid, options);
  EXPECT_TRUE(n.uid.empty());
  EXPECT_FALSE(n.update.ok());
}

TEST(DecodeNodeNameTest, NameOrError) {
  EXPECT_EQ(DecodeNodeName(json::parse(R"({"metadata": {"name": "n1"}})"))->str(), "n1");
  EXPECT_FALSE(DecodeNodeName(json::parse(R"({"metadata": {"name": ""}})")).ok());
  EXPECT_FALSE(DecodeNodeName(json::parse(R"({"metadata": {}})")).ok());
  EXPECT_FALSE(DecodeNodeName(json()).ok());
}

}  // namespace
}  // namespace gpusched::kube
