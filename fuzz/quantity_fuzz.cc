// Fuzz target: Kubernetes quantity parsing. Parsed values are never negative, and MilliValue is never below
// Value (both round up).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpusched/kube/quantity.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto v = gpusched::kube::ParseQuantity(text);
  auto m = gpusched::kube::ParseMilliQuantity(text);
  if (v.ok() && *v < 0) {
    std::abort();
  }
  if (v.ok() && m.ok() && *m < *v) {
    std::abort();
  }
  return 0;
}
