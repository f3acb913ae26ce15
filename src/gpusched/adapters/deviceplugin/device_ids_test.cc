#include "gpusched/adapters/deviceplugin/device_ids.h"

#include <gtest/gtest.h>

#include <string>

namespace gpusched::adapters::deviceplugin {
namespace {

ports::GpuSample Gpu(int32_t index, std::string uuid) {
  return ports::GpuSample{.index = index, .uuid = common::GpuUuid(std::move(uuid))};
}

// NVML UUIDs are "GPU-" + 36 characters.
const std::string kUuid = "GPU-8f3c2a41-7e0b-4c1d-9a2e-5b6c7d8e9f01";

TEST(DeviceIdsTest, ReplicasAreUuidColonColonK) {
  const auto ids = DeviceIdsFor(Gpu(0, kUuid), 3);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], kUuid + "::0");
  EXPECT_EQ(ids[2], kUuid + "::2");
}

TEST(DeviceIdsTest, OneDevicePerGpuIsTheUuid) {
  EXPECT_EQ(DeviceIdsFor(Gpu(2, kUuid), 1), std::vector<std::string>{kUuid});
}

TEST(DeviceIdsTest, EveryIdFitsTheKubeletLimit) {
  // 40 + "::" + 3 digits = 45 <= 63 for the largest replica count.
  for (const auto& id : DeviceIdsFor(Gpu(0, kUuid), kMaxReplicas)) {
    EXPECT_LE(id.size(), kMaxDeviceIdLength) << id;
  }
}

TEST(DeviceIdsTest, LongOrOddUuidsFallBackToTheIndex) {
  const struct {
    const char* name;
    std::string uuid;
    int replicas;
    std::string want_key;
  } cases[] = {
      // 62 characters + "::" + "9" = 65 > 63
      {"too long with a suffix", std::string(62, 'x'), 10, "gpu5"},
      // 62 characters alone fit
      {"long but fits alone", std::string(62, 'x'), 1, std::string(62, 'x')},
      // 60 + "::" + "9" = 63 fits exactly
      {"exactly 63", std::string(60, 'y'), 10, std::string(60, 'y')},
      {"contains the separator", "MIG::weird", 10, "gpu5"},
      {"empty", "", 1, "gpu5"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(GpuKey(Gpu(5, c.uuid), c.replicas), c.want_key) << c.name;
    for (const auto& id : DeviceIdsFor(Gpu(5, c.uuid), c.replicas)) {
      EXPECT_LE(id.size(), kMaxDeviceIdLength) << c.name;
      EXPECT_EQ(GpuKeyOf(id), c.want_key) << c.name;
    }
  }
}

TEST(DeviceIdsTest, GpuKeyOfStripsTheReplica) {
  EXPECT_EQ(GpuKeyOf(kUuid + "::7"), kUuid);
  EXPECT_EQ(GpuKeyOf(kUuid), kUuid);
  EXPECT_EQ(GpuKeyOf("gpu3::12"), "gpu3");
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
