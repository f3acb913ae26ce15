#pragma once

// The learner's side of the slowdown models (TableSlowdown itself is in table_slowdown.h, apart from XGBoost):
//
//   MeasuredSlowdown    (table_slowdown.h) the measurements themselves (the simulator's ground truth).
//   HeldOutSlowdown     out-of-sample predictions (eval.h LeaveOneOutPredictions): what the simulator's
//                       interference-aware policy sees, so it is judged on predictions for applications the model
//                       never saw.
//   TrainedModel        what `gpusched-lab interference train` saves: the data sets and their learners, and the
//                       served tables (per GPU table, the measured pairs, and the learner's predictions for pairs
//                       that were not measured) that the daemons load with LoadServedModel.

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/interference/eval.h"
#include "gpusched/interference/learner.h"
#include "gpusched/interference/table_slowdown.h"

namespace gpusched::interference {

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
