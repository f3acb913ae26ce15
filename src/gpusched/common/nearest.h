#pragma once

// The known name nearest to a mistyped one, for "did you mean" in error messages: the smallest edit distance
// (insertions, deletions, substitutions and swaps of two neighbours each count 1), ties to the first listed; none when
// even the nearest needs more edits than a third of the longer of the two names (rounded up), so that an unrelated
// word gets no suggestion.

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace gpusched::common {

// Optimal string alignment distance between a and b.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) {
    d[i][0] = i;
  }
  for (size_t j = 0; j <= b.size(); ++j) {
    d[0][j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

inline std::string Nearest(std::string_view word, const std::vector<std::string>& known) {
  std::string best;
  size_t best_distance = 0;
  for (const std::string& k : known) {
    const size_t distance = EditDistance(word, k);
    const size_t allowed = (std::max(word.size(), k.size()) + 2) / 3;
    if (distance <= allowed && (best.empty() || distance < best_distance)) {
      best = k;
      best_distance = distance;
    }
  }
  return best;
}

// What an error about an unknown name adds after it: "; did you mean 'x'?" when one is near, then " (known: a, b,
// c)".
inline std::string NearestAndKnown(std::string_view word, const std::vector<std::string>& known) {
  std::string out;
  if (const std::string near = Nearest(word, known); !near.empty()) {
    out = "; did you mean '" + near + "'?";
  }
  out += " (known: ";
  for (size_t i = 0; i < known.size(); ++i) {
    out += (i == 0 ? "" : ", ") + known[i];
  }
  return out + ")";
}

}  // namespace gpusched::common
