// Fuzz target: the extender's ExtenderBindingArgs decoder.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpusched/extender/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::extender;
  auto args = DecodeBindingArgs(std::string(reinterpret_cast<const char*>(data), size));
  if (args.ok()) {
    (void)EncodeBindingResult(args->pod_name + args->node);
  }
  return 0;
}
