// Fuzz target: the decoder of Prometheus /api/v1/query(_range) answers (both the full parse and the fast visitor).
#include <cstddef>
#include <cstdint>
#include <string>

#include "gpusched/adapters/prometheus/query_response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpusched::adapters::prometheus;
  static QueryResponseParser parser;
  std::string body(reinterpret_cast<const char*>(data), size);
  (void)parser.Parse(body);
  std::string again(reinterpret_cast<const char*>(data), size);
  (void)parser.Visit(again, "UUID", [](std::string_view, std::span<const gpusched::core::MetricSample>) {});
  return 0;
}
