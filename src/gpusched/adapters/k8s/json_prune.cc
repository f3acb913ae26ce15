#include "gpusched/adapters/k8s/json_prune.h"

#include <cstdint>
#include <utility>

#include <simdjson.h>

namespace gpusched::adapters::k8s {

using json = nlohmann::json;

JsonPrune& JsonPrune::Drop(std::string key) {
  drop_.insert(std::move(key));
  return *this;
}

JsonPrune& JsonPrune::Under(std::string key) { return under_[std::move(key)]; }

const JsonPrune* JsonPrune::Child(std::string_view key) const {
  const auto it = under_.find(key);
  return it == under_.end() ? nullptr : &it->second;
}

void JsonPrune::Apply(json& value) const {
  if (value.is_array()) {
    for (json& element : value) {
      Apply(element);
    }
    return;
  }
  if (!value.is_object()) {
    return;
  }
  for (const std::string& key : drop_) {
    value.erase(key);
  }
  for (const auto& [key, rule] : under_) {
    if (auto it = value.find(key); it != value.end()) {
      rule.Apply(*it);
    }
  }
}

namespace {

json Build(simdjson::dom::element element, const JsonPrune* rule) {
  using Type = simdjson::dom::element_type;
  switch (element.type()) {
    case Type::OBJECT: {
      json object = json::object();
      for (const simdjson::dom::key_value_pair field : simdjson::dom::object(element)) {
        if (rule != nullptr && rule->Drops(field.key)) {
          continue;
        }
        // A repeated key keeps its last value, as nlohmann's parser does.
        object[std::string(field.key)] = Build(field.value, rule != nullptr ? rule->Child(field.key) : nullptr);
      }
      return object;
    }
    case Type::ARRAY: {
      json array = json::array();
      for (const simdjson::dom::element item : simdjson::dom::array(element)) {
        array.push_back(Build(item, rule));
      }
      return array;
    }
    case Type::STRING:
      return json(std::string(std::string_view(element)));
    case Type::INT64: {
      const auto v = int64_t(element);
      return v >= 0 ? json(static_cast<uint64_t>(v)) : json(v);
    }
    case Type::UINT64:
      return json(uint64_t(element));
    case Type::DOUBLE:
      return json(double(element));
    case Type::BOOL:
      return json(bool(element));
    case Type::NULL_VALUE:
      return json(nullptr);
  }
  return json(nullptr);
}

}  // namespace

struct PrunedReader::Impl {
  simdjson::dom::parser parser;
};

PrunedReader::PrunedReader() : impl_(std::make_unique<Impl>()) {}
PrunedReader::~PrunedReader() = default;

common::Result<json> PrunedReader::Parse(std::string_view text, const JsonPrune& prune, const std::string& what) {
  simdjson::dom::element root;
  if (impl_->parser.parse(text.data(), text.size(), /*realloc_if_needed=*/true).get(root) == simdjson::SUCCESS) {
    return Build(root, &prune);
  }
  json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return common::Internal(what + ": the response is not JSON");
  }
  prune.Apply(parsed);
  return parsed;
}

const JsonPrune& SchedulingPrune() {
  static const JsonPrune kPrune = [] {
    JsonPrune p;
    JsonPrune& meta = p.Under("metadata");
    meta.Drop("managedFields");
    meta.Under("annotations").Drop("kubectl.kubernetes.io/last-applied-configuration");
    JsonPrune& spec = p.Under("spec");
    spec.Drop("volumes");
    for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
      JsonPrune& container = spec.Under(list);
      for (const char* field : {"env", "envFrom", "command", "args", "livenessProbe", "readinessProbe", "startupProbe",
                                "lifecycle", "volumeMounts", "volumeDevices"}) {
        container.Drop(field);
      }
    }
    JsonPrune& status = p.Under("status");
    for (const char* field : {"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "images",
                              "volumesInUse", "volumesAttached"}) {
      status.Drop(field);
    }
    return p;
  }();
  return kPrune;
}

}  // namespace gpusched::adapters::k8s
