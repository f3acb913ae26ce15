#include "gpusched/policy/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gpusched/testing/builders.h"

namespace gpusched::policy {
namespace {

using gpusched::testing::Pod;
using ::testing::HasSubstr;

// Options every policy accepts: a target workload of 2 sharing pods and 1 whole-GPU pod.
PolicyOptions FullOptions() {
  const std::vector<core::PodRequest> pods = {
      Pod("a").Cpu(4000).Share(470).Build(), Pod("b").Cpu(4000).Share(470).Build(), Pod("c").Cpu(8000).Gpus(1).Build()};
  return PolicyOptions{.target_workload = std::make_shared<const TargetWorkload>(TypicalPods(pods))};
}

TEST(RegistryTest, EveryRegisteredNameBuilds) {
  const PolicyOptions options = FullOptions();
  ASSERT_EQ(Registry().size(), PolicyNames().size());
  for (const PolicyEntry& e : Registry()) {
    SCOPED_TRACE(std::string(e.name));
    EXPECT_FALSE(e.summary.empty());
    const auto policy = MakePolicy(e.name, options);
    ASSERT_TRUE(policy.ok()) << policy.status();
    EXPECT_EQ((*policy)->Name(), e.name);
  }
}

TEST(RegistryTest, NamesAreUnique) {
  const std::vector<std::string> names = PolicyNames();
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
}

TEST(RegistryTest, MakePolicy) {
  struct Case {
    std::string name;
    std::string policy;
    PolicyOptions options;
    bool want_ok = false;
    std::vector<std::string> want_message;  // substrings of the InvalidArgument message
  };
  std::vector<std::string> unknown_message = {"unknown policy 'nope'"};
  for (const std::string& n : PolicyNames()) {
    unknown_message.push_back(n);  // the message lists every known name
  }
  const std::vector<Case> cases = {
      {.name = "known name", .policy = "bestfit", .options = {}, .want_ok = true},
      {.name = "unknown name lists the known names", .policy = "nope", .options = {}, .want_message = unknown_message},
      {.name = "names are case-sensitive", .policy = "BestFit", .options = {}, .want_message = {"unknown policy"}},
      {.name = "fgd without a target workload", .policy = "fgd", .options = {}, .want_message = {"target workload"}},
      {.name = "fgd with a target workload", .policy = "fgd", .options = FullOptions(), .want_ok = true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto p = MakePolicy(c.policy, c.options);
    EXPECT_EQ(p.ok(), c.want_ok) << p.status();
    if (!c.want_ok) {
      EXPECT_EQ(p.status().code(), common::StatusCode::kInvalidArgument);
    }
    for (const std::string& part : c.want_message) {
      EXPECT_THAT(p.status().message(), HasSubstr(part));
    }
  }
}

TEST(RegistryTest, BenchmarkPolicyNamesAreThePapersSixInOrder) {
  const std::vector<std::string> want = {"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"};
  EXPECT_EQ(BenchmarkPolicyNames(), want);
  const std::vector<std::string> names = PolicyNames();
  const std::set<std::string> known(names.begin(), names.end());
  for (const std::string& n : BenchmarkPolicyNames()) {
    EXPECT_TRUE(known.contains(n)) << n;
  }
}

}  // namespace
}  // namespace gpusched::policy
