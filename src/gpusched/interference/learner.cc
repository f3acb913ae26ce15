#include "gpusched/interference/learner.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kFormatVersion = 1;
// The memory rule (learner.h) counts only where the tree classifier gives the pair at least this chance of not
// fitting. Unconditioned, the rule flagged 31 of the 38 P100 test pairs that do not fit, but also about 3% of the
// pairs that do, and lost two top-1 partners (18/26); gated at 0.2 it flags 18 (trees alone: 15) and keeps 20/26.
constexpr float kMemoryRuleMinProbability = 0.2f;

double LogOrNaN(double v) { return v > 0 && std::isfinite(v) ? std::log(v) : kNaN; }

std::vector<size_t> TrainApps(const std::vector<bool>& train_app) {
  std::vector<size_t> t;
  for (size_t i = 0; i < train_app.size(); ++i) {
    if (train_app[i]) t.push_back(i);
  }
  return t;
}

// What the per-partner ridge regressions see of an application: the fingerprint, its log isolated throughput on
// the table and its average utilisation (the columns a data set lacks drop out as constant).
std::vector<double> RidgeFeatures(const Dataset& data, size_t table, size_t app, const std::vector<size_t>& refs) {
  std::vector<double> f;
  const GpuTable& t = data.gpus[table];
  for (size_t r : refs) {
    f.push_back(Dataset::Fits(data.At(t, app, r)) ? std::log(data.At(t, app, r)) : kNaN);
    f.push_back(Dataset::Fits(data.At(t, r, app)) ? std::log(data.At(t, r, app)) : kNaN);
  }
  f.push_back(LogOrNaN(t.iso[app]));
  f.push_back(data.apps[app].gpu_util >= 0 ? data.apps[app].gpu_util : kNaN);
  return f;
}

PairLearner::Linear FitRidge(const std::vector<std::vector<double>>& x, const std::vector<double>& y, double lambda) {
  PairLearner::Linear lin;
  const size_t m = x.size();
  if (m < 3) return lin;
  const size_t p = x[0].size();
  lin.mean.assign(p, 0);
  lin.sd.assign(p, 1);
  lin.w.assign(p, 0);
  std::vector<bool> use(p, false);
  for (size_t c = 0; c < p; ++c) {
    double sum = 0;
    size_t cnt = 0;
    for (const auto& r : x) {
      if (!std::isnan(r[c])) {
        sum += r[c];
        ++cnt;
      }
    }
    if (cnt == 0) continue;
    const double mu = sum / static_cast<double>(cnt);
    double var = 0;
    for (const auto& r : x) {
      const double v = std::isnan(r[c]) ? mu : r[c];
      var += (v - mu) * (v - mu);
    }
    const double sd = std::sqrt(var / static_cast<double>(m));
    lin.mean[c] = mu;
    if (sd > 1e-12) {
      lin.sd[c] = sd;
      use[c] = true;
    }
  }
  double ybar = 0;
  for (double v : y) ybar += v;
  ybar /= static_cast<double>(m);
  std::vector<size_t> cols;
  for (size_t c = 0; c < p; ++c) {
    if (use[c]) cols.push_back(c);
  }
  lin.bias = ybar;
  lin.valid = true;
  if (cols.empty()) return lin;
  Eigen::MatrixXd a(static_cast<Eigen::Index>(m), static_cast<Eigen::Index>(cols.size()));
  Eigen::VectorXd b(static_cast<Eigen::Index>(m));
  for (size_t i = 0; i < m; ++i) {
    for (size_t k = 0; k < cols.size(); ++k) {
      const size_t c = cols[k];
      const double v = std::isnan(x[i][c]) ? lin.mean[c] : x[i][c];
      a(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(k)) = (v - lin.mean[c]) / lin.sd[c];
    }
    b(static_cast<Eigen::Index>(i)) = y[i] - ybar;
  }
  Eigen::MatrixXd g = a.transpose() * a;
  g.diagonal().array() += lambda;
  const Eigen::VectorXd w = g.ldlt().solve(a.transpose() * b);
  for (size_t k = 0; k < cols.size(); ++k) lin.w[cols[k]] = w(static_cast<Eigen::Index>(k));
  return lin;
}

nlohmann::json LinearToJson(const PairLearner::Linear& l) {
  if (!l.valid) return nullptr;
  return {{"mean", l.mean}, {"sd", l.sd}, {"w", l.w}, {"bias", l.bias}};
}

