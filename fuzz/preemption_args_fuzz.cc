// Fuzz target: the extender's ExtenderPreemptionArgs decoder and the Meta result encoder.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpusched/extender/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::extender;
  auto args = DecodePreemptionArgs(std::string(reinterpret_cast<const char*>(data), size));
  if (args.ok()) {
    (void)EncodePreemptionResult(args->nodes);
  }
  return 0;
}
