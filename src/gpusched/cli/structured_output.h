#pragma once

// `-o json` and `-o yaml` of the day-two commands, from one JSON document: JSON indented by 2, or YAML in block
// style (yaml-cpp's emitter: strings that would read as another type are quoted, null is ~), as kubectl prints.

#include <string>

#include <nlohmann/json.hpp>

namespace gpusched::cli {

// "json" or "yaml"; anything else is a caller's error (CLI11 checks the flag).
[[nodiscard]] std::string RenderStructured(const nlohmann::json& doc, const std::string& format);

}  // namespace gpusched::cli
