#include "gpusched/agent/dcgm_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace gpusched::agent {
namespace {

using common::GpuUuid;
using common::MiB;
using common::MilliGpu;
using ::testing::HasSubstr;
using ::testing::Not;

ports::GpuSample Gpu(int32_t index) {
  ports::GpuSample s;
  s.index = index;
  s.uuid = GpuUuid("GPU-" + std::to_string(index));
  s.name = "NVIDIA A100-SXM4-80GB";
  s.model = "A100-SXM4-80GB";
  s.pci_bus_id = "00000000:0" + std::to_string(index + 7) + ":00.0";
  s.memory_total = MiB(81920);
  s.memory_used = MiB(1024);
  s.memory_free = MiB(80896);
  s.gpu_utilization = 87;
  s.memory_utilization = 52;
  s.temperature_c = 61;
  s.power_w = 312.25;
  s.sm_clock_mhz = 1410;
  s.memory_clock_mhz = 1593;
  return s;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    out.push_back(line);
  }
  return out;
}

TEST(DcgmMetricsTest, GoldenForOneGpu) {
  const std::vector<ports::GpuSample> samples = {Gpu(0)};
  const AllocationMap allocations = {
      {GpuUuid("GPU-0"),
       {MilliGpu(300),
        MiB(20000),
        {{.ref = {"ml", "train-0", "main"}, .milli = MilliGpu(300), .memory = MiB(20000)}}}}};
  const std::string got = RenderDcgmMetrics(samples, {}, allocations, {.hostname = "node-1"});
  const std::string labels =
      R"(gpu="0",UUID="GPU-0",pci_bus_id="00000000:07:00.0",device="nvidia0",modelName="NVIDIA A100-SXM4-80GB",)"
      R"(Hostname="node-1",hostname="node-1")";
  // gpusched's own series: Prometheus's snake_case names.
  const std::string own =
      R"(gpu="0",uuid="GPU-0",pci_bus_id="00000000:07:00.0",device="nvidia0",model_name="NVIDIA A100-SXM4-80GB",)"
      R"(hostname="node-1")";
  const std::string want =
      "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
      "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
      "DCGM_FI_DEV_SM_CLOCK{" +
      labels +
      "} 1410\n"
      "# HELP DCGM_FI_DEV_MEM_CLOCK Memory clock frequency (in MHz).\n"
      "# TYPE DCGM_FI_DEV_MEM_CLOCK gauge\n"
      "DCGM_FI_DEV_MEM_CLOCK{" +
      labels +
      "} 1593\n"
      "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
      "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
      "DCGM_FI_DEV_GPU_TEMP{" +
      labels +
      "} 61\n"
      "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
      "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
      "DCGM_FI_DEV_POWER_USAGE{" +
      labels +
      "} 312.25\n"
      "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
      "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
      "DCGM_FI_DEV_GPU_UTIL{" +
      labels +
      "} 87\n"
      "# HELP DCGM_FI_DEV_MEM_COPY_UTIL Memory utilization (in %).\n"
      "# TYPE DCGM_FI_DEV_MEM_COPY_UTIL gauge\n"
      "DCGM_FI_DEV_MEM_COPY_UTIL{" +
      labels +
      "} 52\n"
      "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n"
      "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
      "DCGM_FI_DEV_FB_FREE{" +
      labels +
      "} 80896\n"
      "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
      "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
      "DCGM_FI_DEV_FB_USED{" +
      labels +
      "} 1024\n"
      "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
      "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
      "DCGM_FI_DEV_XID_ERRORS{" +
      labels +
      "} 0\n"
      "# HELP gpusched_gpu_healthy 1 when the GPU is healthy, 0 after a critical XID or when it is lost.\n"
      "# TYPE gpusched_gpu_healthy gauge\n"
      "gpusched_gpu_healthy{" +
      own +
      "} 1\n"
      "# HELP gpusched_gpu_allocated_milli GPU compute gpusched has allocated to pods (1000 = one GPU).\n"
      "# TYPE gpusched_gpu_allocated_milli gauge\n"
      "gpusched_gpu_allocated_milli{" +
      own +
      "} 300\n"
      "# HELP gpusched_gpu_allocated_memory_mib GPU memory gpusched has allocated to pods (in MiB).\n"
      "# TYPE gpusched_gpu_allocated_memory_mib gauge\n"
      "gpusched_gpu_allocated_memory_mib{" +
      own +
      "} 20000\n"
      "# HELP gpusched_pod_gpu_allocated_milli GPU compute gpusched has allocated to a container (1000 = one GPU).\n"
      "# TYPE gpusched_pod_gpu_allocated_milli gauge\n"
      "gpusched_pod_gpu_allocated_milli{" +
      own +
      R"(,namespace="ml",pod="train-0",container="main"} 300)"
      "\n"
      "# HELP gpusched_pod_gpu_allocated_memory_mib GPU memory gpusched has allocated to a container (in MiB).\n"
      "# TYPE gpusched_pod_gpu_allocated_memory_mib gauge\n"
      "gpusched_pod_gpu_allocated_memory_mib{" +
      own + R"(,namespace="ml",pod="train-0",container="main"} 20000)" + "\n";
  EXPECT_EQ(got, want);
}

