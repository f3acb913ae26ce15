#include "gpusched/sched/dra_allocator.h"
#include "gpusched/sched/dra_selectors.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace gpusched::sched {
namespace {

using core::dra::AllocationMode;
using core::dra::AttributeValue;
using core::dra::CapacityRequestPolicy;
using core::dra::Device;
using core::dra::DeviceCapacity;
using core::dra::DeviceClass;
using core::dra::DevicePool;
using core::dra::DeviceRequest;
using core::dra::DeviceSubRequest;
using core::dra::Quantity;
using core::dra::ResourceClaim;

constexpr const char* kDriver = "gpu.gpusched.io";
constexpr int64_t kGi = 1024LL * 1024 * 1024;

Quantity Gi(int64_t n) { return Quantity::FromUnits(n * kGi); }
Quantity Mi(int64_t n) { return Quantity::FromUnits(n * 1024 * 1024); }

// A GPU device: memory capacity (bytes), a link group and a uuid attribute; shareable when asked.
Device Gpu(const std::string& name, int64_t memory_gi, const std::string& group = "g0", bool shareable = false) {
  Device d;
  d.name = name;
  d.attributes[std::string(kDriver) + "/linkGroup"] = AttributeValue::String(group);
  d.attributes[std::string(kDriver) + "/uuid"] = AttributeValue::String("GPU-" + name);
  d.capacity[std::string(kDriver) + "/memory"] = DeviceCapacity{.value = Gi(memory_gi)};
  d.allow_multiple_allocations = shareable;
  return d;
}

DeviceSubRequest Sub(const std::string& name, int64_t count = 1, const std::string& cls = "gpu") {
  return DeviceSubRequest{.name = name, .device_class = cls, .count = count};
}

ResourceClaim Claim(const std::string& name, std::vector<DeviceRequest> requests) {
  return ResourceClaim{.namespace_ = "default", .name = name, .uid = "uid-" + name, .requests = std::move(requests)};
}

DeviceRequest Exactly(DeviceSubRequest sub) { return DeviceRequest{.name = sub.name, .exactly = std::move(sub)}; }

// Selectors in these tests: "model=<x>" (the device's uuid attribute ends with x), "true", "error".
DraSelectorMatch FakeMatch() {
  return [](std::string_view expr, const DevicePool&, const Device& d) -> common::Result<bool> {
    if (expr == "true") {
      return true;
    }
    if (expr == "error") {
      return common::InvalidArgument("no such key: model");
    }
    if (expr.substr(0, 6) == "model=") {
      const std::string& uuid = d.attributes.at(std::string(kDriver) + "/uuid").string_value;
      std::string_view want = expr.substr(6);
      return uuid.size() >= want.size() && uuid.compare(uuid.size() - want.size(), want.size(), want) == 0;
    }
    return common::InvalidArgument("test selector not understood: " + std::string(expr));
  };
}

std::map<std::string, DeviceClass> Classes() {
  return {{"gpu", DeviceClass{.name = "gpu", .selectors = {"true"}}},
          {"gpu-a", DeviceClass{.name = "gpu-a", .selectors = {"model=a"}}}};
}

struct Node {
  DevicePool pool;
  std::vector<DraCandidate> candidates;

  explicit Node(std::vector<Device> devices) {
    pool = DevicePool{.driver = kDriver, .pool = "n1", .node = common::NodeName("n1"), .devices = std::move(devices)};
    for (const Device& d : pool.devices) {
      candidates.push_back(DraCandidate{.pool = &pool, .device = &d});
    }
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
};

common::Result<DraNodeResult> Allocate(const Node& node, std::vector<const ResourceClaim*> claims,
                                       DraAllocatorOptions options = {}) {
  return AllocateClaimsOnNode(claims, common::NodeName("n1"), node.candidates, Classes(), FakeMatch(), options);
}

std::vector<std::string> DevicesOf(const core::dra::ClaimAllocation& a) {
  std::vector<std::string> out;
  for (const auto& r : a.devices) {
    out.push_back(r.request + ":" + r.device);
  }
  return out;
}

TEST(DraAllocatorTest, WholeDeviceSkipsTheTakenOne) {
  Node node({Gpu("gpu-0", 80), Gpu("gpu-1", 80)});
  node.candidates[0].taken = true;
  ResourceClaim c = Claim("c", {Exactly(Sub("gpu"))});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"gpu:gpu-1"}));
  EXPECT_EQ(r->allocations[0].node, common::NodeName("n1"));
  EXPECT_TRUE(r->allocations[0].devices[0].share_id.empty());
  EXPECT_TRUE(r->allocations[0].devices[0].consumed_capacity.empty());
}

