#include "gpusched/interference/gbt.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <utility>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

common::Status XgbError(const char* what) {
  return common::Internal(fmt::format("xgboost {}: {}", what, XGBGetLastError()));
}

// A DMatrix that frees itself.
struct Matrix {
  DMatrixHandle h = nullptr;
  ~Matrix() {
    if (h != nullptr) XGDMatrixFree(h);
  }
};

common::Status MakeMatrix(const std::vector<float>& x, size_t rows, size_t cols, Matrix& m) {
  if (x.size() != rows * cols) return common::InvalidArgument("feature matrix size does not match rows × cols");
  if (XGDMatrixCreateFromMat(x.data(), rows, cols, std::nanf(""), &m.h) != 0) return XgbError("DMatrix");
  return common::Status::Ok();
}

}  // namespace

Gbt::Gbt() : mu_(std::make_unique<std::mutex>()) {}
Gbt::~Gbt() {
  if (handle_ != nullptr) XGBoosterFree(handle_);
}
Gbt::Gbt(Gbt&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)), cols_(o.cols_), mu_(std::move(o.mu_)) {}
Gbt& Gbt::operator=(Gbt&& o) noexcept {
  if (this != &o) {
    if (handle_ != nullptr) XGBoosterFree(handle_);
    handle_ = std::exchange(o.handle_, nullptr);
    cols_ = o.cols_;
    mu_ = std::move(o.mu_);
  }
  return *this;
}

common::Result<Gbt> Gbt::Train(const std::vector<float>& x, size_t rows, size_t cols, const std::vector<float>& y,
                               const GbtParams& p) {
  if (rows == 0 || y.size() != rows) return common::InvalidArgument("no training rows, or labels do not match rows");
  Matrix m;
  GPUSCHED_RETURN_IF_ERROR(MakeMatrix(x, rows, cols, m));
  if (XGDMatrixSetFloatInfo(m.h, "label", y.data(), rows) != 0) return XgbError("labels");
  Gbt g;
  g.cols_ = cols;
  BoosterHandle b = nullptr;
  if (XGBoosterCreate(&m.h, 1, &b) != 0) return XgbError("create");
  g.handle_ = b;
  const std::pair<const char*, std::string> params[] = {
      {"booster", "gbtree"},
      {"objective", p.classify ? "binary:logistic" : "reg:squarederror"},
      {"tree_method", "exact"},
      {"nthread", "1"},
      {"verbosity", "0"},
      {"max_depth", std::to_string(p.max_depth)},
      {"eta", fmt::format("{}", p.eta)},
      {"subsample", fmt::format("{}", p.subsample)},
      {"colsample_bytree", fmt::format("{}", p.colsample_bytree)},
      {"min_child_weight", fmt::format("{}", p.min_child_weight)},
      {"seed", std::to_string(p.seed)},
  };
  for (const auto& [k, v] : params) {
    if (XGBoosterSetParam(b, k, v.c_str()) != 0) return XgbError(k);
  }
  for (int i = 0; i < p.rounds; ++i) {
    if (XGBoosterUpdateOneIter(b, i, m.h) != 0) return XgbError("training round");
  }
  return g;
}

common::Result<std::vector<float>> Gbt::Predict(const std::vector<float>& x, size_t rows) const {
  if (handle_ == nullptr) return common::FailedPrecondition("the trees are not trained");
  if (rows == 0) return std::vector<float>{};
  Matrix m;
  GPUSCHED_RETURN_IF_ERROR(MakeMatrix(x, rows, cols_, m));
  std::lock_guard lock(*mu_);
  bst_ulong len = 0;
  const float* out = nullptr;
  if (XGBoosterPredict(handle_, m.h, 0, 0, 0, &len, &out) != 0) return XgbError("predict");
  if (len != rows) return common::Internal("xgboost predict returned the wrong number of values");
  return std::vector<float>(out, out + len);
}

common::Result<std::string> Gbt::SaveJson() const {
  if (handle_ == nullptr) return common::FailedPrecondition("the trees are not trained");
  std::lock_guard lock(*mu_);
  bst_ulong len = 0;
  const char* buf = nullptr;
  if (XGBoosterSaveModelToBuffer(handle_, R"({"format": "json"})", &len, &buf) != 0) return XgbError("save");
  return std::string(buf, len);
}

common::Result<Gbt> Gbt::LoadJson(std::string_view json, size_t cols) {
  Gbt g;
  BoosterHandle b = nullptr;
  if (XGBoosterCreate(nullptr, 0, &b) != 0) return XgbError("create");
  g.handle_ = b;
  g.cols_ = cols;
  if (XGBoosterLoadModelFromBuffer(b, json.data(), json.size()) != 0) return XgbError("load");
  bst_ulong n = 0;
  if (XGBoosterGetNumFeature(b, &n) != 0) return XgbError("feature count");
  if (n != cols) {
    return common::InvalidArgument(fmt::format("the saved trees expect {} features, the model file says {}", n, cols));
  }
  return g;
}

}  // namespace gpusched::interference
