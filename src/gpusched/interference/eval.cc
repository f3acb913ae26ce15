#include "gpusched/interference/eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "fmt/format.h"

namespace gpusched::interference {
namespace {

// Average ranks (ties share the mean rank), then Pearson on ranks.
double Spearman(const std::vector<double>& a, const std::vector<double>& b) {
  auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> idx(v.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < idx.size();) {
      size_t j = i;
      while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = (static_cast<double>(i + j) / 2.0) + 1;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  if (saa == 0 || sbb == 0) return 0;
  return sab / std::sqrt(saa * sbb);
}

// Predicted s(i|j) for the test pairs of one fold, with feasibility; NaN = not predicted.
struct FoldPredictions {
  std::vector<double> s;  // n × n
  std::vector<bool> fits;
};

// The 3-NN baseline for one fold: held-out apps replaced by their k nearest training apps.
FoldPredictions BaselineFold(const Dataset& data, const GpuTable& t, const std::vector<bool>& held, int k) {
  const size_t n = data.size();
  // Static features, standardised over all applications; a column any application lacks is left out.
  std::vector<std::vector<double>> f(n);
  std::vector<std::vector<double>> cols;
  for (const GpuTable& g : data.gpus) {
    std::vector<double> c;
    for (size_t i = 0; i < n; ++i) c.push_back(g.iso[i] > 0 ? std::log(g.iso[i]) : std::nan(""));
    cols.push_back(c);
  }
  bool any_batch = false;
  std::vector<double> batch, util;
  for (size_t i = 0; i < n; ++i) {
    any_batch = any_batch || data.apps[i].batch_size > 0;
    batch.push_back(data.apps[i].batch_size > 0 ? std::log(data.apps[i].batch_size) : 0.0);
    util.push_back(data.apps[i].gpu_util >= 0 ? data.apps[i].gpu_util : std::nan(""));
  }
  if (any_batch) cols.push_back(batch);
  cols.push_back(util);
  for (const auto& c : cols) {
    if (std::any_of(c.begin(), c.end(), [](double v) { return std::isnan(v); })) continue;
    const double mu = std::accumulate(c.begin(), c.end(), 0.0) / static_cast<double>(n);
    double var = 0;
    for (double v : c) var += (v - mu) * (v - mu);
    const double sd = std::sqrt(var / static_cast<double>(n));
    if (sd <= 0) continue;
    for (size_t i = 0; i < n; ++i) f[i].push_back((c[i] - mu) / sd);
  }
  std::vector<size_t> train;
  for (size_t i = 0; i < n; ++i) {
    if (!held[i]) train.push_back(i);
  }
  std::vector<std::vector<size_t>> nn(n);
  for (size_t a = 0; a < n; ++a) {
    if (!held[a]) continue;
    std::vector<size_t> o = train;
    auto d = [&](size_t b) {
      double s = 0;
      for (size_t c = 0; c < f[a].size(); ++c) s += (f[a][c] - f[b][c]) * (f[a][c] - f[b][c]);
      return s;
    };
    std::stable_sort(o.begin(), o.end(), [&](size_t x, size_t y) { return d(x) < d(y); });
    o.resize(std::min<size_t>(o.size(), static_cast<size_t>(k)));
    nn[a] = o;
  }
  FoldPredictions p;
  p.s.assign(n * n, std::nan(""));
  p.fits.assign(n * n, true);
  std::vector<double> fitting;
  for (size_t i = 0; i < n * n; ++i) {
    if (Dataset::Fits(t.slowdown[i])) fitting.push_back(t.slowdown[i]);
  }
  std::sort(fitting.begin(), fitting.end());
  const double median = fitting.empty() ? 2.0 : fitting[fitting.size() / 2];
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = 0; b < n; ++b) {
      if (!held[a] && !held[b]) continue;
      double sum = 0;
      int cnt = 0, infeasible = 0;
      const size_t kk = held[a] ? nn[a].size() : nn[b].size();
      for (size_t q = 0; q < kk; ++q) {
        const size_t x = held[a] ? nn[a][q] : a;
        const size_t y = held[b] ? (q < nn[b].size() ? nn[b][q] : b) : b;
        const double v = data.At(t, x, y);
        if (Dataset::Fits(v)) {
          sum += v;
          ++cnt;
        } else if (Dataset::Measured(v)) {
          ++infeasible;
        }
      }
      p.s[a * n + b] = cnt > 0 ? sum / cnt : median;
      p.fits[a * n + b] = infeasible * 2 <= static_cast<int>(kk);
    }
  }
  return p;
}

// Metrics of one split: predictions of all folds merged (each test pair is predicted by the fold that held it
// out), the held-out sets and the references of each application's fold.
Metrics Score(const Dataset& data, const GpuTable& t, const std::vector<FoldPredictions>& folds,
              const std::vector<std::vector<size_t>>& held_sets, const std::vector<std::vector<size_t>>& fold_refs) {
  const size_t n = data.size();
  Metrics m;
  double err = 0, err_nonref = 0;
  int nonref = 0;
  double rho_sum = 0;
  int rho_n = 0;
  double regret_sum = 0;
  for (size_t f = 0; f < held_sets.size(); ++f) {
    const FoldPredictions& p = folds[f];
    std::vector<bool> held(n, false);
    for (size_t a : held_sets[f]) held[a] = true;
    std::set<size_t> refs(fold_refs[f].begin(), fold_refs[f].end());
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (!held[a] && !held[b]) continue;
        // Each fold scores its own predictions: under loao the pair (A, B) is a test pair of A's fold and of
        // B's, predicted once by each (the baseline is counted the same way).
        const double truth = data.At(t, a, b);
        if (!Dataset::Measured(truth)) continue;
        const double pred = p.s[a * n + b];
        const bool pred_fits = p.fits[a * n + b];
        if (!Dataset::Fits(truth)) {
          ++m.infeasible;
          if (!pred_fits) ++m.infeasible_flagged;
          continue;
        }
        ++m.pairs;
        if (!pred_fits) ++m.false_alarms;
        err += std::abs(pred - truth);
        const bool profiled = (held[a] && refs.count(b) > 0) || (held[b] && refs.count(a) > 0);
        if (!profiled) {
          err_nonref += std::abs(pred - truth);
          ++nonref;
        }
      }
    }
    for (size_t a : held_sets[f]) {
      std::vector<double> tc, pc;
      std::vector<size_t> cand;
      for (size_t b = 0; b < n; ++b) {
        const double s1 = data.At(t, a, b), s2 = data.At(t, b, a);
        if (!Dataset::Fits(s1) || !Dataset::Fits(s2)) continue;
        cand.push_back(b);
        tc.push_back(s1 + s2);
        const bool fits = p.fits[a * n + b] && p.fits[b * n + a];
        pc.push_back(fits ? p.s[a * n + b] + p.s[b * n + a] : std::numeric_limits<double>::max());
      }
      if (cand.empty()) continue;
      ++m.incoming;
      const size_t bt = static_cast<size_t>(std::min_element(tc.begin(), tc.end()) - tc.begin());
      const size_t bp = static_cast<size_t>(std::min_element(pc.begin(), pc.end()) - pc.begin());
      if (tc[bp] <= tc[bt]) ++m.top1;
      regret_sum += tc[bp] - tc[bt];
      if (cand.size() >= 3) {
        rho_sum += Spearman(pc, tc);
        ++rho_n;
      }
    }
  }
  m.mae = m.pairs > 0 ? err / m.pairs : 0;
  m.mae_nonref = nonref > 0 ? err_nonref / nonref : 0;
  m.spearman = rho_n > 0 ? rho_sum / rho_n : 0;
  m.regret = m.incoming > 0 ? regret_sum / m.incoming : 0;
  return m;
}