TEST(DraAllocatorTest, TooFewFreeDevicesSaysHowMany) {
  Node node({Gpu("gpu-0", 80), Gpu("gpu-1", 80)});
  node.candidates[1].taken = true;
  ResourceClaim c = Claim("c", {Exactly(Sub("gpu", 2))});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);
  // 2 devices match the class, gpu-0 alone is free, 2 are needed.
  EXPECT_EQ(r->reason, "claim default/c request gpu: 2 device(s) match class gpu, 1 not held whole, 2 needed");
}

TEST(DraAllocatorTest, SharedDeviceConsumesWhatIsAskedAndRecordsIt) {
  Node node({Gpu("gpu-0", 80, "g0", /*shareable=*/true)});
  const std::string mem = std::string(kDriver) + "/memory";
  node.candidates[0].available[mem] = Gi(30);  // 50 of 80 GiB consumed by other claims
  node.candidates[0].share_ids = {"11111111-1111-4111-8111-111111111111"};
  DeviceSubRequest sub = Sub("gpu");
  sub.capacity["memory"] = Gi(20);  // unqualified: the device's driver's capacity
  ResourceClaim c = Claim("c", {Exactly(sub)});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  const auto& result = r->allocations[0].devices[0];
  EXPECT_EQ(result.consumed_capacity.at(mem), Gi(20));
  EXPECT_TRUE(std::regex_match(result.share_id,
                               std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << result.share_id;
  EXPECT_NE(result.share_id, node.candidates[0].share_ids[0]);

  // 40 GiB does not fit in the 30 left.
  sub.capacity["memory"] = Gi(40);
  ResourceClaim big = Claim("big", {Exactly(sub)});
  auto r2 = Allocate(node, {&big});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_FALSE(r2->fits);
}

TEST(DraAllocatorTest, TwoClaimsOfOnePodSeeEachOther) {
  Node node({Gpu("gpu-0", 80, "g0", true)});
  DeviceSubRequest sub = Sub("gpu");
  sub.capacity[std::string(kDriver) + "/memory"] = Gi(50);
  ResourceClaim a = Claim("a", {Exactly(sub)});
  ResourceClaim b = Claim("b", {Exactly(sub)});
  // 50 + 50 > 80: all or nothing, so neither is allocated.
  auto r = Allocate(node, {&a, &b});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);
  EXPECT_TRUE(r->allocations.empty());
  EXPECT_NE(r->reason.find("claim default/b request gpu"), std::string::npos) << r->reason;

  sub.capacity[std::string(kDriver) + "/memory"] = Gi(40);
  ResourceClaim c = Claim("c", {Exactly(sub)});
  ResourceClaim d = Claim("d", {Exactly(sub)});
  auto r2 = Allocate(node, {&c, &d});
  ASSERT_TRUE(r2.ok()) << r2.status();
  ASSERT_TRUE(r2->fits) << r2->reason;
  EXPECT_NE(r2->allocations[0].devices[0].share_id, r2->allocations[1].devices[0].share_id);
}

TEST(DraAllocatorTest, NoCapacityAskedTakesThePolicyDefault) {
  Device d = Gpu("gpu-0", 80, "g0", true);
  const std::string mem = std::string(kDriver) + "/memory";
  d.capacity[mem].request_policy = CapacityRequestPolicy{.default_value = Gi(80), .min = Mi(256), .step = Mi(256)};
  Node node({d});
  ResourceClaim whole = Claim("whole", {Exactly(Sub("gpu"))});
  auto r = Allocate(node, {&whole});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(r->allocations[0].devices[0].consumed_capacity.at(mem), Gi(80));

  // Once 1 GiB is consumed by someone else, the default (all 80 GiB) no longer fits.
  node.candidates[0].available[mem] = Gi(79);
  auto r2 = Allocate(node, {&whole});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_FALSE(r2->fits);
}

TEST(DraAllocatorTest, ConsumedAmountFollowsTheRequestPolicy) {
  struct Case {
    std::string name;
    std::optional<CapacityRequestPolicy> policy;
    std::optional<Quantity> asked;
    std::optional<Quantity> want;
  };
  const CapacityRequestPolicy range{.default_value = Gi(1), .min = Mi(256), .max = Gi(8), .step = Mi(256)};
  const CapacityRequestPolicy values{.default_value = Gi(2), .valid_values = {Gi(1), Gi(2), Gi(4)}};
  const std::vector<Case> cases = {
      // No policy: what is asked, else the whole capacity (16 GiB).
      {.name = "no policy, asked", .asked = Gi(3), .want = Gi(3)},
      {.name = "no policy, nothing asked takes all", .want = Gi(16)},
      // 300 MiB -> the next step from 256 MiB: 512 MiB.
      {.name = "rounded up to the step", .policy = range, .asked = Mi(300), .want = Mi(512)},
      {.name = "on a step stays", .policy = range, .asked = Mi(768), .want = Mi(768)},
      {.name = "below min becomes min", .policy = range, .asked = Mi(1), .want = Mi(256)},
      {.name = "above max cannot be served", .policy = range, .asked = Gi(9), .want = std::nullopt},
      {.name = "default when nothing asked", .policy = range, .want = Gi(1)},
      {.name = "valid values: next one up", .policy = values, .asked = Mi(1500), .want = Gi(2)},
      {.name = "valid values: above all", .policy = values, .asked = Gi(5), .want = std::nullopt},
      {.name = "valid values: default", .policy = values, .want = Gi(2)},
  };
  for (const Case& c : cases) {
    DeviceCapacity cap{.value = Gi(16), .request_policy = c.policy};
    EXPECT_EQ(ConsumedAmount(cap, c.asked), c.want) << c.name;
  }
}

TEST(DraAllocatorTest, RoundedAmountIsWhatIsConsumed) {
  Device d = Gpu("gpu-0", 1, "g0", true);  // 1 GiB
  const std::string mem = std::string(kDriver) + "/memory";
  d.capacity[mem].request_policy = CapacityRequestPolicy{.min = Mi(256), .step = Mi(256)};
  Node node({d});
  DeviceSubRequest sub = Sub("gpu");
  sub.capacity["memory"] = Mi(300);  // consumes 512 MiB: two fit in 1 GiB, three do not
  ResourceClaim a = Claim("a", {Exactly(sub)});
  ResourceClaim b = Claim("b", {Exactly(sub)});
  ResourceClaim c = Claim("c", {Exactly(sub)});
  auto two = Allocate(node, {&a, &b});
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_TRUE(two->fits) << two->reason;
  auto three = Allocate(node, {&a, &b, &c});
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_FALSE(three->fits);
}

TEST(DraAllocatorTest, FirstAvailableTakesTheFirstAlternativeThatFits) {
  Node node({Gpu("gpu-0", 80), Gpu("gpu-1", 80), Gpu("gpu-2", 80)});
  node.candidates[0].taken = true;
  node.candidates[1].taken = true;
  DeviceRequest req{.name = "r", .first_available = {Sub("r/two", 2), Sub("r/one", 1)}};
  ResourceClaim c = Claim("c", {req});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"r/one:gpu-2"}));

  // With all three free, the first alternative wins.
  node.candidates[0].taken = false;
  node.candidates[1].taken = false;
  auto r2 = Allocate(node, {&c});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(DevicesOf(r2->allocations[0]), (std::vector<std::string>{"r/two:gpu-0", "r/two:gpu-1"}));
}