common::Result<PairLearner::Linear> LinearFromJson(const nlohmann::json& j, size_t p) {
  PairLearner::Linear l;
  if (j.is_null()) return l;
  if (!j.is_object() || !j.contains("mean") || !j.contains("sd") || !j.contains("w") || !j.contains("bias")) {
    return common::InvalidArgument("a ridge entry needs mean, sd, w and bias");
  }
  l.mean = j["mean"].get<std::vector<double>>();
  l.sd = j["sd"].get<std::vector<double>>();
  l.w = j["w"].get<std::vector<double>>();
  l.bias = j["bias"].get<double>();
  if (l.mean.size() != p || l.sd.size() != p || l.w.size() != p) {
    return common::InvalidArgument(fmt::format("a ridge entry has the wrong number of features (want {})", p));
  }
  l.valid = true;
  return l;
}

}  // namespace

double PairLearner::Linear::Apply(const std::vector<double>& x) const {
  double y = bias;
  for (size_t c = 0; c < w.size() && c < x.size(); ++c) {
    if (w[c] == 0) continue;
    const double v = std::isnan(x[c]) ? mean[c] : x[c];
    y += w[c] * (v - mean[c]) / sd[c];
  }
  return y;
}

std::vector<double> AppFeatures(const Dataset& data, size_t table, size_t app, const std::vector<size_t>& refs) {
  std::vector<double> f;
  for (const GpuTable& g : data.gpus) f.push_back(LogOrNaN(g.iso[app]));
  const App& a = data.apps[app];
  f.push_back(a.batch_size > 0 ? std::log(a.batch_size) : kNaN);
  f.push_back(a.gpu_util >= 0 ? a.gpu_util : kNaN);
  const GpuTable& t = data.gpus[table];
  for (size_t r : refs) {
    f.push_back(Dataset::Fits(data.At(t, app, r)) ? std::log(data.At(t, app, r)) : kNaN);
    f.push_back(Dataset::Fits(data.At(t, r, app)) ? std::log(data.At(t, r, app)) : kNaN);
  }
  return f;
}

std::vector<size_t> ChooseReferences(const Dataset& data, const std::vector<size_t>& tables,
                                     const std::vector<bool>& train_app, int k) {
  const std::vector<size_t> train = TrainApps(train_app);
  const size_t want = std::min(static_cast<size_t>(std::max(k, 0)), train.size());
  if (want == 0) return {};
  // The most frequent best partners.
  std::map<size_t, int> count;
  for (size_t t : tables) {
    const GpuTable& g = data.gpus[t];
    for (size_t a : train) {
      double best = std::numeric_limits<double>::infinity();
      size_t best_b = a;
      bool any = false;
      for (size_t b : train) {
        const double s1 = data.At(g, a, b);
        const double s2 = data.At(g, b, a);
        if (!Dataset::Fits(s1) || !Dataset::Fits(s2)) continue;
        if (s1 + s2 < best) {
          best = s1 + s2;
          best_b = b;
          any = true;
        }
      }
      if (any) ++count[best_b];
    }
  }
  std::vector<std::pair<int, size_t>> ranked;
  for (const auto& [b, c] : count) ranked.emplace_back(-c, b);
  std::sort(ranked.begin(), ranked.end());
  std::vector<size_t> good;
  for (const auto& [negc, b] : ranked) {
    if (good.size() >= want / 2) break;
    good.push_back(b);
  }
  // Farthest-point spread over each application's log-slowdown row and column, starting at the most central one.
  std::vector<std::vector<double>> vec(data.size());
  for (size_t a : train) {
    for (size_t t : tables) {
      const GpuTable& g = data.gpus[t];
      for (size_t b : train) {
        const double s1 = data.At(g, a, b);
        const double s2 = data.At(g, b, a);
        vec[a].push_back(Dataset::Fits(s1) ? std::log(s1) : std::log(2.0));
        vec[a].push_back(Dataset::Fits(s2) ? std::log(s2) : std::log(2.0));
      }
    }
  }
  auto dist = [&](const std::vector<double>& x, const std::vector<double>& y) {
    double d = 0;
    for (size_t i = 0; i < x.size(); ++i) d += (x[i] - y[i]) * (x[i] - y[i]);
    return std::sqrt(d);
  };
  std::vector<double> centre(vec[train[0]].size(), 0);
  for (size_t a : train) {
    for (size_t i = 0; i < centre.size(); ++i) centre[i] += vec[a][i] / static_cast<double>(train.size());
  }
  std::vector<size_t> spread = {*std::min_element(
      train.begin(), train.end(), [&](size_t x, size_t y) { return dist(vec[x], centre) < dist(vec[y], centre); })};
  while (spread.size() < want) {
    size_t best = train[0];
    double best_d = -1;
    for (size_t a : train) {
      if (std::find(spread.begin(), spread.end(), a) != spread.end()) continue;
      double d = std::numeric_limits<double>::infinity();
      for (size_t r : spread) d = std::min(d, dist(vec[a], vec[r]));
      if (d > best_d) {
        best_d = d;
        best = a;
      }
    }
    spread.push_back(best);
  }
  std::vector<size_t> refs = good;
  for (size_t r : spread) {
    if (refs.size() >= want) break;
    if (std::find(refs.begin(), refs.end(), r) == refs.end()) refs.push_back(r);
  }
  return refs;
}