size_t TableIndex(const Dataset& data, const GpuTable& t) { return static_cast<size_t>(&t - data.gpus.data()); }

// Runs one split on table `target`, training on `train_tables` (the target itself for loao/lofo).
common::Result<EvalRow> RunSplit(const Dataset& data, size_t target, const std::vector<size_t>& train_tables,
                                 const std::vector<std::vector<size_t>>& held_sets, const std::string& split,
                                 const ModelOptions& options) {
  const size_t n = data.size();
  const GpuTable& t = data.gpus[target];
  std::vector<FoldPredictions> model_folds, base_folds;
  std::vector<std::vector<size_t>> refs;
  const bool cross = std::find(train_tables.begin(), train_tables.end(), target) == train_tables.end();
  for (const auto& hs : held_sets) {
    std::vector<bool> held(n, false);
    for (size_t a : hs) held[a] = true;
    Fold fold;
    fold.train_tables = train_tables;
    fold.train_app.assign(n, true);
    if (!cross) {
      for (size_t a : hs) fold.train_app[a] = false;
    }
    GPUSCHED_ASSIGN_OR_RETURN(learner, PairLearner::Train(data, fold, options));
    std::vector<std::pair<size_t, size_t>> pairs;
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (held[a] || held[b]) pairs.emplace_back(a, b);
      }
    }
    GPUSCHED_ASSIGN_OR_RETURN(pred, learner.Predict(data, target, pairs));
    FoldPredictions model, base;
    model.s.assign(n * n, std::nan(""));
    model.fits.assign(n * n, true);
    base = model;
    for (size_t k = 0; k < pairs.size(); ++k) {
      const size_t idx = pairs[k].first * n + pairs[k].second;
      model.s[idx] = pred.slowdown[k];
      model.fits[idx] = pred.feasible[k];
    }
    refs.push_back(learner.references());
    if (cross) {
      // Baseline: the same pair measured on P100 (the newest training GPU).
      const GpuTable& p100 = data.gpus[train_tables.back()];
      for (size_t i = 0; i < n * n; ++i) {
        base.s[i] = Dataset::Fits(p100.slowdown[i]) ? p100.slowdown[i] : 2.0;
        base.fits[i] = !Dataset::Measured(p100.slowdown[i]) || Dataset::Fits(p100.slowdown[i]);
      }
    } else {
      const FoldPredictions b = BaselineFold(data, t, held, 3);
      for (const auto& [a, c] : pairs) {
        base.s[a * n + c] = b.s[a * n + c];
        base.fits[a * n + c] = b.fits[a * n + c];
      }
    }
    model_folds.push_back(std::move(model));
    base_folds.push_back(std::move(base));
  }
  EvalRow row;
  row.dataset = data.source;
  row.gpu = t.gpu;
  row.split = split;
  row.model = Score(data, t, model_folds, held_sets, refs);
  row.baseline = Score(data, t, base_folds, held_sets, refs);
  return row;
}

}  // namespace

