#include "gpusched/adapters/nvml/fake_inventory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

namespace gpusched::adapters::nvml {
namespace {

using common::MiB;
using std::chrono::seconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;

// A clock the test moves by hand.
struct ManualClock {
  steady_clock::time_point now{};
  std::function<steady_clock::time_point()> Fn() {
    return [this] { return now; };
  }
};

struct SpecCase {
  std::string name;
  std::string spec;
  std::vector<std::string> want_models;  // empty: an error is expected
  std::vector<int64_t> want_memory;
  std::string want_error;
};

TEST(FakeInventorySpecTest, Table) {
  const std::vector<SpecCase> cases = {
      {.name = "four of a known model",
       .spec = "4xA100-80GB",
       .want_models = {"A100-80GB", "A100-80GB", "A100-80GB", "A100-80GB"},
       .want_memory = {81920, 81920, 81920, 81920}},
      {.name = "groups concatenate in order",
       .spec = "2xH100-80GB,1xT4",
       .want_models = {"H100-80GB", "H100-80GB", "T4"},
       .want_memory = {81559, 81559, 15360}},
      {.name = "count defaults to one, spaces and case are forgiven",
       .spec = " l4 , 2XA10 ",
       .want_models = {"L4", "A10", "A10"},
       .want_memory = {23034, 23028, 23028}},
      // 24 GB = 24 x 1024 MiB = 24576
      {.name = "unknown model with memory in GB",
       .spec = "2xFoo:24GB",
       .want_models = {"Foo", "Foo"},
       .want_memory = {24576, 24576}},
      {.name = "known model with its memory overridden in MiB",
       .spec = "1xV100-32GB:16000MiB",
       .want_models = {"V100-32GB"},
       .want_memory = {16000}},
      {.name = "every known model",
       .spec = "A100-40GB,H200-141GB",
       .want_models = {"A100-40GB", "H200-141GB"},
       .want_memory = {40960, 143771}},
      {.name = "unknown model without memory", .spec = "2xFoo", .want_error = "unknown model \"Foo\" needs its memory"},
      {.name = "empty spec", .spec = "", .want_error = "empty spec"},
      {.name = "empty group", .spec = "1xT4,,1xT4", .want_error = "empty group"},
      {.name = "zero count", .spec = "0xT4", .want_error = "must be 1..1024"},
      {.name = "memory without unit", .spec = "1xFoo:24", .want_error = "needs a unit"},
      {.name = "memory not a number", .spec = "1xFoo:lots", .want_error = "not a positive number"},
      {.name = "no model", .spec = "2x", .want_error = "no model"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = FakeInventory::ParseSpec(c.spec);
    if (!c.want_error.empty()) {
      ASSERT_FALSE(got.ok());
      EXPECT_THAT(got.status().message(), HasSubstr(c.want_error));
      EXPECT_THAT(got.status().message(), HasSubstr("fake GPUs"));
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), c.want_models.size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].model, c.want_models[i]) << i;
      EXPECT_EQ((*got)[i].memory.value(), c.want_memory[i]) << i;
    }
  }
}

TEST(FakeInventorySpecTest, ErrorNamesTheSpec) {
  auto got = FakeInventory::ParseSpec("3xBar");
  ASSERT_FALSE(got.ok());
  EXPECT_THAT(got.status().message(), HasSubstr("\"3xBar\""));
  EXPECT_THAT(got.status().message(), HasSubstr("A100-80GB"));  // lists the known models
}

TEST(FakeInventorySpecTest, TopologyOfSpecNodes) {
  // 4 SXM A100s are all NVLinked; the T4s are not. 6 GPUs: indices 0..2 on NUMA 0, 3..5 on NUMA 1.
  auto got = FakeInventory::ParseSpec("4xA100-80GB,2xT4");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].nvlink_peers, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ((*got)[3].nvlink_peers, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE((*got)[4].nvlink_peers.empty());
  EXPECT_EQ((*got)[2].numa_node, 0);
  EXPECT_EQ((*got)[3].numa_node, 1);
}

