// Fuzz target: the openb trace readers (node list and pod list CSV).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpusched/sim/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)gpusched::sim::ParseNodeList(text, "fuzz");
  (void)gpusched::sim::ParsePodList(text, "fuzz");
  return 0;
}
