#pragma once

// The pair learner: predicts s(A | B), the slowdown of application A sharing a GPU with B, for applications whose
// co-location with every other one was never measured. It is what eval validates and what the saved model runs.
//
// What an application is known by (its features on GPU table t):
//   static       log isolated throughput on every GPU type of the data set, log batch size, average GPU
//                utilisation (missing ones are NaN)
//   fingerprint  log s(A | R_k) and log s(R_k | A) against k reference applications R_k on table t: what a short
//                profiling run of A next to each reference measures (Quasar's and Gavel's idea). A pair that does
//                not fit is NaN.
// References are chosen from the training applications only: half are the applications that are most often the
// best partner (least s(a|b) + s(b|a)) among the training applications, so the fingerprint measures the pairs a
// scheduler most wants to know; the rest are spread out (farthest-point over the applications' slowdown rows and
// columns) to tell applications apart.
//
// Two predictors, blended in log space:
//   trees    XGBoost gradient-boosted regression trees on (static(A), fingerprint(A), static(B), fingerprint(B))
//            -> log s(A|B), trained on every measured feasible pair of training applications. They answer any pair.
//   ridge    for a partner B that is a training application: ridge regressions, one per B and direction,
//            log s(x | B) ~ features(x) and log s(B | x) ~ features(x) over the training applications x, and one for
//            the self pair log s(x | x). Each partner gets its own coefficients, which the trees cannot express
//            with 26 applications; the trees cover pairs the ridge cannot (two new applications).
//   prediction = exp(w · ridge + (1 − w) · trees) where ridge applies, else exp(trees); w = ModelOptions.
// Memory: a pair is predicted not to fit when either of two rules says so.
//   - The memory rule: if a new application A does not fit next to reference R, and a training application B
//     fails to fit with at least as many training partners as R does, then A does not fit next to B either. That
//     is what "fits iff footprint(A) + footprint(B) <= GPU memory" implies: B's count of partners it does not fit
//     with grows with its footprint.
//   - A second tree model (binary:logistic) on the same rows as the trees, when the training pairs contain any
//     that did not fit.
//   The memory rule counts only where the tree model gives the pair at least a 20% chance of not fitting
//   (learner.cc says why).

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/interference/gbt.h"

namespace gpusched::interference {

struct ModelOptions {
  int references = 8;         // k: applications each new application is profiled against (0 = no fingerprint)
  GbtParams trees;            // the regression trees
  double ridge_lambda = 1.0;  // L2 penalty on standardised features
  double ridge_weight = 1.0;  // w above; 0 = trees only, 1 = ridge wherever it applies (eval: docs/interference.md)
};

// What a learner is trained on and predicts.
struct Fold {
  std::vector<size_t> train_tables;  // GPU tables (indices into Dataset::gpus) whose pairs train it
  std::vector<bool> train_app;       // per application: its pairs may be used for training
};

class PairLearner {
 public:
  [[nodiscard]] static common::Result<PairLearner> Train(const Dataset& data, const Fold& fold,
                                                         const ModelOptions& options);
  // Predicted slowdowns s(i | j) on table `table` for the given ordered pairs (any applications: features come from
  // the table's measured reference pairs). feasible[k] = false when the pair is predicted not to fit.
  struct Prediction {
    std::vector<double> slowdown;
    std::vector<bool> feasible;
  };
  [[nodiscard]] common::Result<Prediction> Predict(const Dataset& data, size_t table,
                                                   const std::vector<std::pair<size_t, size_t>>& pairs) const;
  [[nodiscard]] const std::vector<size_t>& references() const { return refs_; }
  [[nodiscard]] const ModelOptions& options() const { return options_; }

  // The learner as JSON (references, ridge coefficients, the trees in XGBoost's JSON format) and back.
  [[nodiscard]] common::Result<std::string> Save() const;
  [[nodiscard]] static common::Result<PairLearner> Load(const std::string& json);

  // The memory rule (above) for the pair (i, j) on table `table`.
  [[nodiscard]] bool MemoryRuleSaysNoFit(const Dataset& data, size_t table, size_t i, size_t j) const;

  // One linear model: y = b + Σ w_i (x_i − mean_i) / sd_i, NaN features replaced by mean_i.
  struct Linear {
    std::vector<double> mean, sd, w;
    double bias = 0;
    bool valid = false;
    [[nodiscard]] double Apply(const std::vector<double>& x) const;
  };

 private:
  ModelOptions options_;
  std::vector<size_t> refs_;
  std::vector<bool> train_app_;
  size_t static_cols_ = 0;
  Gbt trees_;
  Gbt fits_;  // untrained when every training pair fit
  // Per application: with how many training partners it does not fit, averaged over the training tables (NaN
  // for applications outside the training set). The memory rule below reads it.
  std::vector<double> no_fit_degree_;
  std::vector<Linear> row_;  // per application j (training only): log s(x | j)
  std::vector<Linear> col_;  // per application j: log s(j | x)
  Linear self_;              // log s(x | x)
};

// Features of application i on table t (static ++ fingerprint against refs). Exposed for tests.
[[nodiscard]] std::vector<double> AppFeatures(const Dataset& data, size_t table, size_t app,
                                              const std::vector<size_t>& refs);
// The reference choice described above, from the training applications' pairs on the given tables.
[[nodiscard]] std::vector<size_t> ChooseReferences(const Dataset& data, const std::vector<size_t>& tables,
                                                   const std::vector<bool>& train_app, int k);

}  // namespace gpusched::interference