TEST(DraAllocatorTest, MatchAttributeKeepsTheSetInOneLinkGroup) {
  Node node({Gpu("gpu-0", 80, "a"), Gpu("gpu-1", 80, "a"), Gpu("gpu-2", 80, "b"), Gpu("gpu-3", 80, "b")});
  node.candidates[0].taken = true;  // group a has one free GPU left
  ResourceClaim c = Claim("c", {Exactly(Sub("gpu", 2))});
  c.constraints = {{.match_attribute = std::string(kDriver) + "/linkGroup"}};
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  // gpu-1 (a) then gpu-2 (b) would break the constraint: the search backtracks to the b pair.
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"gpu:gpu-2", "gpu:gpu-3"}));

  node.candidates[2].taken = true;  // now no group has two free
  auto r2 = Allocate(node, {&c});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_FALSE(r2->fits);
  EXPECT_NE(r2->reason.find("constraints"), std::string::npos) << r2->reason;
}

TEST(DraAllocatorTest, MatchAttributeNamesOnlySomeRequests) {
  Node node({Gpu("gpu-0", 80, "a"), Gpu("gpu-1", 80, "b"), Gpu("gpu-2", 80, "b")});
  // x and y must share a group; z is free to go anywhere.
  ResourceClaim c = Claim("c", {Exactly(Sub("x")), Exactly(Sub("y")), Exactly(Sub("z"))});
  c.constraints = {{.requests = {"x", "y"}, .match_attribute = std::string(kDriver) + "/linkGroup"}};
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  // x on gpu-0 (a) leaves y no a: x moves to gpu-1, y gpu-2, z gpu-0.
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"x:gpu-1", "y:gpu-2", "z:gpu-0"}));
}

