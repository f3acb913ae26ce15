#pragma once

// The serving form of a slowdown model: a full table of pair slowdowns per GPU type, and the prior for what it
// does not know. It is all the daemons need: they load the tables `gpusched-lab interference train` wrote into the
// model file (LoadServedModel) and never run the learner, so the daemon binary links no ML library.
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
//
// The model file's "served" object (written by TrainedModel::Save, slowdown_models.h):
//   {"apps": [name, ...], "description": "...", "tables": [{"gpu": "p100", "incoming": [...], "resident": [...]}]}
// with n × n values per table, row-major; null = unknown, 0 = the pair does not fit (kInfeasible).

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gpusched/common/status.h"
#include "gpusched/interference/dataset.h"
#include "gpusched/ports/slowdown_model.h"

namespace gpusched::interference {

// The model file's "kind" and the format this release writes; LoadServedModel reads format 2 only (format 1, from
// 0.1.0, held no serving tables).
inline constexpr const char* kModelKind = "gpusched-interference-model";
inline constexpr int kModelFormat = 2;

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
  [[nodiscard]] const std::vector<Table>& tables() const { return tables_; }

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

// The "served" object of a model file (above) for `model`, as JSON text.
[[nodiscard]] std::string ServedTablesJson(const TableSlowdown& model);

// Reads the served tables of a model file. Errors name the file and what is wrong with it; a format-1 file asks
// for a new `gpusched-lab interference train`.
[[nodiscard]] common::Result<std::unique_ptr<TableSlowdown>> LoadServedModel(const std::string& path);
// The same from the file's text (`source` names it in errors).
[[nodiscard]] common::Result<std::unique_ptr<TableSlowdown>> ParseServedModel(std::string_view text,
                                                                              const std::string& source);

}  // namespace gpusched::interference
