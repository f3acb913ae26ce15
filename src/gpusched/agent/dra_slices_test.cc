#include "gpusched/agent/dra_slices.h"

#include <gtest/gtest.h>

namespace gpusched::agent {
namespace {

TEST(DraSlicesTest, SamplesBecomePoolGpusWithProductNameAndXid) {
  ports::GpuSample a;
  a.index = 0;
  a.uuid = common::GpuUuid("GPU-a");
  a.name = "NVIDIA H100 80GB HBM3";
  a.model = "H100-80GB-HBM3";
  a.memory_total = common::MiB(81559);
  a.numa_node = 1;
  a.nvlink_peers = {1};
  a.gpu_utilization = 97;  // live values are not part of the pool
  ports::GpuSample b = a;
  b.index = 1;
  b.uuid = common::GpuUuid("GPU-b");
  b.nvlink_peers = {0};
  b.healthy = false;
  b.last_xid = 79;
  const std::vector<kube::PoolGpu> gpus = PoolGpusOf({a, b});
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].gpu.uuid.str(), "GPU-a");
  EXPECT_EQ(gpus[0].gpu.model, "H100-80GB-HBM3");
  EXPECT_EQ(gpus[0].gpu.memory, common::MiB(81559));
  EXPECT_EQ(gpus[0].gpu.numa_node, 1);
  EXPECT_EQ(gpus[0].product_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].last_xid, 0);
  EXPECT_FALSE(gpus[1].gpu.healthy);
  EXPECT_EQ(gpus[1].last_xid, 79);
  // Into the pool: both in one NVLink group, gpu-1 tainted.
  const core::dra::DevicePool pool = kube::GpuDevicePool(common::NodeName("n1"), gpus, {});
  EXPECT_EQ(pool.devices[1].attributes.at("gpu.gpusched.io/linkGroup"), core::dra::AttributeValue::Int(0));
  ASSERT_EQ(pool.devices[1].taints.size(), 1u);
  EXPECT_EQ(pool.devices[1].taints[0].value, "xid-79");
}

}  // namespace
}  // namespace gpusched::agent