TEST(DraAllocatorTest, DistinctAttributeKeepsSharesOnDifferentDevices) {
  Node node({Gpu("gpu-0", 80, "g0", true), Gpu("gpu-1", 80, "g0", true)});
  DeviceSubRequest x = Sub("x");
  x.capacity["memory"] = Gi(10);
  DeviceSubRequest y = x;
  y.name = "y";
  ResourceClaim same = Claim("same", {Exactly(x), Exactly(y)});
  auto r = Allocate(node, {&same});
  ASSERT_TRUE(r.ok()) << r.status();
  // Without a constraint both shares land on the first device that fits.
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"x:gpu-0", "y:gpu-0"}));

  ResourceClaim distinct = Claim("distinct", {Exactly(x), Exactly(y)});
  distinct.constraints = {{.distinct_attribute = std::string(kDriver) + "/uuid"}};
  auto r2 = Allocate(node, {&distinct});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(DevicesOf(r2->allocations[0]), (std::vector<std::string>{"x:gpu-0", "y:gpu-1"}));
}

TEST(DraAllocatorTest, ModeAllNeedsEveryMatchingDeviceFree) {
  Node node({Gpu("gpu-0a", 80), Gpu("gpu-1a", 80), Gpu("gpu-2b", 80)});
  DeviceSubRequest all = Sub("all", 0, "gpu-a");  // class gpu-a: uuids ending in "a"
  all.mode = AllocationMode::kAll;
  ResourceClaim c = Claim("c", {Exactly(all)});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"all:gpu-0a", "all:gpu-1a"}));

  node.candidates[1].taken = true;
  auto r2 = Allocate(node, {&c});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_FALSE(r2->fits);
  EXPECT_EQ(r2->reason, "claim default/c request all: 2 device(s) match class gpu-a, 1 not held whole, all needed");
}

TEST(DraAllocatorTest, ModeAllWithNoMatchingDeviceDoesNotFit) {
  Node node({Gpu("gpu-0b", 80)});
  DeviceSubRequest all = Sub("all", 0, "gpu-a");
  all.mode = AllocationMode::kAll;
  ResourceClaim c = Claim("c", {Exactly(all)});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);
}

TEST(DraAllocatorTest, AdminAccessNeedsTheNamespaceAndIgnoresAllocations) {
  Node node({Gpu("gpu-0", 80)});
  node.candidates[0].taken = true;
  DeviceRequest req = Exactly(Sub("mon"));
  req.admin_access = true;
  ResourceClaim c = Claim("c", {req});
  auto refused = Allocate(node, {&c});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), common::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("resource.kubernetes.io/admin-access=true"), std::string::npos);

  auto r = Allocate(node, {&c}, {.admin_access_allowed = true});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_TRUE(r->allocations[0].devices[0].admin_access);
  EXPECT_EQ(r->allocations[0].devices[0].device, "gpu-0");
}

