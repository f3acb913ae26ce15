#pragma once

// The validation protocol of `gpusched-lab interference eval` (docs/interference.md):
//
// Splits, per data set and GPU table:
//   loao   leave one application out: train on the pairs among the other applications, predict every pair that
//          involves the held-out one (both directions and the self pair)
//   lofo   leave one model family out (Gavel: ResNet-18, ResNet-50, Transformer, LM, Recommendation, CycleGAN, A3C;
//          Co-scheML: HPC, DL training, DL inference): the whole family is held out at once
//   cross  train on the K80 and P100 tables, predict the V100 table (only when the data set has all three)
// The held-out applications keep their static features and their fingerprint (their pairs with the references,
// chosen among the training applications): a profiling run would measure exactly those.
//
// Metrics, over the test pairs that were measured and fit in memory (pairs that do not fit are excluded, and
// counted separately by whether the model predicted them infeasible):
//   mae        mean |predicted − measured| slowdown over every test pair (the baseline's pairs);
//   mae_nonref the same without the pairs of a held-out application with a reference (its profiled pairs);
//   for each held-out incoming application A, over the candidate residents B that fit with it (A itself too),
//   the cost c(B) = s(A|B) + s(B|A):
//   spearman   rank correlation of predicted and measured cost, averaged over incoming applications;
//   top1       how many incoming applications get the truly least-cost partner as the predicted best;
//   regret     mean measured cost of the predicted best minus the least measured cost.
// Baseline, on the same splits: 3 nearest neighbours over standardised (log isolated throughput on every GPU
// type, log batch size, GPU utilisation where the data has them), predicting a held-out application's pairs as
// the mean of its neighbours' measured pairs. For cross it is the pair's P100 measurement.

#include <string>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/interference/learner.h"

namespace gpusched::interference {

struct Metrics {
  double mae = 0;
  double mae_nonref = 0;
  double spearman = 0;
  int top1 = 0;
  int incoming = 0;  // applications ranked (top1 is out of this)
  double regret = 0;
  int pairs = 0;               // test pairs measured and fitting
  int infeasible = 0;          // test pairs measured not to fit
  int infeasible_flagged = 0;  // of those, predicted not to fit
  int false_alarms = 0;        // fitting test pairs predicted not to fit
};

struct EvalRow {
  std::string dataset;  // "gavel", "coscheml", a CSV path
  std::string gpu;
  std::string split;  // loao, lofo, cross
  Metrics model;
  Metrics baseline;
};

struct EvalOptions {
  ModelOptions model;
  std::vector<std::string> splits = {"loao", "lofo", "cross"};
  std::vector<std::string> gpus;  // empty = every table
};

[[nodiscard]] common::Result<std::vector<EvalRow>> Evaluate(const Dataset& data, const EvalOptions& options);

// Out-of-sample predictions of one table for placing application i next to j, each from the leave-one-out
// learner of i (the incoming application is the new one): [i * n + j] holds the predicted s(i | j) and s(j | i)
// and whether the pair is predicted to fit. The simulator judges a policy on these, not on in-sample fits.
struct HeldOutPredictions {
  size_t n = 0;
  std::vector<double> incoming;  // s(i | j)
  std::vector<double> resident;  // s(j | i)
  std::vector<bool> feasible;
};
[[nodiscard]] common::Result<HeldOutPredictions> LeaveOneOutPredictions(const Dataset& data, size_t table,
                                                                        const ModelOptions& options);

// The aligned table eval prints, and the RESULT lines.
[[nodiscard]] std::string FormatEvalTable(const std::vector<EvalRow>& rows);
[[nodiscard]] std::string FormatResultLines(const std::vector<EvalRow>& rows);

}  // namespace gpusched::interference
