// Fuzz target: the HTTP request parser of net::HttpServer with small limits. Whatever the bytes (chunked, compressed,
// oversized, header floods, truncated), it never crashes, a request it accepts keeps within the limits, and a
// refusal is one of the statuses the server answers with.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gpusched/net/http_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpusched::net::HttpLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_header_fields = 16;
  limits.max_body_bytes = 4096;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const gpusched::net::ParseOutcome out = gpusched::net::ParseRequestBytes(bytes, limits);
  if (out.complete) {
    if (out.request.body.size() > limits.max_body_bytes || out.request.headers.size() > limits.max_header_fields) {
      std::abort();
    }
    if (out.status != 0) {
      std::abort();
    }
  } else if (out.status != 0 && out.status != 400 && out.status != 413 && out.status != 415 && out.status != 431 &&
             out.status != 501) {
    std::abort();
  }
  return 0;
}