TEST(DraAllocatorTest, TaintsNeedTolerations) {
  Device tainted = Gpu("gpu-0", 80);
  tainted.taints = {{.key = "gpu.gpusched.io/unhealthy", .value = "xid", .effect = "NoSchedule"}};
  Device informational = Gpu("gpu-1", 80);
  informational.taints = {{.key = "note", .effect = "None"}};
  Node node({tainted, informational});
  ResourceClaim c = Claim("c", {Exactly(Sub("gpu", 2))});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);  // gpu-0's NoSchedule taint is not tolerated; gpu-1's None is no obstacle

  DeviceSubRequest tolerant = Sub("gpu", 2);
  tolerant.tolerations = {{.key = "gpu.gpusched.io/unhealthy", .op = "Exists"}};
  ResourceClaim t = Claim("t", {Exactly(tolerant)});
  auto r2 = Allocate(node, {&t});
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_TRUE(r2->fits) << r2->reason;

  DeviceSubRequest wrong_value = Sub("gpu", 2);
  wrong_value.tolerations = {{.key = "gpu.gpusched.io/unhealthy", .value = "lost", .effect = "NoSchedule"}};
  ResourceClaim w = Claim("w", {Exactly(wrong_value)});
  auto r3 = Allocate(node, {&w});
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_FALSE(r3->fits);
}

TEST(DraAllocatorTest, CapacityIsAFilterOnWholeDevices) {
  Node node({Gpu("gpu-0", 40), Gpu("gpu-1", 80)});
  DeviceSubRequest sub = Sub("gpu");
  sub.capacity["memory"] = Gi(64);
  ResourceClaim c = Claim("c", {Exactly(sub)});
  auto r = Allocate(node, {&c});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"gpu:gpu-1"}));
  EXPECT_TRUE(r->allocations[0].devices[0].consumed_capacity.empty());  // taken whole: nothing to record
}

TEST(DraAllocatorTest, BrokenInputIsAnErrorThatNamesIt) {
  Node node({Gpu("gpu-0", 80, "g0", true)});
  struct Case {
    std::string name;
    ResourceClaim claim;
    common::StatusCode code;
    std::string says;
  };
  DeviceSubRequest ambiguous = Sub("gpu");
  ambiguous.capacity["memory"] = Gi(1);
  ambiguous.capacity[std::string(kDriver) + "/memory"] = Gi(1);
  DeviceSubRequest failing = Sub("gpu");
  failing.selectors = {"error"};
  std::vector<Case> cases = {
      {.name = "unknown class",
       .claim = Claim("c", {Exactly(Sub("gpu", 1, "nope"))}),
       .code = common::StatusCode::kNotFound,
       .says = "DeviceClass \"nope\" does not exist"},
      {.name = "count zero",
       .claim = Claim("c", {Exactly(Sub("gpu", 0))}),
       .code = common::StatusCode::kInvalidArgument,
       .says = "count 0 must be at least 1"},
      {.name = "no sub-request",
       .claim = Claim("c", {DeviceRequest{.name = "empty"}}),
       .code = common::StatusCode::kInvalidArgument,
       .says = "neither exactly nor firstAvailable"},
      {.name = "selector error names the device",
       .claim = Claim("c", {Exactly(failing)}),
       .code = common::StatusCode::kInvalidArgument,
       .says = "selector on device gpu.gpusched.io/n1/gpu-0: no such key: model"},
      {.name = "capacity named twice",
       .claim = Claim("c", {Exactly(ambiguous)}),
       .code = common::StatusCode::kInvalidArgument,
       .says = "(ambiguous)"},
  };
  for (const Case& c : cases) {
    auto r = Allocate(node, {&c.claim});
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.name << ": " << r.status().message();
  }
}

TEST(DraAllocatorTest, SearchGivesUpPastItsBound) {
  // 12 GPUs in 12 groups, 2 wanted in one group: no pair exists, and the search tries every pair (66).
  std::vector<Device> devices;
  for (int i = 0; i < 12; ++i) {
    devices.push_back(Gpu("gpu-" + std::to_string(i), 80, "g" + std::to_string(i)));
  }
  Node node(devices);
  ResourceClaim c = Claim("c", {Exactly(Sub("gpu", 2))});
  c.constraints = {{.match_attribute = std::string(kDriver) + "/linkGroup"}};
  auto r = Allocate(node, {&c}, {.max_steps = 20});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->fits);
  EXPECT_EQ(r->reason, "the claims' device search gave up after 20 trials on this node");
  auto full = Allocate(node, {&c});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_FALSE(full->fits);
  EXPECT_NE(full->reason.find("constraints"), std::string::npos);
}

