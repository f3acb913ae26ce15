#include "gpusched/kube/dra_claims.h"
#include "gpusched/kube/dra_slices.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpusched::kube {
namespace {

using core::dra::AllocationMode;
using nlohmann::json;

// A v1 claim as `kubectl get resourceclaim -o json` shows one on Kubernetes 1.34+: a shared GPU request with
// capacity, a two-GPU alternative list and a link-group constraint, allocated and reserved for one pod.
const char* kClaimV1 = R"({
  "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
  "metadata": {"namespace": "ml", "name": "train-gpus", "uid": "7d0c1e2a-0000-4000-8000-000000000001"},
  "spec": {"devices": {
    "requests": [
      {"name": "shared", "exactly": {"deviceClassName": "shared.gpu.gpusched.io",
        "selectors": [{"cel": {"expression": "device.attributes[\"gpu.gpusched.io\"].model == \"A100-80GB\""}}],
        "capacity": {"requests": {"memory": "20Gi", "gpu.gpusched.io/compute": "25"}}}},
      {"name": "pair", "firstAvailable": [
        {"name": "two", "deviceClassName": "gpu.gpusched.io", "count": 2},
        {"name": "one", "deviceClassName": "gpu.gpusched.io",
         "tolerations": [{"key": "gpu.gpusched.io/unhealthy", "operator": "Exists", "effect": "NoSchedule"}]}]},
      {"name": "all", "exactly": {"deviceClassName": "gpu.gpusched.io", "allocationMode": "All", "adminAccess": true}}
    ],
    "constraints": [{"requests": ["pair"], "matchAttribute": "gpu.gpusched.io/linkGroup"}]
  }},
  "status": {
    "allocation": {
      "devices": {"results": [
        {"request": "shared", "driver": "gpu.gpusched.io", "pool": "node-a", "device": "gpu-0",
         "shareID": "5b2f4a7e-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
         "consumedCapacity": {"gpu.gpusched.io/memory": "20Gi", "gpu.gpusched.io/compute": "25"}},
        {"request": "pair/two", "driver": "gpu.gpusched.io", "pool": "node-a", "device": "gpu-2"}]},
      "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}
    },
    "reservedFor": [{"resource": "pods", "name": "train-0", "uid": "pod-uid-1"}]
  }
})";

