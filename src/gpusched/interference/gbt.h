#pragma once

// Gradient-boosted regression trees through XGBoost's C API, behind a small RAII type: train on a dense float
// matrix (NaN = missing, which XGBoost routes down its learned default branch), predict, save and load as
// XGBoost's own JSON model format.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gpusched/common/status.h"

namespace gpusched::interference {

struct GbtParams {
  int rounds = 400;
  int max_depth = 3;
  double eta = 0.05;
  double subsample = 0.8;
  double colsample_bytree = 0.8;
  double min_child_weight = 2;
  uint64_t seed = 1;
  bool classify = false;  // binary:logistic (predicts a probability) instead of squared-error regression
};

class Gbt {
 public:
  Gbt();
  ~Gbt();
  Gbt(Gbt&&) noexcept;
  Gbt& operator=(Gbt&&) noexcept;
  Gbt(const Gbt&) = delete;
  Gbt& operator=(const Gbt&) = delete;

  // x is rows × cols, row-major. One thread (nthread=1), so a fixed seed gives the same trees on every machine.
  [[nodiscard]] static common::Result<Gbt> Train(const std::vector<float>& x, size_t rows, size_t cols,
                                                 const std::vector<float>& y, const GbtParams& params);
  // Thread-safe (serialised: XGBoost's DMatrix prediction is not documented as re-entrant).
  [[nodiscard]] common::Result<std::vector<float>> Predict(const std::vector<float>& x, size_t rows) const;
  [[nodiscard]] common::Result<std::string> SaveJson() const;
  [[nodiscard]] static common::Result<Gbt> LoadJson(std::string_view json, size_t cols);
  [[nodiscard]] bool trained() const { return handle_ != nullptr; }
  [[nodiscard]] size_t cols() const { return cols_; }

 private:
  void* handle_ = nullptr;  // BoosterHandle
  size_t cols_ = 0;
  std::unique_ptr<std::mutex> mu_;
};

}  // namespace gpusched::interference
