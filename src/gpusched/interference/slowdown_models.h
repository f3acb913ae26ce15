#pragma once

// ports::SlowdownModel implementations.
//
//   MeasuredSlowdown    the measurements themselves (the simulator's ground truth).
//   HeldOutSlowdown     out-of-sample predictions (eval.h LeaveOneOutPredictions): what the simulator's
//                       interference-aware policy sees, so it is judged on predictions for applications the model
//                       never saw.
//   TrainedSlowdown     what `gpusched interference train` saves and the extender loads: per GPU table, the
//                       measured pairs, and the learner's predictions for pairs that were not measured (an
//                       application that was only profiled against the references).
//
// Names: an application matches a data set's application by exact name, else ignoring case and every character
// that is not a letter or digit ("resnet50batchsize64" = "ResNet-50 (batch size 64)"). A GPU string picks the
// table whose name appears in it the same way ("Tesla-P100-PCIE-16GB" -> p100); no match -> the default table
// (the first one, or the one named at construction).
//
// The prior for an application the model does not know (documented in docs/interference.md):
//   unknown incoming A next to known B:  s(A|B) = median over known x of s(x|B)  (how hard B hits a typical
//                                         application), s(B|A) = median over x of s(B|x) (how sensitive B is);
//   both unknown: the table's median slowdown for both; and the pair is taken to fit (memory requests guard it).

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/interference/eval.h"
#include "gpusched/interference/learner.h"
#include "gpusched/ports/slowdown_model.h"

namespace gpusched::interference {

[[nodiscard]] std::string NormalizeName(std::string_view s);

// A full n × n table per GPU type (s(i|j), kInfeasible, or NaN = unknown -> prior), with the lookup and the prior.
class TableSlowdown : public ports::SlowdownModel {
 public:
  struct Table {
    std::string gpu;
    std::vector<double> incoming;  // [i * n + j]: s(i | j)
    std::vector<double> resident;  // [i * n + j]: s(j | i) when i arrives next to j
  };
  TableSlowdown(std::vector<std::string> apps, std::vector<Table> tables, std::string description,
                std::string default_gpu = "");
  [[nodiscard]] ports::PairSlowdown Pair(std::string_view incoming, std::string_view resident,
                                         std::string_view gpu) const override;
  [[nodiscard]] bool Knows(std::string_view app, std::string_view gpu) const override;
  [[nodiscard]] std::string Describe() const override { return description_; }
  [[nodiscard]] const std::vector<std::string>& apps() const { return apps_; }

 private:
  [[nodiscard]] const Table& TableFor(std::string_view gpu) const;
  [[nodiscard]] std::optional<size_t> Index(std::string_view app) const;
  std::vector<std::string> apps_;
  std::unordered_map<std::string, size_t> exact_, normalized_;
  std::vector<Table> tables_;
  std::vector<std::string> table_keys_;  // NormalizeName of each table's GPU, computed once
  size_t default_table_ = 0;
  std::string description_;
  // Per table: the priors (medians) by column, by row, and overall.
  struct Prior {
    std::vector<double> hit_by;   // per resident j: median over i of s(i | j)
    std::vector<double> hurt_by;  // per resident j: median over i of s(j | i)
    double overall = 1.5;
  };
  std::vector<Prior> priors_;
};

// The measurements of every table of `data`.
[[nodiscard]] std::unique_ptr<TableSlowdown> MeasuredSlowdown(const Dataset& data);
// The held-out predictions of one table.
[[nodiscard]] std::unique_ptr<TableSlowdown> HeldOutSlowdown(const Dataset& data, size_t table,
                                                             const HeldOutPredictions& predictions);

// The model file: the data sets, and per table the learner trained on all of it.
struct TrainedModel {
  struct Entry {
    Dataset data;
    std::vector<PairLearner> learners;  // one per table of data
  };
  std::vector<Entry> entries;
  ModelOptions options;

  [[nodiscard]] static common::Result<TrainedModel> Train(std::vector<Dataset> data, const ModelOptions& options);
  [[nodiscard]] common::Status Save(const std::string& path) const;
  [[nodiscard]] static common::Result<TrainedModel> Load(const std::string& path);
  // The serving form: measured pairs first, then the learner's predictions, then the prior. GPU tables of every
  // entry are offered by name (the first entry's first table is the default).
  [[nodiscard]] common::Result<std::unique_ptr<TableSlowdown>> Serve() const;
};

}  // namespace gpusched::interference
