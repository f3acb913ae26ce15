// Fuzz target: the extender's ExtenderArgs decoder (filter and prioritize bodies) and the filter response built
// from what it decoded. Must never crash, hang or leak on any input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpusched/extender/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::extender;
  auto args = DecodeExtenderArgs(std::string(reinterpret_cast<const char*>(data), size));
  if (args.ok()) {
    FilterResult r{.full_nodes = args->full_nodes};
    for (const auto& n : args->nodes) {
      r.passed.push_back(&n);
      r.failed.emplace_back(n.name, n.name);
    }
    (void)EncodeFilterResult(r);
  }
  return 0;
}
