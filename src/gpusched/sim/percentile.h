#pragma once

// The p-quantile (0..1) of a sample with linear interpolation between neighbours (numpy's default); 0 for none.

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpusched::sim {

[[nodiscard]] inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace gpusched::sim