TEST(DraClaimsTest, DecodesAV1Claim) {
  auto c = DecodeResourceClaim(json::parse(kClaimV1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->namespace_, "ml");
  EXPECT_EQ(c->name, "train-gpus");
  EXPECT_EQ(c->uid, "7d0c1e2a-0000-4000-8000-000000000001");
  ASSERT_EQ(c->requests.size(), 3U);

  const auto& shared = c->requests[0];
  ASSERT_TRUE(shared.exactly.has_value());
  EXPECT_EQ(shared.exactly->name, "shared");
  EXPECT_EQ(shared.exactly->device_class, "shared.gpu.gpusched.io");
  EXPECT_EQ(shared.exactly->selectors,
            std::vector<std::string>{"device.attributes[\"gpu.gpusched.io\"].model == \"A100-80GB\""});
  EXPECT_EQ(shared.exactly->mode, AllocationMode::kExactCount);
  EXPECT_EQ(shared.exactly->count, 1);
  // 20Gi = 21474836480 bytes, in milli-units; the capacity keys stay as written (unqualified = device's driver).
  EXPECT_EQ(shared.exactly->capacity.at("memory").milli, 21474836480LL * 1000);
  EXPECT_EQ(shared.exactly->capacity.at("gpu.gpusched.io/compute").milli, 25000);

  const auto& pair = c->requests[1];
  EXPECT_FALSE(pair.exactly.has_value());
  ASSERT_EQ(pair.first_available.size(), 2U);
  EXPECT_EQ(pair.first_available[0].name, "pair/two");
  EXPECT_EQ(pair.first_available[0].count, 2);
  EXPECT_EQ(pair.first_available[1].name, "pair/one");
  ASSERT_EQ(pair.first_available[1].tolerations.size(), 1U);
  EXPECT_EQ(pair.first_available[1].tolerations[0].op, "Exists");

  const auto& all = c->requests[2];
  EXPECT_EQ(all.exactly->mode, AllocationMode::kAll);
  EXPECT_TRUE(all.admin_access);

  ASSERT_EQ(c->constraints.size(), 1U);
  EXPECT_EQ(c->constraints[0].requests, std::vector<std::string>{"pair"});
  EXPECT_EQ(c->constraints[0].match_attribute, "gpu.gpusched.io/linkGroup");

  ASSERT_TRUE(c->allocation.has_value());
  EXPECT_EQ(c->allocation->node, common::NodeName("node-a"));
  ASSERT_EQ(c->allocation->devices.size(), 2U);
  EXPECT_EQ(c->allocation->devices[0].share_id, "5b2f4a7e-1c3d-4e5f-8a9b-0c1d2e3f4a5b");
  EXPECT_EQ(c->allocation->devices[0].consumed_capacity.at("gpu.gpusched.io/memory").milli, 21474836480LL * 1000);
  EXPECT_EQ(c->allocation->devices[1].request, "pair/two");
  EXPECT_EQ(c->reserved_for, std::vector<common::PodUid>{common::PodUid("pod-uid-1")});
  EXPECT_FALSE(c->deallocation_requested);
}

TEST(DraClaimsTest, DecodesTheV1beta1RequestShape) {
  // 1.32-1.33 (v1beta1): the class, mode and count sit in the request itself.
  json claim = json::parse(R"({"metadata": {"namespace": "d", "name": "c"},
    "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.gpusched.io", "count": 2}]}}})");
  auto c = DecodeResourceClaim(claim);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->requests[0].exactly.has_value());
  EXPECT_EQ(c->requests[0].exactly->count, 2);
  EXPECT_EQ(c->requests[0].exactly->device_class, "gpu.gpusched.io");
}

TEST(DraClaimsTest, RefusesWhatItMustNotGuess) {
  struct Case {
    std::string name;
    std::string requests;  // the spec.devices.requests list
    std::string says;
  };
  const std::vector<Case> cases = {
      {.name = "unknown allocation mode",
       .requests = R"([{"name": "r", "exactly": {"deviceClassName": "c", "allocationMode": "Some"}}])",
       .says = "spec.devices.requests[0].exactly.allocationMode \"Some\" is unknown"},
      {.name = "not a CEL selector",
       .requests = R"([{"name": "r", "exactly": {"deviceClassName": "c", "selectors": [{"other": {}}]}}])",
       .says = "spec.devices.requests[0].exactly.selectors[0] is not a CEL selector"},
      {.name = "both exactly and firstAvailable",
       .requests = R"([{"name": "r", "exactly": {"deviceClassName": "c"},
                        "firstAvailable": [{"name": "a", "deviceClassName": "c"}]}])",
       .says = "must set exactly one of exactly and firstAvailable"},
      {.name = "neither",
       .requests = R"([{"name": "r"}])",
       .says = "must set exactly one of exactly and firstAvailable"},
      {.name = "no class",
       .requests = R"([{"name": "r", "exactly": {}}])",
       .says = "spec.devices.requests[0].exactly.deviceClassName is required"},
      {.name = "count zero",
       .requests = R"([{"name": "r", "exactly": {"deviceClassName": "c", "count": 0}}])",
       .says = "count must be an integer of at least 1"},
      {.name = "bad quantity",
       .requests =
           R"([{"name": "r", "exactly": {"deviceClassName": "c", "capacity": {"requests": {"memory": "lots"}}}}])",
       .says = "capacity.requests[memory]"},
      {.name = "bad toleration operator",
       .requests = R"([{"name": "r", "exactly": {"deviceClassName": "c", "tolerations": [{"operator": "Maybe"}]}}])",
       .says = "operator \"Maybe\" is neither Equal nor Exists"},
  };
  for (const Case& c : cases) {
    json claim = {{"metadata", {{"namespace", "d"}, {"name", "c"}}},
                  {"spec", {{"devices", {{"requests", json::parse(c.requests)}}}}}};
    auto r = DecodeResourceClaim(claim);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("ResourceClaim d/c: "), std::string::npos) << c.name;
  }
  json constraint = json::parse(R"({"metadata": {"namespace": "d", "name": "c"},
    "spec": {"devices": {"requests": [], "constraints": [{"matchAttribute": "linkGroup"}]}}})");
  auto r = DecodeResourceClaim(constraint);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must include its domain"), std::string::npos) << r.status().message();
}

