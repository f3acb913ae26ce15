#include "gpusched/core/share_within.h"

#include <string>

namespace gpusched::core {

common::Result<ShareWithin> ParseShareWithin(std::string_view text) {
  if (text == "any") {
    return ShareWithin::kAny;
  }
  if (text == "namespace") {
    return ShareWithin::kNamespace;
  }
  if (text == "queue") {
    return ShareWithin::kQueue;
  }
  return common::InvalidArgument("shareWithin \"" + std::string(text) + "\": want any, namespace or queue");
}

const char* ShareWithinName(ShareWithin mode) {
  switch (mode) {
    case ShareWithin::kAny:
      return "any";
    case ShareWithin::kNamespace:
      return "namespace";
    case ShareWithin::kQueue:
      return "queue";
  }
  return "any";
}

ShareGroup ShareGroupOf(ShareWithin mode, std::string_view ns, std::string_view queue) {
  if (mode == ShareWithin::kAny) {
    return 0;
  }
  const std::string_view key = mode == ShareWithin::kNamespace ? ns : queue;
  uint64_t h = 14695981039346656037ULL;  // FNV-1a, 64 bits
  h = (h ^ static_cast<uint8_t>(mode == ShareWithin::kNamespace ? 'n' : 'q')) * 1099511628211ULL;
  for (const char ch : key) {
    h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ULL;
  }
  if (h == 0 || h == kMixedShareGroup) {
    h = 1;
  }
  return h;
}

}  // namespace gpusched::core
