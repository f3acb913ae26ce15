#include "gpusched/sched/dra_selectors.h"

namespace gpusched::sched {

const DraSelectorCache::Compiled& DraSelectorCache::Program(std::string_view expression) {
  if (auto a = by_address_.find(expression.data()); a != by_address_.end() && *a->second.text == expression) {
    return *a->second.compiled;
  }
  auto it = programs_.find(std::string(expression));
  if (it == programs_.end()) {
    Compiled c;
    c.id = programs_.size();
    auto program = cel::Program::Compile(expression);
    if (program.ok()) {
      c.program = std::make_unique<cel::Program>(std::move(*program));
    } else {
      c.error = program.status();
    }
    it = programs_.emplace(std::string(expression), std::move(c)).first;
  }
  if (by_address_.size() >= kMaxAddresses) {
    by_address_.clear();
  }
  by_address_[expression.data()] = ByAddress{.text = &it->first, .compiled = &it->second};
  return it->second;
}

common::Result<bool> DraSelectorCache::Match(std::string_view expression, const core::dra::DevicePool& pool,
                                             const core::dra::Device& device) {
  const Compiled& c = Program(expression);
  if (c.program == nullptr) {
    return c.error;
  }
  const Key key{.program = c.id, .device = &device};
  if (auto it = verdicts_.find(key); it != verdicts_.end()) {
    return it->second;
  }
  if (verdicts_.size() >= kMaxVerdicts) {
    verdicts_.clear();
  }
  common::Result<bool> verdict = c.program->Matches(cel::DeviceInput{.driver = pool.driver, .device = &device});
  verdicts_.emplace(key, verdict);
  return verdict;
}

DraSelectorMatch DraSelectorCache::Matcher() {
  return [this](std::string_view expression, const core::dra::DevicePool& pool, const core::dra::Device& device) {
    return Match(expression, pool, device);
  };
}

}  // namespace gpusched::sched
