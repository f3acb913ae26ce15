// Fuzz target: the co-location data readers (our pairs CSV, which users bring, and Gavel's throughput JSON). The
// first byte picks the reader. Whatever they accept is a consistent data set: one isolated throughput per
// application per table, an n × n table, and every entry NaN (not measured), 0 (does not fit) or a finite
// positive slowdown.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpusched/interference/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto d = (data[0] & 1) == 0 ? gpusched::interference::ParsePairsCsv(text, "fuzz.csv")
                              : gpusched::interference::ParseGavel(text, "fuzz.json");
  if (!d.ok()) {
    return 0;
  }
  const size_t n = d->size();
  for (const auto& t : d->gpus) {
    if (t.iso.size() != n || t.slowdown.size() != n * n) {
      std::abort();
    }
    for (double s : t.slowdown) {
      if (!std::isnan(s) && (s < 0 || !std::isfinite(s))) {
        std::abort();
      }
    }
  }
  return 0;
}
