#pragma once

// GPUSCHED_CHECK: for impossible internal states only, never for outside input (that returns a Status).

#include <cstdio>
#include <cstdlib>

namespace gpusched::common::internal {
[[noreturn]] inline void CheckFailed(const char* expr, const char* msg, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s: %s\n", file, line, expr, msg);
  std::abort();
}
}  // namespace gpusched::common::internal

#define GPUSCHED_CHECK(cond, msg)                                                  \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      ::gpusched::common::internal::CheckFailed(#cond, (msg), __FILE__, __LINE__); \
    }                                                                              \
  } while (false)