TEST(DraAllocatorTest, ShareIdIsAStableUuid) {
  const std::string a = DraShareId("uid-1", "gpu", "gpu-0", 0);
  EXPECT_EQ(a, DraShareId("uid-1", "gpu", "gpu-0", 0));
  EXPECT_NE(a, DraShareId("uid-1", "gpu", "gpu-0", 1));
  EXPECT_NE(a, DraShareId("uid-2", "gpu", "gpu-0", 0));
  EXPECT_TRUE(std::regex_match(a, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")))
      << a;
}

// Random nodes, random existing use and random claims: whatever is allocated, no device is over its capacity, no
// device taken whole twice, no share ID twice on a device, every request gets its count, and matchAttribute holds.
TEST(DraAllocatorPropertyTest, NeverOvercommitsAndKeepsConstraints) {
  const uint32_t seed = 20261204;
  std::mt19937 rng(seed);
  const std::string mem = std::string(kDriver) + "/memory";
  int fitted = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE("seed " + std::to_string(seed) + " trial " + std::to_string(trial));
    std::vector<Device> devices;
    const int n = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      Device d = Gpu("gpu-" + std::to_string(i), 16 << (rng() % 3), "g" + std::to_string(rng() % 3), rng() % 2 == 0);
      if (d.allow_multiple_allocations && rng() % 2 == 0) {
        d.capacity[mem].request_policy = CapacityRequestPolicy{.min = Gi(1), .step = Gi(1)};
      }
      devices.push_back(d);
    }
    Node node(devices);
    for (auto& cand : node.candidates) {
      if (cand.device->allow_multiple_allocations) {
        const int64_t cap_gi = cand.device->capacity.at(mem).value.milli / Gi(1).milli;
        cand.available[mem] = Gi(static_cast<int64_t>(rng() % static_cast<uint32_t>(cap_gi + 1)));
        cand.share_ids = {DraShareId("other", "r", cand.device->name, 0)};
      } else {
        cand.taken = rng() % 3 == 0;
      }
    }
    std::vector<ResourceClaim> claims;
    const int nc = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < nc; ++k) {
      std::vector<DeviceRequest> requests;
      const int nr = 1 + static_cast<int>(rng() % 2);
      for (int q = 0; q < nr; ++q) {
        DeviceSubRequest sub = Sub("r" + std::to_string(q), 1 + static_cast<int64_t>(rng() % 2));
        if (rng() % 2 == 0) {
          sub.capacity["memory"] = Gi(1 + static_cast<int64_t>(rng() % 12));
        }
        requests.push_back(Exactly(sub));
      }
      ResourceClaim c = Claim("c" + std::to_string(k), requests);
      if (rng() % 3 == 0) {
        c.constraints = {{.match_attribute = std::string(kDriver) + "/linkGroup"}};
      }
      claims.push_back(c);
    }
    std::vector<const ResourceClaim*> ptrs;
    for (const auto& c : claims) {
      ptrs.push_back(&c);
    }
    auto r = Allocate(node, ptrs);
    ASSERT_TRUE(r.ok()) << r.status();
    if (!r->fits) {
      EXPECT_FALSE(r->reason.empty());
      continue;
    }
    ++fitted;
    ASSERT_EQ(r->allocations.size(), claims.size());
    std::map<std::string, int64_t> consumed;  // device -> milli-bytes consumed now
    std::map<std::string, int> whole;
    std::map<std::string, std::set<std::string>> ids;
    for (const auto& cand : node.candidates) {
      for (const auto& id : cand.share_ids) {
        ids[cand.device->name].insert(id);
      }
    }
    for (size_t k = 0; k < claims.size(); ++k) {
      std::map<std::string, int64_t> per_request;
      std::set<std::string> groups;
      for (const auto& res : r->allocations[k].devices) {
        ++per_request[res.request];
        const DraCandidate* cand = nullptr;
        for (const auto& cc : node.candidates) {
          if (cc.device->name == res.device) {
            cand = &cc;
          }
        }
        ASSERT_NE(cand, nullptr);
        groups.insert(cand->device->attributes.at(std::string(kDriver) + "/linkGroup").string_value);
        if (cand->device->allow_multiple_allocations) {
          consumed[res.device] += res.consumed_capacity.at(mem).milli;
          EXPECT_TRUE(ids[res.device].insert(res.share_id).second) << "share ID twice on " << res.device;
        } else {
          EXPECT_FALSE(cand->taken) << res.device << " was held already";
          EXPECT_EQ(++whole[res.device], 1) << res.device << " taken whole twice";
        }
      }
      for (const auto& req : claims[k].requests) {
        EXPECT_EQ(per_request[req.name], req.exactly->count) << claims[k].name << " " << req.name;
      }
      if (!claims[k].constraints.empty()) {
        EXPECT_EQ(groups.size(), 1U) << claims[k].name << " spans link groups";
      }
    }
    for (const auto& cand : node.candidates) {
      if (!cand.device->allow_multiple_allocations) {
        continue;
      }
      const int64_t free = cand.available.at(mem).milli;
      EXPECT_LE(consumed[cand.device->name], free) << cand.device->name << " over capacity";
    }
  }
  EXPECT_GT(fitted, 50) << "the generator should produce fitting cases too";
}

}  // namespace
}  // namespace gpusched::sched

