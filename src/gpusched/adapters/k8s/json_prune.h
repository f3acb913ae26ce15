#pragma once

// Reading large API answers (a list page of 2000 pods is about 7 MB) into nlohmann::json with the fields nobody
// reads left out while reading, and the same rule applied to objects already parsed (watch events).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpusched/common/status.h"

namespace gpusched::adapters::k8s {

// Which fields of a JSON object to leave out: keys dropped at this level, and rules for the values of other keys.
// A rule for a key whose value is an array applies to each element of the array.
class JsonPrune {
 public:
  JsonPrune& Drop(std::string key);
  // The rule for the value of `key` (created empty on first use).
  JsonPrune& Under(std::string key);

  [[nodiscard]] bool Drops(std::string_view key) const { return drop_.find(key) != drop_.end(); }
  // nullptr when nothing below `key` is dropped.
  [[nodiscard]] const JsonPrune* Child(std::string_view key) const;

  // Removes what the rule drops from `value` (an object, or an array of objects; anything else is left alone).
  void Apply(nlohmann::json& value) const;

 private:
  std::set<std::string, std::less<>> drop_;
  std::map<std::string, JsonPrune, std::less<>> under_;
};

// Parses text with simdjson and builds the nlohmann::json value without what a JsonPrune drops (numbers typed as
// nlohmann's own parser types them: unsigned when not negative). Text simdjson refuses (an integer beyond 64 bits,
// say) is parsed by nlohmann and pruned after, so the result never depends on the parser; text that is not JSON is
// an error naming `what`. A reader keeps its buffers between calls (one reader per thread at a time).
class PrunedReader {
 public:
  PrunedReader();
  ~PrunedReader();
  PrunedReader(const PrunedReader&) = delete;
  PrunedReader& operator=(const PrunedReader&) = delete;

  [[nodiscard]] common::Result<nlohmann::json> Parse(std::string_view text, const JsonPrune& prune,
                                                     const std::string& what);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What no gpusched component reads from a cached pod or node and what makes such objects large: everywhere
// metadata.managedFields and the kubectl.kubernetes.io/last-applied-configuration annotation; on pods the
// containers' env, envFrom, command, args, probes, lifecycle and volumeMounts, spec.volumes, and the container
// statuses; on nodes status.images, volumesInUse and volumesAttached. Identity, labels, annotations, resources,
// scheduling fields (nodeName, schedulerName, priority, selectors, affinity, tolerations, ports), phase,
// conditions and node capacity stay.
[[nodiscard]] const JsonPrune& SchedulingPrune();

}  // namespace gpusched::adapters::k8s
