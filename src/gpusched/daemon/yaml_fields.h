#pragma once

// The small helpers every daemon's YAML config parser uses: the file's top level (a mapping, or empty), an error
// naming the file and the key, a typed read that says "has the wrong type" instead of throwing, and a list of
// non-empty names.

#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "gpusched/common/status.h"

namespace gpusched::daemon {

inline common::Status Bad(const std::string& source, const std::string& what) {
  return common::InvalidArgument(source + ": " + what);
}

// The top level of a config file: a mapping, or a null node for an empty file (every key at its default). Text that
// is not YAML, or another kind of top level, is an error naming `source`.
inline common::Result<YAML::Node> ConfigRoot(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Bad(source, std::string("not valid YAML: ") + e.what());
  }
  if (!root.IsNull() && !root.IsMap()) {
    return Bad(source, "the top level must be a mapping");
  }
  return root;
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