common::Result<PairLearner> PairLearner::Train(const Dataset& data, const Fold& fold, const ModelOptions& options) {
  if (fold.train_app.size() != data.size()) return common::InvalidArgument("fold: one train flag per application");
  if (fold.train_tables.empty()) return common::InvalidArgument("fold: no training GPU table");
  for (size_t t : fold.train_tables) {
    if (t >= data.gpus.size()) return common::InvalidArgument("fold: GPU table out of range");
  }
  if (options.references < 0) return common::InvalidArgument("references must be >= 0");
  if (options.ridge_weight < 0 || options.ridge_weight > 1) {
    return common::InvalidArgument("ridge weight must be within 0..1");
  }
  if (!(options.ridge_lambda >= 0)) return common::InvalidArgument("ridge lambda must be >= 0");
  PairLearner l;
  l.options_ = options;
  l.train_app_ = fold.train_app;
  l.refs_ = ChooseReferences(data, fold.train_tables, fold.train_app, options.references);
  const std::vector<size_t> train = TrainApps(fold.train_app);
  const size_t n = data.size();
  l.static_cols_ = data.gpus.size() + 2;

  std::vector<float> x, xf, y, yf;
  size_t rows = 0, rows_f = 0, cols = 0;
  bool any_infeasible = false;
  for (size_t t : fold.train_tables) {
    const GpuTable& g = data.gpus[t];
    std::vector<std::vector<double>> feat(n);
    for (size_t a : train) feat[a] = AppFeatures(data, t, a, l.refs_);
    for (size_t a : train) {
      for (size_t b : train) {
        const double s = data.At(g, a, b);
        if (!Dataset::Measured(s)) continue;
        cols = feat[a].size() * 2;
        auto push = [&](std::vector<float>& into) {
          for (double v : feat[a]) into.push_back(static_cast<float>(v));
          for (double v : feat[b]) into.push_back(static_cast<float>(v));
        };
        push(xf);
        yf.push_back(Dataset::Fits(s) ? 0.0f : 1.0f);
        ++rows_f;
        if (!Dataset::Fits(s)) {
          any_infeasible = true;
          continue;
        }
        push(x);
        y.push_back(static_cast<float>(std::log(s)));
        ++rows;
      }
    }
  }
  if (rows < 2)
    return common::InvalidArgument("fewer than two measured pairs that fit among the training applications");
  GPUSCHED_ASSIGN_OR_RETURN(trees, Gbt::Train(x, rows, cols, y, options.trees));
  l.trees_ = std::move(trees);
  if (any_infeasible) {
    GbtParams p = options.trees;
    p.classify = true;
    p.rounds = std::min(p.rounds, 200);
    GPUSCHED_ASSIGN_OR_RETURN(fits, Gbt::Train(xf, rows_f, cols, yf, p));
    l.fits_ = std::move(fits);
  }

  // How many training partners each training application does not fit with (mean over the training tables).
  l.no_fit_degree_.assign(n, std::nan(""));
  for (size_t b : train) {
    double sum = 0;
    for (size_t t : fold.train_tables) {
      const GpuTable& g = data.gpus[t];
      for (size_t c : train) {
        const double s = data.At(g, b, c);
        if (Dataset::Measured(s) && !Dataset::Fits(s)) sum += 1;
      }
    }
    l.no_fit_degree_[b] = sum / static_cast<double>(fold.train_tables.size());
  }

  // Per-partner ridge regressions.
  l.row_.assign(n, {});
  l.col_.assign(n, {});
  std::vector<std::vector<std::vector<double>>> rf(data.gpus.size());
  for (size_t t : fold.train_tables) {
    rf[t].resize(n);
    for (size_t a : train) rf[t][a] = RidgeFeatures(data, t, a, l.refs_);
  }
  for (size_t j : train) {
    std::vector<std::vector<double>> xr, xc;
    std::vector<double> yr, yc;
    for (size_t t : fold.train_tables) {
      const GpuTable& g = data.gpus[t];
      for (size_t xi : train) {
        if (xi == j) continue;
        if (Dataset::Fits(data.At(g, xi, j))) {
          xr.push_back(rf[t][xi]);
          yr.push_back(std::log(data.At(g, xi, j)));
        }
        if (Dataset::Fits(data.At(g, j, xi))) {
          xc.push_back(rf[t][xi]);
          yc.push_back(std::log(data.At(g, j, xi)));
        }
      }
    }
    l.row_[j] = FitRidge(xr, yr, options.ridge_lambda);
    l.col_[j] = FitRidge(xc, yc, options.ridge_lambda);
  }
  std::vector<std::vector<double>> xs;
  std::vector<double> ys;
  for (size_t t : fold.train_tables) {
    const GpuTable& g = data.gpus[t];
    for (size_t xi : train) {
      if (Dataset::Fits(data.At(g, xi, xi))) {
        xs.push_back(rf[t][xi]);
        ys.push_back(std::log(data.At(g, xi, xi)));
      }
    }
  }
  l.self_ = FitRidge(xs, ys, options.ridge_lambda);
  return l;
}

