#include "gpusched/monitor/manifest.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <yaml-cpp/yaml.h>

namespace gpusched::monitor {
namespace {

using nlohmann::json;

// A plain (unquoted) scalar as YAML 1.2's core schema reads it.
json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") {
    return nullptr;
  }
  if (s == "true" || s == "True" || s == "TRUE") {
    return true;
  }
  if (s == "false" || s == "False" || s == "FALSE") {
    return false;
  }
  const char* begin = s.data();
  const char* end = s.data() + s.size();
  const char* digits = (*begin == '+') ? begin + 1 : begin;
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(digits, end, i); ec == std::errc() && p == end) {
    return i;
  }
  const bool looks_numeric =
      std::all_of(
          digits, end,
          [](char c) { return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'; }) &&
      std::any_of(digits, end, [](char c) { return c >= '0' && c <= '9'; });
  double d = 0;
  if (looks_numeric) {
    if (auto [p, ec] = std::from_chars(digits, end, d); ec == std::errc() && p == end && std::isfinite(d)) {
      return d;
    }
  }
  return s;
}

common::Result<json> ToJson(const YAML::Node& node, const std::string& file) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return json(nullptr);
    case YAML::NodeType::Scalar:
      // yaml-cpp tags a quoted scalar "!" and a plain one "?".
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") {
        return json(node.Scalar());
      }
      return PlainScalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        GPUSCHED_ASSIGN_OR_RETURN(v, ToJson(item, file));
        out.push_back(std::move(v));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return common::InvalidArgument(file + ":" + std::to_string(kv.first.Mark().line + 1) +
                                         ": a mapping key that is not a scalar");
        }
        GPUSCHED_ASSIGN_OR_RETURN(v, ToJson(kv.second, file));
        out[kv.first.Scalar()] = std::move(v);
      }
      return out;
    }
  }
  return json(nullptr);
}

common::Status CheckObject(const ManifestObject& o) {
  const std::string where = o.Where();
  if (!o.object.is_object()) {
    return common::InvalidArgument(where + ": a document that is not a mapping (a Kubernetes object)");
  }
  for (const char* key : {"apiVersion", "kind"}) {
    if (!o.object.contains(key) || !o.object[key].is_string() || o.object[key].get<std::string>().empty()) {
      return common::InvalidArgument(where + ": the object has no " + key);
    }
  }
  const json meta = o.object.value("metadata", json::object());
  const bool named = meta.is_object() &&
                     ((meta.contains("name") && meta["name"].is_string() && !meta["name"].get<std::string>().empty()) ||
                      (meta.contains("generateName") && meta["generateName"].is_string()));
  if (!named) {
    return common::InvalidArgument(where + ": the " + o.Kind() + " has no metadata.name (or generateName)");
  }
  return common::Status::Ok();
}

void AddLabel(json& object, const std::string& run_id) {
  if (!object.is_object()) {
    return;
  }
  json& meta = object["metadata"];
  if (!meta.is_object()) {
    meta = json::object();
  }
  if (!meta.contains("labels") || !meta["labels"].is_object()) {
    meta["labels"] = json::object();
  }
  meta["labels"][std::string(kRunLabel)] = run_id;
}

}  // namespace

std::string ManifestObject::Kind() const { return object.value("kind", ""); }
std::string ManifestObject::ApiVersion() const { return object.value("apiVersion", ""); }
std::string ManifestObject::Name() const {
  const json meta = object.value("metadata", json::object());
  if (meta.contains("name") && meta["name"].is_string()) {
    return meta["name"].get<std::string>();
  }
  return meta.value("generateName", "") + "*";
}

WaitKind ManifestObject::Wait() const {
  const std::string kind = Kind();
  const std::string api = ApiVersion();
  if (kind == "Pod" && api == "v1") {
    return WaitKind::kPod;
  }
  if (kind == "Job" && api == "batch/v1") {
    return WaitKind::kJob;
  }
  if (kind == "Deployment" && api == "apps/v1") {
    return WaitKind::kDeployment;
  }
  return WaitKind::kNone;
}

bool Workload::HasDeployment() const {
  return std::any_of(objects.begin(), objects.end(),
                     [](const ManifestObject& o) { return o.Wait() == WaitKind::kDeployment; });
}

bool Workload::WaitsOnSomething() const {
  return std::any_of(objects.begin(), objects.end(),
                     [](const ManifestObject& o) { return o.Wait() != WaitKind::kNone; });
}

common::Result<std::vector<ManifestObject>> ParseManifests(std::string_view text, const std::string& file) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return common::InvalidArgument(file + ":" + std::to_string(e.mark.line + 1) + ": YAML does not parse: " + e.msg);
  }
  std::vector<ManifestObject> out;
  for (const YAML::Node& doc : docs) {
    if (doc.IsNull()) {
      continue;
    }
    const int line = doc.Mark().line + 1;
    GPUSCHED_ASSIGN_OR_RETURN(j, ToJson(doc, file));
    if (j.is_object() && j.value("kind", "").ends_with("List") && j.contains("items") && j["items"].is_array()) {
      for (size_t i = 0; i < j["items"].size(); ++i) {
        const YAML::Node item = doc["items"][i];
        ManifestObject o{.file = file, .line = item.Mark().line + 1, .object = j["items"][i]};
        GPUSCHED_RETURN_IF_ERROR(CheckObject(o));
        out.push_back(std::move(o));
      }
      continue;
    }
    ManifestObject o{.file = file, .line = line, .object = std::move(j)};
    GPUSCHED_RETURN_IF_ERROR(CheckObject(o));
    out.push_back(std::move(o));
  }
  return out;
}

common::Result<std::vector<Workload>> LoadWorkloads(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec)) {
        const std::string ext = e.path().extension().string();
        if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
          found.push_back(e.path().string());
        }
      }
      if (ec) {
        return common::Unavailable(p + ": " + ec.message());
      }
      if (found.empty()) {
        return common::InvalidArgument(p + ": a directory without .yaml or .yml files");
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      return common::NotFound(p + ": no such file or directory");
    }
  }
  std::vector<Workload> out;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      return common::Unavailable(f + ": cannot be read: " + std::strerror(errno));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    GPUSCHED_ASSIGN_OR_RETURN(objects, ParseManifests(ss.str(), f));
    if (objects.empty()) {
      return common::InvalidArgument(f + ": no Kubernetes object in the file");
    }
    Workload w{.name = fs::path(f).stem().string(), .file = f, .objects = std::move(objects)};
    out.push_back(std::move(w));
  }
  // Two files of the same name in different directories: keep the names apart.
  for (size_t i = 0; i < out.size(); ++i) {
    int n = 1;
    for (size_t j = i + 1; j < out.size(); ++j) {
      if (out[j].name == out[i].name) {
        out[j].name += "-" + std::to_string(++n);
      }
    }
  }
  return out;
}

void LabelForRun(json& object, const std::string& run_id) {
  AddLabel(object, run_id);
  if (!object.contains("spec") || !object["spec"].is_object()) {
    return;
  }
  json& spec = object["spec"];
  if (spec.contains("template") && spec["template"].is_object()) {
    AddLabel(spec["template"], run_id);
  }
  if (spec.contains("jobTemplate") && spec["jobTemplate"].is_object()) {
    json& jt = spec["jobTemplate"];
    if (jt.contains("spec") && jt["spec"].is_object() && jt["spec"].contains("template") &&
        jt["spec"]["template"].is_object()) {
      AddLabel(jt["spec"]["template"], run_id);
    }
  }
}

}  // namespace gpusched::monitor