TEST(DraClaimsTest, AllocationRoundTrips) {
  auto c = DecodeResourceClaim(json::parse(kClaimV1));
  ASSERT_TRUE(c.ok()) << c.status();
  json encoded = EncodeClaimAllocation(*c->allocation);
  auto back = DecodeClaimAllocation(encoded);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *c->allocation);
  // The node selector kube-scheduler writes for node-local devices.
  EXPECT_EQ(encoded["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0], "node-a");
  // 20Gi comes back as 20Gi.
  EXPECT_EQ(encoded["devices"]["results"][0]["consumedCapacity"]["gpu.gpusched.io/memory"], "20Gi");
  EXPECT_FALSE(encoded["devices"]["results"][1].contains("shareID"));

  json status = EncodeClaimStatus(*c->allocation, std::vector<ClaimConsumer>{{"train-0", common::PodUid("u1")}});
  EXPECT_EQ(status["reservedFor"], json::parse(R"([{"resource": "pods", "name": "train-0", "uid": "u1"}])"));
}

TEST(DraClaimsTest, QuantitiesAreExact) {
  EXPECT_EQ(FormatDraQuantity(core::dra::Quantity{1500}), "1500m");
  EXPECT_EQ(FormatDraQuantity(core::dra::Quantity::FromUnits(4)), "4");
  auto q = ParseDraQuantity(json("1500m"));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->milli, 1500);
  EXPECT_FALSE(ParseDraQuantity(json("lots")).ok());
}

TEST(DraClaimsTest, DecodesADeviceClass) {
  auto cls = DecodeDeviceClass(json::parse(R"({"metadata": {"name": "gpu.gpusched.io"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.gpusched.io\""}}],
             "extendedResourceName": "gpusched.io/gpu"}})"));
  ASSERT_TRUE(cls.ok()) << cls.status();
  EXPECT_EQ(cls->name, "gpu.gpusched.io");
  EXPECT_EQ(cls->selectors, std::vector<std::string>{"device.driver == \"gpu.gpusched.io\""});
  EXPECT_EQ(cls->extended_resource_name, "gpusched.io/gpu");
}

TEST(DraClaimsTest, PodClaimReferences) {
  json pod = json::parse(R"({"spec": {"resourceClaims": [
      {"name": "gpu", "resourceClaimName": "shared-gpu"},
      {"name": "scratch", "resourceClaimTemplateName": "one-gpu"},
      {"name": "late", "resourceClaimTemplateName": "one-gpu"}]},
    "status": {"resourceClaimStatuses": [{"name": "scratch", "resourceClaimName": "train-0-scratch-x7k2p"}]}})");
  auto refs = DecodePodClaimRefs(pod);
  ASSERT_TRUE(refs.ok()) << refs.status();
  ASSERT_EQ(refs->size(), 3U);
  EXPECT_EQ((*refs)[0].claim_name, "shared-gpu");
  EXPECT_FALSE((*refs)[0].from_template);
  EXPECT_EQ((*refs)[1].claim_name, "train-0-scratch-x7k2p");
  EXPECT_TRUE((*refs)[1].from_template);
  EXPECT_EQ((*refs)[2].claim_name, "");  // the controller has not made it yet

  auto bad = DecodePodClaimRefs(json::parse(R"({"spec": {"resourceClaims": [{"name": "x"}]}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exactly one of resourceClaimName and resourceClaimTemplateName"),
            std::string::npos);
}

}  // namespace
}  // namespace gpusched::kube
