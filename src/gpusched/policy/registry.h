#pragma once

// The one table of placement policies: {name, summary, factory}. Adding a policy = one line in registry.cc.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/policy/placement_policy.h"
#include "gpusched/policy/policy_options.h"

namespace gpusched::policy {

using PolicyFactory = common::Result<std::unique_ptr<PlacementPolicy>> (*)(const PolicyOptions&);

struct PolicyEntry {
  std::string_view name;
  std::string_view summary;
  PolicyFactory factory;
};

[[nodiscard]] std::span<const PolicyEntry> Registry();
[[nodiscard]] std::vector<std::string> PolicyNames();
// The six policies of the FGD paper's comparison, in the paper's order.
[[nodiscard]] std::vector<std::string> BenchmarkPolicyNames();

// Builds the named policy; an unknown name or bad options is an InvalidArgument naming the choices.
[[nodiscard]] common::Result<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name,
                                                                          const PolicyOptions& options);

}  // namespace gpusched::policy
