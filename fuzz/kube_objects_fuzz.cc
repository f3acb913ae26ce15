// Fuzz target: Pod and Node decoding (resource names, quantities, annotations inside objects). The input is
// parsed as JSON first; non-JSON inputs only exercise the parser.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "gpusched/kube/objects.h"
#include "gpusched/kube/resources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::kube;
  const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return 0;
  }
  (void)DecodePodRequest(j, ResourceConfig{});
  (void)RequestsGpuResource(j, ResourceConfig{});
  (void)DecodePodMeta(j);
  (void)DecodeNode(j);
  return 0;
}