TEST(DcgmMetricsTest, HostnameLabelChoices) {
  const std::vector<ports::GpuSample> samples = {Gpu(0)};
  struct Case {
    std::string name;
    DcgmRenderOptions options;
    bool legacy, lowercase;
  };
  const std::vector<Case> cases = {
      {"both by default", {.hostname = "h"}, true, true},
      {"legacy only", {.hostname = "h", .hostname_labels = HostnameLabels::kLegacy}, true, false},
      {"lowercase only", {.hostname = "h", .hostname_labels = HostnameLabels::kLowercase}, false, true},
      {"none", {.hostname = "h", .hostname_labels = HostnameLabels::kNone}, false, false},
      {"no hostname given", {}, false, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<std::string> lines = Lines(RenderDcgmMetrics(samples, {}, {}, c.options));
    const auto line_of = [&lines](std::string_view family) {
      for (const auto& line : lines) {
        if (line.starts_with(std::string(family) + "{")) {
          return line;
        }
      }
      return std::string();
    };
    // The choice applies to the DCGM_* series; gpusched's own carry `hostname` whenever there is one.
    const std::string dcgm = line_of("DCGM_FI_DEV_SM_CLOCK");
    EXPECT_EQ(dcgm.find("Hostname=\"h\"") != std::string::npos, c.legacy) << dcgm;
    EXPECT_EQ(dcgm.find(",hostname=\"h\"") != std::string::npos, c.lowercase) << dcgm;
    const std::string own = line_of("gpusched_gpu_healthy");
    EXPECT_EQ(own.find(",hostname=\"h\"") != std::string::npos, !c.options.hostname.empty()) << own;
    EXPECT_EQ(own.find("Hostname="), std::string::npos) << own;
  }
}

TEST(DcgmMetricsTest, UnknownValuesAreLeftOut) {
  std::vector<ports::GpuSample> samples = {Gpu(0), Gpu(1)};
  samples[0].power_w = -1;  // GPU 0 cannot read power: only GPU 1's line
  samples[0].pci_bus_id.clear();
  for (auto& s : samples) {  // no GPU has a temperature: no family at all
    s.temperature_c = -1;
  }
  const std::string got = RenderDcgmMetrics(samples, {}, {}, {});
  EXPECT_THAT(got, Not(HasSubstr("DCGM_FI_DEV_GPU_TEMP")));
  EXPECT_THAT(got, Not(HasSubstr("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"")));
  EXPECT_THAT(got, HasSubstr("DCGM_FI_DEV_POWER_USAGE{gpu=\"1\""));
  EXPECT_THAT(got, HasSubstr("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia0\","));
  EXPECT_EQ(RenderDcgmMetrics({}, {}, {}, {}), "");
}

TEST(DcgmMetricsTest, SharedGpuGetsOneSeriesPerPodAllocationsStayPerGpu) {
  const std::vector<ports::GpuSample> samples = {Gpu(0), Gpu(1)};
  const PodAttribution pods = {{GpuUuid("GPU-0"), {{"ns1", "a", "main"}, {"ns2", "b", "worker"}}}};
  const std::string got = RenderDcgmMetrics(samples, pods, {}, {});
  EXPECT_THAT(got, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-0\",pci_bus_id=\"00000000:07:00.0\","
                             "device=\"nvidia0\",modelName=\"NVIDIA A100-SXM4-80GB\",pod=\"a\",namespace=\"ns1\","
                             "container=\"main\"} 87\n"));
  EXPECT_THAT(got, HasSubstr("pod=\"b\",namespace=\"ns2\",container=\"worker\"} 87\n"));
  // GPU 1 has no pod: no pod labels.
  EXPECT_THAT(got, HasSubstr("modelName=\"NVIDIA A100-SXM4-80GB\"} 87\n"));
  size_t util_lines = 0;
  size_t alloc_lines = 0;
  for (const auto& line : Lines(got)) {
    util_lines += line.rfind("DCGM_FI_DEV_GPU_UTIL{", 0) == 0 ? 1 : 0;
    alloc_lines += line.rfind("gpusched_gpu_allocated_milli{", 0) == 0 ? 1 : 0;
    if (line.rfind("gpusched_gpu_", 0) == 0) {
      EXPECT_THAT(line, Not(HasSubstr("pod=")));
    }
  }
  EXPECT_EQ(util_lines, 3u);   // 2 pods on GPU 0 + GPU 1
  EXPECT_EQ(alloc_lines, 2u);  // one per GPU, 0 for unallocated
  EXPECT_THAT(got, HasSubstr("gpusched_gpu_allocated_milli{gpu=\"1\""));
}

TEST(DcgmMetricsTest, LabelValuesAreEscaped) {
  std::vector<ports::GpuSample> samples = {Gpu(0)};
  samples[0].name = "weird \"GPU\"\\\nname";
  const PodAttribution pods = {{GpuUuid("GPU-0"), {{"ns", "p\"1", "c\\2"}}}};
  const std::string got = RenderDcgmMetrics(samples, pods, {}, {});
  EXPECT_THAT(got, HasSubstr(R"(modelName="weird \"GPU\"\\\nname")"));
  EXPECT_THAT(got, HasSubstr(R"(pod="p\"1",namespace="ns",container="c\\2")"));
  for (const auto& line : Lines(got)) {  // every line is a comment or a complete sample
    EXPECT_TRUE(line.rfind("# ", 0) == 0 || line.rfind("DCGM_", 0) == 0 || line.rfind("gpusched_", 0) == 0) << line;
  }
}

TEST(DcgmMetricsTest, ValueFormatting) {
  struct Case {
    double v;
    std::string want;
  };
  const std::vector<Case> cases = {{0, "0"},
                                   {87, "87"},
                                   {312.25, "312.25"},
                                   {0.1, "0.1"},
                                   {1e21, "1e+21"},
                                   {1700000000, "1700000000"},
                                   {-2.5, "-2.5"},
                                   {std::numeric_limits<double>::quiet_NaN(), "NaN"},
                                   {std::numeric_limits<double>::infinity(), "+Inf"},
                                   {-std::numeric_limits<double>::infinity(), "-Inf"}};
  for (const auto& c : cases) {
    std::string out;
    AppendMetricValue(out, c.v);
    EXPECT_EQ(out, c.want);
  }
}

}  // namespace
}  // namespace gpusched::agent
