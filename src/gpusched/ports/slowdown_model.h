#pragma once

// SlowdownModel: how much co-located applications slow each other on one GPU. The slowdown of A next to B is
// A's isolated throughput over its throughput while sharing the GPU with B: 1 = unaffected, 2 = as bad as plain
// time slicing, larger = worse than time slicing. Applications are named by their class (annotation gpusched.io/app,
// e.g. "ResNet-50 (batch size 64)" or "resnet50-bs64"); the GPU by its model or type ("p100", "V100-SXM2-16GB").
//
// A model answers for any names: an application it has never seen gets a documented prior (the implementation
// says which), never an error. Implementations are immutable after construction and safe to call from any thread.

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpusched::ports {

struct PairSlowdown {
  double incoming = 1.0;  // slowdown of the application being placed
  double resident = 1.0;  // slowdown of the one already on the GPU, once the incoming one arrives
  bool feasible = true;   // false: the two are predicted not to fit in the GPU's memory together
};

class SlowdownModel {
 public:
  virtual ~SlowdownModel() = default;
  // Both slowdowns of a pair sharing one GPU of type `gpu`.
  [[nodiscard]] virtual PairSlowdown Pair(std::string_view incoming, std::string_view resident,
                                          std::string_view gpu) const = 0;
  // Whether the model knows the application on that GPU type (measured or fingerprinted); unknown ones get the
  // prior.
  [[nodiscard]] virtual bool Knows(std::string_view app, std::string_view gpu) const = 0;
  // "xgboost model 26 apps (p100, k80, v100)", for logs.
  [[nodiscard]] virtual std::string Describe() const = 0;
};

// The slowdowns when `incoming` joins `residents` on one GPU. Only pairs are measured, so with several residents
// the excess slowdowns add: s(A | B, C) = 1 + (s(A|B) − 1) + (s(A|C) − 1), and each resident r gains
// s(r | incoming) − 1 on top of what it has now. Returns the incoming's slowdown and the residents' added slowdown
// (Σ over residents of s(r|incoming) − 1); nullopt when any pair is infeasible.
struct GroupSlowdown {
  double incoming = 1.0;
  double residents_added = 0.0;
  [[nodiscard]] double Cost() const { return incoming + residents_added; }
};
[[nodiscard]] inline std::optional<GroupSlowdown> JoinSlowdown(const SlowdownModel& model, std::string_view incoming,
                                                               std::span<const std::string> residents,
                                                               std::string_view gpu) {
  GroupSlowdown g;
  for (const std::string& r : residents) {
    const PairSlowdown p = model.Pair(incoming, r, gpu);
    if (!p.feasible) return std::nullopt;
    g.incoming += p.incoming - 1.0;
    g.residents_added += p.resident - 1.0;
  }
  return g;
}

}  // namespace gpusched::ports
