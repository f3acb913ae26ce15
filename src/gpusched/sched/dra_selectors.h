#pragma once

// The CEL selectors of DeviceClasses and claim requests, compiled once and their verdicts remembered: what the DRA
// allocator (dra_allocator.h) evaluates on every device of every node a pod's claims are tried on.
//
// A selector's verdict on a device depends only on the expression and the device's driver, attributes and
// capacities, so it is remembered per (expression, device). Devices are identified by address: the owner of the
// devices (the scheduler's copy of the ResourceSlices) calls Forget() whenever it changes or drops a pool, before
// the addresses can be reused. A selector that does not compile fails every evaluation with the compile error (and
// is compiled only once); a runtime error is remembered like a verdict.
//
// Thread-safety: one thread at a time (the scheduling thread).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "gpusched/common/status.h"
#include "gpusched/core/dra.h"
#include "gpusched/sched/cel.h"
#include "gpusched/sched/dra_allocator.h"

namespace gpusched::sched {

class DraSelectorCache {
 public:
  // Bound to this cache, which must outlive it.
  [[nodiscard]] DraSelectorMatch Matcher();
  [[nodiscard]] common::Result<bool> Match(std::string_view expression, const core::dra::DevicePool& pool,
                                           const core::dra::Device& device);
  // Drops the remembered verdicts (not the compiled programs).
  void Forget() { verdicts_.clear(); }
  [[nodiscard]] size_t programs() const { return programs_.size(); }
  [[nodiscard]] size_t verdicts() const { return verdicts_.size(); }

  static constexpr size_t kMaxVerdicts = 1 << 20;  // past it, Forget() first

 private:
  struct Compiled {
    std::unique_ptr<cel::Program> program;  // null when it did not compile
    common::Status error;
    size_t id = 0;
  };
  struct Key {
    size_t program = 0;
    const core::dra::Device* device = nullptr;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<const void*>()(k.device) * 31 + k.program; }
  };
  const Compiled& Program(std::string_view expression);

  std::unordered_map<std::string, Compiled> programs_;
  // The expression texts a cycle hands in live in the claims and classes, at the same addresses attempt after
  // attempt: looked up by address first (and the text compared), the common case allocates and hashes nothing.
  struct ByAddress {
    const std::string* text = nullptr;
    const Compiled* compiled = nullptr;
  };
  std::unordered_map<const char*, ByAddress> by_address_;
  static constexpr size_t kMaxAddresses = 4096;
  std::unordered_map<Key, common::Result<bool>, KeyHash> verdicts_;
};

}  // namespace gpusched::sched