common::Result<std::vector<EvalRow>> Evaluate(const Dataset& data, const EvalOptions& options) {
  const size_t n = data.size();
  if (n < 5) return common::InvalidArgument(fmt::format("{}: {} applications, eval needs at least 5", data.source, n));
  std::vector<EvalRow> rows;
  auto wanted = [&](const std::string& gpu) {
    return options.gpus.empty() || std::find(options.gpus.begin(), options.gpus.end(), gpu) != options.gpus.end();
  };
  auto split_on = [&](const char* s) {
    return std::find(options.splits.begin(), options.splits.end(), s) != options.splits.end();
  };
  for (const GpuTable& t : data.gpus) {
    if (!wanted(t.gpu)) continue;
    const size_t ti = TableIndex(data, t);
    // Only applications measured on this table take part.
    const std::vector<bool> measured = data.MeasuredApps(t);
    std::vector<size_t> present;
    for (size_t a = 0; a < n; ++a) {
      if (measured[a]) present.push_back(a);
    }
    if (split_on("loao")) {
      std::vector<std::vector<size_t>> sets;
      for (size_t a : present) sets.push_back({a});
      GPUSCHED_ASSIGN_OR_RETURN(row, RunSplit(data, ti, {ti}, sets, "loao", options.model));
      rows.push_back(std::move(row));
    }
    if (split_on("lofo")) {
      std::map<std::string, std::vector<size_t>> fam;
      for (size_t a : present) fam[data.apps[a].family].push_back(a);
      std::vector<std::vector<size_t>> sets;
      for (auto& [name, members] : fam) {
        if (present.size() - members.size() >= 4) sets.push_back(members);
      }
      if (fam.size() >= 2 && !sets.empty()) {
        GPUSCHED_ASSIGN_OR_RETURN(row, RunSplit(data, ti, {ti}, sets, "lofo", options.model));
        rows.push_back(std::move(row));
      }
    }
  }
  if (split_on("cross")) {
    const GpuTable* k80 = data.Find("k80");
    const GpuTable* p100 = data.Find("p100");
    const GpuTable* v100 = data.Find("v100");
    if (k80 != nullptr && p100 != nullptr && v100 != nullptr && wanted("v100")) {
      std::vector<size_t> all(n);
      std::iota(all.begin(), all.end(), 0);
      GPUSCHED_ASSIGN_OR_RETURN(
          row, RunSplit(data, TableIndex(data, *v100), {TableIndex(data, *k80), TableIndex(data, *p100)}, {all},
                        "cross", options.model));
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

common::Result<HeldOutPredictions> LeaveOneOutPredictions(const Dataset& data, size_t table,
                                                          const ModelOptions& options) {
  if (table >= data.gpus.size()) return common::InvalidArgument("GPU table out of range");
  const size_t n = data.size();
  HeldOutPredictions out;
  out.n = n;
  out.incoming.assign(n * n, std::nan(""));
  out.resident.assign(n * n, std::nan(""));
  out.feasible.assign(n * n, true);
  for (size_t i = 0; i < n; ++i) {
    Fold fold;
    fold.train_tables = {table};
    fold.train_app.assign(n, true);
    fold.train_app[i] = false;
    GPUSCHED_ASSIGN_OR_RETURN(learner, PairLearner::Train(data, fold, options));
    std::vector<std::pair<size_t, size_t>> pairs;
    for (size_t j = 0; j < n; ++j) {
      pairs.emplace_back(i, j);
      pairs.emplace_back(j, i);
    }
    GPUSCHED_ASSIGN_OR_RETURN(pred, learner.Predict(data, table, pairs));
    for (size_t j = 0; j < n; ++j) {
      out.incoming[i * n + j] = pred.slowdown[2 * j];
      out.resident[i * n + j] = pred.slowdown[2 * j + 1];
      out.feasible[i * n + j] = pred.feasible[2 * j] && pred.feasible[2 * j + 1];
    }
  }
  return out;
}

std::string FormatEvalTable(const std::vector<EvalRow>& rows) {
  std::string s =
      fmt::format("{:<9} {:<9} {:<6} | {:>6} {:>7} {:>6} {:>7} {:>7} {:>9} | {:>6} {:>6} {:>7} {:>7}\n", "data", "gpu",
                  "split", "mae", "mae-nr", "rho", "top1", "regret", "infeas", "b.mae", "b.rho", "b.top1", "b.regr");
  for (const EvalRow& r : rows) {
    std::string ds = r.dataset.size() > 9 ? r.dataset.substr(r.dataset.size() - 9) : r.dataset;
    s += fmt::format(
        "{:<9} {:<9} {:<6} | {:>6.3f} {:>7.3f} {:>6.2f} {:>7} {:>7.3f} {:>9} | {:>6.3f} {:>6.2f} {:>7} {:>7.3f}\n", ds,
        r.gpu, r.split, r.model.mae, r.model.mae_nonref, r.model.spearman,
        fmt::format("{}/{}", r.model.top1, r.model.incoming), r.model.regret,
        fmt::format("{}/{}", r.model.infeasible_flagged, r.model.infeasible), r.baseline.mae, r.baseline.spearman,
        fmt::format("{}/{}", r.baseline.top1, r.baseline.incoming), r.baseline.regret);
  }
  return s;
}

std::string FormatResultLines(const std::vector<EvalRow>& rows) {
  std::string s;
  for (const EvalRow& r : rows) {
    s += fmt::format("RESULT gpu={} split={} mae={:.3f} spearman={:.2f} top1={}/{} regret={:.3f}\n", r.gpu, r.split,
                     r.model.mae, r.model.spearman, r.model.top1, r.model.incoming, r.model.regret);
  }
  return s;
}

}  // namespace gpusched::interference