TEST(FakeInventoryTest, SampleHasEveryField) {
  ManualClock clock;
  auto inv = FakeInventory::Create("2xA100-80GB", {.node_name = "node-a", .seed = 7, .clock = clock.Fn()});
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ((*inv)->Describe(), "fake 2xA100-80GB");
  auto samples = (*inv)->Sample();
  ASSERT_TRUE(samples.ok());
  ASSERT_EQ(samples->size(), 2u);
  const auto& s = (*samples)[1];
  EXPECT_EQ(s.index, 1);
  EXPECT_EQ(s.uuid.str(), "GPU-fake-node-a-1");
  EXPECT_EQ(s.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(s.model, "A100-80GB");
  EXPECT_FALSE(s.pci_bus_id.empty());
  EXPECT_EQ(s.memory_total.value(), 81920);
  EXPECT_EQ(s.memory_used.value() + s.memory_free.value(), 81920);
  EXPECT_GE(s.gpu_utilization, 0);
  EXPECT_LE(s.gpu_utilization, 100);
  EXPECT_GE(s.memory_utilization, 0);
  EXPECT_GE(s.temperature_c, 30);
  EXPECT_GE(s.power_w, 60);
  EXPECT_LE(s.power_w, 400);
  EXPECT_GT(s.sm_clock_mhz, 0);
  EXPECT_EQ(s.memory_clock_mhz, 1593);
  EXPECT_EQ(s.nvlink_peers, (std::vector<int32_t>{0}));
  EXPECT_TRUE(s.healthy);
  EXPECT_EQ(s.last_xid, 0);
}

TEST(FakeInventoryTest, UuidsAreStablePerNodeAndDifferAcrossNodes) {
  auto a1 = FakeInventory::Create("1xT4", {.node_name = "a"});
  auto a2 = FakeInventory::Create("1xT4", {.node_name = "a", .seed = 99});
  auto b = FakeInventory::Create("1xT4", {.node_name = "b"});
  auto seeded = FakeInventory::Create("1xT4", {.seed = 42});
  ASSERT_TRUE(a1.ok() && a2.ok() && b.ok() && seeded.ok());
  EXPECT_EQ((*(*a1)->Sample())[0].uuid, (*(*a2)->Sample())[0].uuid);
  EXPECT_NE((*(*a1)->Sample())[0].uuid, (*(*b)->Sample())[0].uuid);
  EXPECT_EQ((*(*seeded)->Sample())[0].uuid.str(), "GPU-fake-42-0");
}

std::vector<double> Trace(uint64_t seed, int steps) {
  ManualClock clock;
  auto inv = FakeInventory::Create("4xA100-80GB", {.seed = seed, .clock = clock.Fn()});
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    clock.now += seconds(5);
    const auto samples = *(*inv)->Sample();  // a copy: the Result is a temporary
    for (const auto& s : samples) {
      out.push_back(s.gpu_utilization);
      out.push_back(static_cast<double>(s.memory_used.value()));
      out.push_back(s.power_w);
    }
  }
  return out;
}

TEST(FakeInventoryTest, MotionIsDeterministicForASeedAndMoves) {
  const uint64_t seed = 1234;
  const auto a = Trace(seed, 40);
  const auto b = Trace(seed, 40);
  EXPECT_EQ(a, b) << "seed " << seed;
  EXPECT_NE(a, Trace(seed + 1, 40)) << "seed " << seed + 1;
  // Over 200 s the utilisation of GPU 0 takes more than one value.
  std::set<double> utils;
  for (size_t i = 0; i < a.size(); i += 12) {
    utils.insert(a[i]);
  }
  EXPECT_GT(utils.size(), 5u);
}

