#include "gpusched/kube/dra_slices.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "gpusched/kube/objects.h"
#include "gpusched/kube/quantity.h"

namespace gpusched::kube {
namespace {

using core::dra::Quantity;
using nlohmann::json;

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-z0-9]([-a-z0-9]*[a-z0-9])? with dots between such labels (dots == false: one label).
bool IsDnsName(std::string_view s, bool dots) {
  if (s.empty()) {
    return false;
  }
  char prev = '.';
  for (const char c : s) {
    if (c == '.') {
      if (!dots || prev == '.' || prev == '-') {
        return false;
      }
    } else if (c == '-') {
      if (prev == '.') {
        return false;
      }
    } else if (!IsLowerAlnum(c)) {
      return false;
    }
    prev = c;
  }
  return prev != '.' && prev != '-';
}

bool IsCIdentifier(std::string_view s) {
  if (s.empty() || IsDigit(s.front())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '_'; });
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63: a label value (non-empty) or the name part of a label key.
bool IsLabelPart(std::string_view s) {
  if (s.empty() || s.size() > 63 || !IsAlnum(s.front()) || !IsAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool IsLabelKey(std::string_view s) {
  const size_t slash = s.find('/');
  if (slash == std::string_view::npos) {
    return IsLabelPart(s);
  }
  const std::string_view prefix = s.substr(0, slash);
  return prefix.size() <= 253 && IsDnsSubdomain(prefix) && IsLabelPart(s.substr(slash + 1));
}

// The API's driver-name rule (a CSI driver name): at most 63 characters, a DNS subdomain once lower-cased.
bool IsDriverName(std::string_view s) {
  if (s.empty() || s.size() > kMaxDriverNameLength) {
    return false;
  }
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return IsDnsSubdomain(lower);
}

// Why `name` is not a valid attribute or capacity name, or "".
std::string QualifiedNameProblem(std::string_view name) {
  const size_t slash = name.find('/');
  std::string_view id = name;
  if (slash != std::string_view::npos) {
    const std::string_view domain = name.substr(0, slash);
    id = name.substr(slash + 1);
    if (id.find('/') != std::string_view::npos) {
      return "must not contain more than one slash";
    }
    if (domain.empty()) {
      return "the domain must not be empty";
    }
    if (!IsDriverName(domain)) {
      return "the domain \"" + std::string(domain) + "\" must be a DNS subdomain of at most 63 characters";
    }
  }
  if (id.empty()) {
    return "the name must not be empty";
  }
  if (id.size() > kMaxIdentifierLength) {
    return "the identifier \"" + std::string(id) + "\" is longer than 32 characters";
  }
  if (!IsCIdentifier(id)) {
    return "the identifier \"" + std::string(id) + "\" must be a C identifier (letters, digits, '_'; no leading digit)";
  }
  return "";
}

bool IsSemverIdentifier(std::string_view s, bool numeric_rule) {
  if (s.empty()) {
    return false;
  }
  if (!std::all_of(s.begin(), s.end(), [](char c) { return IsAlnum(c) || c == '-'; })) {
    return false;
  }
  const bool numeric = std::all_of(s.begin(), s.end(), IsDigit);
  return !(numeric_rule && numeric && s.size() > 1 && s.front() == '0');
}

const json* Field(const json& j, std::string_view key) {
  if (!j.is_object()) {
    return nullptr;
  }
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::string Str(const json* j) { return j != nullptr && j->is_string() ? j->get<std::string>() : std::string(); }

class Checker {
 public:
  void Add(const std::string& path, const std::string& message) { errors_.push_back(path + ": " + message); }
  [[nodiscard]] bool ok() const { return errors_.empty(); }
  [[nodiscard]] size_t count() const { return errors_.size(); }
  [[nodiscard]] common::Status Result(std::string_view what) const {
    if (errors_.empty()) {
      return common::Status::Ok();
    }
    std::string message = std::string(what) + " is invalid: ";
    for (size_t i = 0; i < errors_.size(); ++i) {
      message += (i == 0 ? "" : "; ") + errors_[i];
    }
    return common::InvalidArgument(message);
  }

  // A quantity, or nullopt (and an error) when it is missing or malformed.
  std::optional<core::dra::Quantity> Qty(const json* j, const std::string& path, bool required) {
    if (j == nullptr) {
      if (required) {
        Add(path, "required");
      }
      return std::nullopt;
    }
    // The server accepts any quantity it can parse (it rounds below a milli-unit); the decoder is stricter.
    if (!j->is_string() && !j->is_number()) {
      Add(path, "a quantity must be a string or a number");
      return std::nullopt;
    }
    auto milli = ParseMilliQuantity(j->is_string() ? j->get<std::string>() : j->dump());
    if (!milli.ok()) {
      Add(path, milli.status().message());
      return std::nullopt;
    }
    return core::dra::Quantity{*milli};
  }

  // A list of strings of at most `max` entries (condition types); "" when absent.
  void Conditions(const json& device, const char* key, const std::string& path) {
    const json* list = Field(device, key);
    if (list == nullptr) {
      return;
    }
    if (!list->is_array()) {
      Add(path + "." + key, "must be a list of condition types");
      return;
    }
    if (list->size() > 4) {
      Add(path + "." + key, "must have at most 4 entries");
    }
    for (const auto& c : *list) {
      if (!c.is_string() || !IsLabelKey(c.get<std::string>())) {
        Add(path + "." + key, "each entry must be a condition type (a label key)");
      }
    }
  }

  void Attribute(const json& a, const std::string& path, size_t& values) {
    if (!a.is_object()) {
      Add(path, "must be an object with exactly one of int, bool, string, version, ints, bools, strings, versions");
      return;
    }
    int set = 0;
    if (const json* v = Field(a, "int"); v != nullptr) {
      ++set;
      ++values;
      if (!v->is_number_integer()) {
        Add(path + ".int", "must be an integer");
      }
    }
    if (const json* v = Field(a, "bool"); v != nullptr) {
      ++set;
      ++values;
      if (!v->is_boolean()) {
        Add(path + ".bool", "must be true or false");
      }
    }
    if (const json* v = Field(a, "string"); v != nullptr) {
      ++set;
      ++values;
      StringValue(*v, path + ".string", false);
    }
    if (const json* v = Field(a, "version"); v != nullptr) {
      ++set;
      ++values;
      StringValue(*v, path + ".version", true);
    }
    for (const char* key : {"ints", "bools", "strings", "versions"}) {
      const json* list = Field(a, key);
      if (list == nullptr) {
        continue;
      }
      ++set;
      const std::string lpath = path + "." + key;
      if (!list->is_array() || list->empty()) {
        Add(lpath, "must be a non-empty list");
        continue;
      }
      values += list->size();
      for (size_t i = 0; i < list->size(); ++i) {
        const json& item = (*list)[i];
        const std::string ipath = lpath + "[" + std::to_string(i) + "]";
        if (key[0] == 'i' && !item.is_number_integer()) {
          Add(ipath, "must be an integer");
        } else if (key[0] == 'b' && !item.is_boolean()) {
          Add(ipath, "must be true or false");
        } else if (key[0] == 's' || key[0] == 'v') {
          StringValue(item, ipath, key[0] == 'v');
        }
      }
    }
    if (set != 1) {
      Add(path, "exactly one value must be specified");
    }
  }

  void StringValue(const json& v, const std::string& path, bool version) {
    if (!v.is_string()) {
      Add(path, "must be a string");
      return;
    }
    const std::string s = v.get<std::string>();
    if (s.size() > kMaxAttributeValueLength) {
      Add(path, "must be at most 64 characters (has " + std::to_string(s.size()) + ")");
    }
    if (version && !IsSemver(s)) {
      Add(path, "\"" + s + "\" must be a semantic version (semver.org 2.0.0), e.g. 535.104.5");
    }
  }

  void RequestPolicy(const json& p, core::dra::Quantity capacity, const std::string& path) {
    if (!p.is_object()) {
      Add(path, "must be an object");
      return;
    }
    const std::optional<core::dra::Quantity> def = Qty(Field(p, "default"), path + ".default", false);
    const json* values = Field(p, "validValues");
    const json* range = Field(p, "validRange");
    if (values != nullptr && range != nullptr) {
      Add(path, "exactly one policy can be specified, not both validValues and validRange");
      return;
    }
    if (values != nullptr) {
      if (!values->is_array()) {
        Add(path + ".validValues", "must be a list of quantities");
        return;
      }
      if (Field(p, "default") == nullptr) {
        Add(path + ".default", "required when validValues is defined");
      }
      if (values->size() > kMaxValidValues) {
        Add(path + ".validValues", "must have at most 10 entries");
      }
      std::optional<core::dra::Quantity> prev;
      bool found_default = false;
      std::set<int64_t> seen;
      for (size_t i = 0; i < values->size(); ++i) {
        const std::string vpath = path + ".validValues[" + std::to_string(i) + "]";
        auto v = Qty(&(*values)[i], vpath, true);
        if (!v.has_value()) {
          continue;
        }
        if (prev.has_value() && *v < *prev) {
          Add(vpath, "values must be sorted in ascending order");
        }
        if (!seen.insert(v->milli).second) {
          Add(vpath, "duplicate value " + FormatDraQuantity(*v));
        }
        if (*v > capacity) {
          Add(vpath, "option " + FormatDraQuantity(*v) + " is larger than the capacity " + FormatDraQuantity(capacity));
        }
        found_default = found_default || (def.has_value() && *v == *def);
        prev = v;
      }
      if (def.has_value() && !found_default) {
        Add(path + ".validValues", "the default " + FormatDraQuantity(*def) + " is not one of the valid values");
      }
      return;
    }
    if (range == nullptr) {
      return;
    }
    const std::string rpath = path + ".validRange";
    if (!range->is_object()) {
      Add(rpath, "must be an object");
      return;
    }
    if (Field(p, "default") == nullptr) {
      Add(path + ".default", "required when validRange is defined");
    }
    const auto min = Qty(Field(*range, "min"), rpath + ".min", true);
    const auto max = Qty(Field(*range, "max"), rpath + ".max", false);
    const auto step = Qty(Field(*range, "step"), rpath + ".step", false);
    if (!min.has_value()) {
      return;
    }
    if (*min > capacity) {
      Add(rpath + ".min",
          "min " + FormatDraQuantity(*min) + " is larger than the capacity " + FormatDraQuantity(capacity));
    }
    if (def.has_value() && *def < *min) {
      Add(path + ".default", "default " + FormatDraQuantity(*def) + " is less than min " + FormatDraQuantity(*min));
    }
    if (max.has_value()) {
      if (*min > *max) {
        Add(rpath + ".max", "min " + FormatDraQuantity(*min) + " is larger than max " + FormatDraQuantity(*max));
      }
      if (*max > capacity) {
        Add(rpath + ".max",
            "max " + FormatDraQuantity(*max) + " is larger than the capacity " + FormatDraQuantity(capacity));
      }
      if (def.has_value() && *def > *max) {
        Add(path + ".default", "default " + FormatDraQuantity(*def) + " is more than max " + FormatDraQuantity(*max));
      }
    }
    if (step.has_value()) {
      if (step->milli <= 0) {
        Add(rpath + ".step", "must be greater than zero");
        return;
      }
      if (min->milli > std::numeric_limits<int64_t>::max() - step->milli ||
          core::dra::Quantity{min->milli + step->milli} > capacity) {
        Add(rpath + ".step", "one step from min (" + FormatDraQuantity(*min) + " + " + FormatDraQuantity(*step) +
                                 ") is larger than the capacity " + FormatDraQuantity(capacity));
      }
      auto on_step = [&](core::dra::Quantity v, const char* what) {
        if (v >= *min && (v.milli - min->milli) % step->milli != 0) {
          Add(rpath + ".step", std::string(what) + " " + FormatDraQuantity(v) + " is not a multiple of the step " +
                                   FormatDraQuantity(*step) + " from min " + FormatDraQuantity(*min));
        }
      };
      if (def.has_value()) {
        on_step(*def, "default");
      }
      if (max.has_value()) {
        on_step(*max, "max");
      }
    }
  }

  void Taint(const json& t, const std::string& path) {
    if (!t.is_object()) {
      Add(path, "must be an object with key and effect");
      return;
    }
    const json* key = Field(t, "key");
    if (key == nullptr || !key->is_string() || key->get<std::string>().empty()) {
      Add(path + ".key", "required");
    } else if (!IsLabelKey(key->get<std::string>())) {
      Add(path + ".key",
          "\"" + key->get<std::string>() + "\" must be a label name ([prefix/]name, name at most 63 characters)");
    }
    if (const json* value = Field(t, "value"); value != nullptr) {
      if (!value->is_string() || (!value->get<std::string>().empty() && !IsLabelPart(value->get<std::string>()))) {
        Add(path + ".value", "must be a label value (at most 63 characters of letters, digits, '-', '_', '.')");
      }
    }
    const std::string effect = Str(Field(t, "effect"));
    if (effect.empty()) {
      Add(path + ".effect", "required");
    } else if (effect != "None" && effect != "NoSchedule" && effect != "NoExecute") {
      Add(path + ".effect", "\"" + effect + "\" is not one of None, NoSchedule, NoExecute");
    }
    if (const json* added = Field(t, "timeAdded"); added != nullptr) {
      if (!added->is_string() || !ParseMicroTime(added->get<std::string>()).ok()) {
        Add(path + ".timeAdded", "must be an RFC 3339 time");
      }
    }
  }

  // Returns whether the device uses a feature that lowers the slice's device limit to 64.
  bool Device(const json& d, const std::string& path, bool per_device_nodes, std::set<std::string>& names) {
    if (!d.is_object()) {
      Add(path, "must be an object");
      return false;
    }
    const std::string name = Str(Field(d, "name"));
    if (name.empty()) {
      Add(path + ".name", "required");
    } else if (name.size() > 63 || !IsDnsName(name, false)) {
      Add(path + ".name", "\"" + name + "\" must be a DNS label (at most 63 lower-case letters, digits and '-')");
    } else if (!names.insert(name).second) {
      Add(path + ".name", "duplicate device name \"" + name + "\"");
    }
    bool advanced = false;
    const json* attributes = Field(d, "attributes");
    const json* capacity = Field(d, "capacity");
    size_t entries = 0;
    size_t values = 0;
    if (attributes != nullptr) {
      if (!attributes->is_object()) {
        Add(path + ".attributes", "must be a map of name to value");
      } else {
        entries += attributes->size();
        for (const auto& [key, a] : attributes->items()) {
          const std::string apath = path + ".attributes[" + key + "]";
          if (const std::string why = QualifiedNameProblem(key); !why.empty()) {
            Add(apath, why);
          }
          Attribute(a, apath, values);
          for (const char* list : {"ints", "bools", "strings", "versions"}) {
            advanced = advanced || Field(a, list) != nullptr;
          }
        }
      }
    }
    const json* multiple = Field(d, "allowMultipleAllocations");
    if (multiple != nullptr && !multiple->is_boolean()) {
      Add(path + ".allowMultipleAllocations", "must be true or false");
    }
    const bool shareable = multiple != nullptr && multiple->is_boolean() && multiple->get<bool>();
    if (capacity != nullptr) {
      if (!capacity->is_object()) {
        Add(path + ".capacity", "must be a map of name to capacity");
      } else {
        entries += capacity->size();
        for (const auto& [key, c] : capacity->items()) {
          const std::string cpath = path + ".capacity[" + key + "]";
          if (const std::string why = QualifiedNameProblem(key); !why.empty()) {
            Add(cpath, why);
          }
          const auto value = Qty(Field(c, "value"), cpath + ".value", true);
          const json* policy = Field(c, "requestPolicy");
          if (policy != nullptr && !shareable) {
            Add(cpath + ".requestPolicy", "forbidden: allowMultipleAllocations must be true");
          } else if (policy != nullptr && value.has_value()) {
            RequestPolicy(*policy, *value, cpath + ".requestPolicy");
          }
        }
      }
    }
    if (entries > kMaxAttributesAndCapacitiesPerDevice) {
      Add(path,
          "the total number of attributes and capacities must not exceed 32 (has " + std::to_string(entries) + ")");
    }
    if (values > kMaxAttributeValuesPerDevice) {
      Add(path, "the total number of attribute values must not exceed 48 (has " + std::to_string(values) + ")");
    }
    if (const json* taints = Field(d, "taints"); taints != nullptr) {
      if (!taints->is_array()) {
        Add(path + ".taints", "must be a list");
      } else {
        advanced = advanced || !taints->empty();
        if (taints->size() > kMaxTaintsPerDevice) {
          Add(path + ".taints", "must have at most 16 entries");
        }
        for (size_t i = 0; i < taints->size(); ++i) {
          Taint((*taints)[i], path + ".taints[" + std::to_string(i) + "]");
        }
      }
    }
    if (const json* counters = Field(d, "consumesCounters"); counters != nullptr) {
      if (!counters->is_array()) {
        Add(path + ".consumesCounters", "must be a list");
      } else {
        advanced = advanced || !counters->empty();
        if (counters->size() > 2) {
          Add(path + ".consumesCounters", "must have at most 2 entries");
        }
        for (size_t i = 0; i < counters->size(); ++i) {
          const json& c = (*counters)[i];
          const std::string cpath = path + ".consumesCounters[" + std::to_string(i) + "]";
          if (!IsDnsName(Str(Field(c, "counterSet")), false)) {
            Add(cpath + ".counterSet", "required, a DNS label");
          }
          const json* map = Field(c, "counters");
          if (map == nullptr || !map->is_object() || map->empty()) {
            Add(cpath + ".counters", "required");
          }
        }
      }
    }
    int placements = 0;
    for (const char* key : {"nodeName", "nodeSelector", "allNodes"}) {
      if (Field(d, key) != nullptr) {
        ++placements;
        if (!per_device_nodes) {
          Add(path + "." + key, "can only be set if perDeviceNodeSelection is set to true in the ResourceSlice spec");
        }
      }
    }
    if (per_device_nodes && placements != 1) {
      Add(path, "exactly one of nodeName, nodeSelector, or allNodes is required when perDeviceNodeSelection is true");
    }
    Conditions(d, "bindingConditions", path);
    Conditions(d, "bindingFailureConditions", path);
    return advanced;
  }

  std::vector<std::string> errors_;
};

void CheckMetadata(const json& slice, Checker& c) {
  const json* md = Field(slice, "metadata");
  const std::string name = Str(Field(md == nullptr ? json::object() : *md, "name"));
  const std::string generate = md == nullptr ? std::string() : Str(Field(*md, "generateName"));
  if (name.empty() && generate.empty()) {
    c.Add("metadata.name", "name or generateName is required");
  }
  if (!name.empty() && (name.size() > kMaxObjectNameLength || !IsDnsSubdomain(name))) {
    c.Add("metadata.name",
          "\"" + name + "\" must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)");
  }
  if (name.empty() && !generate.empty()) {
    // The server appends 5 characters; the prefix must make a valid name with them.
    const std::string probe = generate + "abcde";
    if (probe.size() > kMaxObjectNameLength || !IsDnsSubdomain(probe)) {
      c.Add("metadata.generateName", "\"" + generate + "\" does not make a DNS subdomain");
    }
  }
}

// The pool's node selection; adds errors.
void CheckSpec(const json& spec, Checker& c) {
  const std::string driver = Str(Field(spec, "driver"));
  if (driver.empty()) {
    c.Add("spec.driver", "required");
  } else if (!IsDriverName(driver)) {
    c.Add("spec.driver", "\"" + driver + "\" must be a DNS subdomain of at most 63 characters");
  }
  const json* pool = Field(spec, "pool");
  if (pool == nullptr || !pool->is_object()) {
    c.Add("spec.pool", "required");
  } else {
    const std::string name = Str(Field(*pool, "name"));
    if (name.empty()) {
      c.Add("spec.pool.name", "required");
    } else {
      bool parts_ok = name.size() <= kMaxPoolNameLength;
      size_t start = 0;
      while (parts_ok) {
        const size_t slash = name.find('/', start);
        parts_ok = IsDnsSubdomain(
            std::string_view(name).substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) {
          break;
        }
        start = slash + 1;
      }
      if (!parts_ok) {
        c.Add("spec.pool.name", "\"" + name + "\" must be DNS subdomains joined by '/', at most 253 characters");
      }
    }
    const json* gen = Field(*pool, "generation");
    if (gen != nullptr && (!gen->is_number_integer() || gen->get<int64_t>() < 0)) {
      c.Add("spec.pool.generation", "must be an integer greater than or equal to zero");
    }
    const json* count = Field(*pool, "resourceSliceCount");
    if (count == nullptr || !count->is_number_integer() || count->get<int64_t>() <= 0) {
      c.Add("spec.pool.resourceSliceCount", "must be greater than zero");
    }
  }
  int selections = 0;
  if (const json* node = Field(spec, "nodeName"); node != nullptr) {
    const std::string n = Str(node);
    if (n.empty()) {
      c.Add("spec.nodeName", "must be either unset or set to a non-empty string");
    } else {
      ++selections;
      if (n.size() > kMaxObjectNameLength || !IsDnsSubdomain(n)) {
        c.Add("spec.nodeName", "\"" + n + "\" must be a DNS subdomain (a node name)");
      }
    }
  }
  if (const json* selector = Field(spec, "nodeSelector"); selector != nullptr) {
    ++selections;
    const json* terms = Field(*selector, "nodeSelectorTerms");
    if (terms == nullptr || !terms->is_array() || terms->size() != 1) {
      c.Add("spec.nodeSelector.nodeSelectorTerms", "must have exactly one node selector term");
    }
  }
  bool per_device = false;
  for (const char* key : {"allNodes", "perDeviceNodeSelection"}) {
    if (const json* flag = Field(spec, key); flag != nullptr) {
      if (!flag->is_boolean() || !flag->get<bool>()) {
        c.Add(std::string("spec.") + key, "must be either unset or set to true");
      } else {
        ++selections;
        per_device = per_device || std::string_view(key) == "perDeviceNodeSelection";
      }
    }
  }
  if (selections == 0) {
    c.Add("spec", "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required");
  } else if (selections > 1) {
    c.Add("spec",
          "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, but several are set");
  }
  const json* devices = Field(spec, "devices");
  const json* counters = Field(spec, "sharedCounters");
  if (devices != nullptr && counters != nullptr) {
    c.Add("spec", "only one of sharedCounters or devices is allowed");
  }
  if (counters != nullptr && (!counters->is_array() || counters->size() > 8)) {
    c.Add("spec.sharedCounters", "must be a list of at most 8 counter sets");
  }
  if (devices == nullptr) {
    return;
  }
  if (!devices->is_array()) {
    c.Add("spec.devices", "must be a list");
    return;
  }
  std::set<std::string> names;
  bool advanced = false;
  for (size_t i = 0; i < devices->size(); ++i) {
    advanced = c.Device((*devices)[i], "spec.devices[" + std::to_string(i) + "]", per_device, names) || advanced;
  }
  const size_t limit = advanced ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice;
  if (devices->size() > limit) {
    c.Add("spec.devices", "must have at most " + std::to_string(limit) + " items" +
                              (advanced ? " when a device has taints, consumes counters or has list attributes" : "") +
                              " (has " + std::to_string(devices->size()) + ")");
  }
}

std::string Qualify(const std::string& driver, const std::string& name) {
  return name.find('/') == std::string::npos ? driver + "/" + name : name;
}

std::string Unqualify(const std::string& driver, const std::string& name) {
  const std::string prefix = driver + "/";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

// Decodes a validated device; refuses fields core::dra does not model.
common::Result<core::dra::Device> DecodeDevice(const json& d, const std::string& driver, const std::string& path) {
  core::dra::Device out;
  out.name = Str(Field(d, "name"));
  const std::string where = path + " (device " + out.name + ")";
  for (const char* key : {"consumesCounters", "nodeName", "nodeSelector", "allNodes", "bindingConditions",
                          "bindingFailureConditions", "nodeAllocatableResources"}) {
    const json* v = Field(d, key);
    if (v != nullptr && !(v->is_array() && v->empty()) && !(v->is_object() && v->empty())) {
      return common::InvalidArgument(where + "." + key + ": not supported by gpusched (core::dra::Device has no " +
                                     key + "); refusing the slice rather than ignoring it");
    }
  }
  if (const json* binds = Field(d, "bindsToNode"); binds != nullptr && binds->is_boolean() && binds->get<bool>()) {
    return common::InvalidArgument(where + ".bindsToNode: true is not supported by gpusched");
  }
  if (const json* attributes = Field(d, "attributes"); attributes != nullptr) {
    for (const auto& [key, a] : attributes->items()) {
      const std::string name = Qualify(driver, key);
      core::dra::AttributeValue v;
      if (const json* i = Field(a, "int"); i != nullptr) {
        v = core::dra::AttributeValue::Int(i->get<int64_t>());
      } else if (const json* b = Field(a, "bool"); b != nullptr) {
        v = core::dra::AttributeValue::Bool(b->get<bool>());
      } else if (const json* s = Field(a, "string"); s != nullptr) {
        v = core::dra::AttributeValue::String(s->get<std::string>());
      } else if (const json* ver = Field(a, "version"); ver != nullptr) {
        v = core::dra::AttributeValue::Version(ver->get<std::string>());
      } else {
        return common::InvalidArgument(where + ".attributes[" + key +
                                       "]: list-typed attributes are not supported by gpusched");
      }
      if (!out.attributes.emplace(name, std::move(v)).second) {
        return common::InvalidArgument(where + ".attributes[" + key + "]: attribute " + name +
                                       " is given twice (with and without the driver's domain)");
      }
    }
  }
  if (const json* m = Field(d, "allowMultipleAllocations"); m != nullptr) {
    out.allow_multiple_allocations = m->get<bool>();
  }
  if (const json* capacity = Field(d, "capacity"); capacity != nullptr) {
    for (const auto& [key, c] : capacity->items()) {
      const std::string name = Qualify(driver, key);
      const std::string cpath = where + ".capacity[" + key + "]";
      auto exact = [&cpath](const json& q, const std::string& field) -> common::Result<Quantity> {
        auto v = ParseDraQuantity(q);
        if (!v.ok()) {
          return common::InvalidArgument(cpath + field + ": " + v.status().message());
        }
        return *v;
      };
      core::dra::DeviceCapacity cap;
      GPUSCHED_ASSIGN_OR_RETURN(value, exact(*Field(c, "value"), ".value"));
      cap.value = value;
      if (const json* p = Field(c, "requestPolicy"); p != nullptr) {
        core::dra::CapacityRequestPolicy policy;
        if (const json* def = Field(*p, "default"); def != nullptr) {
          GPUSCHED_ASSIGN_OR_RETURN(v, exact(*def, ".requestPolicy.default"));
          policy.default_value = v;
        }
        if (const json* values = Field(*p, "validValues"); values != nullptr) {
          for (const auto& item : *values) {
            GPUSCHED_ASSIGN_OR_RETURN(v, exact(item, ".requestPolicy.validValues"));
            policy.valid_values.push_back(v);
          }
        }
        if (const json* range = Field(*p, "validRange"); range != nullptr) {
          for (auto [k, slot] :
               {std::pair{"min", &policy.min}, std::pair{"max", &policy.max}, std::pair{"step", &policy.step}}) {
            if (const json* q = Field(*range, k); q != nullptr) {
              GPUSCHED_ASSIGN_OR_RETURN(v, exact(*q, std::string(".requestPolicy.validRange.") + k));
              *slot = v;
            }
          }
        }
        cap.request_policy = std::move(policy);
      }
      if (!out.capacity.emplace(name, std::move(cap)).second) {
        return common::InvalidArgument(where + ".capacity[" + key + "]: capacity " + name +
                                       " is given twice (with and without the driver's domain)");
      }
    }
  }
  if (const json* taints = Field(d, "taints"); taints != nullptr) {
    for (const auto& t : *taints) {
      out.taints.push_back(core::dra::DeviceTaint{.key = Str(Field(t, "key")),
                                                  .value = Str(Field(t, "value")),
                                                  .effect = Str(Field(t, "effect")),
                                                  .time_added = Str(Field(t, "timeAdded"))});
    }
  }
  return out;
}

json EncodeQuantity(Quantity q) { return FormatDraQuantity(q); }

json EncodeDevice(const core::dra::Device& d, const std::string& driver) {
  json out = {{"name", d.name}};
  if (!d.attributes.empty()) {
    json attributes = json::object();
    for (const auto& [name, v] : d.attributes) {
      json value;
      switch (v.kind) {
        case core::dra::AttributeKind::kInt:
          value = {{"int", v.int_value}};
          break;
        case core::dra::AttributeKind::kBool:
          value = {{"bool", v.bool_value}};
          break;
        case core::dra::AttributeKind::kString:
          value = {{"string", v.string_value}};
          break;
        case core::dra::AttributeKind::kVersion:
          value = {{"version", v.string_value}};
          break;
      }
      attributes[Unqualify(driver, name)] = std::move(value);
    }
    out["attributes"] = std::move(attributes);
  }
  if (!d.capacity.empty()) {
    json capacity = json::object();
    for (const auto& [name, c] : d.capacity) {
      json entry = {{"value", EncodeQuantity(c.value)}};
      if (c.request_policy.has_value()) {
        const core::dra::CapacityRequestPolicy& p = *c.request_policy;
        json policy = json::object();
        if (p.default_value.has_value()) {
          policy["default"] = EncodeQuantity(*p.default_value);
        }
        if (!p.valid_values.empty()) {
          json values = json::array();
          for (const auto& v : p.valid_values) {
            values.push_back(EncodeQuantity(v));
          }
          policy["validValues"] = std::move(values);
        }
        if (p.min.has_value() || p.max.has_value() || p.step.has_value()) {
          json range = json::object();
          if (p.min.has_value()) {
            range["min"] = EncodeQuantity(*p.min);
          }
          if (p.max.has_value()) {
            range["max"] = EncodeQuantity(*p.max);
          }
          if (p.step.has_value()) {
            range["step"] = EncodeQuantity(*p.step);
          }
          policy["validRange"] = std::move(range);
        }
        entry["requestPolicy"] = std::move(policy);
      }
      capacity[Unqualify(driver, name)] = std::move(entry);
    }
    out["capacity"] = std::move(capacity);
  }
  if (d.allow_multiple_allocations) {
    out["allowMultipleAllocations"] = true;
  }
  if (!d.taints.empty()) {
    json taints = json::array();
    for (const auto& t : d.taints) {
      json taint = {{"key", t.key}, {"effect", t.effect}};
      if (!t.value.empty()) {
        taint["value"] = t.value;
      }
      if (!t.time_added.empty()) {
        taint["timeAdded"] = t.time_added;
      }
      taints.push_back(std::move(taint));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace

bool IsDnsLabel(std::string_view s) { return s.size() <= 63 && IsDnsName(s, false); }

bool IsDnsSubdomain(std::string_view s) { return s.size() <= 253 && IsDnsName(s, true); }

bool IsSemver(std::string_view s) {
  std::string_view core_part = s;
  std::string_view pre;
  std::string_view build;
  if (const size_t plus = core_part.find('+'); plus != std::string_view::npos) {
    build = core_part.substr(plus + 1);
    core_part = core_part.substr(0, plus);
    if (build.empty()) {
      return false;
    }
  }
  if (const size_t dash = core_part.find('-'); dash != std::string_view::npos) {
    pre = core_part.substr(dash + 1);
    core_part = core_part.substr(0, dash);
    if (pre.empty()) {
      return false;
    }
  }
  auto each = [](std::string_view list, auto ok) {
    size_t start = 0;
    int n = 0;
    for (;;) {
      const size_t dot = list.find('.', start);
      const std::string_view part =
          list.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
      if (!ok(part)) {
        return -1;
      }
      ++n;
      if (dot == std::string_view::npos) {
        return n;
      }
      start = dot + 1;
    }
  };
  const int numbers = each(core_part, [](std::string_view p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), IsDigit) && (p.size() == 1 || p.front() != '0');
  });
  if (numbers != 3) {
    return false;
  }
  if (!pre.empty() && each(pre, [](std::string_view p) { return IsSemverIdentifier(p, true); }) < 0) {
    return false;
  }
  return build.empty() || each(build, [](std::string_view p) { return IsSemverIdentifier(p, false); }) > 0;
}

std::string FormatDraQuantity(Quantity q) { return core::dra::FormatQuantity(q); }

common::Result<Quantity> ParseDraQuantity(const json& value) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (value.is_number()) {
    text = value.dump();
  } else {
    return common::InvalidArgument("a quantity must be a string or a number, not " + value.dump());
  }
  return core::dra::ParseQuantity(text);
}

common::Status ValidateResourceSlice(const json& slice) {
  if (!slice.is_object()) {
    return common::InvalidArgument("ResourceSlice is invalid: not a JSON object");
  }
  Checker c;
  CheckMetadata(slice, c);
  const json* spec = Field(slice, "spec");
  if (spec == nullptr || !spec->is_object()) {
    c.Add("spec", "required");
  } else {
    CheckSpec(*spec, c);
  }
  const json* md = Field(slice, "metadata");
  const std::string name = md == nullptr ? std::string() : Str(Field(*md, "name"));
  return c.Result(name.empty() ? "ResourceSlice" : "ResourceSlice " + name);
}

common::Result<ResourceSliceInfo> DecodeResourceSlice(const json& slice) {
  GPUSCHED_RETURN_IF_ERROR(ValidateResourceSlice(slice));
  const json& spec = slice["spec"];
  const json& md = slice.contains("metadata") ? slice["metadata"] : json::object();
  ResourceSliceInfo out;
  out.name = Str(Field(md, "name"));
  out.resource_version = Str(Field(md, "resourceVersion"));
  const std::string where = "ResourceSlice " + out.name;
  for (const char* key : {"sharedCounters", "perDeviceNodeSelection", "partitionTypeAttribute", "skipNodeOperations"}) {
    if (Field(spec, key) != nullptr) {
      return common::InvalidArgument(where + ": spec." + key + " is not supported by gpusched");
    }
  }
  out.pool.driver = Str(Field(spec, "driver"));
  const json& pool = spec["pool"];
  out.pool.pool = Str(Field(pool, "name"));
  out.pool.generation = Field(pool, "generation") != nullptr ? pool["generation"].get<int64_t>() : 0;
  out.resource_slice_count = pool["resourceSliceCount"].get<int64_t>();
  out.pool.node = common::NodeName(Str(Field(spec, "nodeName")));
  out.node_local = !out.pool.node.empty();
  if (const json* devices = Field(spec, "devices"); devices != nullptr) {
    for (size_t i = 0; i < devices->size(); ++i) {
      GPUSCHED_ASSIGN_OR_RETURN(
          d, DecodeDevice((*devices)[i], out.pool.driver, where + ": spec.devices[" + std::to_string(i) + "]"));
      out.pool.devices.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<AssembledPool> AssemblePools(const std::vector<ResourceSliceInfo>& slices) {
  std::map<std::pair<std::string, std::string>, std::vector<const ResourceSliceInfo*>> by_pool;
  for (const auto& s : slices) {
    by_pool[{s.pool.driver, s.pool.pool}].push_back(&s);
  }
  std::vector<AssembledPool> out;
  for (auto& [key, members] : by_pool) {
    int64_t generation = 0;
    for (const ResourceSliceInfo* s : members) {
      generation = std::max(generation, s->pool.generation);
    }
    std::vector<const ResourceSliceInfo*> current;
    for (const ResourceSliceInfo* s : members) {
      if (s->pool.generation == generation) {
        current.push_back(s);
      }
    }
    std::sort(current.begin(), current.end(),
              [](const ResourceSliceInfo* a, const ResourceSliceInfo* b) { return a->name < b->name; });
    AssembledPool p;
    p.pool = core::dra::DevicePool{
        .driver = key.first, .pool = key.second, .node = current.front()->pool.node, .generation = generation};
    p.node_local = current.front()->node_local;
    std::set<std::string> names;
    for (const ResourceSliceInfo* s : current) {
      if (s->resource_slice_count != current.front()->resource_slice_count) {
        p.problem = "its slices of generation " + std::to_string(generation) + " disagree on resourceSliceCount";
      }
      if (s->pool.node != p.pool.node) {
        p.problem = "its slices of generation " + std::to_string(generation) + " name different nodes";
      }
      for (const auto& d : s->pool.devices) {
        if (!names.insert(d.name).second && p.problem.empty()) {
          p.problem = "device " + d.name + " appears in two of its slices";
        }
        p.pool.devices.push_back(d);
      }
    }
    const int64_t want = current.front()->resource_slice_count;
    if (p.problem.empty() && static_cast<int64_t>(current.size()) != want) {
      p.problem = "incomplete: " + std::to_string(current.size()) + " of " + std::to_string(want) +
                  " slices of generation " + std::to_string(generation);
    }
    out.push_back(std::move(p));
  }
  return out;
}

common::Result<std::vector<json>> EncodeResourceSliceSpecs(const core::dra::DevicePool& pool) {
  if (pool.node.empty()) {
    return common::InvalidArgument("pool " + pool.pool + " of " + pool.driver +
                                   ": only node-local pools are published (no node name)");
  }
  std::set<std::string> names;
  for (const auto& d : pool.devices) {
    const size_t entries = d.attributes.size() + d.capacity.size();
    if (entries > kMaxAttributesAndCapacitiesPerDevice) {
      return common::InvalidArgument("device " + d.name + " of pool " + pool.pool + " has " + std::to_string(entries) +
                                     " attributes and capacities; a ResourceSlice allows at most 32 per device");
    }
    if (!names.insert(d.name).second) {
      return common::InvalidArgument("pool " + pool.pool + " has two devices named " + d.name);
    }
  }
  // Greedy: a slice takes devices while it stays within its limit (64 once one of its devices has taints).
  std::vector<std::pair<size_t, size_t>> ranges;  // [begin, end)
  size_t begin = 0;
  while (begin < pool.devices.size() || ranges.empty()) {
    size_t end = begin;
    bool tainted = false;
    while (end < pool.devices.size()) {
      const bool t = tainted || !pool.devices[end].taints.empty();
      const size_t limit = t ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice;
      if (end - begin + 1 > limit) {
        break;
      }
      tainted = t;
      ++end;
    }
    ranges.emplace_back(begin, end);
    begin = end;
    if (begin >= pool.devices.size()) {
      break;
    }
  }
  std::vector<json> specs;
  for (const auto& [from, to] : ranges) {
    json devices = json::array();
    for (size_t i = from; i < to; ++i) {
      devices.push_back(EncodeDevice(pool.devices[i], pool.driver));
    }
    json spec = {{"driver", pool.driver},
                 {"pool",
                  {{"name", pool.pool},
                   {"generation", pool.generation},
                   {"resourceSliceCount", static_cast<int64_t>(ranges.size())}}},
                 {"nodeName", pool.node.str()},
                 {"devices", std::move(devices)}};
    const json probe = {{"metadata", {{"name", "probe"}}}, {"spec", spec}};
    if (auto s = ValidateResourceSlice(probe); !s.ok()) {
      return common::InvalidArgument("pool " + pool.pool + " of " + pool.driver +
                                     " cannot be published: " + s.message().substr(s.message().find(':') + 2));
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::string ResourceSliceName(std::string_view node, std::string_view driver, size_t index) {
  const std::string suffix = "-" + std::string(driver) + "-" + std::to_string(index);
  std::string prefix(node);
  if (prefix.size() + suffix.size() > kMaxObjectNameLength) {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a(node)));
    const size_t keep = kMaxObjectNameLength - suffix.size() - 17;
    prefix = prefix.substr(0, keep);
    while (!prefix.empty() && (prefix.back() == '.' || prefix.back() == '-')) {
      prefix.pop_back();
    }
    prefix += "-" + std::string(hash);
  }
  return prefix + suffix;
}

}  // namespace gpusched::kube
