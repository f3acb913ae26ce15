#include "gpusched/adapters/deviceplugin/cdi_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace gpusched::adapters::deviceplugin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class CdiSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpcdi-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/dev");
    fs::create_directories(dir_ + "/proc");
    fs::create_directories(dir_ + "/lib");
    options_ = CdiSpecOptions{.spec_dir = dir_ + "/cdi", .dev_dir = dir_ + "/dev", .proc_gpus_dir = dir_ + "/proc"};
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void Write(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(dir_ + "/" + path).parent_path());
    std::ofstream(dir_ + "/" + path) << text;
  }
  // The driver's information file for the GPU at `bus` (its own 4-digit domain, lower case).
  void Driver(const std::string& bus, int minor) const {
    Write("proc/" + bus + "/information",
          "Model: \t\t NVIDIA A100\nIRQ:   \t\t 150\nGPU UUID: \t GPU-x\nDevice Minor: \t " + std::to_string(minor) +
              "\nBus Type: \t PCIe\n");
  }
  std::string Read(const std::string& path) const {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static ports::GpuSample Gpu(int index, const std::string& bus) {
    return ports::GpuSample{.index = index, .uuid = common::GpuUuid("GPU-" + std::to_string(index)), .pci_bus_id = bus};
  }

  std::string dir_;
  CdiSpecOptions options_;
};

TEST_F(CdiSpecTest, MinorComesFromTheDriverNotTheIndex) {
  Driver("0000:07:00.0", 3);
  auto minor = GpuMinor(options_.proc_gpus_dir, "00000000:07:00.0");  // NVML's 8-digit domain
  ASSERT_TRUE(minor.ok()) << minor.status();
  EXPECT_EQ(*minor, 3);
  auto missing = GpuMinor(options_.proc_gpus_dir, "00000000:08:00.0");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/proc/0000:08:00.0/information"));
  Write("proc/0000:09:00.0/information", "Model: A100\n");
  EXPECT_THAT(GpuMinor(options_.proc_gpus_dir, "0000:09:00.0").status().message(), HasSubstr("no \"Device Minor:\""));
  Write("proc/0000:0a:00.0/information", "Device Minor: \t lots\n");
  EXPECT_THAT(GpuMinor(options_.proc_gpus_dir, "00000000:0A:00.0").status().message(), HasSubstr("malformed"));
}

TEST_F(CdiSpecTest, OneDevicePerGpuByUuidWithItsOwnNodeAndTheControlNodes) {
  // GPU 0 sits at bus 07 with minor 1, GPU 1 at bus 0b with minor 0: the index is not the minor.
  Driver("0000:07:00.0", 1);
  Driver("0000:0b:00.0", 0);
  Write("dev/nvidiactl", "");
  Write("dev/nvidia-uvm", "");  // nvidia-uvm-tools absent: left out
  Write("lib/libcuda.so.535.1", "elf");
  fs::create_symlink("libcuda.so.535.1", dir_ + "/lib/libcuda.so.1");
  options_.driver_files = FindDriverFiles(std::vector<std::string>{dir_ + "/nolib", dir_ + "/lib"},
                                          std::vector<std::string>{"libcuda.so.1", "libnvidia-ml.so.1"});
  ASSERT_EQ(options_.driver_files, std::vector<std::string>{dir_ + "/lib/libcuda.so.1"});
  const std::vector<ports::GpuSample> gpus = {Gpu(0, "00000000:07:00.0"), Gpu(1, "00000000:0B:00.0")};
  const CdiSpec spec = BuildCdiSpec(options_, gpus);
  EXPECT_EQ(spec.problems, "");
  EXPECT_EQ(spec.gpus, (std::set<common::GpuUuid>{common::GpuUuid("GPU-0"), common::GpuUuid("GPU-1")}));
  const json want = {
      {"cdiVersion", "0.5.0"},
      {"kind", "gpusched.io/gpu"},
      {"devices",
       {{{"name", "GPU-0"}, {"containerEdits", {{"deviceNodes", {{{"path", dir_ + "/dev/nvidia1"}}}}}}},
        {{"name", "GPU-1"}, {"containerEdits", {{"deviceNodes", {{{"path", dir_ + "/dev/nvidia0"}}}}}}}}},
      {"containerEdits",
       {{"deviceNodes", {{{"path", dir_ + "/dev/nvidiactl"}}, {{"path", dir_ + "/dev/nvidia-uvm"}}}},
        {"mounts",
         {{{"hostPath", dir_ + "/lib/libcuda.so.535.1"},
           {"containerPath", dir_ + "/lib/libcuda.so.1"},
           {"options", {"ro", "nosuid", "nodev", "bind"}}}}}}}};
  EXPECT_EQ(spec.spec, want) << spec.spec.dump(2);
}

TEST_F(CdiSpecTest, AGpuWithoutAKnownMinorIsLeftOutAndNamed) {
  Driver("0000:07:00.0", 0);
  const std::vector<ports::GpuSample> gpus = {Gpu(0, "00000000:07:00.0"), Gpu(1, "00000000:0c:00.0")};
  const CdiSpec spec = BuildCdiSpec(options_, gpus);
  EXPECT_EQ(spec.gpus, (std::set<common::GpuUuid>{common::GpuUuid("GPU-0")}));
  ASSERT_EQ(spec.spec["devices"].size(), 1u);
  EXPECT_THAT(spec.problems, HasSubstr("GPU 1 (GPU-1): cannot read " + dir_ + "/proc/0000:0c:00.0/information"));
  EXPECT_FALSE(spec.spec.contains("containerEdits"));  // no control node, no driver file here
}

TEST_F(CdiSpecTest, WrittenAtomicallyOnlyWhenChangedAndRemoved) {
  Driver("0000:07:00.0", 0);
  const std::vector<ports::GpuSample> gpus = {Gpu(0, "00000000:07:00.0")};
  const std::string path = CdiSpecPath(options_);
  EXPECT_EQ(path, dir_ + "/cdi/gpusched.io-gpu.json");
  const json spec = BuildCdiSpec(options_, gpus).spec;
  ASSERT_TRUE(WriteCdiSpec(options_, spec).ok());
  EXPECT_EQ(json::parse(Read(path)), spec);
  const auto written = fs::last_write_time(path);
  // The same content again: the file is left alone (no rename, same mtime).
  ASSERT_TRUE(WriteCdiSpec(options_, spec).ok());
  EXPECT_EQ(fs::last_write_time(path), written);
  // New content replaces it, and no temporary file is left behind.
  json other = spec;
  other["devices"] = json::array();
  ASSERT_TRUE(WriteCdiSpec(options_, other).ok());
  EXPECT_EQ(json::parse(Read(path)), other);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ + "/cdi")) {
    ++files;
  }
  EXPECT_EQ(files, 1u);
  ASSERT_TRUE(RemoveCdiSpec(options_).ok());
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(RemoveCdiSpec(options_).ok());  // absent: fine
  // A spec directory that cannot be created is an error naming it.
  Write("blocker", "");
  options_.spec_dir = dir_ + "/blocker/cdi";
  const common::Status s = WriteCdiSpec(options_, spec);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir_ + "/blocker/cdi"));
}

}  // namespace
}  // namespace gpusched::adapters::deviceplugin