common::Result<PairLearner::Prediction> PairLearner::Predict(
    const Dataset& data, size_t table, const std::vector<std::pair<size_t, size_t>>& pairs) const {
  if (table >= data.gpus.size()) return common::InvalidArgument("predict: GPU table out of range");
  if (data.size() != train_app_.size()) {
    return common::InvalidArgument(fmt::format("predict: the learner was trained on {} applications, the data has {}",
                                               train_app_.size(), data.size()));
  }
  const size_t n = data.size();
  std::vector<std::vector<double>> feat(n), rfeat(n);
  auto features = [&](size_t a) -> const std::vector<double>& {
    if (feat[a].empty()) feat[a] = AppFeatures(data, table, a, refs_);
    return feat[a];
  };
  auto ridge_features = [&](size_t a) -> const std::vector<double>& {
    if (rfeat[a].empty()) rfeat[a] = RidgeFeatures(data, table, a, refs_);
    return rfeat[a];
  };
  std::vector<float> x;
  for (const auto& [i, j] : pairs) {
    if (i >= n || j >= n) return common::InvalidArgument("predict: application index out of range");
    for (double v : features(i)) x.push_back(static_cast<float>(v));
    for (double v : features(j)) x.push_back(static_cast<float>(v));
  }
  GPUSCHED_ASSIGN_OR_RETURN(tree_out, trees_.Predict(x, pairs.size()));
  std::vector<float> fit_out;
  if (fits_.trained()) {
    GPUSCHED_ASSIGN_OR_RETURN(f, fits_.Predict(x, pairs.size()));
    fit_out = std::move(f);
  }
  Prediction p;
  const double w = options_.ridge_weight;
  for (size_t k = 0; k < pairs.size(); ++k) {
    const auto [i, j] = pairs[k];
    double ridge = 0;
    int votes = 0;
    if (i == j) {
      if (self_.valid) {
        ridge += self_.Apply(ridge_features(i));
        ++votes;
      }
    } else {
      if (train_app_[j] && row_[j].valid) {
        ridge += row_[j].Apply(ridge_features(i));
        ++votes;
      }
      if (train_app_[i] && col_[i].valid) {
        ridge += col_[i].Apply(ridge_features(j));
        ++votes;
      }
    }
    double logs = tree_out[k];
    if (votes > 0) logs = w * (ridge / votes) + (1 - w) * logs;
    p.slowdown.push_back(std::exp(logs));
    const float no_fit = fit_out.empty() ? 0.0f : fit_out[k];
    p.feasible.push_back(no_fit < 0.5f &&
                         !(no_fit >= kMemoryRuleMinProbability && MemoryRuleSaysNoFit(data, table, i, j)));
  }
  return p;
}

