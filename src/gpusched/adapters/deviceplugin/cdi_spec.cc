#include "gpusched/adapters/deviceplugin/cdi_spec.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>

namespace gpusched::adapters::deviceplugin {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// NVML's "00000000:07:00.0" -> the driver's "0000:07:00.0" (a 4-digit domain, lower case).
std::string DriverBusId(std::string_view nvml) {
  std::string id(nvml);
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const size_t colon = id.find(':');
  if (colon != std::string::npos && colon > 4) {
    id = id.substr(colon - 4);
  }
  return id;
}

}  // namespace

common::Result<int> GpuMinor(std::string_view proc_gpus_dir, std::string_view pci_bus_id) {
  const std::string path = std::string(proc_gpus_dir) + "/" + DriverBusId(pci_bus_id) + "/information";
  std::ifstream in(path);
  if (!in) {
    return common::NotFound("cannot read " + path);
  }
  std::string line;
  while (std::getline(in, line)) {
    constexpr std::string_view kKey = "Device Minor:";
    if (line.starts_with(kKey)) {
      std::istringstream value(line.substr(kKey.size()));
      int minor = -1;
      if (value >> minor && minor >= 0 && minor < 256) {
        return minor;
      }
      return common::NotFound(path + ": malformed \"" + line + "\"");
    }
  }
  return common::NotFound(path + " has no \"Device Minor:\" line");
}

std::vector<std::string> FindDriverFiles(std::span<const std::string> lib_dirs, std::span<const std::string> sonames) {
  std::vector<std::string> out;
  for (const std::string& soname : sonames) {
    for (const std::string& dir : lib_dirs) {
      std::error_code ec;
      const fs::path link = fs::path(dir) / soname;
      if (!fs::exists(link, ec)) {
        continue;
      }
      const fs::path real = fs::canonical(link, ec);
      if (!ec && fs::is_regular_file(real, ec)) {
        out.push_back(link.string());  // mounted at its soname path: the loader finds it there
        break;
      }
    }
  }
  return out;
}

common::Result<json> GpuDeviceNode(const CdiSpecOptions& options, const ports::GpuSample& gpu) {
  auto minor = GpuMinor(options.proc_gpus_dir, gpu.pci_bus_id);
  if (!minor.ok()) {
    return common::NotFound("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid.str() +
                            "): " + minor.status().message());
  }
  return json{{"path", options.dev_dir + "/nvidia" + std::to_string(*minor)}};
}

json CommonContainerEdits(const CdiSpecOptions& options) {
  json nodes = json::array();
  for (const std::string& name : options.control_nodes) {
    const std::string path = options.dev_dir + "/" + name;
    std::error_code ec;
    if (fs::exists(path, ec)) {
      nodes.push_back({{"path", path}});
    }
  }
  json mounts = json::array();
  for (const std::string& file : options.driver_files) {
    std::error_code ec;
    const fs::path real = fs::canonical(file, ec);
    mounts.push_back({{"hostPath", ec ? file : real.string()},
                      {"containerPath", file},
                      {"options", json::array({"ro", "nosuid", "nodev", "bind"})}});
  }
  json edits = json::object();
  if (!nodes.empty()) {
    edits["deviceNodes"] = std::move(nodes);
  }
  if (!mounts.empty()) {
    edits["mounts"] = std::move(mounts);
  }
  return edits;
}

CdiSpec BuildCdiSpec(const CdiSpecOptions& options, std::span<const ports::GpuSample> gpus) {
  CdiSpec out;
  json devices = json::array();
  for (const ports::GpuSample& g : gpus) {
    auto node = GpuDeviceNode(options, g);
    if (!node.ok()) {
      out.problems += (out.problems.empty() ? "" : "; ") + node.status().message();
      continue;
    }
    devices.push_back(
        {{"name", g.uuid.str()}, {"containerEdits", {{"deviceNodes", json::array({std::move(node).value()})}}}});
    out.gpus.insert(g.uuid);
  }
  json edits = CommonContainerEdits(options);
  out.spec = {{"cdiVersion", "0.5.0"}, {"kind", options.kind}, {"devices", std::move(devices)}};
  if (!edits.empty()) {
    out.spec["containerEdits"] = std::move(edits);
  }
  return out;
}

std::string CdiSpecPath(const CdiSpecOptions& options) {
  std::string name = options.kind;
  std::replace(name.begin(), name.end(), '/', '-');
  return options.spec_dir + "/" + name + ".json";
}

common::Status WriteCdiSpec(const CdiSpecOptions& options, const json& spec) {
  return WriteCdiSpecFile(CdiSpecPath(options), spec);
}

common::Status RemoveCdiSpec(const CdiSpecOptions& options) { return RemoveCdiSpecFile(CdiSpecPath(options)); }

common::Status WriteCdiSpecFile(const std::string& path, const json& spec) {
  const std::string text = spec.dump(2) + "\n";
  {
    std::ifstream in(path);
    if (in) {
      std::stringstream current;
      current << in.rdbuf();
      if (current.str() == text) {
        return common::Status::Ok();
      }
    }
  }
  const std::string dir = fs::path(path).parent_path().string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return common::Unavailable("CDI spec: cannot create " + dir + ": " + ec.message());
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      fs::remove(tmp, ec);
      return common::Unavailable("CDI spec: cannot write " + tmp);
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return common::Unavailable("CDI spec: cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
  return common::Status::Ok();
}

common::Status RemoveCdiSpecFile(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) {
    return common::Unavailable("CDI spec: cannot remove " + path + ": " + ec.message());
  }
  return common::Status::Ok();
}

}  // namespace gpusched::adapters::deviceplugin