TEST(FakeInventoryTest, FreezeStopsTime) {
  ManualClock clock;
  auto inv = FakeInventory::Create("2xL4", {.clock = clock.Fn()});
  clock.now += seconds(17);
  (*inv)->Freeze();
  const auto before = *(*inv)->Sample();
  clock.now += seconds(1000);
  const auto after = *(*inv)->Sample();
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].gpu_utilization, after[i].gpu_utilization);
    EXPECT_EQ(before[i].memory_used, after[i].memory_used);
    EXPECT_EQ(before[i].temperature_c, after[i].temperature_c);
  }
}

TEST(FakeInventoryTest, ScriptedValuesAndWhatFollowsThem) {
  auto inv = FakeInventory::Create("2xA100-80GB");
  ASSERT_TRUE(inv.ok());
  FakeInventory& f = **inv;
  ASSERT_TRUE(f.SetUtilization(0, 100).ok());
  ASSERT_TRUE(f.SetUtilization(1, 0).ok());
  ASSERT_TRUE(f.SetMemoryUsed(1, MiB(4096)).ok());
  ASSERT_TRUE(f.SetProcesses(1, {{.pid = 7, .used_memory = MiB(4096)}}).ok());
  const auto s = *f.Sample();
  // Full load: A100 TDP 400 W, 80 C, max SM clock 1410; memory-copy util 0.6 x 100 = 60.
  EXPECT_EQ(s[0].gpu_utilization, 100);
  EXPECT_EQ(s[0].memory_utilization, 60);
  EXPECT_EQ(s[0].power_w, 400);
  EXPECT_EQ(s[0].temperature_c, 80);
  EXPECT_EQ(s[0].sm_clock_mhz, 1410);
  // Idle: 60 W, 30 C, idle SM clock 210; memory pinned: free = 81920 - 4096 = 77824.
  EXPECT_EQ(s[1].power_w, 60);
  EXPECT_EQ(s[1].temperature_c, 30);
  EXPECT_EQ(s[1].sm_clock_mhz, 210);
  EXPECT_EQ(s[1].memory_used.value(), 4096);
  EXPECT_EQ(s[1].memory_free.value(), 77824);
  ASSERT_EQ(s[1].processes.size(), 1u);
  EXPECT_EQ(s[1].processes[0].pid, 7u);
}

TEST(FakeInventoryTest, ScriptingRejectsBadInput) {
  auto inv = FakeInventory::Create("1xT4");
  FakeInventory& f = **inv;
  EXPECT_THAT(f.SetUtilization(1, 10).message(), HasSubstr("no GPU 1"));
  EXPECT_THAT(f.SetUtilization(-1, 10).message(), HasSubstr("no GPU -1"));
  EXPECT_FALSE(f.SetUtilization(0, 101).ok());
  EXPECT_FALSE(f.SetMemoryUsed(0, MiB(15361)).ok());  // a T4 has 15360 MiB
  EXPECT_FALSE(f.InjectXid(0, 0).ok());
}

TEST(FakeInventoryTest, CriticalXidMakesUnhealthyApplicationXidDoesNot) {
  auto inv = FakeInventory::Create("3xH100-80GB");
  FakeInventory& f = **inv;
  ASSERT_TRUE(f.InjectXid(0, 13).ok());  // graphics engine exception: the application's fault
  ASSERT_TRUE(f.InjectXid(1, 79).ok());  // fallen off the bus: the hardware's
  ASSERT_TRUE(f.InjectXid(2, 48).ok());  // double-bit ECC error
  auto s = *f.Sample();
  EXPECT_TRUE(s[0].healthy);
  EXPECT_EQ(s[0].last_xid, 13);
  EXPECT_FALSE(s[1].healthy);
  EXPECT_EQ(s[1].last_xid, 79);
  EXPECT_FALSE(s[2].healthy);
  ASSERT_TRUE(f.SetHealthy(1, true).ok());
  ASSERT_TRUE(f.SetHealthy(0, false).ok());
  s = *f.Sample();
  EXPECT_TRUE(s[1].healthy);
  EXPECT_EQ(s[1].last_xid, 0);
  EXPECT_FALSE(s[0].healthy);
}

