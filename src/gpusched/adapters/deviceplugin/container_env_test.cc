#include "gpusched/adapters/deviceplugin/container_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gpusched::adapters::deviceplugin {
namespace {

core::GpuShare Share(int32_t index, int64_t milli, int64_t mib, bool exclusive = false, int32_t numa = -1) {
  return core::GpuShare{.index = index,
                        .uuid = common::GpuUuid("GPU-" + std::to_string(index)),
                        .milli = common::MilliGpu{milli},
                        .memory = common::MiB{mib},
                        .exclusive = exclusive,
                        .numa_node = numa};
}

using Envs = std::map<std::string, std::string>;

TEST(ContainerEnvTest, Table) {
  // The pipe directory is mounted read-only: no tenant can replace the daemon's sockets.
  const MountSpec default_mount{.container_path = "/tmp/nvidia-mps", .host_path = "/tmp/nvidia-mps", .read_only = true};
  const struct {
    const char* name;
    std::vector<core::GpuShare> gpus;
    Envs want;
    bool mount;
  } cases[] = {
      {"exclusive GPU: UUID only, no MPS limits",
       {Share(3, 1000, 81920, true)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-3"}},
       false},
      // 300 milli -> 30 %; 20000 MiB on ordinal 0
      {"shared GPU: percentage, memory limit, pipe directory",
       {Share(1, 300, 20000)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-1"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=20000M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      // sorted by host index: GPU-2 is ordinal 0, GPU-5 ordinal 1; percentage = min(400, 250)/10 = 25
      {"two shared GPUs in host index order, smallest percentage",
       {Share(5, 400, 1000), Share(2, 250, 2048)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-2,GPU-5"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=2048M,1=1000M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      // 5 milli / 10 = 0 -> at least 1
      {"tiny share gets at least 1 percent",
       {Share(0, 5, 100)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "1"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=100M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      {"memory-only share: no compute cap",
       {Share(0, 0, 4096)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      {"compute-only share: no memory limit",
       {Share(0, 500, 0)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      // exclusive GPU-0 is ordinal 0 and gets no limit; shared GPU-1 is ordinal 1
      {"exclusive and shared GPUs: only the shared one is limited",
       {Share(1, 500, 8000), Share(0, 1000, 81920, true)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-1"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "50"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "1=8000M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
      // NUMA nodes distinct and ascending, whatever the order of the shares
      {"exclusive GPUs on two NUMA nodes",
       {Share(6, 1000, 81920, true, 1), Share(1, 1000, 81920, true, 0), Share(7, 1000, 81920, true, 1)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-1,GPU-6,GPU-7"}, {"GPUSCHED_NUMA_NODES", "0,1"}},
       false},
      // a GPU whose NUMA node is unknown adds nothing to the list
      {"shared GPU on NUMA node 1 beside one of unknown NUMA node",
       {Share(0, 1000, 81920, true), Share(5, 200, 1000, false, 1)},
       {{"NVIDIA_VISIBLE_DEVICES", "GPU-0,GPU-5"},
        {"GPUSCHED_NUMA_NODES", "1"},
        {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "20"},
        {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "1=1000M"},
        {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
        {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"}},
       true},
  };
  for (const auto& c : cases) {
    const ContainerEnv env = BuildContainerEnv(c.gpus, MpsOptions{});
    EXPECT_EQ(env.envs, c.want) << c.name;
    if (c.mount) {
      EXPECT_EQ(env.mounts, std::vector<MountSpec>{default_mount}) << c.name;
    } else {
      EXPECT_TRUE(env.mounts.empty()) << c.name;
    }
  }
}

TEST(ContainerEnvTest, PipeDirectoriesAreConfigurable) {
  const std::vector<core::GpuShare> gpus = {Share(0, 300, 1000)};
  const ContainerEnv env =
      BuildContainerEnv(gpus, MpsOptions{.pipe_host_dir = "/run/mps/pipe", .pipe_container_dir = "/mps/pipe"});
  EXPECT_EQ(env.envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/pipe");
  ASSERT_EQ(env.mounts.size(), 1u);
  EXPECT_EQ(env.mounts[0].host_path, "/run/mps/pipe");
  EXPECT_EQ(env.mounts[0].container_path, "/mps/pipe");
  EXPECT_TRUE(env.mounts[0].read_only);
}

TEST(ContainerEnvTest, SharedMemoryIsMountedOnlyWhenConfiguredAndNeverForExclusiveGpus) {
  const std::vector<core::GpuShare> shared = {Share(0, 300, 1000)};
  const MpsOptions options{.pipe_host_dir = "/run/gpusched/mps/pipe",
                           .pipe_container_dir = "/run/gpusched/mps/pipe",
                           .shm_host_dir = "/run/gpusched/mps/shm"};
  const ContainerEnv env = BuildContainerEnv(shared, options);
  const std::vector<MountSpec> want = {
      {.container_path = "/run/gpusched/mps/pipe", .host_path = "/run/gpusched/mps/pipe", .read_only = true},
      {.container_path = "/dev/shm", .host_path = "/run/gpusched/mps/shm", .read_only = false}};
  EXPECT_EQ(env.mounts, want);
  // An exclusive GPU is no MPS client: neither the pipes nor the daemon's shared memory.
  const std::vector<core::GpuShare> exclusive = {Share(1, 1000, 81920, true)};
  EXPECT_TRUE(BuildContainerEnv(exclusive, options).mounts.empty());
  // MPS off: nothing either.
  MpsOptions off = options;
  off.enabled = false;
  EXPECT_TRUE(BuildContainerEnv(shared, off).mounts.empty());
}

// Each device-list strategy on one container with GPUs 5 and 2 (handed over in host index order: 2, then 5).
TEST(ContainerEnvTest, DeviceListStrategies) {
  const std::vector<core::GpuShare> gpus = {Share(5, 1000, 0, true), Share(2, 1000, 0, true)};
  auto env_for = [&](DeviceListStrategy strategy) {
    ContainerEnv env = BuildContainerEnv(gpus, MpsOptions{});
    ApplyDeviceList(env, gpus, "nvidia.com/gpu", DeviceListOptions{.strategy = strategy});
    return env;
  };
  const ContainerEnv envvar = env_for(DeviceListStrategy::kEnvvar);
  EXPECT_EQ(envvar.envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-2,GPU-5");
  EXPECT_TRUE(envvar.mounts.empty());
  EXPECT_TRUE(envvar.annotations.empty());
  EXPECT_TRUE(envvar.cdi_devices.empty());

  const ContainerEnv volumes = env_for(DeviceListStrategy::kVolumeMounts);
  EXPECT_EQ(volumes.envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  EXPECT_EQ(
      volumes.mounts,
      (std::vector<MountSpec>{
          {.container_path = "/var/run/nvidia-container-devices/GPU-2", .host_path = "/dev/null", .read_only = true},
          {.container_path = "/var/run/nvidia-container-devices/GPU-5", .host_path = "/dev/null", .read_only = true}}));
  EXPECT_TRUE(volumes.cdi_devices.empty());

  const ContainerEnv annotations = env_for(DeviceListStrategy::kCdiAnnotations);
  EXPECT_EQ(annotations.envs.at("NVIDIA_VISIBLE_DEVICES"), "void");  // an image's own value does not add GPUs
  EXPECT_EQ(annotations.annotations,
            (Envs{{"cdi.k8s.io/gpusched_nvidia-com-gpu", "gpusched.io/gpu=GPU-2,gpusched.io/gpu=GPU-5"}}));
  EXPECT_TRUE(annotations.cdi_devices.empty());
  EXPECT_TRUE(annotations.mounts.empty());

  const ContainerEnv cri = env_for(DeviceListStrategy::kCdiCri);
  EXPECT_EQ(cri.envs.at("NVIDIA_VISIBLE_DEVICES"), "void");
  EXPECT_EQ(cri.cdi_devices, (std::vector<std::string>{"gpusched.io/gpu=GPU-2", "gpusched.io/gpu=GPU-5"}));
  EXPECT_TRUE(cri.annotations.empty());
  // The NUMA hint and MPS limits do not depend on the strategy.
  for (const ContainerEnv* e : {&volumes, &annotations, &cri}) {
    EXPECT_EQ(e->envs.size(), envvar.envs.size());
  }
}

TEST(ContainerEnvTest, SharedGpusKeepTheirMpsMountUnderVolumeMounts) {
  const std::vector<core::GpuShare> gpus = {Share(1, 300, 20000)};
  ContainerEnv env = BuildContainerEnv(gpus, MpsOptions{});
  ApplyDeviceList(env, gpus, "gpusched.io/gpu", DeviceListOptions{});  // the default: volume-mounts
  EXPECT_EQ(env.envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=20000M");
  ASSERT_EQ(env.mounts.size(), 2u);
  EXPECT_EQ(env.mounts[0].container_path, "/tmp/nvidia-mps");
  EXPECT_EQ(env.mounts[1].container_path, "/var/run/nvidia-container-devices/GPU-1");
}

TEST(ContainerEnvTest, StrategyNames) {
  for (const char* name : {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri"}) {
    auto s = ParseDeviceListStrategy(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_STREQ(DeviceListStrategyName(*s), name);
  }
  auto bad = ParseDeviceListStrategy("cdi");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown device-list strategy \"cdi\" (choose envvar, volume-mounts, cdi-annotations or cdi-cri)");
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
