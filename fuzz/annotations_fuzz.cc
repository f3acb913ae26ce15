// Fuzz target: the gpusched.io/allocation and gpusched.io/gpus annotation decoders; what decodes must encode
// and decode again to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpusched/kube/annotations.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto a = kube::DecodeAllocation(text, common::PodUid("u")); a.ok()) {
    auto again = kube::DecodeAllocation(kube::EncodeAllocation(*a), common::PodUid("u"));
    if (!again.ok() || kube::EncodeAllocation(*again) != kube::EncodeAllocation(*a)) {
      std::abort();
    }
  }
  if (auto g = kube::DecodeGpuInventory(text); g.ok()) {
    auto again = kube::DecodeGpuInventory(kube::EncodeGpuInventory(*g));
    if (!again.ok() || *again != *g) {
      std::abort();
    }
  }
  return 0;
}
