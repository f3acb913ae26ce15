#pragma once

// FakeSlowdownModel: a ports::SlowdownModel with scripted answers for tests of the forecast, the
// interference-aware policy's front ends and the co-location simulator.
//   Set(in, res, answer)       exactly this answer when `in` joins `res`
//   SetPair(a, b, s_ab, s_ba)  s(a|b) and s(b|a): Pair(a, b) = {s_ab, s_ba}, Pair(b, a) = {s_ba, s_ab}
//   Infeasible(a, b)           the two do not fit together, in either order
// Anything else gets `otherwise` (per direction). It records the GPU strings it is asked about. Thread-safe.

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpusched/ports/slowdown_model.h"

namespace gpusched::testing {

class FakeSlowdownModel final : public ports::SlowdownModel {
 public:
  explicit FakeSlowdownModel(ports::PairSlowdown otherwise = {.incoming = 1.5, .resident = 1.5})
      : otherwise_(otherwise) {}
  FakeSlowdownModel(const FakeSlowdownModel& o)
      : otherwise_(o.otherwise_), answers_(o.answers_), slowdown_(o.slowdown_), infeasible_(o.infeasible_) {}

  FakeSlowdownModel& Set(const std::string& incoming, const std::string& resident, ports::PairSlowdown answer) {
    std::lock_guard lock(mu_);
    answers_[{incoming, resident}] = answer;
    return *this;
  }
  FakeSlowdownModel& SetPair(const std::string& a, const std::string& b, double s_ab, double s_ba) {
    std::lock_guard lock(mu_);
    slowdown_[{a, b}] = s_ab;
    slowdown_[{b, a}] = s_ba;
    return *this;
  }
  FakeSlowdownModel& Infeasible(const std::string& a, const std::string& b) {
    std::lock_guard lock(mu_);
    infeasible_.insert({a, b});
    infeasible_.insert({b, a});
    return *this;
  }

  [[nodiscard]] ports::PairSlowdown Pair(std::string_view incoming, std::string_view resident,
                                         std::string_view gpu) const override {
    std::lock_guard lock(mu_);
    gpus_asked_.emplace_back(gpu);
    const std::pair<std::string, std::string> key{std::string(incoming), std::string(resident)};
    if (auto it = answers_.find(key); it != answers_.end()) {
      return it->second;
    }
    const std::pair<std::string, std::string> back{key.second, key.first};
    auto get = [&](const std::pair<std::string, std::string>& k, double fallback) {
      auto it = slowdown_.find(k);
      return it == slowdown_.end() ? fallback : it->second;
    };
    return {.incoming = get(key, otherwise_.incoming),
            .resident = get(back, otherwise_.resident),
            .feasible = !infeasible_.contains(key)};
  }
  [[nodiscard]] bool Knows(std::string_view, std::string_view) const override { return true; }
  [[nodiscard]] std::string Describe() const override { return "fake slowdown model"; }

  [[nodiscard]] std::vector<std::string> GpusAsked() const {
    std::lock_guard lock(mu_);
    return gpus_asked_;
  }

 private:
  mutable std::mutex mu_;
  ports::PairSlowdown otherwise_;
  std::map<std::pair<std::string, std::string>, ports::PairSlowdown> answers_;
  std::map<std::pair<std::string, std::string>, double> slowdown_;
  std::set<std::pair<std::string, std::string>> infeasible_;
  mutable std::vector<std::string> gpus_asked_;
};

}  // namespace gpusched::testing