TEST(FakeInventoryTest, SampleErrorIsReturnedUntilCleared) {
  auto inv = FakeInventory::Create("1xT4");
  (*inv)->SetSampleError(common::Unavailable("driver gone"));
  EXPECT_EQ((*inv)->Sample().status().code(), common::StatusCode::kUnavailable);
  (*inv)->SetSampleError(common::Status::Ok());
  EXPECT_TRUE((*inv)->Sample().ok());
}

class FakeInventoryYamlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpusched-fake-yaml-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(FakeInventoryYamlTest, LoadsAList) {
  const std::string path = Write("gpus.yaml",
                                 "- {model: A100-80GB, numa: 1, nvlink_peers: [1]}\n"
                                 "- {model: Foo, memory_mib: 24000, nvlink_peers: [0]}\n");
  auto inv = FakeInventory::Create(path, {.node_name = "y"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  auto s = *(*inv)->Sample();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].memory_total.value(), 81920);
  EXPECT_EQ(s[0].numa_node, 1);
  EXPECT_EQ(s[0].nvlink_peers, (std::vector<int32_t>{1}));
  ASSERT_EQ(s[0].links.size(), 1u);
  EXPECT_EQ(s[0].links[0].kind, core::LinkKind::kNvlink);
  EXPECT_EQ(s[1].name, "Foo");
  EXPECT_EQ(s[1].memory_total.value(), 24000);
  EXPECT_THAT((*inv)->Describe(), HasSubstr("2 GPUs"));
}

TEST_F(FakeInventoryYamlTest, PinnedUtilizationAndMemoryHoldFromTheStart) {
  const std::string path = Write("gpus.yaml",
                                 "- {model: A100-80GB, utilization: 37, memory_used_mib: 2048}\n"
                                 "- {model: A100-80GB, utilization: 100}\n"
                                 "- {model: A100-80GB}\n");
  auto inv = FakeInventory::Create(path, {.node_name = "y"});
  ASSERT_TRUE(inv.ok()) << inv.status();
  for (int round = 0; round < 2; ++round) {
    auto s = *(*inv)->Sample();
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].gpu_utilization, 37);
    EXPECT_EQ(s[0].memory_used.value(), 2048);
    EXPECT_EQ(s[1].gpu_utilization, 100);
    EXPECT_EQ(s[1].power_w, 400);  // follows the pinned load: A100 TDP
  }
  // Still scriptable afterwards.
  ASSERT_TRUE((*inv)->SetUtilization(0, 5).ok());
  EXPECT_EQ((*(*inv)->Sample())[0].gpu_utilization, 5);
}

TEST_F(FakeInventoryYamlTest, Errors) {
  struct Case {
    std::string name, text, want;
  };
  const std::vector<Case> cases = {
      {"unknown model without memory", "- {model: Foo}\n", "needs memory_mib"},
      {"no model", "- {memory_mib: 10}\n", "has no model"},
      {"peer out of range", "- {model: T4, nvlink_peers: [3]}\n", "nvlink peer 3"},
      {"peer is itself", "- {model: T4, nvlink_peers: [0]}\n", "nvlink peer 0"},
      {"not a list", "model: T4\n", "want a non-empty list"},
      {"bad yaml", "- {model: [\n", "gpus.yml"},
      {"utilization above 100", "- {model: T4, utilization: 101}\n", "utilization 101 is outside 0..100"},
      {"memory used above total", "- {model: T4, memory_used_mib: 15361}\n", "memory_used_mib 15361 is outside"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = FakeInventory::Create(Write("gpus.yml", c.text));
    ASSERT_FALSE(got.ok());
    EXPECT_THAT(got.status().message(), HasSubstr(c.want));
  }
  auto missing = FakeInventory::Create(dir_ + "/nope.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.yaml"));
}

}  // namespace
}  // namespace gpusched::adapters::nvml
