#pragma once

// The small helpers every daemon's YAML config parser uses: an error naming the file and the key, a typed read that
// says "has the wrong type" instead of throwing, and a list of non-empty names.

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "gpusched/common/status.h"

namespace gpusched::daemon {

inline common::Status Bad(const std::string& source, const std::string& what) {
  return common::InvalidArgument(source + ": " + what);
}

template <typename T>
common::Result<T> As(const YAML::Node& node, const std::string& source, const std::string& key) {
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(source, "\"" + key + "\" has the wrong type");
  }
}

// A YAML list of names, none empty (tls.allowedClientNames, schedulerNames).
inline common::Result<std::vector<std::string>> NameList(const YAML::Node& node, const std::string& source,
                                                         const std::string& key, std::string_view what) {
  if (!node.IsSequence()) {
    return Bad(source, "\"" + key + "\" must be a list of " + std::string(what));
  }
  GPUSCHED_ASSIGN_OR_RETURN(names, As<std::vector<std::string>>(node, source, key));
  for (const auto& n : names) {
    if (n.empty()) {
      return Bad(source, "\"" + key + "\" has an empty name");
    }
  }
  return names;
}

}  // namespace gpusched::daemon
