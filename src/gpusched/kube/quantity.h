#pragma once

// Kubernetes resource quantities ("20k", "1Gi", "500m", "1.5", "2e3"), as resource.Quantity parses them:
//   quantity ::= [+-] digits [. digits] suffix
//   suffix   ::= "" | m | k | M | G | T | P | E            (decimal SI)
//              | Ki | Mi | Gi | Ti | Pi | Ei                (binary SI)
//              | (e|E) [+-] digits                          (decimal exponent)
// kube-scheduler sends quantities in canonical form, so gpusched.io/gpu-memory: 20000 arrives as "20k".

#include <cstdint>
#include <string_view>

#include "gpusched/common/status.h"

namespace gpusched::kube {

// The value rounded up to an integer (resource.Quantity.Value()). Errors name the text; values beyond int64 and
// negative values (no resource may be negative) are errors.
common::Result<int64_t> ParseQuantity(std::string_view text);

// The value in thousandths, rounded up (resource.Quantity.MilliValue()): "500m" -> 500, "2" -> 2000.
common::Result<int64_t> ParseMilliQuantity(std::string_view text);

// The value in thousandths, exactly: a value finer than a thousandth ("0.0005", "1e-4") is an error instead of being
// rounded (DRA capacities compare exactly).
common::Result<int64_t> ParseExactMilliQuantity(std::string_view text);

}  // namespace gpusched::kube