bool PairLearner::MemoryRuleSaysNoFit(const Dataset& data, size_t table, size_t i, size_t j) const {
  const GpuTable& t = data.gpus[table];
  // `fresh` is the application outside the training set, `known` the training one it is paired with.
  auto rule = [&](size_t fresh, size_t known) {
    if (train_app_[fresh] || !train_app_[known] || std::isnan(no_fit_degree_[known])) return false;
    for (size_t r : refs_) {
      const double s = data.At(t, fresh, r);
      if (Dataset::Measured(s) && !Dataset::Fits(s) && no_fit_degree_[r] <= no_fit_degree_[known]) return true;
    }
    return false;
  };
  return rule(i, j) || rule(j, i);
}

common::Result<std::string> PairLearner::Save() const {
  nlohmann::json j;
  j["format"] = kFormatVersion;
  j["references"] = refs_;
  j["train_app"] = train_app_;
  j["static_cols"] = static_cols_;
  j["options"] = {{"references", options_.references},
                  {"ridge_lambda", options_.ridge_lambda},
                  {"ridge_weight", options_.ridge_weight}};
  GPUSCHED_ASSIGN_OR_RETURN(trees, trees_.SaveJson());
  j["trees"] = nlohmann::json::parse(trees);
  j["trees_cols"] = trees_.cols();
  if (fits_.trained()) {
    GPUSCHED_ASSIGN_OR_RETURN(fits, fits_.SaveJson());
    j["fits"] = nlohmann::json::parse(fits);
  } else {
    j["fits"] = nullptr;
  }
  j["row"] = nlohmann::json::array();
  j["col"] = nlohmann::json::array();
  for (const Linear& l : row_) j["row"].push_back(LinearToJson(l));
  for (const Linear& l : col_) j["col"].push_back(LinearToJson(l));
  j["self"] = LinearToJson(self_);
  std::vector<double> degree;
  for (double d : no_fit_degree_) degree.push_back(std::isnan(d) ? -1 : d);
  j["no_fit_degree"] = degree;
  return j.dump();
}

common::Result<PairLearner> PairLearner::Load(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return common::InvalidArgument("learner: not a JSON object");
  if (j.value("format", 0) != kFormatVersion) {
    return common::InvalidArgument(fmt::format("learner: format {} is not {}", j.value("format", 0), kFormatVersion));
  }
  try {
    PairLearner l;
    l.refs_ = j.at("references").get<std::vector<size_t>>();
    l.train_app_ = j.at("train_app").get<std::vector<bool>>();
    l.static_cols_ = j.at("static_cols").get<size_t>();
    const auto& o = j.at("options");
    l.options_.references = o.at("references").get<int>();
    l.options_.ridge_lambda = o.at("ridge_lambda").get<double>();
    l.options_.ridge_weight = o.at("ridge_weight").get<double>();
    const size_t cols = j.at("trees_cols").get<size_t>();
    GPUSCHED_ASSIGN_OR_RETURN(trees, Gbt::LoadJson(j.at("trees").dump(), cols));
    l.trees_ = std::move(trees);
    if (!j.at("fits").is_null()) {
      GPUSCHED_ASSIGN_OR_RETURN(fits, Gbt::LoadJson(j.at("fits").dump(), cols));
      l.fits_ = std::move(fits);
    }
    const size_t n = l.train_app_.size();
    const size_t p = 2 * l.refs_.size() + 2;
    if (j.at("row").size() != n || j.at("col").size() != n) {
      return common::InvalidArgument("learner: one row and one column regression per application");
    }
    for (size_t r : l.refs_) {
      if (r >= n) return common::InvalidArgument("learner: a reference application is out of range");
    }
    for (size_t i = 0; i < n; ++i) {
      GPUSCHED_ASSIGN_OR_RETURN(row, LinearFromJson(j.at("row")[i], p));
      GPUSCHED_ASSIGN_OR_RETURN(col, LinearFromJson(j.at("col")[i], p));
      l.row_.push_back(std::move(row));
      l.col_.push_back(std::move(col));
    }
    GPUSCHED_ASSIGN_OR_RETURN(self, LinearFromJson(j.at("self"), p));
    l.self_ = std::move(self);
    for (double d : j.at("no_fit_degree").get<std::vector<double>>()) {
      l.no_fit_degree_.push_back(d < 0 ? std::nan("") : d);
    }
    if (l.no_fit_degree_.size() != n) return common::InvalidArgument("learner: one no-fit degree per application");
    return l;
  } catch (const nlohmann::json::exception& e) {
    return common::InvalidArgument(fmt::format("learner: {}", e.what()));
  }
}

}  // namespace gpusched::interference
