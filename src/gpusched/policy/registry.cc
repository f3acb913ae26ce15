#include "gpusched/policy/registry.h"

#include <array>

#include "gpusched/policy/best_fit_policy.h"
#include "gpusched/policy/binpack_policy.h"
#include "gpusched/policy/dot_product_policy.h"
#include "gpusched/policy/fgd_policy.h"
#include "gpusched/policy/gpu_clustering_policy.h"
#include "gpusched/policy/gpu_packing_policy.h"
#include "gpusched/policy/interference_aware_policy.h"
#include "gpusched/policy/load_aware_policy.h"
#include "gpusched/policy/random_policy.h"
#include "gpusched/policy/topology_policy.h"

namespace gpusched::policy {
namespace {

constexpr std::array kPolicies{
    PolicyEntry{"random", "a uniformly random feasible node and GPU", &RandomPolicy::Create},
    PolicyEntry{"dotprod", "least alignment of free capacity and demand (Tetris, FGD benchmark)",
                &DotProductPolicy::Create},
    PolicyEntry{"gpuclustering", "keep pods of one GPU shape together", &GpuClusteringPolicy::Create},
    PolicyEntry{"gpupacking", "shared GPUs, then used nodes, then idle nodes", &GpuPackingPolicy::Create},
    PolicyEntry{"bestfit", "the node left with the least CPU and GPU", &BestFitPolicy::Create},
    PolicyEntry{"fgd", "fragmentation gradient descent (ATC'23)", &FgdPolicy::Create},
    PolicyEntry{"fgd-scarcity", "fgd that counts GPUs the CPU cannot feed and keeps rare GPU models for tied pods",
                &FgdPolicy::CreateScarcity},
    PolicyEntry{"binpack", "most used node and GPU first", &BinpackPolicy::Create},
    PolicyEntry{"spread", "least used node and GPU first", &SpreadPolicy::Create},
    PolicyEntry{"load-aware", "least-loaded GPUs by live metrics, then the stronger model", &LoadAwarePolicy::Create},
    PolicyEntry{"interference-aware", "the GPU where co-located pods slow each other least, empty GPUs first",
                &InterferenceAwarePolicy::Create},
    PolicyEntry{"topology", "the node where the pod's GPUs are best linked and the fewest NVLink groups break",
                &TopologyPolicy::Create},
};

}  // namespace

std::span<const PolicyEntry> Registry() { return kPolicies; }

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const auto& e : kPolicies) {
    names.emplace_back(e.name);
  }
  return names;
}

std::vector<std::string> BenchmarkPolicyNames() {
  return {"random", "dotprod", "gpuclustering", "gpupacking", "bestfit", "fgd"};
}

common::Result<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name, const PolicyOptions& options) {
  for (const auto& e : kPolicies) {
    if (e.name == name) {
      return e.factory(options);
    }
  }
  std::string known;
  for (const auto& e : kPolicies) {
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  return common::InvalidArgument("unknown policy '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace gpusched::policy
