#pragma once

// GPU model names, one way everywhere: the name gpusched stores for a model, and the key two spellings of one model
// match by.

#include <cctype>
#include <string>
#include <string_view>

namespace gpusched::core {

// gpusched's model name from a product name: the name without a leading "NVIDIA-" (GPU feature discovery's
// nvidia.com/gpu.product label) or "NVIDIA " (NVML's product name): "NVIDIA-A100-SXM4-80GB" and
// "NVIDIA A100-SXM4-80GB" are "A100-SXM4-80GB"; other names ("Tesla T4") are kept as they are.
[[nodiscard]] inline std::string GpuModelName(std::string_view product) {
  for (std::string_view prefix : {std::string_view("NVIDIA-"), std::string_view("NVIDIA ")}) {
    if (product.starts_with(prefix)) {
      product.remove_prefix(prefix.size());
      break;
    }
  }
  return std::string(product);
}

// The key that spellings of one model share: letters and digits only, upper case, without a leading NVIDIA or
// TESLA ("NVIDIA A100-SXM4-80GB", "a100 sxm4 80gb" and "A100-SXM4-80GB" all give "A100SXM480GB").
[[nodiscard]] inline std::string GpuModelKey(std::string_view model) {
  std::string s;
  s.reserve(model.size());
  for (char ch : model) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0) {
      s.push_back(static_cast<char>(std::toupper(u)));
    }
  }
  for (std::string_view prefix : {"NVIDIA", "TESLA"}) {
    if (s.size() > prefix.size() && s.starts_with(prefix)) {
      s.erase(0, prefix.size());
    }
  }
  return s;
}

}  // namespace gpusched::core