namespace gpusched::sched {
namespace {

// The production matcher: CEL selectors compiled once, verdicts remembered per device.
TEST(DraSelectorCacheTest, AllocatesWithCelSelectors) {
  Node node({Gpu("gpu-0", 80, "a"), Gpu("gpu-1", 80, "b"), Gpu("gpu-2", 80, "b")});
  std::map<std::string, DeviceClass> classes = {
      {"gpu", DeviceClass{.name = "gpu", .selectors = {"device.driver == \"gpu.gpusched.io\""}}}};
  DeviceSubRequest sub = Sub("gpu", 2);
  sub.selectors = {"device.attributes[\"gpu.gpusched.io\"].linkGroup == \"b\"",
                   "device.capacity[\"gpu.gpusched.io\"].memory.compareTo(quantity(\"40Gi\")) >= 0"};
  ResourceClaim c = Claim("c", {Exactly(sub)});
  const ResourceClaim* claims[] = {&c};
  DraSelectorCache cache;
  auto r = AllocateClaimsOnNode(claims, common::NodeName("n1"), node.candidates, classes, cache.Matcher());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->fits) << r->reason;
  EXPECT_EQ(DevicesOf(r->allocations[0]), (std::vector<std::string>{"gpu:gpu-1", "gpu:gpu-2"}));
  EXPECT_EQ(cache.programs(), 3U);
  EXPECT_EQ(cache.verdicts(), 8U);  // the class on 3 devices + the first selector on 3 + the second on the 2 in b

  // Again: every verdict is remembered, nothing is evaluated twice.
  auto again = AllocateClaimsOnNode(claims, common::NodeName("n1"), node.candidates, classes, cache.Matcher());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(cache.verdicts(), 8U);
  cache.Forget();
  EXPECT_EQ(cache.verdicts(), 0U);
  EXPECT_EQ(cache.programs(), 3U);
}

TEST(DraSelectorCacheTest, ErrorsNameTheSelector) {
  Node node({Gpu("gpu-0", 80)});
  std::map<std::string, DeviceClass> classes = {{"gpu", DeviceClass{.name = "gpu"}}};
  struct Case {
    std::string name;
    std::string selector;
    std::string says;
  };
  const std::vector<Case> cases = {
      {.name = "a macro is refused at compile",
       .selector = "device.attributes[\"gpu.gpusched.io\"].exists(a, a == \"x\")",
       .says = "unsupported"},
      {.name = "a missing attribute fails at run time",
       .selector = "device.attributes[\"gpu.gpusched.io\"].nvlink == 2",
       .says = "no such key"},
  };
  for (const Case& k : cases) {
    DeviceSubRequest sub = Sub("gpu");
    sub.selectors = {k.selector};
    ResourceClaim c = Claim("c", {Exactly(sub)});
    const ResourceClaim* claims[] = {&c};
    DraSelectorCache cache;
    auto r = AllocateClaimsOnNode(claims, common::NodeName("n1"), node.candidates, classes, cache.Matcher());
    ASSERT_FALSE(r.ok()) << k.name;
    EXPECT_NE(r.status().message().find(k.says), std::string::npos) << k.name << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("gpu.gpusched.io/n1/gpu-0"), std::string::npos) << k.name;
  }
}

}  // namespace
}  // namespace gpusched::sched
