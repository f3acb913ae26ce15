#include "gpusched/core/gpu_model.h"

#include <gtest/gtest.h>

namespace gpusched::core {
namespace {

// GPU feature discovery's label and NVML's product name give one model name; other names stay as they are.
TEST(GpuModelTest, NameWithoutTheVendorPrefix) {
  EXPECT_EQ(GpuModelName("NVIDIA-A100-SXM4-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(GpuModelName("NVIDIA A100-SXM4-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(GpuModelName("A100-SXM4-80GB"), "A100-SXM4-80GB");
  EXPECT_EQ(GpuModelName("Tesla T4"), "Tesla T4");
  EXPECT_EQ(GpuModelName("NVIDIA-NVIDIA H100"), "NVIDIA H100") << "one prefix only";
  EXPECT_EQ(GpuModelName(""), "");
}

TEST(GpuModelTest, SpellingsOfOneModelShareAKey) {
  EXPECT_EQ(GpuModelKey("NVIDIA A100-SXM4-80GB"), "A100SXM480GB");
  EXPECT_EQ(GpuModelKey("a100 sxm4 80gb"), "A100SXM480GB");
  EXPECT_EQ(GpuModelKey("Tesla T4"), "T4");
  EXPECT_EQ(GpuModelKey("NVIDIA"), "NVIDIA") << "a name that is only the prefix keeps it";
  EXPECT_NE(GpuModelKey("A100-SXM4-40GB"), GpuModelKey("A100-SXM4-80GB"));
}

}  // namespace
}  // namespace gpusched::core
