#include "gpusched/cli/structured_output.h"

#include <yaml-cpp/yaml.h>

namespace gpusched::cli {
namespace {

void Emit(YAML::Emitter& out, const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : j.items()) {
        out << YAML::Key << key << YAML::Value;
        Emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case nlohmann::json::value_t::array:
      out << YAML::BeginSeq;
      for (const auto& value : j) {
        Emit(out, value);
      }
      out << YAML::EndSeq;
      return;
    case nlohmann::json::value_t::string:
      out << j.get<std::string>();
      return;
    case nlohmann::json::value_t::boolean:
      out << j.get<bool>();
      return;
    case nlohmann::json::value_t::number_integer:
      out << j.get<int64_t>();
      return;
    case nlohmann::json::value_t::number_unsigned:
      out << j.get<uint64_t>();
      return;
    case nlohmann::json::value_t::number_float:
      out << j.get<double>();
      return;
    default:
      out << YAML::Null;
      return;
  }
}

}  // namespace

std::string RenderStructured(const nlohmann::json& doc, const std::string& format) {
  if (format == "yaml") {
    YAML::Emitter out;
    out.SetBoolFormat(YAML::TrueFalseBool);
    out.SetNullFormat(YAML::TildeNull);
    Emit(out, doc);
    return std::string(out.c_str()) + "\n";
  }
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace gpusched::cli
